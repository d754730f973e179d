"""DESCRIBE output as ScyllaDB's server-side describe prints it (``schema/schema.cc``,
``cql3/statements/describe_statement.cc``, ``data_dictionary.cc``, ``types.cc``).

>>> maybe_quote("cdc$time"), maybe_quote("pk"), maybe_quote("to")
('"cdc$time"', 'pk', '"to"')
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cqlcdc.cql.ast import Describe
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, Keyspace, SecondaryIndex, TableSchema, table_uuid
from cqlcdc.schema.system_catalog import SystemCatalog
from cqlcdc.schema.table_options import describe_options, format_map, single_quote
from cqlcdc.types import SetType
from cqlcdc.types.base import CqlType
from cqlcdc.types.text import RESERVED_KEYWORDS, maybe_quote

if TYPE_CHECKING:
    from cqlcdc.schema.catalog import Catalog

# Keywords of ScyllaDB's Cql.g that are not "unreserved": they cannot be bare identifiers.

CDC_LOG_DESC_PREFIX = (
    "/* Do NOT execute this statement! It's only for informational purposes.\n"
    "   A CDC log table is created automatically when creating the base with CDC\n"
    "   enabled option or creating the vector index on the base table's vector column.\n"
    "\n"
)
CDC_LOG_DESC_SUFFIX = "\n*/"

_STRATEGY_PREFIX = "org.apache.cassandra.locator."


def describe_type(keyspace: str, name: str, fields: Sequence[tuple[str, CqlType]]) -> str:
    """``CREATE TYPE ks.ut (\\n    a int,\\n    b text\\n);``"""
    lines = [f"    {maybe_quote(f)} {t.cql_name}" for f, t in fields]
    body = ",\n".join(lines)
    return f"CREATE TYPE {maybe_quote(keyspace)}.{maybe_quote(name)} (\n{body}\n);"


def create_table_statement(table: TableSchema, internals: bool = False) -> str:
    """The ``CREATE TABLE`` statement of ``schema::get_create_statement``. ``internals``
    (DESCRIBE ... WITH INTERNALS) adds the table's id and its dropped columns: each made in
    the CREATE, dropped after it with its drop's timestamp, and added again if it was."""
    name = f"{maybe_quote(table.keyspace)}.{maybe_quote(table.name)}"
    # ScyllaDB lists dropped_columns from a hash map: for the few a table has, the last
    # dropped first
    dropped = list(reversed(table.dropped)) if internals else []
    readded = {d.name for d in dropped}
    parts = [f"CREATE TABLE {name} ("]
    for column in table.select_star_columns:
        if column.name in readded:
            continue  # made as the dropped column below, then dropped and added again
        # the per-row TTL column is marked after its type (ScyllaDB's schema::describe)
        ttl = " TTL" if column.name == table.ttl_column else ""
        parts.append(f"\n    {_column_definition(column)}{ttl},")
    for d in dropped:
        parts.append(f"\n    {maybe_quote(d.name)} {d.type.cql_name},")
    pk = ", ".join(maybe_quote(c.name) for c in table.partition_key)
    if len(table.partition_key) > 1:
        pk = f"({pk})"
    key = "".join([pk, *(", " + maybe_quote(c.name) for c in table.clustering_key)])
    parts.append(f"\n    PRIMARY KEY ({key})\n) WITH ")
    if internals:
        parts.append(f"ID = {table_uuid(table)}\nAND ")
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
    for d in dropped:
        parts.append(
            f"\nALTER TABLE {name} DROP {maybe_quote(d.name)} USING TIMESTAMP {d.timestamp};"
        )
        again = table.column(d.name)
        if again is not None:
            parts.append(f"\nALTER TABLE {name} ADD {_column_definition(again)};")
    return "".join(parts)


def _column_definition(column: Column) -> str:
    static = " STATIC" if column.kind == "static" else ""
    return f"{maybe_quote(column.name)} {column.type.cql_name}{static}"


def _properties(table: TableSchema) -> str:
    cdc_text = format_map(table.cdc.as_map()) if table.cdc.declared else None
    return "\n    AND ".join(describe_options(table.options, cdc_text))


