"""The driver's real Connection (its reactor, version negotiation, handshake and v5
checksumming) against a server made of the wire layer alone: no engine, canned answers.

This is the shape the server wiring takes: FrameReader -> Handshake.check -> decode_request
-> a response -> encode_response -> Framing.encode, and Handshake.switch_framing right
after STARTUP's answer is written."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import cassandra
import pytest
from cassandra import ConsistencyLevel, ProtocolVersion
from cassandra.connection import DefaultEndPoint, ProtocolVersionUnsupported
from cassandra.io.libevreactor import LibevConnection
from cassandra.protocol import PrepareMessage, QueryMessage, ResultMessage

from cqlcdc.errors import CqlError, InvalidRequest, ProtocolError
from cqlcdc.server.error_responses import error_response
from cqlcdc.server.frames import Frame, Opcode
from cqlcdc.server.framing import FrameReader, Framing
from cqlcdc.server.handshake import Handshake
from cqlcdc.server.requests import (
    Options,
    Prepare,
    Query,
    Register,
    RequestMessage,
    Startup,
    decode_request,
)
from cqlcdc.server.responses import (
    EVENT_STREAM,
    Ready,
    ResponseMessage,
    SchemaChangeEvent,
    Supported,
    encode_response,
    supported_options,
)
from cqlcdc.server.results import (
    ColumnSpec,
    PreparedResult,
    RowsMetadata,
    RowsResult,
    SchemaChange,
    serialize_rows,
)
from cqlcdc.types import native_type

TEXT, BLOB = native_type("text"), native_type("blob")
BIG_BYTES = 300_000  # a response over two v5 segments


def _answer(message: RequestMessage) -> ResponseMessage:
    """Canned answers: a query gets its own text back, or a big blob, or an error."""
    if isinstance(message, Options):
        return Supported(supported_options())
    if isinstance(message, Register):
        return Ready()
    if isinstance(message, Prepare):
        cols = (ColumnSpec("ks", "t", "k", TEXT),)
        return PreparedResult(b"\x01", cols, (0,), cols)
    if isinstance(message, Query):
        if message.query == "FAIL":
            raise InvalidRequest("no such thing")
        if message.query == "BIG":
            cols = (ColumnSpec("ks", "t", "b", BLOB),)
            return RowsResult(RowsMetadata(cols), serialize_rows(cols, [[bytes(BIG_BYTES)]]))
        cols = (ColumnSpec("ks", "t", "q", TEXT),)
        return RowsResult(RowsMetadata(cols), serialize_rows(cols, [[message.query]]))
    raise InvalidRequest(f"not served here: {type(message).__name__}")


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    framing, handshake = Framing(), Handshake()
    frames = FrameReader(reader, framing)

    def send(version: int, stream: int, response: ResponseMessage) -> None:
        writer.write(framing.encode([encode_response(version, stream, response)]))

    try:
        while True:
            try:
                frame: Frame | None = await frames.read()
            except ProtocolError as e:  # the framing is broken: say why, then close
                send(*handshake.reply_to(framing.rejected), error_response(e))
                return
            if frame is None:
                return
            header, closing = frame.header, False
            try:
                handshake.check(header)
                request = decode_request(frame)
                if isinstance(request.message, Startup):
                    response: ResponseMessage = handshake.startup(request.message, header.version)
                else:
                    response = _answer(request.message)
            except CqlError as e:
                response, closing = error_response(e), isinstance(e, ProtocolError)
            send(handshake.reply_version(header), header.stream, response)
            if isinstance(response, Ready) and isinstance(request.message, Register):
                change = SchemaChange("CREATED", "KEYSPACE", "pushed")
                send(handshake.reply_version(header), EVENT_STREAM, SchemaChangeEvent(change))
            if header.opcode == Opcode.STARTUP:  # answered: v5 switches to segments now
                handshake.switch_framing(framing)
            await writer.drain()
            if closing:
                return
    finally:
        writer.close()


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    loop = asyncio.new_event_loop()
    started = threading.Event()
    address: list[Any] = []
    stop = asyncio.Event()

    async def main() -> None:
        srv = await asyncio.start_server(_serve, "127.0.0.1", 0)
        address.append(srv.sockets[0].getsockname()[:2])
        started.set()
        await stop.wait()
        srv.close()
        await srv.wait_closed()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert started.wait(10)
    LibevConnection.initialize_reactor()
    yield address[0]
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    assert not thread.is_alive()


def _connect(server: tuple[str, int], version: int) -> Any:
    return LibevConnection.factory(DefaultEndPoint(*server), 10, protocol_version=version)


@pytest.mark.parametrize("version", [4, 5])
def test_connect_query_and_errors(server: tuple[str, int], version: int) -> None:
    conn = _connect(server, version)
    try:
        assert conn._is_checksumming_enabled is (version == 5)  # v5: segments after READY
        result = conn.wait_for_response(QueryMessage("SELECT 'é'", ConsistencyLevel.ONE))
        assert isinstance(result, ResultMessage)
        assert result.parsed_rows == [("SELECT 'é'",)]
        big = conn.wait_for_response(QueryMessage("BIG", ConsistencyLevel.ONE))
        assert big.parsed_rows == [(bytes(BIG_BYTES),)]
        # (fail_on_error would have the driver drop the connection)
        [(ok, error)] = conn.wait_for_responses(
            QueryMessage("FAIL", ConsistencyLevel.ONE), fail_on_error=False, timeout=10
        )
        assert not ok and isinstance(error, cassandra.InvalidRequest)
        assert "no such thing" in str(error)
        prepared = conn.wait_for_response(PrepareMessage("SELECT k FROM ks.t WHERE k = ?"))
        assert prepared.query_id == b"\x01" and prepared.pk_indexes == [0]
        # many requests in flight at once: frames share segments both ways
        many = [QueryMessage(f"SELECT {i}", ConsistencyLevel.ONE) for i in range(50)]
        answers = conn.wait_for_responses(*many, timeout=10)
        assert [a.parsed_rows for a in answers] == [[(f"SELECT {i}",)] for i in range(50)]
    finally:
        conn.close()


@pytest.mark.parametrize("version", [4, 5])
def test_events_are_pushed_on_stream_minus_one(server: tuple[str, int], version: int) -> None:
    conn = _connect(server, version)
    pushed: list[dict[str, Any]] = []
    got = threading.Event()

    def on_event(event: dict[str, Any]) -> None:
        pushed.append(event)
        got.set()

    try:
        conn.register_watchers({"SCHEMA_CHANGE": on_event}, register_timeout=10)
        assert got.wait(10)
        assert pushed == [
            {"change_type": "CREATED", "target_type": "KEYSPACE", "keyspace": "pushed"}
        ]
    finally:
        conn.close()


def test_the_drivers_downgrade_ends_at_v5(server: tuple[str, int]) -> None:
    # Cluster's negotiation: start at the highest version, step down on each refusal
    version, refused = ProtocolVersion.MAX_SUPPORTED, []
    while True:
        try:
            conn = _connect(server, version)
            break
        except ProtocolVersionUnsupported:
            refused.append(version)
            version = ProtocolVersion.get_lower_supported(version)
    try:
        assert refused == [ProtocolVersion.DSE_V2, ProtocolVersion.DSE_V1]
        assert conn.protocol_version == 5 and conn._is_checksumming_enabled
    finally:
        conn.close()


def test_unsupported_old_versions_are_refused(server: tuple[str, int]) -> None:
    with pytest.raises(ProtocolVersionUnsupported):
        _connect(server, 3)
