"""Requests encoded by the real cassandra-driver (v4 and v5), decoded by ours."""

from __future__ import annotations

import struct

import pytest
from cassandra import ConsistencyLevel
from cassandra.protocol import (
    AuthResponseMessage,
    BatchMessage,
    ExecuteMessage,
    OptionsMessage,
    PrepareMessage,
    QueryMessage,
    RegisterMessage,
    StartupMessage,
)
from cassandra.query import UNSET_VALUE, BatchType

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import Frame, FrameHeader, Opcode
from cqlcdc.server.notations import UNSET
from cqlcdc.server.requests import (
    AuthResponse,
    Batch,
    BatchStatement,
    Execute,
    Options,
    Prepare,
    Query,
    QueryParams,
    Register,
    Startup,
    decode_request,
)
from cqlcdc.server.requests import BatchType as OurBatchType

from .helpers import VERSIONS, decode_driver_request

INT_1 = struct.pack(">i", 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_startup_options_register_auth_response(version: int) -> None:
    startup = decode_driver_request(
        StartupMessage("3.4.5", {"DRIVER_NAME": "py", "DRIVER_VERSION": "3.30.1"}), version, 3
    )
    assert startup.stream == 3 and startup.version == version
    assert startup.message == Startup(
        {"DRIVER_NAME": "py", "DRIVER_VERSION": "3.30.1", "CQL_VERSION": "3.4.5"}
    )
    assert isinstance(startup.message, Startup)
    assert startup.message.cql_version == "3.4.5" and startup.message.compression is None

    assert decode_driver_request(OptionsMessage(), version).message == Options()
    register = decode_driver_request(RegisterMessage(["SCHEMA_CHANGE", "STATUS_CHANGE"]), version)
    assert register.message == Register(("SCHEMA_CHANGE", "STATUS_CHANGE"))
    auth = decode_driver_request(AuthResponseMessage(b"\x00cassandra\x00secret"), version)
    assert auth.message == AuthResponse(b"\x00cassandra\x00secret")


@pytest.mark.parametrize("version", VERSIONS)
def test_query_with_every_parameter_the_driver_sends(version: int) -> None:
    msg = QueryMessage(
        "SELECT * FROM ks.t",
        ConsistencyLevel.LOCAL_QUORUM,
        serial_consistency_level=ConsistencyLevel.LOCAL_SERIAL,
        fetch_size=100,
        paging_state=b"\x00state",
        timestamp=1_700_000_000_000_000,
        keyspace="ks" if version >= 5 else None,
    )
    msg.query_params = [INT_1, None, UNSET_VALUE, b""]
    request = decode_driver_request(msg, version)
    assert request.message == Query(
        "SELECT * FROM ks.t",
        QueryParams(
            consistency=ConsistencyLevel.LOCAL_QUORUM,
            values=(INT_1, None, UNSET, b""),
            page_size=100,
            paging_state=b"\x00state",
            serial_consistency=ConsistencyLevel.LOCAL_SERIAL,
            timestamp_us=1_700_000_000_000_000,
            keyspace="ks" if version >= 5 else None,
        ),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_query_has_defaults(version: int) -> None:
    request = decode_driver_request(QueryMessage("SELECT 1", ConsistencyLevel.ONE), version)
    assert request.message == Query("SELECT 1", QueryParams(consistency=ConsistencyLevel.ONE))
    assert not request.tracing and request.custom_payload is None


@pytest.mark.parametrize("version", VERSIONS)
def test_unset_and_null_stay_distinct(version: int) -> None:
    msg = ExecuteMessage(b"id", [UNSET_VALUE, None], ConsistencyLevel.ONE, result_metadata_id=b"")
    request = decode_driver_request(msg, version)
    assert isinstance(request.message, Execute)
    assert request.message.params.values == (UNSET, None)
    assert request.message.params.values[0] is not None


@pytest.mark.parametrize("version", VERSIONS)
def test_execute(version: int) -> None:
    msg = ExecuteMessage(
        b"\x01\x02\x03",
        [INT_1, b"text"],
        ConsistencyLevel.QUORUM,
        fetch_size=5000,
        paging_state=b"\x07",
        skip_meta=True,
        timestamp=42,
        result_metadata_id=b"\xaa\xbb",
    )
    request = decode_driver_request(msg, version)
    assert request.message == Execute(
        b"\x01\x02\x03",
        QueryParams(
            consistency=ConsistencyLevel.QUORUM,
            values=(INT_1, b"text"),
            # the driver keeps skip_meta but never sets the flag (_write_query_params)
            skip_metadata=False,
            page_size=5000,
            paging_state=b"\x07",
            timestamp_us=42,
        ),
        b"\xaa\xbb" if version >= 5 else None,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_prepare(version: int) -> None:
    keyspace = "ks" if version >= 5 else None
    request = decode_driver_request(PrepareMessage("SELECT v FROM t", keyspace), version)
    assert request.message == Prepare("SELECT v FROM t", keyspace)
    assert decode_driver_request(PrepareMessage("SELECT 1"), version).message == Prepare("SELECT 1")


@pytest.mark.parametrize("version", VERSIONS)
def test_batch(version: int) -> None:
    msg = BatchMessage(
        BatchType.UNLOGGED,
        [
            (False, "INSERT INTO t (k, v) VALUES (?, ?)", [INT_1, None]),
            (True, b"\x09\x08", [UNSET_VALUE]),
            (False, "DELETE FROM t WHERE k = 1", []),
        ],
        ConsistencyLevel.TWO,
        serial_consistency_level=ConsistencyLevel.SERIAL,
        timestamp=1234,
        keyspace="ks" if version >= 5 else None,
    )
    request = decode_driver_request(msg, version)
    assert request.message == Batch(
        OurBatchType.UNLOGGED,
        (
            BatchStatement("INSERT INTO t (k, v) VALUES (?, ?)", None, (INT_1, None)),
            BatchStatement(None, b"\x09\x08", (UNSET,)),
            BatchStatement("DELETE FROM t WHERE k = 1", None, ()),
        ),
        consistency=ConsistencyLevel.TWO,
        serial_consistency=ConsistencyLevel.SERIAL,
        timestamp_us=1234,
        keyspace="ks" if version >= 5 else None,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_tracing_and_custom_payload(version: int) -> None:
    msg = QueryMessage("SELECT 1", ConsistencyLevel.ONE)
    msg.tracing = True
    msg.custom_payload = {"key": b"value", "none": None}
    request = decode_driver_request(msg, version)
    assert request.tracing
    assert request.custom_payload == {"key": b"value", "none": None}
    assert request.message == Query("SELECT 1", QueryParams())


def _frame(version: int, opcode: int, body: bytes, flags: int = 0) -> Frame:
    return Frame(FrameHeader(version, flags, 0, opcode, len(body)), body)


def _long_string(s: str) -> bytes:
    return struct.pack(">i", len(s)) + s.encode()


def _string(s: str) -> bytes:
    return struct.pack(">H", len(s)) + s.encode()


def test_named_values_and_now_in_seconds_which_the_driver_never_sends() -> None:
    flags = 0x01 | 0x02 | 0x40 | 0x80 | 0x100
    body = (
        _long_string("SELECT * FROM t WHERE k = :k")
        + struct.pack(">Hi", 1, flags)
        + struct.pack(">H", 2)
        + _string("k")
        + struct.pack(">i", 4)
        + INT_1
        + _string("v")
        + struct.pack(">i", -2)
        + _string("ks")
        + struct.pack(">i", 1_700_000_000)
    )
    request = decode_request(_frame(5, Opcode.QUERY, body))
    assert isinstance(request.message, Query)
    params = request.message.params
    assert params.names == ("k", "v") and params.values == (INT_1, UNSET)
    assert params.skip_metadata
    assert params.keyspace == "ks" and params.now_in_seconds == 1_700_000_000


def test_batch_now_in_seconds_v5() -> None:
    body = bytes([0]) + struct.pack(">H", 0) + struct.pack(">Hi", 1, 0x100) + struct.pack(">i", 7)
    request = decode_request(_frame(5, Opcode.BATCH, body))
    assert isinstance(request.message, Batch) and request.message.now_in_seconds == 7


@pytest.mark.parametrize(
    ("version", "opcode", "body", "message"),
    [
        (4, Opcode.QUERY, _long_string("q") + struct.pack(">HB", 1, 0x80), "Unknown flags 0x80"),
        (5, Opcode.QUERY, _long_string("q") + struct.pack(">Hi", 1, 0x200), "Unknown flags"),
        (4, Opcode.QUERY, _long_string("q") + struct.pack(">HB", 0x0B, 0), "consistency"),
        (4, Opcode.QUERY, _long_string("q") + struct.pack(">HB", 1, 0) + b"x", "unexpected"),
        (4, Opcode.QUERY, _long_string("q") + struct.pack(">HBHi", 1, 1, 1, -3), "length -3"),
        (4, Opcode.QUERY, _long_string("q") + struct.pack(">HBi", 1, 8, -2), "paging state"),
        (4, Opcode.QUERY, _long_string("q") + struct.pack(">H", 1), "Truncated"),
        (4, Opcode.QUERY, struct.pack(">i", -5), "negative length"),
        (4, Opcode.QUERY, struct.pack(">i", 2) + b"\xff\xfe", "UTF-8"),
        (4, Opcode.BATCH, bytes([3]) + struct.pack(">H", 0), "BATCH type"),
        (4, Opcode.BATCH, bytes([0]) + struct.pack(">H", 1) + bytes([2]), "Must be 0 or 1"),
        (4, Opcode.BATCH, bytes([0]) + struct.pack(">HHB", 0, 1, 0x40), "Named values"),
        (5, Opcode.PREPARE, _long_string("q") + struct.pack(">i", 2), "PREPARE flags"),
        (4, Opcode.REGISTER, struct.pack(">H", 1) + _string("NOPE"), "event type"),
        (4, Opcode.STARTUP, struct.pack(">H", 0), "Missing value CQL_VERSION"),
        (4, Opcode.READY, b"", "non-request opcode READY"),
        (4, 0x42, b"", "opcode 0x42"),
        (3, Opcode.OPTIONS, b"", "version 3"),
    ],
)
def test_malformed_requests_are_protocol_errors(
    version: int, opcode: int, body: bytes, message: str
) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        decode_request(_frame(version, opcode, body))
    assert info.value.code == 0x000A