@dataclass(frozen=True, slots=True)
class Described:
    """One described element, a row of ScyllaDB's server-side DESCRIBE (``keyspace_name,
    type, name, create_statement``)."""

    keyspace: str
    type: str  # keyspace | type | table | index | changefeed
    name: str
    statement: str


def describe_table(
    table: TableSchema, log: TableSchema | None, attached: bool, internals: bool = False
) -> list[Described]:
    """DESCRIBE TABLE: the CREATE statement, its indexes, its changefeeds and its CDC log's
    ``ALTER TABLE log WITH ...``; an attached CDC log alone, as a CQL comment.

    Args:
        table: the table described.
        log: for a base table with CDC enabled, its log.
        attached: ``table`` is a log whose base has CDC enabled (printed as a comment).
    """
    ks = table.keyspace
    text = create_table_statement(table, internals)
    if attached:
        return [
            Described(ks, "table", table.name, f"{CDC_LOG_DESC_PREFIX}{text}{CDC_LOG_DESC_SUFFIX}")
        ]
    out = [Described(ks, "table", table.name, text)]
    out.extend(
        Described(ks, "index", index.name, create_index_statement(table, index))
        for index in table.indexes
    )
    for feed, options in table.changefeeds:
        with_clause = ", ".join(f"{k} = {v}" for k, v in options)
        name = f"{maybe_quote(table.keyspace)}.{maybe_quote(table.name)}"
        alter = f"ALTER TABLE {name} ADD CHANGEFEED {maybe_quote(feed)} WITH ({with_clause});"
        if feed in table.disabled_feeds:  # its state (YDB's Disabled), as the DDL that made it
            alter += f"\nALTER TABLE {name} ALTER CHANGEFEED {maybe_quote(feed)} DISABLE;"
        out.append(Described(ks, "changefeed", feed, alter))
    if log is not None:
        alter = (
            f"ALTER TABLE {maybe_quote(log.keyspace)}.{maybe_quote(log.name)} WITH "
            f"{_properties(log)};"
        )
        out.append(Described(log.keyspace, "table", log.name, alter))
    return out


def create_index_statement(table: TableSchema, index: SecondaryIndex) -> str:
    """An index as ScyllaDB's DESCRIBE prints it after its table."""
    column = maybe_quote(index.column)
    target = column if index.kind == "regular" else f"{index.kind}({column})"
    indexed = table.column(index.column)
    if index.kind == "keys" and indexed is not None and isinstance(indexed.type, SetType):
        # a set's elements are kept as keys(s), but only values(s) (or s) creates the index:
        # ScyllaDB's schema.cc describes it as values(s)
        target = f"values({column})"
    if index.local_key:
        target = f"({', '.join(maybe_quote(c) for c in index.local_key)}), {target}"
    return (
        f"CREATE INDEX {maybe_quote(index.name)} ON {maybe_quote(table.keyspace)}."
        f"{maybe_quote(table.name)}({target});"
    )


def describe_keyspace(keyspace: Keyspace) -> str:
    """``CREATE KEYSPACE`` as ``keyspace_metadata::describe`` prints it. Every keyspace here
    is a vnodes keyspace (``tablets = {'enabled': true}`` is refused), which ScyllaDB prints
    as ``tablets = {'enabled': false}`` whether the CREATE said so or not."""
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


def _statements(texts: Sequence[str]) -> str:
    """Several descriptions as cqlsh prints them: each followed by a blank line."""
    return "\n".join(t.rstrip("\n") + "\n" for t in texts)


def described_text(elements: Sequence[Described]) -> str:
    """Described elements as cqlsh prints them."""
    return _statements([e.statement for e in elements])


def _table_elements(catalog: Catalog, table: TableSchema, internals: bool) -> list[Described]:
    attached = catalog.is_attached_log(table.keyspace, table.name)
    log = catalog.log_table(table) if table.cdc.enabled else None
    return describe_table(table, log, attached, internals)


def _system_keyspace_elements(
    system: SystemCatalog, keyspace: Keyspace, internals: bool
) -> list[Described]:
    """DESC KEYSPACE of a system keyspace: the keyspace, then its tables by name (no types,
    indexes or CDC logs there)."""
    out = [Described(keyspace.name, "keyspace", keyspace.name, describe_keyspace(keyspace))]
    for t in system.tables_of(keyspace.name):
        out.extend(describe_table(t, None, False, internals))
    return out


