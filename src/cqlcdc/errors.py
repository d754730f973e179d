"""Every exception cqlcdc raises, each carrying its CQL native-protocol error code.

The classes and codes follow the CQL protocol (and the python driver's names), so a client
that knows ScyllaDB's errors knows ours:

>>> InvalidRequest("Undefined column name x").code
8704
"""

from __future__ import annotations

from typing import ClassVar


class CqlError(Exception):
    """Base of every error a CQL statement can produce.

    Attributes:
        code: the CQL native protocol error code of the class.
        message: the human-readable message (ScyllaDB's wording where the spec shows it).
    """

    code: ClassVar[int] = 0x0000
    by_code: ClassVar[dict[int, type[CqlError]]] = {}

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        CqlError.by_code.setdefault(cls.code, cls)

    @property
    def class_name(self) -> str:
        """The protocol-level name of the error class, e.g. ``InvalidRequest``."""
        return type(self).__name__


class ServerError(CqlError):
    """An internal failure of the engine (a bug or an I/O failure), never bad input."""

    code = 0x0000


class ProtocolError(CqlError):
    code = 0x000A


class AuthenticationFailed(CqlError):
    """A login was refused: an unknown role, a wrong password, or a role without LOGIN
    (Cassandra's ``AuthenticationException``, answered as AUTHENTICATION_ERROR)."""

    code = 0x0100


class Unavailable(CqlError):
    code = 0x1000


class Overloaded(CqlError):
    code = 0x1001


class WriteTimeout(CqlError):
    """The write was not acknowledged in time; it may or may not be applied later."""

    code = 0x1100


class ReadFailure(CqlError):
    code = 0x1300


class FunctionFailure(CqlError):
    """A function failed on its arguments (``fromJson`` of text that is not a value of the
    receiver's type). Carries the function's keyspace, name and argument types."""

    code = 0x1400

    def __init__(
        self, message: str, keyspace: str = "", function: str = "", arg_types: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message)
        self.keyspace = keyspace
        self.function = function
        self.arg_types = arg_types


class WriteFailure(CqlError):
    code = 0x1500


class CqlSyntaxError(CqlError):
    """The statement text does not parse. Carries the 1-based line and column of the fault."""

    code = 0x2000

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        where = f"line {line}:{column} " if line else ""
        super().__init__(f"{where}{message}")
        self.line = line
        self.column = column


class Unauthorized(CqlError):
    code = 0x2100


class InvalidRequest(CqlError):
    """The statement parses but is not valid for the schema or the data."""

    code = 0x2200


class ConfigurationError(CqlError):
    """A DDL statement asks for an impossible schema or option."""

    code = 0x2300


class AlreadyExists(ConfigurationError):
    """CREATE of a keyspace, table or type that exists (without IF NOT EXISTS)."""

    code = 0x2400

    def __init__(self, message: str, keyspace: str = "", table: str = "") -> None:
        super().__init__(message)
        self.keyspace = keyspace
        self.table = table


class Unprepared(CqlError):
    code = 0x2500


class CorruptIngestFile(ServerError):
    """A durable ingest file is damaged; the engine refuses to skip it silently."""


class DataDirLocked(ServerError):
    """Another process owns the data directory (one engine per data directory).

    Args:
        data_dir: the data directory.
        pid: the holder's process id, when known.
        holder: the holder as its lease record names it (host, pid, since when, until
            when), when known.
    """

    def __init__(self, data_dir: object, pid: int | None = None, holder: str | None = None) -> None:
        if holder is None:
            holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"data directory {data_dir} is in use by another cqlcdc process ({holder}); "
            "one process owns a data directory at a time"
        )
        self.data_dir = data_dir
        self.pid = pid
        self.holder = holder


class LeaseLost(ServerError):
    """This process no longer owns its data directory: its lease could not be renewed in
    time, or another process took it over after it expired. Nothing more may be committed."""

    def __init__(self, data_dir: object, reason: str) -> None:
        super().__init__(
            f"lost the lease of data directory {data_dir}: {reason}; this process no longer "
            "owns it and commits nothing more"
        )
        self.data_dir = data_dir
        self.reason = reason


class NoExecutors(ServerError):
    """A Spark cluster gave the engine no executor in time (``pipeline.spark``): its
    workers have too little memory or too few cores free for the executors asked for."""


class UnappliedWrite(ServerError):
    """The pipeline cannot apply a durable ingest record (a defect, never bad input: writes
    are validated before they are appended). The engine stops at it rather than skip an
    acknowledged write; ``cqlcdc recover`` names it and can skip it (docs/pipeline.md).

    The message holds ``ingest record seq=N`` (or ``records seq=A..B``), which is how the
    engine finds the record again in an error raised inside a Spark executor.
    """


__all__ = [
    "AlreadyExists",
    "AuthenticationFailed",
    "ConfigurationError",
    "CorruptIngestFile",
    "CqlError",
    "CqlSyntaxError",
    "DataDirLocked",
    "FunctionFailure",
    "InvalidRequest",
    "LeaseLost",
    "Overloaded",
    "ProtocolError",
    "ReadFailure",
    "ServerError",
    "UnappliedWrite",
    "Unauthorized",
    "Unavailable",
    "Unprepared",
    "WriteFailure",
    "WriteTimeout",
]
