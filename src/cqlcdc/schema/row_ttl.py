"""ScyllaDB's per-row TTL: one regular column holds each row's expiration time.

``CREATE TABLE t (p int PRIMARY KEY, e timestamp TTL)``, ``ALTER TABLE t TTL e``,
``ALTER TABLE t TTL NULL`` (ScyllaDB's create_table_statement / alter_table_statement, their
checks and messages). A ``timestamp`` column counts milliseconds since the epoch, ``bigint``
and ``int`` seconds. A row is expired once that time has passed, unless it is more than five
years in the past (then it is taken as malformed and never expires: alternator/ttl.cc
``is_expired``).

>>> is_expired(1_000, "bigint", 2_000)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.types.base import CqlType

TTL_TYPES = ("timestamp", "bigint", "int")
# std::chrono::years(5): 5 * 365.2425 days
FIVE_YEARS_S = 5 * 31_556_952


def ttl_column_of_create(
    columns: Sequence[ast.ColumnDef],
    types: Mapping[str, CqlType],
    partition_key: Sequence[str],
    clustering_key: Sequence[str],
) -> str | None:
    """The TTL column a CREATE TABLE marks, checked as ScyllaDB checks it.

    Raises:
        InvalidRequest: two TTL columns, a type other than timestamp/bigint/int, a key part
            or a static column (ScyllaDB's messages).
    """
    chosen: ast.ColumnDef | None = None
    for c in columns:  # the grammar's add_definition: in column order
        if not c.ttl:
            continue
        if chosen is not None:
            raise InvalidRequest(
                f"Cannot have more than one TTL column in a table. Saw {chosen.name} and {c.name}"
            )
        type_name = types[c.name].cql_name
        if type_name not in TTL_TYPES:
            raise InvalidRequest(
                f"TTL column '{c.name}' must be of type timestamp, bigint or int, "
                f"can't be {type_name}"
            )
        chosen = c
    if chosen is None:
        return None
    if chosen.name in partition_key or chosen.name in clustering_key:
        raise InvalidRequest(f"TTL column {chosen.name} cannot be part of the PRIMARY KEY")
    if chosen.static:
        raise InvalidRequest(f"TTL column {chosen.name} cannot be a static column")
    return chosen.name


def set_ttl_column(table: TableSchema, action: ast.SetTtlColumn) -> TableSchema:
    """``ALTER TABLE t TTL col`` / ``TTL NULL``.

    Raises:
        InvalidRequest: no such column, a wrong type, a key or static column, a table that
            already has one (or, for NULL, has none): ScyllaDB's messages.
    """
    where = f"{table.keyspace}.{table.name}"
    name = action.column
    if name is None:
        if table.ttl_column is None:
            raise InvalidRequest(
                f"Cannot unset TTL column, table {where} does not have a TTL column set"
            )
        return replace(table, ttl_column=None)
    column = table.column(name)
    if column is None:
        raise InvalidRequest(f"Column '{name}' does not exist in table {where}")
    if column.type.cql_name not in TTL_TYPES:
        raise InvalidRequest(
            f"TTL column {name} must be of type timestamp, bigint or int, "
            f"can't be {column.type.cql_name}"
        )
    if column.is_key:
        raise InvalidRequest(f"Cannot use a primary key column {name} as a TTL column")
    if column.kind == "static":
        raise InvalidRequest(f"Cannot use a static column {name} as a TTL column")
    if table.ttl_column is not None:
        raise InvalidRequest(
            f"Cannot set TTL column, table {where} already has a TTL column defined: "
            f"{table.ttl_column}"
        )
    return replace(table, ttl_column=name)


def expiration_s(value: Any, type_name: str) -> int | None:
    """A TTL column's value as seconds since the epoch (a timestamp's milliseconds
    truncated); None for null."""
    if value is None:
        return None
    return int(value) // 1000 if type_name == "timestamp" else int(value)


def is_expired(value: Any, type_name: str, now_s: int) -> bool:
    """Whether a row whose TTL column holds ``value`` has expired at ``now_s``."""
    at = expiration_s(value, type_name)
    return at is not None and now_s - FIVE_YEARS_S < at <= now_s


__all__ = ["TTL_TYPES", "expiration_s", "is_expired", "set_ttl_column", "ttl_column_of_create"]
