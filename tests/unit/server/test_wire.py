"""The server's wire layer against the real cassandra-driver: what the driver encodes we
decode, what we encode the driver decodes; and no body, however broken, raises anything but
a ProtocolError."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from cassandra import ConsistencyLevel
from cassandra.protocol import (
    BatchMessage,
    ErrorMessage,
    ExecuteMessage,
    PrepareMessage,
    ProtocolHandler,
    QueryMessage,
    RegisterMessage,
    ResultMessage,
    StartupMessage,
)
from cassandra.query import BatchType
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.errors import AlreadyExists, InvalidRequest, ProtocolError
from cqlcdc.server import wire
from cqlcdc.server.typecodes import type_option
from cqlcdc.types import ListType, MapType, native_type

READERS = [
    wire.read_startup,
    wire.read_query,
    wire.read_prepare,
    wire.read_execute,
    wire.read_register,
    wire.read_batch,
    wire.read_auth_response,
]


def _body(message: Any) -> bytes:
    buf = io.BytesIO()
    message.send_body(buf, 4)
    return buf.getvalue()


def test_requests_the_driver_encodes() -> None:
    query = wire.decode(
        _body(QueryMessage("SELECT * FROM t", ConsistencyLevel.QUORUM, fetch_size=100)),
        wire.read_query,
    )
    assert query.query == "SELECT * FROM t"
    assert query.params.consistency == ConsistencyLevel.QUORUM
    assert query.params.page_size == 100 and query.params.values == ()
    execute = wire.decode(
        _body(ExecuteMessage(b"\x01\x02", [b"\x00\x00\x00\x07", None], 1, paging_state=b"ps")),
        wire.read_execute,
    )
    assert execute.query_id == b"\x01\x02"
    assert execute.params.values == (b"\x00\x00\x00\x07", None)
    assert execute.params.paging_state == b"ps"
    assert wire.decode(_body(PrepareMessage("INSERT ...")), wire.read_prepare) == "INSERT ..."
    startup = wire.decode(_body(StartupMessage("3.4.5", {"DRIVER_NAME": "x"})), wire.read_startup)
    assert startup == {"CQL_VERSION": "3.4.5", "DRIVER_NAME": "x"}
    events = wire.decode(_body(RegisterMessage(["SCHEMA_CHANGE"])), wire.read_register)
    assert events == ["SCHEMA_CHANGE"]
    batch = wire.decode(
        _body(
            BatchMessage(
                BatchType.UNLOGGED, [(False, "INSERT a", [b"v"]), (True, b"id", [])], 1, None, 42
            )
        ),
        wire.read_batch,
    )
    assert batch.kind == 1 and batch.params.timestamp_us == 42
    assert batch.children == (
        wire.BatchChild("INSERT a", None, (b"v",)),
        wire.BatchChild(None, b"id", ()),
    )


def _decode(opcode: int, body: bytes) -> Any:
    return ProtocolHandler.decode_message(4, {}, 1, 0, opcode, body, None, None)


def test_responses_the_driver_decodes() -> None:
    text, ints = native_type("text"), MapType(native_type("int"), native_type("text"))
    columns = [
        wire.ColumnSpec("ks", "t", "k", type_option(text)),
        wire.ColumnSpec("ks", "t", "m", type_option(ints)),
        wire.ColumnSpec("ks", "t", "l", type_option(ListType(native_type("bigint")))),
    ]
    m = ints.make({1: "one"})
    rows = [[text.serialize("a"), ints.serialize(m), None]]
    result = _decode(wire.OP_RESULT, wire.rows_result(columns, rows, paging_state=b"next"))
    assert isinstance(result, ResultMessage)
    assert result.column_names == ["k", "m", "l"]
    assert result.parsed_rows == [("a", {1: "one"}, None)]
    assert result.paging_state == b"next"
    err = _decode(wire.OP_ERROR, wire.error_body(AlreadyExists("exists", "ks", "t")))
    assert isinstance(err, ErrorMessage) and err.info == {"keyspace": "ks", "table": "t"}
    invalid = _decode(wire.OP_ERROR, wire.error_body(InvalidRequest("bad")))
    assert invalid.code == 0x2200 and invalid.message == "bad"


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=64), which=st.integers(0, len(READERS) - 1))
def test_any_body_is_read_or_refused_with_a_protocol_error(body: bytes, which: int) -> None:
    with contextlib.suppress(ProtocolError):  # anything else fails the test
        wire.decode(body, READERS[which])


@pytest.mark.parametrize("length", [-1, wire.MAX_BODY_BYTES + 1])
def test_frame_lengths_out_of_bounds_are_refused(length: int) -> None:
    header = wire.HEADER.pack(4, 0, 0, wire.OP_QUERY, length)
    with pytest.raises(ProtocolError, match="Invalid frame body length"):
        wire.decode_header(header)
