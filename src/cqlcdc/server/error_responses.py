"""ERROR messages (spec 4.2.1 and section 8): code, message and the code's own fields.

A driver reads those fields for the codes that have them and fails the whole connection
when they are missing, so ``ErrorResponse`` always writes them: given, taken from the
exception (AlreadyExists' keyspace and table, an Unprepared's id) or, last, neutral
defaults (consistency ONE, nothing received).

>>> from cqlcdc.errors import AlreadyExists
>>> error_response(AlreadyExists("Keyspace ks already exists", "ks")).info
AlreadyExistsInfo(keyspace='ks', table='')
"""

from __future__ import annotations

import io
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from cqlcdc.errors import AlreadyExists, CqlError, ServerError
from cqlcdc.server.frames import Opcode
from cqlcdc.server.notations import (
    write_byte,
    write_inetaddr,
    write_int,
    write_short,
    write_short_bytes,
    write_string,
    write_string_list,
)

ONE = 0x0001
# a [string] is a [short] length and its bytes: a longer message cannot be sent at all
MAX_MESSAGE_BYTES = 0xFFFF
# the write types a driver knows (WriteType.name_to_value fails on any other)
WRITE_TYPES = frozenset(
    {"SIMPLE", "BATCH", "UNLOGGED_BATCH", "COUNTER", "BATCH_LOG", "CAS", "VIEW", "CDC"}
)


def _check_write_type(write_type: str) -> None:
    if write_type not in WRITE_TYPES:
        raise ValueError(f"unknown write type {write_type!r}")


@dataclass(frozen=True, slots=True)
class UnavailableInfo:
    """0x1000: the consistency, the replicas it needs and those alive."""

    code: ClassVar[int] = 0x1000
    consistency: int = ONE
    required: int = 1
    alive: int = 0

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short(out, self.consistency)
        write_int(out, self.required)
        write_int(out, self.alive)


@dataclass(frozen=True, slots=True)
class WriteTimeoutInfo:
    """0x1100. ``contentions`` is sent (v5) only for a CAS write."""

    code: ClassVar[int] = 0x1100
    consistency: int = ONE
    received: int = 0
    block_for: int = 1
    write_type: str = "SIMPLE"
    contentions: int = 0

    def __post_init__(self) -> None:
        _check_write_type(self.write_type)

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short(out, self.consistency)
        write_int(out, self.received)
        write_int(out, self.block_for)
        write_string(out, self.write_type)
        if self.write_type == "CAS" and version >= 5:
            write_short(out, self.contentions)


@dataclass(frozen=True, slots=True)
class ReadTimeoutInfo:
    code: ClassVar[int] = 0x1200
    consistency: int = ONE
    received: int = 0
    block_for: int = 1
    data_present: bool = False

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short(out, self.consistency)
        write_int(out, self.received)
        write_int(out, self.block_for)
        write_byte(out, int(self.data_present))


def _write_failures(out: io.BytesIO, version: int, reasons: Mapping[str, int]) -> None:
    """v5: the reason map (replica address -> failure code); v4: only how many failed."""
    if version >= 5:
        write_int(out, len(reasons))
        for address, reason in reasons.items():
            write_inetaddr(out, address)
            write_short(out, reason)
    else:
        write_int(out, len(reasons))


@dataclass(frozen=True, slots=True)
class ReadFailureInfo:
    """0x1300. ``reasons`` maps each failed replica's address to a failure code."""

    code: ClassVar[int] = 0x1300
    consistency: int = ONE
    received: int = 0
    block_for: int = 1
    reasons: Mapping[str, int] = field(default_factory=lambda: {"127.0.0.1": 0})
    data_present: bool = False

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short(out, self.consistency)
        write_int(out, self.received)
        write_int(out, self.block_for)
        _write_failures(out, version, self.reasons)
        write_byte(out, int(self.data_present))


@dataclass(frozen=True, slots=True)
class WriteFailureInfo:
    code: ClassVar[int] = 0x1500
    consistency: int = ONE
    received: int = 0
    block_for: int = 1
    reasons: Mapping[str, int] = field(default_factory=lambda: {"127.0.0.1": 0})
    write_type: str = "SIMPLE"

    def __post_init__(self) -> None:
        _check_write_type(self.write_type)

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short(out, self.consistency)
        write_int(out, self.received)
        write_int(out, self.block_for)
        _write_failures(out, version, self.reasons)
        write_string(out, self.write_type)


@dataclass(frozen=True, slots=True)
class FunctionFailureInfo:
    """0x1400: the function that failed and its argument types (CQL names)."""

    code: ClassVar[int] = 0x1400
    keyspace: str = ""
    function: str = ""
    arg_types: tuple[str, ...] = ()

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string(out, self.keyspace)
        write_string(out, self.function)
        write_string_list(out, list(self.arg_types))


