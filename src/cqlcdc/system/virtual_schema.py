"""``system_virtual_schema``: the schema of the virtual keyspaces, as Cassandra 4 defines it
(``VirtualSchemaKeyspace``: ``keyspaces``, ``tables``, ``columns``).

Drivers read it from every server whose ``release_version`` is 4.0 or later, which this one
reports (``system_local.RELEASE_VERSION``); without it the C++ driver logs an error on every
control connection. Like Cassandra, it describes only virtual keyspaces, itself here, and is
not listed in ``system_schema``.

>>> sorted(name for _, name in TABLES)
['columns', 'keyspaces', 'tables']
"""

from __future__ import annotations

from typing import Any

from cqlcdc.schema.model import Column, ColumnKind, TableSchema
from cqlcdc.system.schema import column_rows
from cqlcdc.types import native_type

KS = "system_virtual_schema"


def _col(name: str, type_name: str, kind: ColumnKind = "regular", pos: int = 0) -> Column:
    return Column(name, native_type(type_name), kind, pos)


def _table(name: str, *columns: Column) -> TableSchema:
    return TableSchema(KS, name, columns, table_id=f"{KS}.{name}")


TABLES: dict[tuple[str, str], TableSchema] = {
    (KS, t.name): t
    for t in (
        _table("keyspaces", _col("keyspace_name", "text", "partition_key")),
        _table(
            "tables",
            _col("keyspace_name", "text", "partition_key"),
            _col("table_name", "text", "clustering"),
            _col("comment", "text"),
        ),
        _table(
            "columns",
            _col("keyspace_name", "text", "partition_key"),
            _col("table_name", "text", "clustering", 0),
            _col("column_name", "text", "clustering", 1),
            _col("clustering_order", "text"),
            _col("column_name_bytes", "blob"),
            _col("kind", "text"),
            _col("position", "int"),
            _col("type", "text"),
        ),
    )
}
_COMMENTS = {
    "keyspaces": "virtual keyspace definitions",
    "tables": "virtual table definitions",
    "columns": "virtual column definitions",
}


def virtual_schema_rows(name: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The rows of ``system_virtual_schema.<name>``, all in the one keyspace's partition."""
    own = sorted(TABLES.values(), key=lambda t: t.name)
    rows: list[dict[str, Any]]
    if name == "keyspaces":
        rows = [{"keyspace_name": KS}]
    elif name == "tables":
        rows = [
            {"keyspace_name": KS, "table_name": t.name, "comment": _COMMENTS[t.name]} for t in own
        ]
    else:
        rows = [row for t in own for row in column_rows(t)]
    return {(KS,): rows}


__all__ = ["KS", "TABLES", "virtual_schema_rows"]
