"""CREATE TABLE and the column actions of ALTER TABLE, as pure functions on ``TableSchema``.

Messages are ScyllaDB's (``cql3/statements/create_table_statement.cc``,
``alter_table_statement.cc``, ``schema/schema.cc``). The catalog adds existence, CDC and
versioning around them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace

from cqlcdc.cql.ast import (
    AddColumns,
    AlterColumnType,
    CreateTable,
    DropColumns,
    RenameColumns,
    TypeRef,
)
from cqlcdc.errors import ConfigurationError, InvalidRequest
from cqlcdc.schema.model import Column, DroppedColumn, TableSchema
from cqlcdc.schema.row_ttl import ttl_column_of_create
from cqlcdc.schema.typeshape import is_counter, references_duration, subtypes
from cqlcdc.types import UserType
from cqlcdc.types.base import CqlType

NAME_LENGTH = 48  # schema::NAME_LENGTH
_NAME_RE = re.compile(r"\w+")

Resolver = Callable[[TypeRef], CqlType]

# ALTER ... TYPE: (old, new) pairs whose values are readable by the new type
# (``is_value_compatible_with``); every type is also compatible with blob.
_VALUE_COMPATIBLE = frozenset(
    {
        ("ascii", "text"),
        ("ascii", "varchar"),
        ("text", "varchar"),
        ("varchar", "text"),
        ("int", "varint"),
        ("bigint", "varint"),
        ("smallint", "varint"),
        ("tinyint", "varint"),
        ("timeuuid", "uuid"),
        ("bigint", "timestamp"),
        ("timestamp", "bigint"),
    }
)


def validate_name(name: str, what: str) -> None:
    """Table/keyspace names: ``\\w+`` and at most 48 characters.

    Raises:
        InvalidRequest: ScyllaDB's message for ``what`` (``table`` or ``keyspace``).
    """
    if what == "table":
        if not _NAME_RE.fullmatch(name):
            raise InvalidRequest(
                f'"{name}" is not a valid table name '
                "(must be alphanumeric character only: [0-9A-Za-z]+)"
            )
        if len(name) > NAME_LENGTH:
            raise InvalidRequest(
                f'Table names shouldn\'t be more than {NAME_LENGTH} characters long (got "{name}")'
            )
    else:
        if not _NAME_RE.fullmatch(name):
            raise InvalidRequest(f'"{name}" is not a valid keyspace name')
        if len(name) > NAME_LENGTH:
            raise InvalidRequest(
                f"Keyspace names shouldn't be more than {NAME_LENGTH} characters long "
                f'(got "{name}")'
            )


def is_counter_table(columns: tuple[Column, ...]) -> bool:
    return any(is_counter(c.type) for c in columns if not c.is_key)


def check_counter_mix(table: TableSchema) -> None:
    """A table's value columns are all counters or none is (``schema::schema``).

    Raises:
        ConfigurationError: ScyllaDB's message naming the first offending column.
    """
    if is_counter_table(table.columns):
        for c in table.value_columns:
            if not is_counter(c.type):
                raise ConfigurationError(
                    f"Cannot add a non counter column ({c.name}) in a counter column family"
                )
    else:
        for c in table.select_star_columns:
            if is_counter(c.type):
                raise ConfigurationError(
                    f"Cannot add a counter column ({c.name}) in a non counter column family"
                )


def _check_key_part(name: str, t: CqlType, static: bool) -> None:
    if t.multicell:
        kind = "user-defined type" if isinstance(t, UserType) else "collection type"
        raise InvalidRequest(f"Invalid non-frozen {kind} for PRIMARY KEY component {name}")
    if is_counter(t):
        raise InvalidRequest(f"counter type is not supported for PRIMARY KEY part {name}")
    if references_duration(t):
        raise InvalidRequest(f"duration type is not supported for PRIMARY KEY part {name}")
    if static:
        raise InvalidRequest(f"Static column {name} cannot be part of the PRIMARY KEY")


def _check_udt_column(t: CqlType) -> None:
    if isinstance(t, UserType) and t.multicell and any(s.multicell for s in subtypes(t)):
        raise InvalidRequest("Non-frozen UDTs with nested non-frozen collections are not supported")


def build_table(
    stmt: CreateTable, keyspace: str, resolve: Resolver, default_ttl_s: int
) -> TableSchema:
    """The table a CREATE TABLE defines (without options, CDC, id or version).

    Raises:
        InvalidRequest: name, key, static, clustering-order or type rules.
        ConfigurationError: counter and non-counter columns mixed.
    """
    name = stmt.name.name
    validate_name(name, "table")
    seen: set[str] = set()
    for c in stmt.columns:
        if c.name in seen:
            raise InvalidRequest(f"Multiple definition of identifier {c.name}")
        seen.add(c.name)
    types = {c.name: resolve(c.type) for c in stmt.columns}
    ttl_column = ttl_column_of_create(stmt.columns, types, stmt.partition_key, stmt.clustering_key)
    for c in stmt.columns:
        if default_ttl_s > 0 and is_counter(types[c.name]):
            raise InvalidRequest("Cannot set default_time_to_live on a table with counters")
        _check_udt_column(types[c.name])
    if not stmt.partition_key:
        raise InvalidRequest("No PRIMARY KEY specified (exactly one required)")
    statics = {c.name for c in stmt.columns if c.static}
    if stmt.compact_storage:
        _check_compact(stmt, types, statics)
    key_kind: dict[str, tuple[str, int]] = {}
    for kind, names in (("partition_key", stmt.partition_key), ("clustering", stmt.clustering_key)):
        for position, key in enumerate(names):
            if key not in types:
                raise InvalidRequest(f"Unknown definition {key} referenced in PRIMARY KEY")
            _check_key_part(key, types[key], key in statics)
            key_kind[key] = (kind, position)
    if statics and not stmt.clustering_key:
        raise InvalidRequest(
            "Static columns are only useful (and thus allowed) if the table has at least one "
            "clustering column"
        )
    descending = _clustering_order(stmt)
    columns = []
    for c in stmt.columns:
        if c.name in key_kind:
            kind, position = key_kind[c.name]
            columns.append(
                Column(c.name, types[c.name], kind, position, c.name in descending)  # type: ignore[arg-type]
            )
        else:
            columns.append(Column(c.name, types[c.name], "static" if c.static else "regular"))
    table = TableSchema(
        keyspace,
        name,
        tuple(columns),
        compact_storage=stmt.compact_storage,
        ttl_column=ttl_column,
    )
    check_counter_mix(table)
    return table


def _check_compact(stmt: CreateTable, types: dict[str, CqlType], statics: set[str]) -> None:
    """``WITH COMPACT STORAGE`` as ScyllaDB checks it (``create_table_statement``, with
    ``enable_create_table_with_compact_storage: true``): no static or multi-cell columns;
    with clustering columns (a dense table) at most one other column; without, at least
    one.

    Raises:
        InvalidRequest: ScyllaDB's message.
    """
    keys = set(stmt.partition_key) | set(stmt.clustering_key)
    others = sorted(c.name for c in stmt.columns if c.name not in keys)
    if any(types[name].multicell for name in others):
        raise InvalidRequest(
            "Non-frozen collections and UDTs are not supported with COMPACT STORAGE"
        )
    if statics:
        raise InvalidRequest("Static columns are not supported in COMPACT STORAGE tables")
    if stmt.clustering_key and len(others) > 1:
        raise InvalidRequest(
            "COMPACT STORAGE with composite PRIMARY KEY allows no more than one column not "
            f"part of the PRIMARY KEY (got: {', '.join(others)})"
        )
    if not stmt.clustering_key and not others:
        raise InvalidRequest(
            "COMPACT STORAGE with non-composite PRIMARY KEY require one column not part of "
            "the PRIMARY KEY, none given"
        )


def _clustering_order(stmt: CreateTable) -> set[str]:
    """The DESC clustering columns, after ScyllaDB's CLUSTERING ORDER BY checks."""
    order = stmt.clustering_order
    if not order:
        return set()
    if len(order) > len(stmt.clustering_key):
        raise InvalidRequest(
            "Only clustering key columns can be defined in CLUSTERING ORDER directive"
        )
    named = {c for c, _ in order}
    for i, (column, _) in enumerate(order):
        expected = stmt.clustering_key[i]
        if column != expected:
            if expected in named:
                raise InvalidRequest(
                    "The order of columns in the CLUSTERING ORDER directive must be the one "
                    f"of the clustering key ({expected} must appear before {column})"
                )
            raise InvalidRequest(f"Missing CLUSTERING ORDER for column {expected}")
    return {c for c, direction in order if direction.upper() == "DESC"}


