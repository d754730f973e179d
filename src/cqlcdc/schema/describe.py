"""DESCRIBE output as ScyllaDB's server-side describe prints it (``schema/schema.cc``,
``cql3/statements/describe_statement.cc``, ``data_dictionary.cc``, ``types.cc``).

>>> maybe_quote("cdc$time"), maybe_quote("pk"), maybe_quote("to")
('"cdc$time"', 'pk', '"to"')
"""

from __future__ import annotations

from collections.abc import Sequence

from cqlcdc.schema.model import Keyspace, TableSchema
from cqlcdc.schema.table_options import describe_options, format_map, single_quote
from cqlcdc.types.base import CqlType

# Keywords of ScyllaDB's Cql.g that are not "unreserved": they cannot be bare identifiers.
RESERVED_KEYWORDS = frozenset(
    """add allow alter and ann apply asc authorize batch begin by cast columnfamily concurrency
    create default delete drop entries from full grant if in index infinity insert into is
    keyspace limit materialized modify nan norecursive not null of on or order primary rename
    replace revoke schema scylla_clustering_bound scylla_counter_shard_list
    scylla_timeuuid_list_index select set table text_search_indexing to token truncate
    unlogged unset update use using vector_search_indexing view where with""".split()
)

CDC_LOG_DESC_PREFIX = (
    "/* Do NOT execute this statement! It's only for informational purposes.\n"
    "   A CDC log table is created automatically when creating the base with CDC\n"
    "   enabled option or creating the vector index on the base table's vector column.\n"
    "\n"
)
CDC_LOG_DESC_SUFFIX = "\n*/"

_STRATEGY_PREFIX = "org.apache.cassandra.locator."


def maybe_quote(identifier: str) -> str:
    """``cql3::util::maybe_quote``: quote unless ``[a-z][a-z0-9_]*`` and not reserved."""
    plain = (
        identifier != ""
        and "a" <= identifier[0] <= "z"
        and all("a" <= c <= "z" or "0" <= c <= "9" or c == "_" for c in identifier)
    )
    if plain and identifier not in RESERVED_KEYWORDS:
        return identifier
    return '"' + identifier.replace('"', '""') + '"'


def describe_type(keyspace: str, name: str, fields: Sequence[tuple[str, CqlType]]) -> str:
    """``CREATE TYPE ks.ut (\\n    a int,\\n    b text\\n);``"""
    lines = [f"    {maybe_quote(f)} {t.cql_name}" for f, t in fields]
    body = ",\n".join(lines)
    return f"CREATE TYPE {maybe_quote(keyspace)}.{maybe_quote(name)} (\n{body}\n);"


def create_table_statement(table: TableSchema) -> str:
    """The ``CREATE TABLE`` statement of ``schema::get_create_statement`` (no internals)."""
    parts = [f"CREATE TABLE {maybe_quote(table.keyspace)}.{maybe_quote(table.name)} ("]
    for column in table.select_star_columns:
        static = " STATIC" if column.kind == "static" else ""
        parts.append(f"\n    {maybe_quote(column.name)} {column.type.cql_name}{static},")
    pk = ", ".join(maybe_quote(c.name) for c in table.partition_key)
    if len(table.partition_key) > 1:
        pk = f"({pk})"
    key = "".join([pk, *(", " + maybe_quote(c.name) for c in table.clustering_key)])
    parts.append(f"\n    PRIMARY KEY ({key})\n) WITH ")
    if table.clustering_key:
        order = ", ".join(
            f"{maybe_quote(c.name)} {'DESC' if c.descending else 'ASC'}"
            for c in table.clustering_key
        )
        parts.append(f"CLUSTERING ORDER BY ({order})\n    AND ")
    if table.compact_storage:
        parts.append("COMPACT STORAGE\n    AND ")
    parts.append(_properties(table))
    parts.append(";\n")
    return "".join(parts)


def _properties(table: TableSchema) -> str:
    cdc_text = format_map(table.cdc.as_map()) if table.cdc.declared else None
    return "\n    AND ".join(describe_options(table.options, cdc_text))


def describe_table(table: TableSchema, log: TableSchema | None, attached: bool) -> str:
    """DESCRIBE TABLE: the CREATE statement; an attached CDC log as a CQL comment.

    Args:
        table: the table described.
        log: for a base table with CDC enabled, its log (an ``ALTER TABLE log WITH ...``
            statement follows the base's CREATE).
        attached: ``table`` is a log whose base has CDC enabled (printed as a comment).
    """
    text = create_table_statement(table)
    if attached:
        return f"{CDC_LOG_DESC_PREFIX}{text}{CDC_LOG_DESC_SUFFIX}"
    if log is not None:
        alter = (
            f"ALTER TABLE {maybe_quote(log.keyspace)}.{maybe_quote(log.name)} WITH "
            f"{_properties(log)};\n"
        )
        text = f"{text}\n{alter}"
    return text


def describe_keyspace(keyspace: Keyspace) -> str:
    """``CREATE KEYSPACE`` as ``keyspace_metadata::describe`` prints it (vnodes keyspace)."""
    replication = dict(keyspace.replication)
    strategy = replication.pop("class", "SimpleStrategy")
    if "." not in strategy:
        strategy = _STRATEGY_PREFIX + strategy
    options = "".join(f", {single_quote(k)}: {single_quote(v)}" for k, v in replication.items())
    durable = "true" if keyspace.durable_writes else "false"
    return (
        f"CREATE KEYSPACE {maybe_quote(keyspace.name)} WITH replication = "
        f"{{'class': {single_quote(strategy)}{options}}} AND durable_writes = {durable} "
        "AND tablets = {'enabled': false};"
    )


def describe_names(names: Sequence[str]) -> str:
    """A listing (DESC TABLES / TYPES / KEYSPACES) as cqlsh prints it: names, quoted as
    needed, separated by two spaces."""
    return "  ".join(maybe_quote(n) for n in names) + "\n"


__all__ = [
    "CDC_LOG_DESC_PREFIX",
    "CDC_LOG_DESC_SUFFIX",
    "RESERVED_KEYWORDS",
    "create_table_statement",
    "describe_keyspace",
    "describe_names",
    "describe_table",
    "describe_type",
    "maybe_quote",
]
