"""Requests as a server reads them (spec section 4.1), for protocol v4 and v5.

The cassandra-driver only encodes these; this is the other direction. Every malformed,
truncated or overlong body is a ProtocolError (code 0x000A), never an IndexError.

>>> from cqlcdc.server.frames import Frame, FrameHeader, Opcode
>>> body = bytes.fromhex("00000008") + b"SELECT 1" + bytes.fromhex("0001 00")
>>> decode_request(Frame(FrameHeader(4, 0, 7, Opcode.QUERY, len(body)), body)).message.query
'SELECT 1'
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import (
    FLAG_CUSTOM_PAYLOAD,
    FLAG_TRACING,
    Frame,
    Opcode,
    opcode_name,
)
from cqlcdc.server.notations import BodyReader, Value

# <query_parameters> flags (4.1.4): a [byte] in v4, an [int] in v5
VALUES = 0x0001
SKIP_METADATA = 0x0002
PAGE_SIZE = 0x0004
PAGING_STATE = 0x0008
SERIAL_CONSISTENCY = 0x0010
DEFAULT_TIMESTAMP = 0x0020
NAMES_FOR_VALUES = 0x0040
KEYSPACE = 0x0080  # v5
NOW_IN_SECONDS = 0x0100  # v5
PREPARE_WITH_KEYSPACE = 0x0001  # PREPARE's own flags (v5)

_QUERY_FLAGS = {4: 0x7F, 5: 0x1FF}
_BATCH_FLAGS = {4: 0x70, 5: 0x1F0}  # the four low bits make no sense for a batch
EVENT_TYPES = frozenset({"TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE"})


class BatchType(enum.IntEnum):
    LOGGED = 0
    UNLOGGED = 1
    COUNTER = 2


@dataclass(frozen=True, slots=True)
class QueryParams:
    """``<query_parameters>`` of QUERY and EXECUTE.

    ``page_size`` is as sent: None or <= 0 means no paging. ``names`` is set when the
    values are named (then it is as long as ``values``).
    """

    consistency: int = 0x0001
    values: tuple[Value, ...] = ()
    names: tuple[str, ...] | None = None
    skip_metadata: bool = False
    page_size: int | None = None
    paging_state: bytes | None = None
    serial_consistency: int | None = None
    timestamp_us: int | None = None
    keyspace: str | None = None
    now_in_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Startup:
    """STARTUP: its options (CQL_VERSION is checked present; COMPRESSION, DRIVER_NAME...)."""

    options: Mapping[str, str]

    @property
    def cql_version(self) -> str:
        return self.options["CQL_VERSION"]

    @property
    def compression(self) -> str | None:
        return self.options.get("COMPRESSION") or None


@dataclass(frozen=True, slots=True)
class Options:
    """OPTIONS: asks for SUPPORTED."""


@dataclass(frozen=True, slots=True)
class Query:
    query: str
    params: QueryParams = field(default_factory=QueryParams)


@dataclass(frozen=True, slots=True)
class Prepare:
    query: str
    keyspace: str | None = None  # v5


@dataclass(frozen=True, slots=True)
class Execute:
    query_id: bytes
    params: QueryParams = field(default_factory=QueryParams)
    result_metadata_id: bytes | None = None  # v5: the client's idea of the result columns


@dataclass(frozen=True, slots=True)
class BatchStatement:
    """One statement of a BATCH: query text or a prepared id, and its values."""

    query: str | None
    query_id: bytes | None
    values: tuple[Value, ...] = ()


@dataclass(frozen=True, slots=True)
class Batch:
    type: BatchType
    statements: tuple[BatchStatement, ...]
    consistency: int = 0x0001
    serial_consistency: int | None = None
    timestamp_us: int | None = None
    keyspace: str | None = None  # v5
    now_in_seconds: int | None = None  # v5


@dataclass(frozen=True, slots=True)
class Register:
    events: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthResponse:
    token: bytes | None


RequestMessage = Startup | Options | Query | Prepare | Execute | Batch | Register | AuthResponse


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request frame: the message and the frame's own fields.

    ``tracing`` is the client asking for a trace; ``custom_payload`` is the frame's
    ``[bytes map]`` (None when the flag is not set).
    """

    version: int
    stream: int
    message: RequestMessage
    tracing: bool = False
    custom_payload: Mapping[str, bytes | None] | None = None


def decode_request(frame: Frame) -> Request:
    """Decode a request frame of protocol v4 or v5.

    Raises:
        ProtocolError: an opcode that is not a request, a malformed, truncated or overlong
            body, unknown flags, an invalid consistency or batch type.
    """
    header = frame.header
    if header.version not in _QUERY_FLAGS:
        raise ProtocolError(f"Cannot decode protocol version {header.version}")
    read = _READERS.get(header.opcode)
    if read is None:
        raise ProtocolError(f"Unknown or non-request opcode {opcode_name(header.opcode)}")
    reader = BodyReader(frame.body, opcode_name(header.opcode))
    payload = reader.read_bytes_map() if header.flags & FLAG_CUSTOM_PAYLOAD else None
    message = read(reader, header.version)
    reader.expect_end()
    return Request(
        header.version, header.stream, message, bool(header.flags & FLAG_TRACING), payload
    )