def _keyspace_elements(
    catalog: Catalog, keyspace: Keyspace, internals: bool = False
) -> list[Described]:
    """DESC KEYSPACE: the keyspace, its types (dependencies first), its tables by name
    (attached CDC logs only as the ALTER after their base)."""
    out = [Described(keyspace.name, "keyspace", keyspace.name, describe_keyspace(keyspace))]
    out.extend(
        Described(
            t.keyspace,
            "type",
            t.name,
            describe_type(t.keyspace, t.name, list(zip(t.field_names, t.field_types, strict=True))),
        )
        for t in catalog.user_types(keyspace.name)
    )
    for t in catalog.tables(keyspace.name):
        if not catalog.is_attached_log(t.keyspace, t.name):
            out.extend(_table_elements(catalog, t, internals))
    return out


def listing_text(names_by_keyspace: Sequence[tuple[str, Sequence[str]]], current: bool) -> str:
    """DESC TABLES / TYPES as cqlsh prints them: in the ``current`` keyspace its names
    alone, else a titled block of names per keyspace (also for the ``--connect`` client,
    which gets the names from the server)."""
    if current:
        return "".join(describe_names(names) for _, names in names_by_keyspace)
    return "\n".join(
        f"Keyspace {maybe_quote(ks)}\n{'-' * (len(maybe_quote(ks)) + 9)}\n{describe_names(names)}"
        for ks, names in names_by_keyspace
    )


def listing(
    catalog: Catalog,
    current: str | None,
    names_of: str,
    system: Mapping[str, Sequence[str]] | None = None,
) -> list[tuple[str, list[str]]]:
    """DESC KEYSPACES / TABLES / TYPES as ScyllaDB lists them (describe_statement.cc
    ``listing_describe_statement``): the USEd keyspace's names, else those of every keyspace,
    system ones included, keyspaces and names sorted; CDC logs are left out of tables.

    Args:
        system: the system keyspaces and their tables' names (``cqlcdc.system.tables``;
            the catalog holds only user keyspaces).

    Returns:
        ``(keyspace, names)`` per keyspace; for KEYSPACES one entry per keyspace with its name.

    Raises:
        InvalidRequest: the USEd keyspace does not exist.
    """
    system = system or {}
    if names_of == "KEYSPACES" or current is None:
        keyspaces = sorted({k.name for k in catalog.keyspaces()} | set(system))
    else:
        keyspaces = [current]
    if names_of == "KEYSPACES":
        return [(ks, [ks]) for ks in keyspaces]
    blocks: list[tuple[str, list[str]]] = []
    for ks in keyspaces:
        if ks in system:
            names = sorted(system[ks]) if names_of == "TABLES" else []
        elif catalog.keyspace(ks) is None:
            raise InvalidRequest(f"'{ks}' not found in keyspaces")
        elif names_of == "TABLES":
            names = [t.name for t in catalog.tables(ks) if not catalog.is_attached_log(ks, t.name)]
        else:
            names = [t.name for t in catalog.user_types(ks)]
        if names or current is not None:  # a row per name: a keyspace without any is not shown
            blocks.append((ks, names))
    return blocks


def describe_statement(
    catalog: Catalog,
    stmt: Describe,
    current: str | None,
    system: SystemCatalog | None = None,
) -> str:
    """The text of a DESCRIBE statement (``describe_statement.cc`` + cqlsh's layout).

    Args:
        system: the system keyspaces and their tables, which listings include and which
            DESCRIBE KEYSPACE / TABLE describe (``cqlcdc.system.tables.SYSTEM_CATALOG``).

    Raises:
        InvalidRequest: an unknown keyspace, table or type (ScyllaDB's messages).
    """
    names = system.names() if system is not None else None
    if stmt.kind == "KEYSPACES":
        return describe_names([ks for ks, _ in listing(catalog, None, "KEYSPACES", names)])
    if stmt.kind in ("TABLES", "TYPES"):
        return listing_text(listing(catalog, current, stmt.kind, names), current is not None)
    if stmt.kind == "CLUSTER":
        return "Cluster: cqlcdc\nPartitioner: Murmur3Partitioner\n"
    if stmt.kind in ("FUNCTIONS", "AGGREGATES"):  # there are no user-defined ones
        return ""
    return described_text(describe_elements(catalog, stmt, current, system))


