"""The CQL binary protocol (v4) as a server speaks it: frames, requests in, responses out.

The cassandra-driver encodes only requests and decodes only responses; a server needs the
other direction. The byte-level primitives are the driver's own (``cassandra.protocol``
``read_*``/``write_*``), the message layouts those of the protocol spec
(native_protocol_v4.spec). Any malformed or truncated body raises ``ProtocolError``.

>>> header = encode_header(4, 0, 1, OP_READY, 0)
>>> decode_header(header)[:4]
(4, 0, 1, 2)
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from cassandra import protocol as p

from cqlcdc.errors import AlreadyExists, CqlError, ProtocolError, Unprepared

HEADER = struct.Struct(">BBhBi")
HEADER_SIZE = HEADER.size
RESPONSE = 0x80
MAX_BODY_BYTES = 256 * 1024 * 1024
SUPPORTED_VERSIONS = (4,)

OP_ERROR = 0x00
OP_STARTUP = 0x01
OP_READY = 0x02
OP_AUTHENTICATE = 0x03
OP_OPTIONS = 0x05
OP_SUPPORTED = 0x06
OP_QUERY = 0x07
OP_RESULT = 0x08
OP_PREPARE = 0x09
OP_EXECUTE = 0x0A
OP_REGISTER = 0x0B
OP_EVENT = 0x0C
OP_BATCH = 0x0D
OP_AUTH_CHALLENGE = 0x0E
OP_AUTH_RESPONSE = 0x0F
OP_AUTH_SUCCESS = 0x10

RESULT_VOID = 0x0001
RESULT_ROWS = 0x0002
RESULT_SET_KEYSPACE = 0x0003
RESULT_PREPARED = 0x0004
RESULT_SCHEMA_CHANGE = 0x0005

_VALUES = 0x01
_SKIP_METADATA = 0x02
_PAGE_SIZE = 0x04
_PAGING_STATE = 0x08
_SERIAL_CONSISTENCY = 0x10
_TIMESTAMP = 0x20
_NAMES_FOR_VALUES = 0x40

_ROWS_GLOBAL_TABLES_SPEC = 0x0001
_ROWS_HAS_MORE_PAGES = 0x0002
_ROWS_NO_METADATA = 0x0004


class Unset:
    """A bound value the client left unset (length -2): the column keeps what it has."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


def decode_header(data: bytes) -> tuple[int, int, int, int, int]:
    """``(version, flags, stream, opcode, body_length)`` of a request frame header.

    Raises:
        ProtocolError: a response frame, a negative or oversized body length.
    """
    version_byte, flags, stream, opcode, length = HEADER.unpack(data)
    if version_byte & RESPONSE:
        raise ProtocolError("Frame is a response, not a request")
    if length < 0 or length > MAX_BODY_BYTES:
        raise ProtocolError(f"Invalid frame body length {length} (at most {MAX_BODY_BYTES})")
    return version_byte, flags, stream, opcode, length


def encode_header(version: int, flags: int, stream: int, opcode: int, length: int) -> bytes:
    return HEADER.pack(version | RESPONSE, flags, stream, opcode, length)


def unsupported_version_message(version: int) -> str:
    """Cassandra's wording, which the drivers look for to downgrade ('unsupported protocol
    version')."""
    supported = ", ".join(f"{v}/v{v}" for v in SUPPORTED_VERSIONS)
    return (
        f"Invalid or unsupported protocol version ({version}); supported versions are ({supported})"
    )


# -- requests ------------------------------------------------------------------------------

T = TypeVar("T")


def decode(body: bytes, reader: Callable[[io.BytesIO], T]) -> T:
    """Run ``reader`` over a whole body; anything malformed is a ProtocolError."""
    buf = io.BytesIO(body)
    try:
        result = reader(buf)
    except ProtocolError:
        raise
    except (struct.error, IndexError, ValueError, UnicodeDecodeError, TypeError) as e:
        raise ProtocolError(f"Malformed message body: {e}") from None
    if buf.tell() != len(body):
        raise ProtocolError(f"{len(body) - buf.tell()} unexpected bytes after the message")
    return result


def _exact(buf: io.BytesIO, n: int) -> bytes:
    if n < 0:
        raise ProtocolError(f"Negative length {n}")
    data = buf.read(n)
    if len(data) != n:
        raise ProtocolError("Truncated message body")
    return data


def _short(buf: io.BytesIO) -> int:
    return int(struct.unpack(">H", _exact(buf, 2))[0])


def _int(buf: io.BytesIO) -> int:
    return int(struct.unpack(">i", _exact(buf, 4))[0])


def _long(buf: io.BytesIO) -> int:
    return int(struct.unpack(">q", _exact(buf, 8))[0])


def _byte(buf: io.BytesIO) -> int:
    return _exact(buf, 1)[0]


def _string(buf: io.BytesIO) -> str:
    return _exact(buf, _short(buf)).decode("utf-8")


def _long_string(buf: io.BytesIO) -> str:
    return _exact(buf, _int(buf)).decode("utf-8")


