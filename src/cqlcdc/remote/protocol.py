"""The cassandra-driver, adapted so results and errors come back as cqlcdc's own.

Rows arrive as the server sent them, cell bytes undecoded (``RawRowsHandler``, a protocol
handler the driver documents for "alternative result decoding"), and are decoded with
cqlcdc's types, the codecs the server encoded them with: every value is the one the
embedded engine returns, which the driver's Python values (datetimes, named tuples, sorted
sets) are not. Column types are built from the driver's type classes (``cql_type``), and a
driver exception becomes the ``CqlError`` the embedded engine raises (``cql_error``).

>>> from cassandra import cqltypes
>>> cql_type(cqltypes.MapType.apply_parameters((cqltypes.UTF8Type, cqltypes.Int32Type))).cql_name
'map<text, int>'
"""

from __future__ import annotations

import re
from typing import Any

from cassandra import cqltypes
from cassandra.policies import RetryPolicy
from cassandra.protocol import (
    AlreadyExistsException,
    ErrorMessage,
    ProtocolHandler,
    ResultMessage,
    read_int,
)

from cqlcdc.errors import AlreadyExists, CqlError, CqlSyntaxError, InvalidRequest, ServerError
from cqlcdc.types import (
    ListType,
    MapType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
)
from cqlcdc.types.base import CqlType

__all__ = ["NoRetries", "RawRowsHandler", "cql_error", "cql_type", "decode_row"]


def cql_type(driver_type: Any) -> CqlType:
    """The cqlcdc type of one of the driver's type classes (``ResultSet.column_types``,
    prepared metadata). Nested types are frozen, as CQL has them.

    Raises:
        ServerError: a type cqlcdc does not have (a custom class the server never sends).
    """

    def inner(t: Any) -> CqlType:
        return cql_type(t).frozen()

    if issubclass(driver_type, cqltypes.UserType):  # before TupleType: a UDT is one
        fields = [inner(t) for t in driver_type.subtypes]
        return UserType(driver_type.keyspace, driver_type.typename, driver_type.fieldnames, fields)
    if issubclass(driver_type, cqltypes.TupleType):
        return TupleType(tuple(inner(t) for t in driver_type.subtypes))
    if issubclass(driver_type, cqltypes.ListType):
        return ListType(inner(driver_type.subtypes[0]))
    if issubclass(driver_type, cqltypes.SetType):
        return SetType(inner(driver_type.subtypes[0]))
    if issubclass(driver_type, cqltypes.MapType):
        return MapType(inner(driver_type.subtypes[0]), inner(driver_type.subtypes[1]))
    if issubclass(driver_type, cqltypes.VectorType):
        return VectorType(inner(driver_type.subtype), driver_type.vector_size)
    if issubclass(driver_type, cqltypes.FrozenType | cqltypes.ReversedType):
        return cql_type(driver_type.subtypes[0])
    try:
        return native_type(driver_type.typename)
    except InvalidRequest:
        raise ServerError(
            f"Unsupported result type {driver_type.cql_parameterized_type()}"
        ) from None


def decode_row(row: tuple[bytes | None, ...], types: list[CqlType]) -> tuple[Any, ...]:
    """A row of cell bytes (``RawRowsHandler``) as cqlcdc values."""
    return tuple(
        None if cell is None else ctype.deserialize(cell)
        for cell, ctype in zip(row, types, strict=True)
    )


class _RawRowsResult(ResultMessage):  # type: ignore[misc]  # the driver is untyped
    """A RESULT whose rows keep their cells as bytes (a leading ``_``: not registered as
    the driver's RESULT message, which other sessions keep using)."""

    def recv_results_rows(
        self,
        f: Any,
        protocol_version: int,
        user_type_map: Any,
        result_metadata: Any,
        column_encryption_policy: Any,
    ) -> None:
        self.recv_results_metadata(f, user_type_map)
        column_metadata = self.column_metadata or result_metadata
        count = read_int(f)
        width = len(column_metadata)
        self.parsed_rows = [tuple(self.recv_row(f, width)) for _ in range(count)]
        self.column_names = [c[2] for c in column_metadata]
        self.column_types = [c[3] for c in column_metadata]


class _AlreadyExistsAsSent(AlreadyExistsException):  # type: ignore[misc]
    """0x2400 raised as the server sent it: the driver's own conversion builds
    ``AlreadyExists(keyspace, table)`` with a message of its own and drops the server's."""

    error_code = None  # not registered in the driver's table of error classes

    def to_exception(self) -> Any:
        return self


class _ErrorAsSent(ErrorMessage):  # type: ignore[misc]
    @classmethod
    def recv_body(cls, f: Any, protocol_version: int, *args: Any) -> Any:
        error = ErrorMessage.recv_body(f, protocol_version, *args)
        if type(error) is AlreadyExistsException:
            return _AlreadyExistsAsSent(error.code, error.message, error.info)
        return error


class RawRowsHandler(ProtocolHandler):  # type: ignore[misc]
    """The protocol handler of a ``RemoteSession``'s requests (``client_protocol_handler``)."""

    message_types_by_opcode = {
        **ProtocolHandler.message_types_by_opcode,
        ResultMessage.opcode: _RawRowsResult,
        ErrorMessage.opcode: _ErrorAsSent,
    }


class NoRetries(RetryPolicy):  # type: ignore[misc]
    """Every error reaches the caller as the server sent it: a write is not sent twice, and
    a server error is not turned into "no host available" by a retry on the one host."""

    def on_read_timeout(self, *args: Any, **kwargs: Any) -> tuple[Any, None]:
        return self.RETHROW, None

    def on_write_timeout(self, *args: Any, **kwargs: Any) -> tuple[Any, None]:
        return self.RETHROW, None

    def on_unavailable(self, *args: Any, **kwargs: Any) -> tuple[Any, None]:
        return self.RETHROW, None

    def on_request_error(self, *args: Any, **kwargs: Any) -> tuple[Any, None]:
        return self.RETHROW, None


# what the driver's exceptions say of a server error (ErrorMessage.summary_msg)
_SUMMARY = re.compile(r'Error from server: code=([0-9a-fA-F]{4}) \[[^\]]*\] message="(.*)"\Z', re.S)


def cql_error(exc: BaseException) -> CqlError | None:
    """The CqlError of a server's error response, as the driver raised it; None for a
    failure of the connection (no server answer to map)."""
    code: int
    message: str
    if isinstance(exc, ErrorMessage):
        code, message = exc.code, exc.message
    else:
        found = _SUMMARY.search(str(exc))
        if found is None:
            return None
        code, message = int(found.group(1), 16), found.group(2)
    cls = CqlError.by_code.get(code)
    if cls is None:  # a code the embedded engine never raises
        return ServerError(f"code={code:04x}: {message}")
    if cls is AlreadyExists and isinstance(exc, ErrorMessage) and isinstance(exc.info, dict):
        return AlreadyExists(message, exc.info.get("keyspace", ""), exc.info.get("table", ""))
    if cls is CqlSyntaxError:
        return CqlSyntaxError(message)  # the server's message already says where
    return cls(message)