@dataclass(frozen=True, slots=True)
class CasWriteUnknownInfo:
    """0x1700 (v5): a contended CAS whose outcome is unknown."""

    code: ClassVar[int] = 0x1700
    consistency: int = ONE
    received: int = 0
    block_for: int = 1

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short(out, self.consistency)
        write_int(out, self.received)
        write_int(out, self.block_for)


@dataclass(frozen=True, slots=True)
class AlreadyExistsInfo:
    """0x2400: the keyspace, and the table ('' when the keyspace is what exists)."""

    code: ClassVar[int] = 0x2400
    keyspace: str = ""
    table: str = ""

    def write(self, out: io.BytesIO, version: int) -> None:
        write_string(out, self.keyspace)
        write_string(out, self.table)


@dataclass(frozen=True, slots=True)
class UnpreparedInfo:
    """0x2500: the statement id the server does not know (the driver re-prepares)."""

    code: ClassVar[int] = 0x2500
    query_id: bytes = b""

    def write(self, out: io.BytesIO, version: int) -> None:
        write_short_bytes(out, self.query_id)


ErrorInfo = (
    UnavailableInfo
    | WriteTimeoutInfo
    | ReadTimeoutInfo
    | ReadFailureInfo
    | WriteFailureInfo
    | FunctionFailureInfo
    | CasWriteUnknownInfo
    | AlreadyExistsInfo
    | UnpreparedInfo
)
_INFO_TYPES: dict[int, type[ErrorInfo]] = {
    t.code: t
    for t in (
        UnavailableInfo,
        WriteTimeoutInfo,
        ReadTimeoutInfo,
        ReadFailureInfo,
        WriteFailureInfo,
        FunctionFailureInfo,
        CasWriteUnknownInfo,
        AlreadyExistsInfo,
        UnpreparedInfo,
    )
}


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """ERROR: a code of spec section 8, a message, and the code's fields (defaults when
    ``info`` is None and the code has fields).

    Raises:
        ValueError: ``info`` of another code than ``code``.
    """

    opcode: ClassVar[int] = Opcode.ERROR
    code: int
    message: str
    info: ErrorInfo | None = None

    def __post_init__(self) -> None:
        if self.info is not None and self.info.code != self.code:
            raise ValueError(f"{type(self.info).__name__} is not for error code {self.code:#x}")

    def write(self, out: io.BytesIO, version: int) -> None:
        write_int(out, self.code)
        write_string(out, truncated_message(self.message))
        info = self.info
        if info is None and self.code in _INFO_TYPES:
            info = _INFO_TYPES[self.code]()
        if info is not None:
            info.write(out, version)


def truncated_message(message: str, max_bytes: int = MAX_MESSAGE_BYTES) -> str:
    """``message`` cut to at most ``max_bytes`` of UTF-8 (on a character boundary), so
    that an error quoting a huge identifier or value is still sent: a [string] holds at
    most 65,535 bytes, and an ERROR that cannot be encoded leaves the client waiting.

    >>> truncated_message("ab\u00e9", 3)
    'ab'
    """
    encoded = message.encode("utf-8")
    if len(encoded) <= max_bytes:
        return message
    return encoded[:max_bytes].decode("utf-8", errors="ignore")


def error_response(err: CqlError) -> ErrorResponse:
    """The ERROR for an exception: its class's code, its message, and the fields the code
    has, from an ``info`` attribute (an ErrorInfo for the same code), AlreadyExists'
    keyspace and table, or an unprepared ``query_id``."""
    info = getattr(err, "info", None)
    if not (isinstance(info, ErrorInfo) and info.code == err.code):
        info = None
    if info is None and isinstance(err, AlreadyExists):
        info = AlreadyExistsInfo(err.keyspace, err.table)
    if info is None and err.code == UnpreparedInfo.code:
        query_id = getattr(err, "query_id", b"")
        info = UnpreparedInfo(query_id if isinstance(query_id, bytes) else b"")
    return ErrorResponse(err.code, err.message, info)


def failure_response(error: Exception) -> tuple[ErrorResponse, CqlError]:
    """What a request that raised ``error`` is answered with, and the error it counts as: a
    CqlError as it is; anything else is a defect, logged (call it in the ``except``), and
    answered as a server error, so the client hears and the server keeps serving."""
    if not isinstance(error, CqlError):
        logging.getLogger("cqlcdc.server").exception("request failed")
        error = ServerError(f"{type(error).__name__}: {error}")
    return error_response(error), error


__all__ = [
    "MAX_MESSAGE_BYTES",
    "WRITE_TYPES",
    "AlreadyExistsInfo",
    "CasWriteUnknownInfo",
    "ErrorInfo",
    "ErrorResponse",
    "FunctionFailureInfo",
    "ReadFailureInfo",
    "ReadTimeoutInfo",
    "UnavailableInfo",
    "UnpreparedInfo",
    "WriteFailureInfo",
    "WriteTimeoutInfo",
    "error_response",
    "failure_response",
    "truncated_message",
]