def _short_bytes(buf: io.BytesIO) -> bytes:
    return _exact(buf, _short(buf))


def _value(buf: io.BytesIO) -> bytes | Unset | None:
    n = _int(buf)
    if n == -1:
        return None
    if n == -2:
        return UNSET
    return _exact(buf, n)


def _string_map(buf: io.BytesIO) -> dict[str, str]:
    return {_string(buf): _string(buf) for _ in range(_short(buf))}


@dataclass(frozen=True, slots=True)
class QueryParams:
    """The parameters of QUERY and EXECUTE (and the tail of BATCH)."""

    consistency: int = 0x0001
    values: tuple[bytes | Unset | None, ...] = ()
    names: tuple[str, ...] | None = None
    skip_metadata: bool = False
    page_size: int | None = None
    paging_state: bytes | None = None
    serial_consistency: int | None = None
    timestamp_us: int | None = None


def _query_params(buf: io.BytesIO) -> QueryParams:
    consistency = _short(buf)
    flags = _byte(buf)
    values: list[bytes | Unset | None] = []
    names: list[str] | None = None
    if flags & _VALUES:
        count = _short(buf)
        if flags & _NAMES_FOR_VALUES:
            names = []
        for _ in range(count):
            if names is not None:
                names.append(_string(buf))
            values.append(_value(buf))
    page_size = _int(buf) if flags & _PAGE_SIZE else None
    paging_state = None
    if flags & _PAGING_STATE:
        state = _value(buf)
        paging_state = state if isinstance(state, bytes) else None
    serial = _short(buf) if flags & _SERIAL_CONSISTENCY else None
    timestamp = _long(buf) if flags & _TIMESTAMP else None
    return QueryParams(
        consistency,
        tuple(values),
        tuple(names) if names is not None else None,
        bool(flags & _SKIP_METADATA),
        page_size,
        paging_state,
        serial,
        timestamp,
    )


@dataclass(frozen=True, slots=True)
class Query:
    query: str
    params: QueryParams


@dataclass(frozen=True, slots=True)
class Execute:
    query_id: bytes
    params: QueryParams


@dataclass(frozen=True, slots=True)
class BatchChild:
    """One statement of a BATCH: query text or a prepared id, and its values."""

    query: str | None
    query_id: bytes | None
    values: tuple[bytes | Unset | None, ...]


@dataclass(frozen=True, slots=True)
class Batch:
    kind: int  # 0 logged, 1 unlogged, 2 counter
    children: tuple[BatchChild, ...]
    params: QueryParams = field(default_factory=QueryParams)


def read_startup(buf: io.BytesIO) -> dict[str, str]:
    return _string_map(buf)


def read_query(buf: io.BytesIO) -> Query:
    return Query(_long_string(buf), _query_params(buf))


def read_prepare(buf: io.BytesIO) -> str:
    return _long_string(buf)


def read_execute(buf: io.BytesIO) -> Execute:
    return Execute(_short_bytes(buf), _query_params(buf))


def read_register(buf: io.BytesIO) -> list[str]:
    return [_string(buf) for _ in range(_short(buf))]


def read_auth_response(buf: io.BytesIO) -> bytes | None:
    token = _value(buf)
    return token if isinstance(token, bytes) else None


def read_batch(buf: io.BytesIO) -> Batch:
    kind = _byte(buf)
    children = []
    for _ in range(_short(buf)):
        is_prepared = _byte(buf)
        if is_prepared == 0:
            query: str | None = _long_string(buf)
            query_id = None
        elif is_prepared == 1:
            query, query_id = None, _short_bytes(buf)
        else:
            raise ProtocolError(f"Invalid BATCH statement kind {is_prepared}")
        values = tuple(_value(buf) for _ in range(_short(buf)))
        children.append(BatchChild(query, query_id, values))
    consistency = _short(buf)
    flags = _byte(buf)
    serial = _short(buf) if flags & _SERIAL_CONSISTENCY else None
    timestamp = _long(buf) if flags & _TIMESTAMP else None
    if flags & _NAMES_FOR_VALUES:
        raise ProtocolError("Named values are not supported in BATCH")
    return Batch(
        kind,
        tuple(children),
        QueryParams(consistency, serial_consistency=serial, timestamp_us=timestamp),
    )


# -- responses -----------------------------------------------------------------------------


def _body(write: Callable[[io.BytesIO], None]) -> bytes:
    buf = io.BytesIO()
    write(buf)
    return buf.getvalue()


