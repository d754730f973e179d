"""Hostile input: random, truncated, extended and corrupted bodies, frames, segments and
type options are read or refused with a ProtocolError, never anything else; and whatever
the driver encodes (random parameters) decodes to what it was given."""

from __future__ import annotations

import contextlib
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.protocol import BatchMessage, ExecuteMessage, PrepareMessage, QueryMessage
from cassandra.query import UNSET_VALUE, BatchType
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import FLAG_CUSTOM_PAYLOAD, Frame, FrameHeader, Opcode
from cqlcdc.server.framing import Framing
from cqlcdc.server.notations import UNSET
from cqlcdc.server.requests import Batch, Execute, Prepare, Query, decode_request
from cqlcdc.server.typecodes import decode_type_option, parse_marshal_class

from .helpers import driver_frame

REQUESTS = sorted(
    {
        Opcode.STARTUP,
        Opcode.OPTIONS,
        Opcode.QUERY,
        Opcode.PREPARE,
        Opcode.EXECUTE,
        Opcode.BATCH,
        Opcode.REGISTER,
        Opcode.AUTH_RESPONSE,
    }
)
FUZZ = settings(max_examples=300, deadline=None)

levels = st.sampled_from(sorted(ConsistencyLevel.value_to_name))
values = st.lists(st.one_of(st.none(), st.just(UNSET_VALUE), st.binary(max_size=20)), max_size=5)
texts = st.text(max_size=30)
optional_bytes = st.one_of(st.none(), st.binary(min_size=1, max_size=10))


@st.composite
def driver_messages(draw: st.DrawFn) -> tuple[Any, int]:
    """A request the driver encodes, with random parameters, and a protocol version."""
    version = draw(st.sampled_from([4, 5]))
    # never '': the driver then sets the keyspace flag without the keyspace (PREPARE) or
    # the keyspace without the flag (BATCH)
    keyspace = draw(st.one_of(st.none(), st.text(min_size=1, max_size=9))) if version >= 5 else None
    kind = draw(st.sampled_from(["query", "execute", "prepare", "batch"]))
    common = {
        "serial_consistency_level": draw(st.sampled_from([None, 8, 9])),
        "timestamp": draw(st.one_of(st.none(), st.integers(0, 2**63 - 1))),
    }
    paging = {
        "fetch_size": draw(st.one_of(st.none(), st.integers(1, 2**31 - 1))),
        "paging_state": draw(optional_bytes),
    }
    msg: Any
    if kind == "query":
        msg = QueryMessage(draw(texts), draw(levels), keyspace=keyspace, **common, **paging)
        msg.query_params = draw(st.one_of(st.none(), values))
    elif kind == "execute":
        msg = ExecuteMessage(
            draw(st.binary(max_size=16)),
            draw(values),
            draw(levels),
            result_metadata_id=draw(st.binary(max_size=16)),
            **common,
            **paging,
        )
    elif kind == "prepare":
        msg = PrepareMessage(draw(texts), keyspace)
    else:
        statements = draw(
            st.lists(
                st.one_of(
                    st.tuples(st.just(False), texts, values),
                    st.tuples(st.just(True), st.binary(max_size=16), values),
                ),
                max_size=4,
            )
        )
        batch_type = draw(st.sampled_from([BatchType.LOGGED, BatchType.UNLOGGED]))
        msg = BatchMessage(batch_type, statements, draw(levels), keyspace=keyspace, **common)
    return msg, version


def _ours(value: Any) -> Any:
    return UNSET if value is UNSET_VALUE else value


@FUZZ
@given(driver_messages())
def test_what_the_driver_encodes_we_decode(case: tuple[Any, int]) -> None:
    msg, version = case
    decoded = decode_request(driver_frame(msg, version)).message
    if isinstance(msg, PrepareMessage):
        assert decoded == Prepare(msg.query, msg.keyspace)
    elif isinstance(msg, BatchMessage):
        assert isinstance(decoded, Batch)
        assert decoded.type == msg.batch_type.value and decoded.consistency == msg.consistency_level
        assert decoded.serial_consistency == msg.serial_consistency_level
        assert decoded.timestamp_us == msg.timestamp
        assert decoded.keyspace == msg.keyspace
        for ours, (prepared, text_or_id, params) in zip(
            decoded.statements, msg.queries, strict=True
        ):
            assert (ours.query_id if prepared else ours.query) == text_or_id
            assert ours.values == tuple(_ours(v) for v in params)
    else:
        assert isinstance(decoded, Query | Execute)
        params = decoded.params
        assert params.consistency == msg.consistency_level
        assert params.values == tuple(_ours(v) for v in msg.query_params or ())
        assert params.page_size == msg.fetch_size
        assert params.paging_state == msg.paging_state
        assert params.serial_consistency == msg.serial_consistency_level
        assert params.timestamp_us == msg.timestamp
        if isinstance(decoded, Query):
            assert decoded.query == msg.query and params.keyspace == msg.keyspace
        else:
            assert decoded.query_id == msg.query_id
            assert decoded.result_metadata_id == (msg.result_metadata_id if version >= 5 else None)


@FUZZ
@given(driver_messages(), st.data())
def test_truncated_or_extended_bodies_are_protocol_errors(
    case: tuple[Any, int], data: st.DataObject
) -> None:
    frame = driver_frame(*case)
    body = frame.body
    cut = data.draw(st.integers(0, len(body) - 1), label="cut")
    extra = data.draw(st.binary(min_size=1, max_size=8), label="extra")
    for broken in (body[:cut], body + extra):
        header = FrameHeader(frame.header.version, 0, 1, frame.header.opcode, len(broken))
        try:
            decode_request(Frame(header, broken))
        except ProtocolError as e:
            assert e.code == 0x000A and e.message
        else:
            raise AssertionError(f"{len(broken)} of {len(body)} bytes decoded")


@FUZZ
@given(
    opcode=st.sampled_from(REQUESTS),
    version=st.sampled_from([4, 5]),
    payload=st.booleans(),
    body=st.binary(max_size=80),
)
def test_random_bodies_are_read_or_refused(
    opcode: int, version: int, payload: bool, body: bytes
) -> None:
    flags = FLAG_CUSTOM_PAYLOAD if payload else 0
    with contextlib.suppress(ProtocolError):  # anything else fails the test
        decode_request(Frame(FrameHeader(version, flags, 0, opcode, len(body)), body))


@FUZZ
@given(driver_messages(), st.data())
def test_corrupted_bodies_are_read_or_refused(case: tuple[Any, int], data: st.DataObject) -> None:
    frame = driver_frame(*case)
    body = bytearray(frame.body)
    for _ in range(data.draw(st.integers(1, 4))):
        if body:
            body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_request(Frame(frame.header, bytes(body)))


@FUZZ
@given(chunks=st.lists(st.binary(max_size=40), max_size=6), segmented=st.booleans())
def test_random_bytes_on_the_wire(chunks: list[bytes], segmented: bool) -> None:
    framing = Framing(max_body_bytes=1024)
    if segmented:
        framing.start_segments()
    with contextlib.suppress(ProtocolError):
        for chunk in chunks:
            for frame in framing.feed(chunk):
                with contextlib.suppress(ProtocolError):
                    decode_request(frame)


@FUZZ
@given(option=st.binary(max_size=60))
def test_random_type_options(option: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_type_option(option)


@FUZZ
@given(name=st.text(alphabet="(),: 0123456789abcdefListTypeMapSetUserVectorInt32UTF8", max_size=60))
def test_random_class_names(name: str) -> None:
    with contextlib.suppress(ProtocolError):
        parse_marshal_class(name)
