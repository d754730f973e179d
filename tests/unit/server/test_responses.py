"""Responses encoded by ours, decoded by the real cassandra-driver (both its compiled and its
pure-Python ProtocolHandler), for v4 and v5."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cassandra import (
    SchemaTargetType,
    UserAggregateDescriptor,
    UserFunctionDescriptor,
)
from cassandra.cqltypes import Int32Type, VarcharType
from cassandra.protocol import (
    RESULT_KIND_PREPARED,
    RESULT_KIND_ROWS,
    RESULT_KIND_SCHEMA_CHANGE,
    RESULT_KIND_SET_KEYSPACE,
    RESULT_KIND_VOID,
    AuthChallengeMessage,
    AuthenticateMessage,
    AuthSuccessMessage,
    EventMessage,
    ReadyMessage,
    ResultMessage,
    SupportedMessage,
)

from cqlcdc.server.responses import (
    EVENT_STREAM,
    AuthChallenge,
    Authenticate,
    AuthSuccess,
    Ready,
    SchemaChangeEvent,
    StatusChangeEvent,
    Supported,
    TopologyChangeEvent,
    encode_response,
    supported_options,
)
from cqlcdc.server.results import (
    ColumnSpec,
    PreparedResult,
    RowsMetadata,
    RowsResult,
    SchemaChange,
    SchemaChangeResult,
    SetKeyspaceResult,
    VoidResult,
    metadata_id,
    serialize_rows,
)
from cqlcdc.types import native_type

from .helpers import HANDLERS, VERSIONS, driver_decode

INT = native_type("int")
TEXT = native_type("text")
COLS = (ColumnSpec("ks", "t", "k", INT), ColumnSpec("ks", "t", "v", TEXT))

pytestmark = pytest.mark.parametrize("version", VERSIONS)


@pytest.fixture(params=HANDLERS, ids=["cython", "python"])
def handler(request: pytest.FixtureRequest) -> Any:
    return request.param


def test_ready_authenticate_supported_auth(version: int, handler: Any) -> None:
    ready = driver_decode(encode_response(version, 1, Ready()), handler=handler)
    assert isinstance(ready, ReadyMessage) and ready.stream_id == 1

    auth = driver_decode(
        encode_response(version, 2, Authenticate("org.apache.cassandra.auth.Password")),
        handler=handler,
    )
    assert isinstance(auth, AuthenticateMessage)
    assert auth.authenticator == "org.apache.cassandra.auth.Password"

    supported = driver_decode(
        encode_response(version, 3, Supported(supported_options())), handler=handler
    )
    assert isinstance(supported, SupportedMessage)
    assert supported.cql_versions == ["3.4.5"]
    assert supported.options == {"COMPRESSION": [], "PROTOCOL_VERSIONS": ["4/v4", "5/v5"]}
    assert not any(k.startswith("SCYLLA") for k in supported.options)

    challenge = driver_decode(encode_response(version, 4, AuthChallenge(b"salt")), handler=handler)
    assert isinstance(challenge, AuthChallengeMessage) and challenge.challenge == b"salt"
    success = driver_decode(encode_response(version, 5, AuthSuccess(b"ok")), handler=handler)
    assert isinstance(success, AuthSuccessMessage) and success.token == "ok"


def test_void_and_set_keyspace(version: int, handler: Any) -> None:
    void = driver_decode(encode_response(version, 1, VoidResult()), handler=handler)
    assert isinstance(void, ResultMessage) and void.kind == RESULT_KIND_VOID
    ks = driver_decode(encode_response(version, 1, SetKeyspaceResult("shop")), handler=handler)
    assert ks.kind == RESULT_KIND_SET_KEYSPACE and ks.new_keyspace == "shop"


def test_rows_with_global_table_spec(version: int, handler: Any) -> None:
    rows = serialize_rows(COLS, [(1, "a"), (2, None), (None, "")])
    msg = driver_decode(
        encode_response(version, 9, RowsResult(RowsMetadata(COLS), rows)), handler=handler
    )
    assert msg.kind == RESULT_KIND_ROWS and msg.stream_id == 9
    assert msg.column_names == ["k", "v"]
    assert msg.column_types == [Int32Type, VarcharType]
    assert list(msg.parsed_rows) == [(1, "a"), (2, None), (None, "")]
    assert msg.paging_state is None


def test_rows_from_several_tables(version: int, handler: Any) -> None:
    cols = (ColumnSpec("a", "t1", "x", INT), ColumnSpec("b", "t2", "y", INT))
    result = RowsResult(RowsMetadata(cols), serialize_rows(cols, [(1, 2)]))
    msg = driver_decode(encode_response(version, 1, result), handler=handler)
    assert [c[:3] for c in msg.column_metadata] == [("a", "t1", "x"), ("b", "t2", "y")]
    assert list(msg.parsed_rows) == [(1, 2)]


def test_paging_state_and_no_metadata(version: int, handler: Any) -> None:
    meta = RowsMetadata(COLS, paging_state=b"\x00next\xff", no_metadata=True)
    frame = encode_response(version, 1, RowsResult(meta, serialize_rows(COLS, [(7, "x")])))
    # with no metadata the client decodes by the columns PREPARE gave it
    prepared_columns = [("ks", "t", "k", Int32Type), ("ks", "t", "v", VarcharType)]
    msg = driver_decode(frame, handler=handler, result_metadata=prepared_columns)
    assert msg.paging_state == b"\x00next\xff"
    assert msg.column_metadata is None
    assert list(msg.parsed_rows) == [(7, "x")]


def test_metadata_changed_is_v5_only(version: int, handler: Any) -> None:
    new_id = metadata_id(COLS)
    meta = RowsMetadata(COLS, new_metadata_id=new_id)
    msg = driver_decode(encode_response(version, 1, RowsResult(meta, ())), handler=handler)
    assert msg.column_names == ["k", "v"]
    assert getattr(msg, "result_metadata_id", None) == (new_id if version >= 5 else None)
    with pytest.raises(ValueError):
        RowsMetadata(COLS, no_metadata=True, new_metadata_id=new_id)


def test_prepared_with_pk_indexes_and_result_metadata(version: int, handler: Any) -> None:
    binds = (
        ColumnSpec("ks", "t", "v", TEXT),
        ColumnSpec("ks", "t", "k2", INT),
        ColumnSpec("ks", "t", "k1", INT),
    )
    prepared = PreparedResult(b"\x01\x02", binds, (2, 1), COLS)
    msg = driver_decode(encode_response(version, 1, prepared), handler=handler)
    assert msg.kind == RESULT_KIND_PREPARED and msg.query_id == b"\x01\x02"
    assert [(c.name, c.type) for c in msg.bind_metadata] == [
        ("v", VarcharType),
        ("k2", Int32Type),
        ("k1", Int32Type),
    ]
    assert msg.pk_indexes == [2, 1]
    assert [c[2] for c in msg.column_metadata] == ["k", "v"]
    assert msg.result_metadata_id == (metadata_id(COLS) if version >= 5 else None)


def test_prepared_statement_without_result(version: int, handler: Any) -> None:
    prepared = PreparedResult(b"id", (ColumnSpec("ks", "t", "k", INT),), (0,), (), b"given")
    msg = driver_decode(encode_response(version, 1, prepared), handler=handler)
    assert msg.column_metadata is None and msg.pk_indexes == [0]
    assert msg.result_metadata_id == (b"given" if version >= 5 else None)
    with pytest.raises(ValueError):
        PreparedResult(b"id", (), (0,))


@pytest.mark.parametrize(
    ("change", "event"),
    [
        (SchemaChange("CREATED", "KEYSPACE", "ks"), {"keyspace": "ks"}),
        (SchemaChange("UPDATED", "TABLE", "ks", "t"), {"keyspace": "ks", "table": "t"}),
        (SchemaChange("DROPPED", "TYPE", "ks", "ut"), {"keyspace": "ks", "type": "ut"}),
        (
            SchemaChange("CREATED", "FUNCTION", "ks", "f", ("int", "text")),
            {"keyspace": "ks", "function": UserFunctionDescriptor("f", ["int", "text"])},
        ),
        (
            SchemaChange("DROPPED", "AGGREGATE", "ks", "agg", ("int",)),
            {"keyspace": "ks", "aggregate": UserAggregateDescriptor("agg", ["int"])},
        ),
    ],
)
def test_schema_change_result_and_event(
    version: int, handler: Any, change: SchemaChange, event: dict[str, Any]
) -> None:
    expected = {"change_type": change.change_type, "target_type": change.target, **event}
    msg = driver_decode(encode_response(version, 1, SchemaChangeResult(change)), handler=handler)
    assert msg.kind == RESULT_KIND_SCHEMA_CHANGE
    assert _event(msg.schema_change_event) == _event(expected)
    pushed = driver_decode(
        encode_response(version, EVENT_STREAM, SchemaChangeEvent(change)), handler=handler
    )
    assert isinstance(pushed, EventMessage) and pushed.stream_id == -1
    assert pushed.event_type == "SCHEMA_CHANGE"
    assert _event(pushed.event_args) == _event(expected)
    assert getattr(SchemaTargetType, change.target) == change.target


def _event(args: dict[str, Any]) -> dict[str, Any]:
    # the function and aggregate descriptors have no __eq__
    described = (UserFunctionDescriptor, UserAggregateDescriptor)
    return {
        k: (type(v), v.name, v.argument_types) if isinstance(v, described) else v
        for k, v in args.items()
    }


def test_topology_and_status_events(version: int, handler: Any) -> None:
    for event, kind in [
        (TopologyChangeEvent("NEW_NODE", "10.0.0.7", 9042), "TOPOLOGY_CHANGE"),
        (StatusChangeEvent("DOWN", "::1", 19042), "STATUS_CHANGE"),
    ]:
        msg = driver_decode(encode_response(version, EVENT_STREAM, event), handler=handler)
        assert msg.event_type == kind
        assert msg.event_args == {
            "change_type": event.change_type,
            "address": (event.address, event.port),
        }


def test_tracing_warnings_custom_payload(version: int, handler: Any) -> None:
    trace = uuid.UUID(int=7)
    frame = encode_response(
        version,
        1,
        VoidResult(),
        tracing_id=trace,
        warnings=["Aggregation query used without partition key"],
        custom_payload={"k": b"v"},
    )
    msg = driver_decode(frame, handler=handler)
    assert msg.trace_id == trace
    assert msg.warnings == ["Aggregation query used without partition key"]
    assert msg.custom_payload == {"k": b"v"}
    assert msg.kind == RESULT_KIND_VOID