def add_columns(table: TableSchema, action: AddColumns, resolve: Resolver) -> TableSchema:
    """ALTER TABLE ... ADD.

    Raises:
        InvalidRequest: COMPACT STORAGE, static without clustering key, name conflicts.
        ConfigurationError: counter and non-counter columns mixed.
    """
    if table.compact_storage:
        raise InvalidRequest("Cannot add new column to a COMPACT STORAGE table")
    columns = list(table.columns)
    names = {c.name: c for c in columns}
    for d in action.columns:
        if d.static and not table.clustering_key:
            raise InvalidRequest(
                "Static columns are only useful (and thus allowed) if the table has at least "
                "one clustering column"
            )
        existing = names.get(d.name)
        if existing is not None:
            part = "a PRIMARY KEY part" if existing.is_key else "an existing column"
            raise InvalidRequest(f"Invalid column name {d.name} because it conflicts with {part}")
        t = resolve(d.type)
        _check_udt_column(t)
        _check_readd(table, d.name, t)
        if is_counter(t) and not is_counter_table(table.columns):
            raise ConfigurationError(
                f"Cannot add a counter column ({d.name}) in a non counter column family"
            )
        column = Column(d.name, t, "static" if d.static else "regular")
        columns.append(column)
        names[d.name] = column
    new = replace(table, columns=tuple(columns))
    check_counter_mix(new)
    return new