def describe_elements(
    catalog: Catalog, stmt: Describe, current: str | None, system: SystemCatalog | None = None
) -> list[Described]:
    """The elements DESCRIBE SCHEMA / KEYSPACE / TABLE / TYPE / INDEX describes, one row
    each in the server's answer, as ScyllaDB's. SCHEMA leaves the system keyspaces out (as
    ScyllaDB's DESC SCHEMA does); KEYSPACE and TABLE describe them too, from ``system``.

    Raises:
        InvalidRequest: an unknown keyspace, table or type (ScyllaDB's messages).
    """
    if stmt.kind == "SCHEMA":
        return [
            e for ks in catalog.keyspaces() for e in _keyspace_elements(catalog, ks, stmt.internals)
        ]
    if stmt.kind == "KEYSPACE":
        name = stmt.name.name if stmt.name is not None else current
        if name is None:
            raise InvalidRequest(
                "No keyspace has been specified. USE a keyspace, or explicitly specify "
                "keyspace.tablename"
            )
        system_keyspace = system.keyspace(name) if system is not None else None
        if system is not None and system_keyspace is not None:
            return _system_keyspace_elements(system, system_keyspace, stmt.internals)
        keyspace = catalog.keyspace(name)
        if keyspace is None:
            raise InvalidRequest(f"'{name}' not found in keyspaces")
        return _keyspace_elements(catalog, keyspace, stmt.internals)
    assert stmt.name is not None
    ks = stmt.name.keyspace or current
    if ks is None:
        raise InvalidRequest(
            "No keyspace has been specified. USE a keyspace, or explicitly specify "
            "keyspace.tablename"
        )
    if system is not None and system.keyspace(ks) is not None:
        return _system_element(system, stmt, ks)
    if catalog.keyspace(ks) is None:
        raise InvalidRequest(f"'{ks}' not found in keyspaces")
    if stmt.kind == "TYPE":
        udt = catalog.user_type(ks, stmt.name.name)
        if udt is None:
            raise InvalidRequest(f"Type '{stmt.name.name}' not found in keyspace '{ks}'")
        fields = list(zip(udt.field_names, udt.field_types, strict=True))
        return [Described(ks, "type", udt.name, describe_type(ks, udt.name, fields))]
    if stmt.kind == "INDEX":
        for owner in catalog.tables(ks):
            for index in owner.indexes:
                if index.name == stmt.name.name:
                    return [
                        Described(ks, "index", index.name, create_index_statement(owner, index))
                    ]
        raise InvalidRequest(f"Index '{stmt.name.name}' not found in keyspace '{ks}'")
    table = catalog.table(ks, stmt.name.name)
    if table is None:
        raise InvalidRequest(f"Table '{stmt.name.name}' not found in keyspace '{ks}'")
    return _table_elements(catalog, table, stmt.internals)


def _system_element(system: SystemCatalog, stmt: Describe, ks: str) -> list[Described]:
    """DESC TABLE / TYPE / INDEX in a system keyspace: its tables (no types or indexes)."""
    assert stmt.name is not None
    name = stmt.name.name
    if stmt.kind == "TYPE":
        raise InvalidRequest(f"Type '{name}' not found in keyspace '{ks}'")
    if stmt.kind == "INDEX":
        raise InvalidRequest(f"Index '{name}' not found in keyspace '{ks}'")
    table = system.table(ks, name)
    if table is None:
        raise InvalidRequest(f"Table '{name}' not found in keyspace '{ks}'")
    return describe_table(table, None, False, stmt.internals)


__all__ = [
    "CDC_LOG_DESC_PREFIX",
    "CDC_LOG_DESC_SUFFIX",
    "RESERVED_KEYWORDS",
    "Described",
    "SystemCatalog",
    "create_index_statement",
    "create_table_statement",
    "describe_elements",
    "describe_keyspace",
    "describe_names",
    "describe_statement",
    "describe_table",
    "describe_type",
    "described_text",
    "listing",
    "listing_text",
    "maybe_quote",
]
