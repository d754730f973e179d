"""cqlcdc: CQL tables with ScyllaDB-exact CDC logs and YDB-style changefeeds, on Spark.

>>> import cqlcdc
>>> session = cqlcdc.connect(data_dir="/tmp/cqlcdc")  # doctest: +SKIP
>>> session.execute("CREATE KEYSPACE ks WITH replication = "
...                 "{'class': 'SimpleStrategy', 'replication_factor': 1}")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cqlcdc.errors import (
    AlreadyExists,
    ConfigurationError,
    CorruptIngestFile,
    CqlError,
    CqlSyntaxError,
    DataDirLocked,
    InvalidRequest,
    LeaseLost,
    ServerError,
    WriteTimeout,
)

if TYPE_CHECKING:
    from cqlcdc.session import Session


def connect(*args: Any, **kwargs: Any) -> Session:
    """Open a session on an embedded engine; see ``cqlcdc.session.connect``."""
    from cqlcdc.session import connect as _connect

    return _connect(*args, **kwargs)


__all__ = [
    "AlreadyExists",
    "ConfigurationError",
    "CorruptIngestFile",
    "CqlError",
    "CqlSyntaxError",
    "DataDirLocked",
    "InvalidRequest",
    "LeaseLost",
    "ServerError",
    "WriteTimeout",
    "connect",
]