def _check_readd(table: TableSchema, name: str, new_type: CqlType) -> None:
    """ScyllaDB's checks of a column added under a dropped column's name
    (``alter_table_statement::add_column``): never in a counter table (#7831), and a
    non-frozen collection only over the same collection type (#6276), since the dropped
    column's element cells are still in the files."""
    old = table.dropped_column(name)
    if old is None:
        return
    if is_counter_table(table.columns) or is_counter(old.type):
        raise InvalidRequest(f"Cannot re-add previously dropped counter column {name}")
    if _multicell_collection(new_type) and _multicell_collection(old.type) and new_type != old.type:
        raise InvalidRequest(
            f"Cannot add a collection with the name {name} because a collection with the same "
            "name and a different type has already been used in the past"
        )


def _multicell_collection(t: CqlType) -> bool:
    return t.multicell and not isinstance(t, UserType)


def drop_columns(table: TableSchema, action: DropColumns) -> TableSchema:
    """ALTER TABLE ... DROP [USING TIMESTAMP t]: the columns go, and each is remembered with
    the drop's timestamp (the clock when none is given) so that a column added later under
    its name does not show the data written before (``TableSchema.readded_at``).

    Raises:
        InvalidRequest: a COMPACT STORAGE table (not a "CQL3 table" to ScyllaDB), an unknown
            column or a PRIMARY KEY part.
    """
    if table.compact_storage:
        raise InvalidRequest("Cannot drop columns from a non-CQL3 table")
    dropped: set[str] = set()
    for name in action.columns:
        column = table.column(name)
        if column is None or name in dropped:
            raise InvalidRequest(f"Column {name} was not found in table {table.name}")
        if column.is_key:
            raise InvalidRequest(f"Cannot drop PRIMARY KEY part {name}")
        dropped.add(name)
    at = time.time_ns() // 1000 if action.timestamp is None else action.timestamp
    records = [d for d in table.dropped if d.name not in dropped]
    for c in table.columns:
        if c.name in dropped:
            previous = table.dropped_column(c.name)
            # a drop never moves the line back (an older USING TIMESTAMP than the last drop)
            stamp = at if previous is None else max(at, previous.timestamp)
            records.append(DroppedColumn(c.name, c.type, c.kind == "static", stamp))
    return replace(
        table,
        columns=tuple(c for c in table.columns if c.name not in dropped),
        dropped=tuple(records),
        # dropping the TTL column turns the per-row TTL off for good (test_ttl_row.py)
        ttl_column=None if table.ttl_column in dropped else table.ttl_column,
    )


def rename_columns(table: TableSchema, action: RenameColumns) -> TableSchema:
    """ALTER TABLE ... RENAME (PRIMARY KEY columns only).

    Raises:
        InvalidRequest: unknown source, existing target, or a non-key column.
    """
    columns = {c.name: c for c in table.columns}
    order = [c.name for c in table.columns]
    for old, new in action.renames:
        column = columns.get(old)
        if column is None:
            raise InvalidRequest(f"Cannot rename unknown column {old} in table {table.name}")
        if new in columns:
            raise InvalidRequest(
                f"Cannot rename column {old} to {new} in table {table.name}; "
                "another column of that name already exist"
            )
        if not column.is_key:
            raise InvalidRequest(f"Cannot rename non PRIMARY KEY part {old}")
        del columns[old]
        columns[new] = replace(column, name=new)
        order[order.index(old)] = new
    return replace(table, columns=tuple(columns[n] for n in order))


def alter_column_type(
    table: TableSchema, action: AlterColumnType, resolve: Resolver
) -> TableSchema:
    """ALTER TABLE ... ALTER c TYPE t: only to a value-compatible type.

    Raises:
        InvalidRequest: an unknown column.
        ConfigurationError: the types are incompatible.
    """
    column = table.column(action.column)
    if column is None:
        raise InvalidRequest(f"Column {action.column} was not found in table {table.name}")
    new_type = resolve(action.type)
    old_name, new_name = column.type.cql_name, new_type.cql_name
    compatible = (
        old_name == new_name
        or (old_name, new_name) in _VALUE_COMPATIBLE
        or (new_name == "blob" and not column.type.multicell)
    )
    if column.kind == "clustering" and old_name != new_name and new_name == "blob":
        compatible = False  # clustering columns need order compatibility
    if not compatible:
        how = "not order-compatible" if column.kind == "clustering" else "incompatible"
        raise ConfigurationError(
            f"Cannot change {column.name} from type {old_name} to type {new_name}: types are {how}."
        )
    columns = tuple(replace(c, type=new_type) if c is column else c for c in table.columns)
    return replace(table, columns=columns)


__all__ = [
    "NAME_LENGTH",
    "Resolver",
    "add_columns",
    "alter_column_type",
    "build_table",
    "check_counter_mix",
    "drop_columns",
    "is_counter_table",
    "rename_columns",
    "validate_name",
]
