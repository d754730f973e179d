"""``system_schema``: the catalog as Cassandra 3 / ScyllaDB lay it out, for drivers' schema
metadata and cqlsh (keyspaces, tables, columns, types; no functions, indexes or views).

>>> TABLES[("system_schema", "columns")].primary_key_names  # doctest: +SKIP
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from cqlcdc.schema.model import Column, ColumnKind, Keyspace, TableSchema
from cqlcdc.schema.table_options import DEFAULT_TABLE_OPTIONS
from cqlcdc.types import ListType, MapType, SetType, native_type
from cqlcdc.types.base import CqlType

KS = "system_schema"
_TEXT = native_type("text")
_STRATEGY_PREFIX = "org.apache.cassandra.locator."


def _col(name: str, ctype: CqlType | str, kind: ColumnKind = "regular", pos: int = 0) -> Column:
    return Column(name, native_type(ctype) if isinstance(ctype, str) else ctype, kind, pos)


def _table(name: str, *columns: Column) -> TableSchema:
    return TableSchema(KS, name, columns, table_id=f"{KS}.{name}")


_MAP = MapType(_TEXT, _TEXT, frozen=True)
_TEXT_LIST = ListType(_TEXT, frozen=True)
_KS_KEY = _col("keyspace_name", "text", "partition_key")

TABLES: dict[tuple[str, str], TableSchema] = {
    (KS, t.name): t
    for t in (
        _table(
            "keyspaces",
            _KS_KEY,
            _col("durable_writes", "boolean"),
            _col("replication", _MAP),
        ),
        _table(
            "tables",
            _KS_KEY,
            _col("table_name", "text", "clustering"),
            _col("bloom_filter_fp_chance", "double"),
            _col("caching", _MAP),
            _col("comment", "text"),
            _col("compaction", _MAP),
            _col("compression", _MAP),
            _col("crc_check_chance", "double"),
            _col("dclocal_read_repair_chance", "double"),
            _col("default_time_to_live", "int"),
            _col("extensions", MapType(_TEXT, native_type("blob"), frozen=True)),
            _col("flags", SetType(_TEXT, frozen=True)),
            _col("gc_grace_seconds", "int"),
            _col("id", "uuid"),
            _col("max_index_interval", "int"),
            _col("memtable_flush_period_in_ms", "int"),
            _col("min_index_interval", "int"),
            _col("read_repair_chance", "double"),
            _col("speculative_retry", "text"),
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
            _col("id", "uuid"),
            _col("include_all_columns", "boolean"),
            _col("where_clause", "text"),
        ),
        _table(
            "dropped_columns",
            _KS_KEY,
            _col("table_name", "text", "clustering", 0),
            _col("column_name", "text", "clustering", 1),
            _col("dropped_time", "timestamp"),
            _col("type", "text"),
        ),
    )
}

_DOUBLES = ("bloom_filter_fp_chance", "crc_check_chance")
_INTS = (
    "default_time_to_live",
    "gc_grace_seconds",
    "max_index_interval",
    "memtable_flush_period_in_ms",
    "min_index_interval",
)
_MAPS = ("caching", "compaction", "compression")


def _option_map(text: str) -> dict[str, str]:
    """``{'k': 'v', ...}`` (the DESCRIBE text a table option keeps) as a dict."""
    return dict(re.findall(r"'((?:[^']|'')*)'\s*:\s*'((?:[^']|'')*)'", text))


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'") if text.startswith("'") else text


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


def _table_row(t: TableSchema) -> dict[str, Any]:
    options = dict(DEFAULT_TABLE_OPTIONS)
    options.update(t.options)
    row: dict[str, Any] = {"keyspace_name": t.keyspace, "table_name": t.name}
    for name in _DOUBLES:
        row[name] = float(options[name])
    for name in _INTS:
        row[name] = int(options[name])
    for name in _MAPS:
        row[name] = _MAP.make(_option_map(options[name]))
    row["comment"] = _unquote(options["comment"])
    row["speculative_retry"] = _unquote(options["speculative_retry"])
    row["dclocal_read_repair_chance"] = 0.0
    row["read_repair_chance"] = 0.0
    row["extensions"] = MapType(_TEXT, native_type("blob"), frozen=True).make({})
    counter = any(c.type.is_counter for c in t.columns)
    # every CQL table is 'compound' (the drivers read a table without it as COMPACT STORAGE)
    row["flags"] = frozenset({"compound", *(["counter"] if counter else [])})
    try:
        row["id"] = uuid.UUID(t.table_id)
    except ValueError:
        row["id"] = uuid.uuid5(uuid.NAMESPACE_URL, t.table_id)
    return row


def _column_rows(t: TableSchema) -> list[dict[str, Any]]:
    rows = []
    for c in t.columns:
        order = "none"
        if c.kind == "clustering":
            order = "desc" if c.descending else "asc"
        rows.append(
            {
                "keyspace_name": t.keyspace,
                "table_name": t.name,
                "column_name": c.name,
                "clustering_order": order,
                "column_name_bytes": c.name.encode(),
                "kind": c.kind,
                "position": c.position if c.is_key else -1,
                "type": c.type.cql_name,
            }
        )
    return sorted(rows, key=lambda r: (r["table_name"], r["column_name"]))


def schema_rows(
    name: str, keyspaces: tuple[Keyspace, ...], tables: tuple[TableSchema, ...], types: Any
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The rows of ``system_schema.<name>`` by partition (keyspace); ``types(ks)`` gives a
    keyspace's user types."""
    parts: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for ks in keyspaces:
        key = (ks.name,)
        own = sorted((t for t in tables if t.keyspace == ks.name), key=lambda t: t.name)
        if name == "keyspaces":
            parts[key] = [_keyspace_row(ks)]
        elif name == "tables":
            parts[key] = [_table_row(t) for t in own]
        elif name == "columns":
            parts[key] = [r for t in own for r in _column_rows(t)]
        elif name == "types":
            parts[key] = [
                {
                    "keyspace_name": ks.name,
                    "type_name": u.name,
                    "field_names": tuple(u.field_names),
                    "field_types": tuple(f.cql_name for f in u.field_types),
                }
                for u in sorted(types(ks.name), key=lambda u: u.name)
            ]
    return {k: v for k, v in parts.items() if v}
