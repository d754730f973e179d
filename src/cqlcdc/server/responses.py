"""Responses as a server writes them (spec 4.2), and whole response frames.

RESULT kinds live in ``results``, ERROR in ``error_responses``; this module has the rest
(READY, AUTHENTICATE, SUPPORTED, AUTH_CHALLENGE, AUTH_SUCCESS, EVENT) and
``encode_response``, which frames any of them with the optional tracing id, warnings and
custom payload.

>>> encode_response(4, 3, Ready()).hex()
'840000030200000000'
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from cqlcdc.server.frames import (
    FLAG_CUSTOM_PAYLOAD,
    FLAG_TRACING,
    FLAG_WARNING,
    SUPPORTED_VERSIONS,
    Opcode,
    encode_frame,
)
from cqlcdc.server.notations import (
    write_bytes,
    write_bytes_map,
    write_inet,
    write_string,
    write_string_list,
    write_string_multimap,
)
from cqlcdc.server.results import SchemaChange

EVENT_STREAM = -1  # every EVENT goes out on stream -1 (spec 2.3)
CQL_VERSION = "3.4.5"  # the CQL of Cassandra 4, which cqlsh 6 and the drivers expect


class ResponseMessage(Protocol):
    """What ``encode_response`` frames: an opcode and a body writer."""

    @property
    def opcode(self) -> int: ...

    def write(self, out: io.BytesIO, version: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Ready:
    opcode: ClassVar[int] = Opcode.READY

    def write(self, out: io.BytesIO, version: int) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Authenticate:
    """AUTHENTICATE: the authenticator's Java class name (drivers pick their SASL
    mechanism by it, e.g. ``org.apache.cassandra.auth.PasswordAuthenticator``)."""

    opcode: ClassVar[int] = Opcode.AUTHENTICATE
    authenticator: str

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string(out, self.authenticator)


@dataclass(frozen=True, slots=True)
class Supported:
    """SUPPORTED: each STARTUP option with its values (a [string multimap])."""

    opcode: ClassVar[int] = Opcode.SUPPORTED
    options: Mapping[str, Sequence[str]]

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string_multimap(out, {k: list(v) for k, v in self.options.items()})


def supported_options(
    cql_version: str = CQL_VERSION,
    compression: Sequence[str] = (),
    versions: Sequence[int] = SUPPORTED_VERSIONS,
) -> dict[str, list[str]]:
    """What this server answers OPTIONS with: CQL_VERSION and COMPRESSION (the Python
    driver fails without either), PROTOCOL_VERSIONS as Cassandra lists them, and none of
    ScyllaDB's ``SCYLLA_*`` extensions (shard awareness, LWT flags...), which a driver
    would then expect this server to honour."""
    return {
        "CQL_VERSION": [cql_version],
        "COMPRESSION": list(compression),
        "PROTOCOL_VERSIONS": [f"{v}/v{v}" for v in versions],
    }


@dataclass(frozen=True, slots=True)
class AuthChallenge:
    opcode: ClassVar[int] = Opcode.AUTH_CHALLENGE
    token: bytes | None

    def write(self, out: io.BytesIO, version: int) -> None:
        write_bytes(out, self.token)


@dataclass(frozen=True, slots=True)
class AuthSuccess:
    opcode: ClassVar[int] = Opcode.AUTH_SUCCESS
    token: bytes | None = None

    def write(self, out: io.BytesIO, version: int) -> None:
        write_bytes(out, self.token)


@dataclass(frozen=True, slots=True)
class SchemaChangeEvent:
    """EVENT SCHEMA_CHANGE, to connections that registered for it."""

    opcode: ClassVar[int] = Opcode.EVENT
    change: SchemaChange

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string(out, "SCHEMA_CHANGE")
        self.change.write(out)


@dataclass(frozen=True, slots=True)
class TopologyChangeEvent:
    """EVENT TOPOLOGY_CHANGE: ``NEW_NODE``, ``REMOVED_NODE`` (or ``MOVED_NODE``) and the
    node's native transport address."""

    opcode: ClassVar[int] = Opcode.EVENT
    change_type: str
    address: str
    port: int

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string(out, "TOPOLOGY_CHANGE")
        write_string(out, self.change_type)
        write_inet(out, (self.address, self.port))


@dataclass(frozen=True, slots=True)
class StatusChangeEvent:
    """EVENT STATUS_CHANGE: ``UP`` or ``DOWN`` and the node's address."""

    opcode: ClassVar[int] = Opcode.EVENT
    change_type: str
    address: str
    port: int

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string(out, "STATUS_CHANGE")
        write_string(out, self.change_type)
        write_inet(out, (self.address, self.port))


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response whose body another process encoded: what the coordinator answers a
    protocol worker (``cqlcdc serve --workers``), sent on as it came."""

    opcode: int
    body: bytes

    def write(self, out: io.BytesIO, version: int) -> None:
        out.write(self.body)


def encode_body(version: int, message: ResponseMessage) -> bytes:
    """The body of ``message`` in protocol ``version``."""
    out = io.BytesIO()
    message.write(out, version)
    return out.getvalue()


def encode_response(
    version: int,
    stream: int,
    message: ResponseMessage,
    *,
    tracing_id: uuid.UUID | None = None,
    warnings: Sequence[str] = (),
    custom_payload: Mapping[str, bytes | None] | None = None,
) -> bytes:
    """A whole response frame (give it to ``Framing.encode``, which segments it in v5).

    Args:
        version: the connection's protocol version.
        stream: the request's stream id (``EVENT_STREAM`` for events).
        message: the response.
        tracing_id: the trace of a request that asked for tracing.
        warnings: server warnings the client logs.
        custom_payload: a [bytes map] for a custom query handler.
    """
    out = io.BytesIO()
    flags = 0
    if tracing_id is not None:
        flags |= FLAG_TRACING
        out.write(tracing_id.bytes)
    if warnings:
        flags |= FLAG_WARNING
        write_string_list(out, list(warnings))
    if custom_payload is not None:
        flags |= FLAG_CUSTOM_PAYLOAD
        write_bytes_map(out, custom_payload)
    message.write(out, version)
    return encode_frame(version, stream, message.opcode, out.getvalue(), flags)


__all__ = [
    "CQL_VERSION",
    "EVENT_STREAM",
    "AuthChallenge",
    "AuthSuccess",
    "Authenticate",
    "EncodedBody",
    "Ready",
    "ResponseMessage",
    "SchemaChangeEvent",
    "StatusChangeEvent",
    "Supported",
    "TopologyChangeEvent",
    "encode_body",
    "encode_response",
    "supported_options",
]
