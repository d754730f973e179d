"""``system_schema``: the catalog as ScyllaDB / Cassandra 3+ lay it out, for drivers' schema
metadata, cqlsh, and ScyllaDB's CDC libraries (keyspaces, tables, columns, types, the empty
functions, aggregates, triggers, indexes, views and dropped columns, ``scylla_keyspaces``
and ``scylla_tables``). The layouts are ``db/schema_tables.cc``'s, column for column.

>>> [c.name for c in TABLES[(KS, "columns")].primary_key]
['keyspace_name', 'table_name', 'column_name']
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cqlcdc.cdc.schema_extensions import parse_option_map, table_extensions
from cqlcdc.schema.model import (
    Column,
    ColumnKind,
    Keyspace,
    TableSchema,
    legacy_table_id,
    table_uuid,
)
from cqlcdc.schema.table_options import DEFAULT_TABLE_OPTIONS
from cqlcdc.types import ListType, MapType, SetType, native_type
from cqlcdc.types.base import CqlType
from cqlcdc.types.udt import UserType

KS = "system_schema"
_TEXT = native_type("text")
_STRATEGY_PREFIX = "org.apache.cassandra.locator."
# every schema table is frozen: a row is rewritten whole, never merged cell by cell
_MAP = MapType(_TEXT, _TEXT, frozen=True)
_BLOB_MAP = MapType(_TEXT, native_type("blob"), frozen=True)
_TEXT_LIST = ListType(_TEXT, frozen=True)
_TEXT_SET = SetType(_TEXT, frozen=True)


def _col(name: str, ctype: CqlType | str, kind: ColumnKind = "regular", pos: int = 0) -> Column:
    return Column(name, native_type(ctype) if isinstance(ctype, str) else ctype, kind, pos)


def _table(name: str, *columns: Column) -> TableSchema:
    return TableSchema(KS, name, columns, table_id=f"{KS}.{name}")


_KS_KEY = _col("keyspace_name", "text", "partition_key")
# the options every table and view row carries (schema_tables.cc: tables() and views())
_OPTION_COLUMNS = (
    _col("bloom_filter_fp_chance", "double"),
    _col("caching", _MAP),
    _col("comment", "text"),
    _col("compaction", _MAP),
    _col("compression", _MAP),
    _col("crc_check_chance", "double"),
    _col("dclocal_read_repair_chance", "double"),
    _col("default_time_to_live", "int"),
    _col("extensions", _BLOB_MAP),
    _col("gc_grace_seconds", "int"),
    _col("id", "uuid"),
    _col("max_index_interval", "int"),
    _col("memtable_flush_period_in_ms", "int"),
    _col("min_index_interval", "int"),
    _col("read_repair_chance", "double"),
    _col("speculative_retry", "text"),
)

TABLES: dict[tuple[str, str], TableSchema] = {
    (KS, t.name): t
    for t in (
        _table("keyspaces", _KS_KEY, _col("durable_writes", "boolean"), _col("replication", _MAP)),
        _table(
            "tables",
            _KS_KEY,
            _col("table_name", "text", "clustering"),
            *_OPTION_COLUMNS,
            # SUPER, COUNTER, DENSE, COMPOUND: how a driver tells COMPACT STORAGE apart
            _col("flags", _TEXT_SET),
        ),
        _table(
            "columns",
            _KS_KEY,
            _col("table_name", "text", "clustering", 0),
            _col("column_name", "text", "clustering", 1),
            _col("clustering_order", "text"),
            _col("column_name_bytes", "blob"),
            _col("kind", "text"),
            _col("position", "int"),
            _col("type", "text"),
        ),
        _table(
            "types",
            _KS_KEY,
            _col("type_name", "text", "clustering"),
            _col("field_names", _TEXT_LIST),
            _col("field_types", _TEXT_LIST),
        ),
        _table(
            "functions",
            _KS_KEY,
            _col("function_name", "text", "clustering", 0),
            _col("argument_types", _TEXT_LIST, "clustering", 1),
            _col("argument_names", _TEXT_LIST),
            _col("body", "text"),
            _col("called_on_null_input", "boolean"),
            _col("language", "text"),
            _col("return_type", "text"),
        ),
        _table(
            "aggregates",
            _KS_KEY,
            _col("aggregate_name", "text", "clustering", 0),
            _col("argument_types", _TEXT_LIST, "clustering", 1),
            _col("final_func", "text"),
            _col("initcond", "text"),
            _col("return_type", "text"),
            _col("state_func", "text"),
            _col("state_type", "text"),
        ),
        _table(
            "triggers",
            _KS_KEY,
            _col("table_name", "text", "clustering", 0),
            _col("trigger_name", "text", "clustering", 1),
            _col("options", _MAP),
        ),
        _table(
            "indexes",
            _KS_KEY,
            _col("table_name", "text", "clustering", 0),
            _col("index_name", "text", "clustering", 1),
            _col("kind", "text"),
            _col("options", _MAP),
        ),
        _table(
            "views",
            _KS_KEY,
            _col("view_name", "text", "clustering"),
            _col("base_table_id", "uuid"),
            _col("base_table_name", "text"),
            _col("include_all_columns", "boolean"),
            _col("where_clause", "text"),
            *_OPTION_COLUMNS,
        ),
        _table(
            "dropped_columns",
            _KS_KEY,
            _col("table_name", "text", "clustering", 0),
            _col("column_name", "text", "clustering", 1),
            _col("dropped_time", "timestamp"),
            _col("type", "text"),
        ),
        # a row only for a keyspace with tablets or non-local storage: none here, so the
        # CDC libraries read streams the vnode way (system_distributed)
        _table(
            "scylla_keyspaces",
            _KS_KEY,
            _col("consistency", "text"),
            _col("initial_tablets", "int"),
            _col("storage_options", _MAP),
            _col("storage_type", "text"),
        ),
        _table(
            "scylla_tables",
            _KS_KEY,
            _col("table_name", "text", "clustering"),
            _col("cdc", _MAP),  # unused since ScyllaDB 4.0: the cdc extension replaced it
            _col("committed_by_group0", "boolean"),
            _col("in_memory", "boolean"),
            _col("partitioner", "text"),
            _col("tablets", _MAP),
            _col("version", "uuid"),
        ),
    )
}


@dataclass(frozen=True, slots=True)
class SchemaSource:
    """What ``system_schema`` shows: the catalog's keyspaces, tables (CDC logs included) and
    user types, and the system keyspaces with their virtual tables (a client looks those up
    too: the CDC libraries check that ``system_distributed``'s stream tables exist)."""

    keyspaces: tuple[Keyspace, ...]
    tables: tuple[TableSchema, ...]
    user_types: Callable[[str], tuple[UserType, ...]]
    system_keyspaces: tuple[Keyspace, ...] = ()
    system_tables: tuple[TableSchema, ...] = ()


def table_flags(table: TableSchema) -> frozenset[str]:
    """Cassandra's table flags: every CQL table is ``compound``; COMPACT STORAGE is
    ``dense`` with clustering columns and ``compound`` only with several of them.

    Drivers read a table without ``compound``, ``dense`` or ``super`` as COMPACT STORAGE, so
    a CQL table without the flag would come back with its clustering key dropped.
    """
    flags = set()
    if not table.compact_storage or len(table.clustering_key) > 1:
        flags.add("compound")
    if table.compact_storage and table.clustering_key:
        flags.add("dense")
    if any(c.type.is_counter for c in table.columns):
        flags.add("counter")
    return frozenset(flags)


def _keyspace_row(ks: Keyspace) -> dict[str, Any]:
    replication = dict(ks.replication)
    strategy = replication.get("class", "SimpleStrategy")
    if "." not in strategy:
        replication["class"] = _STRATEGY_PREFIX + strategy
    return {
        "keyspace_name": ks.name,
        "durable_writes": ks.durable_writes,
        "replication": _MAP.make(replication),
    }


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'") if text.startswith("'") else text


_DOUBLES = ("bloom_filter_fp_chance", "crc_check_chance")
_INTS = (
    "default_time_to_live",
    "gc_grace_seconds",
    "max_index_interval",
    "memtable_flush_period_in_ms",
    "min_index_interval",
)
_MAPS = ("caching", "compaction", "compression")


def _table_row(t: TableSchema, system: bool) -> dict[str, Any]:
    options = dict(DEFAULT_TABLE_OPTIONS)
    options.update(t.options)
    row: dict[str, Any] = {"keyspace_name": t.keyspace, "table_name": t.name}
    for name in _DOUBLES:
        row[name] = float(options[name])
    for name in _INTS:
        row[name] = int(options[name])
    for name in _MAPS:
        row[name] = _MAP.make(parse_option_map(options[name]))
    row["comment"] = _unquote(options["comment"])
    row["speculative_retry"] = _unquote(options["speculative_retry"])
    # read repair chances are gone from ScyllaDB; the columns stay for drivers, as zeros
    row["dclocal_read_repair_chance"] = 0.0
    row["read_repair_chance"] = 0.0
    # a system table is built in code, without the extensions CREATE TABLE attaches
    row["extensions"] = _BLOB_MAP.make({} if system else table_extensions(t))
    row["flags"] = table_flags(t)
    row["id"] = table_uuid(t)
    return row


def _hidden_name(table: TableSchema, base: str) -> str:
    """A name for a column COMPACT STORAGE adds, not clashing with a declared one."""
    name, i = base, 0
    while table.column(name) is not None:
        i += 1
        name = f"{base}{i}"
    return name


def _stored_columns(t: TableSchema) -> list[tuple[str, ColumnKind, int, str, str]]:
    """(name, kind, position, clustering order, type) as Cassandra stores a table's columns.

    COMPACT STORAGE without clustering columns (a Thrift "static" table) keeps its values as
    static columns under a hidden ``column1`` clustering column and ``value`` column; a dense
    table without a value column gets an ``empty``-typed one. Drivers hide these again.
    """
    compact_static = t.compact_storage and not t.clustering_key
    out: list[tuple[str, ColumnKind, int, str, str]] = []
    for c in t.columns:
        kind: ColumnKind = "static" if compact_static and c.kind == "regular" else c.kind
        order = ("desc" if c.descending else "asc") if c.kind == "clustering" else "none"
        out.append((c.name, kind, c.position if c.is_key else -1, order, c.type.cql_name))
    if compact_static:
        out.append((_hidden_name(t, "column1"), "clustering", 0, "asc", "text"))
        out.append((_hidden_name(t, "value"), "regular", -1, "none", "blob"))
    elif t.compact_storage and not t.regular_columns:
        out.append((_hidden_name(t, "value"), "regular", -1, "none", "empty"))
    return out


def column_rows(t: TableSchema) -> list[dict[str, Any]]:
    rows = [
        {
            "keyspace_name": t.keyspace,
            "table_name": t.name,
            "column_name": name,
            "clustering_order": order,
            "column_name_bytes": name.encode(),
            "kind": kind,
            "position": position,
            "type": type_name,
        }
        for name, kind, position, order, type_name in _stored_columns(t)
    ]
    return sorted(rows, key=lambda r: r["column_name"])


def _type_row(u: UserType) -> dict[str, Any]:
    return {
        "keyspace_name": u.keyspace,
        "type_name": u.name,
        "field_names": tuple(u.field_names),
        "field_types": tuple(f.cql_name for f in u.field_types),
    }


def _scylla_table_row(t: TableSchema) -> dict[str, Any]:
    version = uuid.uuid5(table_uuid(t), str(t.schema_version))
    return {"keyspace_name": t.keyspace, "table_name": t.name, "version": version}


def schema_rows(name: str, source: SchemaSource) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The rows of ``system_schema.<name>`` by partition (keyspace), each partition in
    clustering order; a keyspace without rows has no partition."""
    parts: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    keyspaces = [(k, False) for k in source.keyspaces]
    keyspaces += [(k, True) for k in source.system_keyspaces]
    for ks, system in keyspaces:
        tables = source.system_tables if system else source.tables
        own = sorted((t for t in tables if t.keyspace == ks.name), key=lambda t: t.name)
        rows: list[dict[str, Any]] = []
        if name == "keyspaces":
            rows = [_keyspace_row(ks)]
        elif name == "tables":
            rows = [_table_row(t, system) for t in own]
        elif name == "columns":
            rows = [r for t in own for r in column_rows(t)]
        elif name == "types" and not system:
            types = sorted(source.user_types(ks.name), key=lambda u: u.name)
            rows = [_type_row(u) for u in types]
        elif name == "scylla_tables":
            rows = [_scylla_table_row(t) for t in own]
        elif name == "indexes":
            rows = [
                {
                    "keyspace_name": t.keyspace,
                    "table_name": t.name,
                    "index_name": index.name,
                    "kind": "COMPOSITES",
                    "options": _MAP.make({"target": index.target}),
                }
                for t in own
                for index in sorted(t.indexes, key=lambda i: i.name)
            ]
        elif name == "dropped_columns":
            rows = [
                {
                    "keyspace_name": t.keyspace,
                    "table_name": t.name,
                    "column_name": d.name,
                    "dropped_time": d.timestamp // 1000,  # microseconds -> a CQL timestamp
                    "type": d.type.cql_name,
                }
                for t in own
                for d in sorted(t.dropped, key=lambda d: d.name)
            ]
        if rows:
            parts[(ks.name,)] = rows
    return parts


def schema_version(source: SchemaSource) -> uuid.UUID:
    """``system.local``'s ``schema_version``: a digest of every schema row a client reads,
    so any DDL a client could see changes it, and one catalog always gives the same one
    (drivers wait until every node reports the same version after a DDL)."""
    digest = hashlib.sha1(usedforsecurity=False)
    for name in ("keyspaces", "tables", "columns", "types", "indexes"):
        schema = TABLES[(KS, name)]
        for _, rows in sorted(schema_rows(name, source).items()):
            for row in rows:
                for c in schema.columns:
                    value = row.get(c.name)
                    if value is None:
                        digest.update(b"\xff\xff\xff\xff")  # null, unlike any length
                        continue
                    cell = c.type.serialize(value)
                    digest.update(len(cell).to_bytes(4, "big") + cell)
    return uuid.UUID(bytes=digest.digest()[:16], version=5)


__all__ = [
    "KS",
    "TABLES",
    "SchemaSource",
    "column_rows",
    "legacy_table_id",
    "schema_rows",
    "schema_version",
    "table_flags",
    "table_uuid",
]
