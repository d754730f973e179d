"""A read_committed view of a Kafka partition computed from the log itself, for the tests.

Tansu 0.6 (the test broker) writes transaction markers but answers every fetch with an empty
``aborted_transactions`` list, so librdkafka's ``isolation.level = read_committed`` still hands
out the records of aborted transactions. This module fetches the raw record batches (Fetch v4,
read_uncommitted) and applies the markers as a Kafka broker's aborted-transaction index does:
a transactional batch is visible iff the first control record of its producer after it is a
COMMIT; batches of a transaction that has no marker yet are not visible (above the LSO).

>>> records = read_committed("127.0.0.1", 9092, "orders", 0)  # doctest: +SKIP
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

_BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")  # 61 bytes, RecordBatch v2 up to the count


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


@dataclass(slots=True)
class _Batch:
    base_offset: int
    last_offset: int
    producer_id: int
    transactional: bool
    control: bool
    records: list[LogRecord]


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)  # zigzag
            shift += 7

    def blob(self, length: int) -> bytes | None:
        if length < 0:
            return None
        out = self.data[self.pos : self.pos + length]
        self.pos += length
        return out

    def string(self) -> str:
        raw = self.blob(self.take(">h"))
        return "" if raw is None else raw.decode()


def _fetch(sock: socket.socket, topic: str, partition: int, offset: int) -> tuple[int, int, bytes]:
    """One Fetch v4 (read_uncommitted): (error code, high watermark, record bytes)."""
    client = b"cqlcdc-tests"
    body = struct.pack(">hhih", 1, 4, 1, len(client)) + client
    body += struct.pack(">iiiib", -1, 100, 1, 8 << 20, 0)
    name = topic.encode()
    body += struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, partition, offset, 8 << 20)
    sock.sendall(struct.pack(">i", len(body)) + body)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    r = _Reader(_recv(sock, size))
    r.take(">i")  # correlation id
    r.take(">i")  # throttle time
    for _ in range(r.take(">i")):
        r.string()
        for _ in range(r.take(">i")):
            r.take(">i")
            error = r.take(">h")
            high = r.take(">q")
            r.take(">q")  # last stable offset
            aborted = r.take(">i")
            r.pos += max(aborted, 0) * 16
            records = r.blob(r.take(">i")) or b""
            return error, high, records
    raise AssertionError(f"the fetch response has no partition {topic}/{partition}")


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        out += chunk
    return bytes(out)


def _batches(data: bytes) -> list[_Batch]:
    out: list[_Batch] = []
    pos = 0
    while pos + _BATCH_HEADER.size <= len(data):
        (base, length, _, magic, _, attrs, last_delta, base_ts, _, pid, _, _, count) = (
            _BATCH_HEADER.unpack_from(data, pos)
        )
        end = pos + 12 + length
        if end > len(data):  # a batch cut by max_bytes: fetched again next time
            break
        assert magic == 2, f"record batch magic {magic}"
        assert attrs & 0x07 == 0, "compressed batches are not parsed here"
        r = _Reader(data[:end], pos + _BATCH_HEADER.size)
        records = []
        for _ in range(count):
            r.varint()  # record length
            r.take(">b")  # attributes
            ts_delta = r.varint()
            offset_delta = r.varint()
            key = r.blob(r.varint())
            value = r.blob(r.varint())
            headers = []
            for _ in range(r.varint()):
                hkey = r.blob(r.varint()) or b""
                headers.append((hkey.decode(), r.blob(r.varint())))
            records.append(
                LogRecord(base + offset_delta, key, value, tuple(headers), base_ts + ts_delta)
            )
        out.append(
            _Batch(base, base + last_delta, pid, bool(attrs & 0x10), bool(attrs & 0x20), records)
        )
        pos = end
    return out


def read_committed(host: str, port: int, topic: str, partition: int) -> list[LogRecord]:
    """The records a read_committed consumer must see in ``topic``/``partition``, in order."""
    return read_log(host, port, topic, partition)[0]


def read_log(
    host: str, port: int, topic: str, partition: int
) -> tuple[list[LogRecord], list[LogRecord]]:
    """The partition's data records split into (committed or non-transactional, the rest:
    aborted or still open), each in offset order."""
    batches: list[_Batch] = []
    with socket.create_connection((host, port), timeout=10) as sock:
        offset = 0
        while True:
            error, high, data = _fetch(sock, topic, partition, offset)
            assert error == 0, f"fetch {topic}/{partition}@{offset}: error code {error}"
            got = _batches(data)
            batches += got
            if got:
                offset = got[-1].last_offset + 1
            if offset >= high:
                break
            assert got, f"no progress fetching {topic}/{partition} at {offset} (high {high})"
    markers: dict[int, list[tuple[int, bool]]] = {}
    for b in batches:
        if b.control:
            (kind,) = struct.unpack(">h", (b.records[0].key or b"\0\0\0\0")[2:4])
            markers.setdefault(b.producer_id, []).append((b.base_offset, kind == 1))
    visible: list[LogRecord] = []
    hidden: list[LogRecord] = []
    for b in batches:
        if b.control:
            continue
        if b.transactional:
            after = [commit for at, commit in markers.get(b.producer_id, []) if at > b.base_offset]
            if not after or not after[0]:
                hidden += b.records
                continue
        visible += b.records
    return visible, hidden
