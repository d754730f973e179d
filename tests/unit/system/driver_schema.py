"""The real cassandra-driver's schema parser reading cqlcdc's system tables.

``FakeConnection`` answers the driver's own queries (their exact text, WHERE clauses bound
by the driver) the way the server's read path does: the statement is parsed, the system
table's rows are computed and the normal CQL evaluator applies the restrictions; every cell
is serialized by cqlcdc and read back by the driver's type, as it would be off the wire.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cassandra import InvalidRequest as DriverInvalidRequest
from cassandra.metadata import SchemaParserV4
from cassandra.protocol import ResultMessage

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlError, InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.server.typecodes import type_option
from cqlcdc.storage.select import PartitionRows, ResultSet, evaluate, prepare
from cqlcdc.system.tables import SYSTEM_KEYSPACES, SystemView, system_rows, system_table

RowSource = Callable[[TableSchema], list[PartitionRows]]


def select(text: str, rows_of: RowSource) -> ResultSet:
    """A SELECT on a system table as ``reads.select`` evaluates it.

    Raises:
        CqlError: as the coordinator answers (an unknown keyspace or table, a bad WHERE).
    """
    stmt = parse_statement(text)
    assert isinstance(stmt, ast.Select)
    keyspace, name = stmt.table.keyspace, stmt.table.name
    schema = system_table(keyspace, name) if keyspace in SYSTEM_KEYSPACES else None
    if schema is None:
        raise InvalidRequest(f"Keyspace {keyspace} does not exist")
    res = prepare(schema, stmt)
    return evaluate(schema, stmt, res, rows_of(schema), int(time.time()))


def view_rows(view: SystemView) -> RowSource:
    return lambda schema: system_rows(schema, view)


def driver_rows(result: ResultSet, protocol_version: int = 4) -> list[dict[str, Any]]:
    """The rows as the driver decodes them (``dict_factory``): each cell through cqlcdc's
    serializer and the driver's deserializer for the column's type."""
    types = [
        None if t is None else ResultMessage.read_type(io.BytesIO(type_option(t)), {})
        for t in result.types
    ]
    out = []
    for row in result.rows:
        values = []
        for value, ctype, dtype in zip(row, result.types, types, strict=True):
            if value is None or ctype is None or dtype is None:
                values.append(value)
            else:
                values.append(dtype.from_binary(ctype.serialize(value), protocol_version))
        out.append(dict(zip(result.columns, values, strict=True)))
    return out


@dataclass
class _Rows:
    column_names: list[str]
    parsed_rows: list[tuple[Any, ...]]


class FakeConnection:
    """Just enough of ``cassandra.connection.Connection`` for the schema parser."""

    def __init__(self, rows_of: RowSource) -> None:
        self.rows_of = rows_of
        self.queries: list[str] = []

    def answer(self, query: str) -> tuple[bool, Any]:
        self.queries.append(query)
        try:
            result = select(query, self.rows_of)
        except CqlError as e:
            return False, DriverInvalidRequest(str(e))
        rows = driver_rows(result)
        return True, _Rows(result.columns, [tuple(r.values()) for r in rows])

    def wait_for_responses(self, *msgs: Any, **kwargs: Any) -> list[tuple[bool, Any]]:
        assert kwargs.get("fail_on_error") is False
        return [self.answer(m.query) for m in msgs]


def parser(rows_of: RowSource) -> tuple[SchemaParserV4, FakeConnection]:
    """The parser the driver picks for release 4.x (``system.local``'s release_version)."""
    conn = FakeConnection(rows_of)
    return SchemaParserV4(conn, timeout=1.0), conn