def error_body(err: CqlError) -> bytes:
    """ERROR: the code, the message and the code's extra fields."""

    def write(f: io.BytesIO) -> None:
        p.write_int(f, err.code)
        p.write_string(f, err.message)
        if isinstance(err, AlreadyExists):
            p.write_string(f, err.keyspace)
            p.write_string(f, err.table)
        elif isinstance(err, Unprepared):
            p.write_string(f, getattr(err, "query_id", b""))
        elif err.code == 0x1000:  # Unavailable: consistency, required, alive
            p.write_consistency_level(f, 1)
            p.write_int(f, 1)
            p.write_int(f, 0)
        elif err.code == 0x1100:  # WriteTimeout: consistency, received, blockfor, write type
            p.write_consistency_level(f, 1)
            p.write_int(f, 0)
            p.write_int(f, 1)
            p.write_string(f, "SIMPLE")
        elif err.code in (0x1200, 0x1300):  # ReadTimeout / ReadFailure
            p.write_consistency_level(f, 1)
            p.write_int(f, 0)
            p.write_int(f, 1)
            if err.code == 0x1300:
                p.write_int(f, 1)
            p.write_byte(f, 0)
        elif err.code == 0x1500:  # WriteFailure
            p.write_consistency_level(f, 1)
            p.write_int(f, 0)
            p.write_int(f, 1)
            p.write_int(f, 1)
            p.write_string(f, "SIMPLE")

    return _body(write)


def supported_body(options: dict[str, list[str]]) -> bytes:
    return _body(lambda f: p.write_stringmultimap(f, options))


def authenticate_body(authenticator: str) -> bytes:
    return _body(lambda f: p.write_string(f, authenticator))


def auth_token_body(token: bytes | None) -> bytes:
    return _body(lambda f: p.write_value(f, token))


def void_result() -> bytes:
    return _body(lambda f: p.write_int(f, RESULT_VOID))


def set_keyspace_result(keyspace: str) -> bytes:
    def write(f: io.BytesIO) -> None:
        p.write_int(f, RESULT_SET_KEYSPACE)
        p.write_string(f, keyspace)

    return _body(write)


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """A column of a result or a bind marker: where it lives, its name, its type option."""

    keyspace: str
    table: str
    name: str
    type_option: bytes


def _write_metadata(
    f: io.BytesIO,
    columns: Sequence[ColumnSpec],
    paging_state: bytes | None = None,
    no_metadata: bool = False,
    pk_indexes: Sequence[int] | None = None,
) -> None:
    flags = 0
    same_table = bool(columns) and all(
        (c.keyspace, c.table) == (columns[0].keyspace, columns[0].table) for c in columns
    )
    if same_table:
        flags |= _ROWS_GLOBAL_TABLES_SPEC
    if paging_state is not None:
        flags |= _ROWS_HAS_MORE_PAGES
    if no_metadata:
        flags |= _ROWS_NO_METADATA
    p.write_int(f, flags)
    p.write_int(f, len(columns))
    if pk_indexes is not None:
        p.write_int(f, len(pk_indexes))
        for index in pk_indexes:
            p.write_short(f, index)
    if paging_state is not None:
        p.write_value(f, paging_state)
    if no_metadata:
        return
    if same_table:
        p.write_string(f, columns[0].keyspace)
        p.write_string(f, columns[0].table)
    for c in columns:
        if not same_table:
            p.write_string(f, c.keyspace)
            p.write_string(f, c.table)
        p.write_string(f, c.name)
        f.write(c.type_option)


def rows_result(
    columns: Sequence[ColumnSpec],
    rows: Sequence[Sequence[bytes | None]],
    paging_state: bytes | None = None,
    no_metadata: bool = False,
) -> bytes:
    """RESULT Rows: metadata, then each row's cells as [bytes] (already serialized)."""

    def write(f: io.BytesIO) -> None:
        p.write_int(f, RESULT_ROWS)
        _write_metadata(f, columns, paging_state, no_metadata)
        p.write_int(f, len(rows))
        for row in rows:
            for cell in row:
                p.write_value(f, cell)

    return _body(write)


def prepared_result(
    query_id: bytes,
    binds: Sequence[ColumnSpec],
    pk_indexes: Sequence[int],
    result_columns: Sequence[ColumnSpec],
) -> bytes:
    """RESULT Prepared: the id, the bind markers' metadata (with the partition key's
    marker indexes, for token-aware routing) and the result's metadata."""

    def write(f: io.BytesIO) -> None:
        p.write_int(f, RESULT_PREPARED)
        p.write_string(f, query_id)
        _write_metadata(f, binds, pk_indexes=pk_indexes)
        _write_metadata(f, result_columns, no_metadata=not result_columns)

    return _body(write)


def schema_change_result(change: str, target: str, keyspace: str, name: str = "") -> bytes:
    return _body(
        lambda f: _write_schema_change(f, RESULT_SCHEMA_CHANGE, change, target, keyspace, name)
    )


def schema_change_event(change: str, target: str, keyspace: str, name: str = "") -> bytes:
    def write(f: io.BytesIO) -> None:
        p.write_string(f, "SCHEMA_CHANGE")
        _write_schema_change(f, None, change, target, keyspace, name)

    return _body(write)


def _write_schema_change(
    f: io.BytesIO, kind: int | None, change: str, target: str, keyspace: str, name: str
) -> None:
    if kind is not None:
        p.write_int(f, kind)
    p.write_string(f, change)
    p.write_string(f, target)
    p.write_string(f, keyspace)
    if target != "KEYSPACE":
        p.write_string(f, name)
    if target in ("FUNCTION", "AGGREGATE"):
        p.write_short(f, 0)