def _startup(r: BodyReader, version: int) -> Startup:
    options = r.read_string_map()
    if "CQL_VERSION" not in options:
        raise ProtocolError("Missing value CQL_VERSION in STARTUP message")
    return Startup(options)


def _options(r: BodyReader, version: int) -> Options:
    return Options()


def _query(r: BodyReader, version: int) -> Query:
    return Query(r.read_long_string(), _params(r, version))


def _prepare(r: BodyReader, version: int) -> Prepare:
    query = r.read_long_string()
    if version < 5:
        return Prepare(query)
    flags = r.read_int()
    if flags & ~PREPARE_WITH_KEYSPACE:
        raise ProtocolError(f"Unknown PREPARE flags {flags:#x}")
    return Prepare(query, r.read_string() if flags & PREPARE_WITH_KEYSPACE else None)


def _execute(r: BodyReader, version: int) -> Execute:
    query_id = r.read_short_bytes()
    metadata_id = r.read_short_bytes() if version >= 5 else None
    return Execute(query_id, _params(r, version), metadata_id)


def _register(r: BodyReader, version: int) -> Register:
    events = tuple(r.read_string_list())
    for event in events:
        if event not in EVENT_TYPES:
            raise ProtocolError(f"Invalid value '{event}' for an event type")
    return Register(events)


def _auth_response(r: BodyReader, version: int) -> AuthResponse:
    return AuthResponse(r.read_bytes())


def _flags(r: BodyReader, version: int, allowed: int) -> int:
    flags = r.read_int() if version >= 5 else r.read_byte()
    if flags & ~allowed:
        raise ProtocolError(f"Unknown flags {flags & ~allowed:#x} in the {r.what} message")
    return flags


def _params(r: BodyReader, version: int) -> QueryParams:
    consistency = r.read_consistency()
    flags = _flags(r, version, _QUERY_FLAGS[version])
    values: list[Value] = []
    names: list[str] | None = [] if flags & NAMES_FOR_VALUES and flags & VALUES else None
    if flags & VALUES:
        for _ in range(r.read_short()):
            if names is not None:
                names.append(r.read_string())
            values.append(r.read_value())
    page_size = r.read_int() if flags & PAGE_SIZE else None
    paging_state = None
    if flags & PAGING_STATE:
        state = r.read_value()
        if not (state is None or isinstance(state, bytes)):
            raise ProtocolError("The paging state cannot be unset")
        paging_state = state
    serial = r.read_consistency() if flags & SERIAL_CONSISTENCY else None
    timestamp = r.read_long() if flags & DEFAULT_TIMESTAMP else None
    keyspace = r.read_string() if flags & KEYSPACE else None
    now = r.read_int() if flags & NOW_IN_SECONDS else None
    return QueryParams(
        consistency,
        tuple(values),
        tuple(names) if names is not None else None,
        bool(flags & SKIP_METADATA),
        page_size,
        paging_state,
        serial,
        timestamp,
        keyspace,
        now,
    )


def _batch(r: BodyReader, version: int) -> Batch:
    try:
        kind = BatchType(r.read_byte())
    except ValueError as e:
        raise ProtocolError(f"Unknown BATCH type: {e}") from None
    statements = []
    for _ in range(r.read_short()):
        prepared = r.read_byte()
        if prepared == 0:
            query: str | None = r.read_long_string()
            query_id = None
        elif prepared == 1:
            query, query_id = None, r.read_short_bytes()
        else:
            raise ProtocolError(
                f"Invalid query kind in BATCH messages. Must be 0 or 1 but got {prepared}"
            )
        values = tuple(r.read_value() for _ in range(r.read_short()))
        statements.append(BatchStatement(query, query_id, values))
    consistency = r.read_consistency()
    flags = _flags(r, version, _BATCH_FLAGS[version])
    if flags & NAMES_FOR_VALUES:
        # the spec itself says this cannot work (CASSANDRA-10246); Cassandra refuses it too
        raise ProtocolError("Named values are not supported in BATCH")
    return Batch(
        kind,
        tuple(statements),
        consistency,
        r.read_consistency() if flags & SERIAL_CONSISTENCY else None,
        r.read_long() if flags & DEFAULT_TIMESTAMP else None,
        r.read_string() if flags & KEYSPACE else None,
        r.read_int() if flags & NOW_IN_SECONDS else None,
    )


_READERS: dict[int, Callable[[BodyReader, int], RequestMessage]] = {
    Opcode.STARTUP: _startup,
    Opcode.OPTIONS: _options,
    Opcode.QUERY: _query,
    Opcode.PREPARE: _prepare,
    Opcode.EXECUTE: _execute,
    Opcode.BATCH: _batch,
    Opcode.REGISTER: _register,
    Opcode.AUTH_RESPONSE: _auth_response,
}

__all__ = [
    "EVENT_TYPES",
    "AuthResponse",
    "Batch",
    "BatchStatement",
    "BatchType",
    "Execute",
    "Options",
    "Prepare",
    "Query",
    "QueryParams",
    "Register",
    "Request",
    "RequestMessage",
    "Startup",
    "decode_request",
]
