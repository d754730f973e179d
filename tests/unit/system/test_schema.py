"""``system_schema`` as the real cassandra-driver reads it: its SchemaParserV4 sends its own
queries to the virtual tables (evaluated as the read path evaluates them) and must rebuild
every keyspace, user type and table (CDC logs and system tables included) as the catalog has
it; ScyllaDB's CDC libraries find the cdc extension and the stream tables they look for."""

from __future__ import annotations

import doctest
import struct
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from cassandra.metadata import KeyspaceMetadata, NetworkTopologyStrategy, TableMetadata

from cqlcdc.cdc import schema_extensions
from cqlcdc.cdc.streams import Generation, Generations
from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import Keyspace, TableSchema
from cqlcdc.schema.table_options import DEFAULT_TABLE_OPTIONS
from cqlcdc.system import schema as system_schema
from cqlcdc.system import tables as system_tables
from cqlcdc.system.local import NodeInfo
from cqlcdc.system.tables import SystemView
from cqlcdc.types.udt import UserType

from .driver_schema import driver_rows, parser, select, view_rows

DDL = [
    "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE KEYSPACE other WITH replication = {'class': 'NetworkTopologyStrategy', "
    "'datacenter1': 3} AND durable_writes = false",
    "CREATE TYPE ks.addr (street text, zip int)",
    "CREATE TYPE ks.person (name text, home frozen<addr>, tags frozen<set<text>>)",
    "CREATE TABLE ks.events (pk int, day date, at timeuuid, s text static, "
    "m frozen<map<int, text>>, l list<int>, st set<text>, mp map<text, frozen<list<int>>>, "
    "who frozen<person>, home addr, pair tuple<int, text>, PRIMARY KEY ((pk), day, at)) "
    "WITH CLUSTERING ORDER BY (day DESC, at ASC) AND comment = 'it''s' "
    "AND default_time_to_live = 7 AND cdc = {'enabled': true, 'preimage': true, 'ttl': 3600}",
    "CREATE TABLE ks.cpk (a int, b text, c int, d int, PRIMARY KEY ((a, b), c, d)) "
    "WITH CLUSTERING ORDER BY (c ASC, d DESC)",
    "CREATE TABLE ks.hits (pk int PRIMARY KEY, n counter)",
    'CREATE TABLE ks."Mixed" ("Key" int, "Ck" int, "Val" text, PRIMARY KEY ("Key", "Ck"))',
    "CREATE TABLE other.kv (k text PRIMARY KEY, v blob) WITH paxos_grace_seconds = 100",
]
SYSTEM = {"system", "system_auth", "system_distributed", "system_schema", "system_cqlcdc"}


def _catalog(data_dir: Path, ddl: list[str] = DDL) -> Catalog:
    catalog = Catalog(DocumentDirectory.of(data_dir))
    for text in ddl:
        catalog.execute(parse_statement(text), None)
    return catalog


def _view(catalog: Any) -> SystemView:
    generations = Generations([Generation.create(1_600_000_000_000, 8, 1)])
    return SystemView(generations, catalog, NodeInfo(host_id=uuid.UUID(int=7)), 8)


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return _catalog(tmp_path)


def _keyspaces(catalog: Any) -> dict[str, KeyspaceMetadata]:
    schema_parser, _ = parser(view_rows(_view(catalog)))
    return {k.name: k for k in schema_parser.get_all_keyspaces()}


def _layout(t: TableSchema) -> tuple[Any, ...]:
    """A table as a driver sees it: keys, clustering order, each column's type and kind."""
    columns = sorted((c.name, c.type.cql_name, c.kind == "static") for c in t.columns)
    clustering = [(c.name, c.descending) for c in t.clustering_key]
    return [c.name for c in t.partition_key], clustering, columns


def _driver_layout(meta: TableMetadata) -> tuple[Any, ...]:
    columns = sorted((c.name, c.cql_type, c.is_static) for c in meta.columns.values())
    clustering = [(c.name, c.is_reversed) for c in meta.clustering_key]
    return [c.name for c in meta.partition_key], clustering, columns


def test_the_driver_rebuilds_every_table_type_and_keyspace(catalog: Catalog) -> None:
    schema_parser, conn = parser(view_rows(_view(catalog)))
    keyspaces = {k.name: k for k in schema_parser.get_all_keyspaces()}
    # its queries, system_virtual_schema included (answered as by Cassandra 4)
    names = ["keyspaces", "tables", "columns", "types", "functions", "aggregates"]
    names += ["triggers", "indexes", "views"]
    assert [q.split(" FROM ", 1)[-1] for q in conn.queries[:9]] == [
        f"system_schema.{name}" for name in names
    ]
    assert len(conn.queries) == 12 and "system_virtual_schema.columns" in conn.queries[-1]
    assert set(keyspaces) == {"ks", "other", "system_virtual_schema"} | SYSTEM
    virtual = keyspaces["system_virtual_schema"]
    assert virtual.virtual and sorted(virtual.tables) == ["columns", "keyspaces", "tables"]
    tables = [*catalog.tables(), *system_tables.SYSTEM_TABLES]
    assert len(catalog.tables()) == 6  # the CDC log included
    for t in tables:
        meta = keyspaces[t.keyspace].tables[t.name]
        assert meta._exc_info is None
        assert _driver_layout(meta) == _layout(t), t.qualified_name
        assert not meta.is_compact_storage
    other = keyspaces["other"]
    assert other.durable_writes is False
    assert isinstance(other.replication_strategy, NetworkTopologyStrategy)
    assert other.replication_strategy.dc_replication_factors == {"datacenter1": 3}
    person = keyspaces["ks"].user_types["person"]
    assert person.field_names == ["name", "home", "tags"]
    assert person.field_types == ["text", "frozen<addr>", "frozen<set<text>>"]
    events = keyspaces["ks"].tables["events"]
    assert events.options["comment"] == "it's" and events.options["default_time_to_live"] == 7


def _options(t: TableSchema) -> dict[str, str]:
    """The table's options over the defaults, as DESCRIBE text (extensions left out: the
    driver knows none of ScyllaDB's)."""
    options = {**dict(DEFAULT_TABLE_OPTIONS), **dict(t.options)}
    return {k: v for k, v in options.items() if k not in ("tombstone_gc", "paxos_grace_seconds")}


def test_the_drivers_create_statements_make_the_same_schema(
    catalog: Catalog, tmp_path: Path
) -> None:
    keyspaces = _keyspaces(catalog)
    ddl = [keyspaces[k.name].as_cql_query() for k in catalog.keyspaces()]
    ddl += [keyspaces["ks"].user_types[u.name].as_cql_query() for u in catalog.user_types("ks")]
    bases = [t for t in catalog.tables() if t.log_of is None]
    ddl += [keyspaces[t.keyspace].tables[t.name].as_cql_query() for t in bases]
    again = _catalog(tmp_path / "again", ddl)
    assert again.keyspaces() == catalog.keyspaces()
    assert again.user_types("ks") == catalog.user_types("ks")
    for t in bases:
        made = again.table(t.keyspace, t.name)
        assert made is not None and _layout(made) == _layout(t)
        assert _options(made) == _options(t)
    text = keyspaces["ks"].export_as_string()
    assert "CLUSTERING ORDER BY (day DESC, at ASC)" in text
    assert "PRIMARY KEY ((a, b), c, d)" in text and '"Mixed"' in text


def test_where_keyspace_and_table_restrict_through_the_evaluator(catalog: Catalog) -> None:
    rows_of = view_rows(_view(catalog))
    schema_parser, conn = parser(rows_of)
    meta = schema_parser.get_table(None, "ks", "cpk")
    assert "WHERE keyspace_name = 'ks' AND table_name = 'cpk'" in conn.queries[0]
    assert _driver_layout(meta) == _layout(catalog.table("ks", "cpk"))  # type: ignore[arg-type]
    assert schema_parser.get_table(None, "ks", "nope") is None
    assert schema_parser.get_keyspace(None, "other").durable_writes is False
    assert schema_parser.get_type(None, "ks", "addr").field_names == ["street", "zip"]
    tables = select(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = 'other'", rows_of
    )
    assert tables.rows == [("kv",)]
    columns = select(
        "SELECT column_name, kind, position, clustering_order FROM system_schema.columns "
        "WHERE keyspace_name = 'ks' AND table_name = 'cpk'",
        rows_of,
    )
    assert columns.rows == [
        ("a", "partition_key", 0, "none"),
        ("b", "partition_key", 1, "none"),
        ("c", "clustering", 0, "asc"),
        ("d", "clustering", 1, "desc"),
    ]
    log = select(
        "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = 'ks' "
        "AND table_name = 'events_scylla_cdc_log' AND column_name = 'cdc$stream_id'",
        rows_of,
    )
    assert log.rows == [("cdc$stream_id", "blob")]


def test_flags_mark_every_cql_table_compound_and_counters(catalog: Catalog) -> None:
    rows_of = view_rows(_view(catalog))
    result = select("SELECT table_name, flags FROM system_schema.tables", rows_of)
    flags = {name: set(f) for name, f in result.rows}
    assert flags["hits"] == {"compound", "counter"}
    assert all(f == {"compound"} for name, f in flags.items() if name != "hits")


@dataclass
class _StubCatalog:
    """A catalog holding tables the DDL cannot make (COMPACT STORAGE from older versions)."""

    tables_: tuple[TableSchema, ...]
    keyspaces_: tuple[Keyspace, ...] = (Keyspace("ks"),)
    types_: dict[str, tuple[UserType, ...]] = field(default_factory=dict)

    def keyspaces(self) -> tuple[Keyspace, ...]:
        return self.keyspaces_

    def tables(self) -> tuple[TableSchema, ...]:
        return self.tables_

    def user_types(self, keyspace: str) -> tuple[UserType, ...]:
        return self.types_.get(keyspace, ())


@pytest.mark.parametrize(
    ("columns", "flags", "clustering"),
    [
        # a Thrift "static" table: values become static columns under a hidden column1
        ("pk int PRIMARY KEY, v int, w text", set(), []),
        ("pk int, ck int, v int, PRIMARY KEY (pk, ck)", {"dense"}, ["ck"]),
        # no value column: a hidden 'empty' one the driver drops again
        ("pk int, c1 int, c2 text, PRIMARY KEY (pk, c1, c2)", {"dense", "compound"}, ["c1", "c2"]),
        ("pk int, ck int, n counter, PRIMARY KEY (pk, ck)", {"dense", "counter"}, ["ck"]),
    ],
)
def test_compact_storage_flags_as_cassandra_sets_them(
    tmp_path: Path, columns: str, flags: set[str], clustering: list[str]
) -> None:
    made = _catalog(tmp_path, [DDL[0], f"CREATE TABLE ks.cs ({columns})"]).table("ks", "cs")
    assert made is not None
    compact = replace(made, compact_storage=True)
    stub = _StubCatalog((compact,))
    rows_of = view_rows(_view(stub))
    stored = select("SELECT flags FROM system_schema.tables WHERE keyspace_name = 'ks'", rows_of)
    assert set(stored.rows[0][0] or ()) == flags
    meta = _keyspaces(stub)["ks"].tables["cs"]
    assert meta.is_compact_storage
    assert [c.name for c in meta.clustering_key] == clustering
    assert sorted(meta.columns) == sorted(c.name for c in made.columns)
    assert not any(c.is_static for c in meta.columns.values())
    assert "WITH COMPACT STORAGE" in meta.export_as_string()


def _go_string_map(raw: bytes) -> dict[str, str]:
    """scylla-cdc-go's extensionParser.parseStringMap: little-endian int32 lengths."""
    (count,), at = struct.unpack_from("<i", raw), 4
    out: dict[str, str] = {}
    for _ in range(count):
        pair = []
        for _ in range(2):
            (size,) = struct.unpack_from("<i", raw, at)
            pair.append(raw[at + 4 : at + 4 + size].decode())
            at += 4 + size
        out[pair[0]] = pair[1]
    assert at == len(raw)
    return out


def _extensions(rows_of: Any, keyspace: str, table: str) -> dict[str, bytes]:
    # the query scylla-cdc-go's fetchScyllaCDCExtensionTTL sends
    result = select(
        "SELECT extensions FROM system_schema.tables "
        f"WHERE keyspace_name = '{keyspace}' AND table_name = '{table}'",
        rows_of,
    )
    (row,) = driver_rows(result)
    return dict(row["extensions"])


def test_the_cdc_extension_is_what_scyllas_cdc_library_decodes(catalog: Catalog) -> None:
    rows_of = view_rows(_view(catalog))
    events = _extensions(rows_of, "ks", "events")
    assert _go_string_map(events["cdc"]) == {
        "delta": "full",
        "enabled": "true",
        "postimage": "false",
        "preimage": "true",
        "ttl": "3600",
    }
    tombstone_gc = {"mode": "timeout", "propagation_delay_in_seconds": "3600"}
    assert _go_string_map(events["tombstone_gc"]) == tombstone_gc
    log = _extensions(rows_of, "ks", "events_scylla_cdc_log")
    assert set(log) == {"tombstone_gc"}
    kv = _extensions(rows_of, "other", "kv")
    assert set(kv) == {"tombstone_gc", "paxos_grace_seconds"}
    assert struct.unpack("<i", kv["paxos_grace_seconds"]) == (100,)
    assert _extensions(rows_of, "system", "local") == {}
    catalog.execute(parse_statement("ALTER TABLE ks.events WITH cdc = {'enabled': false}"), None)
    catalog.execute(
        parse_statement("ALTER TABLE ks.hits WITH tombstone_gc = {'mode': 'repair'}"), None
    )
    assert _go_string_map(_extensions(rows_of, "ks", "events")["cdc"])["enabled"] == "false"
    assert _go_string_map(_extensions(rows_of, "ks", "hits")["tombstone_gc"]) == {"mode": "repair"}


def test_extension_maps_round_trip_and_refuse_garbage() -> None:
    entries = {"é": "", "b": "x" * 300, "a": "1"}
    data = schema_extensions.serialize_string_map(entries)
    assert _go_string_map(data) == entries
    assert schema_extensions.deserialize_string_map(data) == entries
    for bad in (data[:-1], data + b"\0", b"\x01\x00"):
        with pytest.raises(ValueError):
            schema_extensions.deserialize_string_map(bad)


def test_scylla_keyspaces_has_no_row_so_cdc_libraries_read_vnode_streams(
    catalog: Catalog,
) -> None:
    rows_of = view_rows(_view(catalog))
    # scylla-cdc-go's usesTablets: no row (gocql.ErrNotFound) means vnodes
    query = "SELECT * FROM system_schema.scylla_keyspaces WHERE keyspace_name = 'ks'"
    result = select(query, rows_of)
    assert result.rows == []
    assert result.columns == [
        "keyspace_name", "consistency", "initial_tablets", "storage_options", "storage_type"
    ]  # fmt: skip
    # and the table its isTableInSchema looks up (through gocql's schema metadata)
    schema_parser, _ = parser(rows_of)
    streams = schema_parser.get_table(None, "system_distributed", "cdc_streams_descriptions_v2")
    assert [c.name for c in streams.partition_key] == ["time"]
    assert [c.name for c in streams.clustering_key] == ["range_end"]
    assert streams.columns["streams"].cql_type == "frozen<set<blob>>"


def test_scylla_tables_versions_change_with_alter(catalog: Catalog) -> None:
    rows_of = view_rows(_view(catalog))
    query = (
        "SELECT version FROM system_schema.scylla_tables "
        "WHERE keyspace_name = 'ks' AND table_name = 'hits'"
    )
    before = select(query, rows_of).rows
    catalog.execute(parse_statement("ALTER TABLE ks.hits WITH comment = 'x'"), None)
    after = select(query, rows_of).rows
    assert len(before) == len(after) == 1 and before != after


def test_dropped_columns_lists_every_drop_and_its_time(catalog: Catalog) -> None:
    rows_of = view_rows(_view(catalog))
    query = (
        "SELECT column_name, dropped_time, type FROM system_schema.dropped_columns "
        "WHERE keyspace_name = 'ks' AND table_name = 'cpk'"
    )
    assert select(query, rows_of).rows == []
    catalog.execute(parse_statement("ALTER TABLE ks.cpk ADD (x int, y list<text>)"), None)
    catalog.execute(
        parse_statement("ALTER TABLE ks.cpk DROP (y, x) USING TIMESTAMP 1700000000123456"), None
    )
    catalog.execute(parse_statement("ALTER TABLE ks.cpk ADD x text"), None)  # still listed
    assert select(query, rows_of).rows == [
        ("x", 1_700_000_000_123, "int"),
        ("y", 1_700_000_000_123, "list<text>"),
    ]


# db/schema_tables.cc, column for column: (name, type, kind)
LAYOUTS = {
    "keyspaces": "keyspace_name text partition_key, durable_writes boolean regular, "
    "replication frozen<map<text, text>> regular",
    "types": "keyspace_name text partition_key, type_name text clustering, "
    "field_names frozen<list<text>> regular, field_types frozen<list<text>> regular",
    "columns": "keyspace_name text partition_key, table_name text clustering, "
    "column_name text clustering, clustering_order text regular, column_name_bytes blob regular, "
    "kind text regular, position int regular, type text regular",
    "dropped_columns": "keyspace_name text partition_key, table_name text clustering, "
    "column_name text clustering, dropped_time timestamp regular, type text regular",
    "indexes": "keyspace_name text partition_key, table_name text clustering, "
    "index_name text clustering, kind text regular, options frozen<map<text, text>> regular",
    "triggers": "keyspace_name text partition_key, table_name text clustering, "
    "trigger_name text clustering, options frozen<map<text, text>> regular",
    "functions": "keyspace_name text partition_key, function_name text clustering, "
    "argument_types frozen<list<text>> clustering, argument_names frozen<list<text>> regular, "
    "body text regular, called_on_null_input boolean regular, language text regular, "
    "return_type text regular",
}
TABLE_OPTIONS = (
    "bloom_filter_fp_chance double r, caching frozen<map<text, text>> r, comment text r, "
    "compaction frozen<map<text, text>> r, compression frozen<map<text, text>> r, "
    "crc_check_chance double r, dclocal_read_repair_chance double r, "
    "default_time_to_live int r, extensions frozen<map<text, blob>> r, gc_grace_seconds int r, "
    "id uuid r, max_index_interval int r, memtable_flush_period_in_ms int r, "
    "min_index_interval int r, read_repair_chance double r, speculative_retry text r"
)


def _split_types(text: str) -> list[str]:
    """'a int, b frozen<map<text, text>>' -> ['a int', 'b frozen<map<text, text>>']."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def _parse_layout(text: str) -> list[tuple[str, str, str]]:
    """'name type kind, ...' -> [(name, type, kind), ...] in the order written."""
    out = []
    for column in _split_types(text):
        name, rest = column.split(" ", 1)
        ctype, kind = rest.rsplit(" ", 1)
        out.append((name, ctype, kind))
    return out


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_layouts_are_scyllas(name: str) -> None:
    expected = _parse_layout(LAYOUTS[name])
    schema = system_schema.TABLES[("system_schema", name)]
    assert {(c.name, c.type.cql_name, c.kind) for c in schema.columns} == set(expected)
    key = [n for n, _, kind in expected if kind in ("partition_key", "clustering")]
    assert [c.name for c in schema.primary_key] == key


def test_tables_and_views_carry_every_table_option() -> None:
    options = {(n, t) for n, t, _ in _parse_layout(TABLE_OPTIONS)}
    view_only = {"base_table_id", "base_table_name", "include_all_columns", "where_clause"}
    for name, own in (("tables", {"flags"}), ("views", view_only)):
        schema = system_schema.TABLES[("system_schema", name)]
        regular = {(c.name, c.type.cql_name) for c in schema.columns if c.kind == "regular"}
        assert options <= regular
        assert {n for n, _ in regular - options} == own


def _version(catalog: Any) -> Any:
    result = select(
        "SELECT schema_version FROM system.local WHERE key = 'local'", view_rows(_view(catalog))
    )
    return result.rows[0][0]


def test_schema_version_follows_every_visible_change_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    catalog = _catalog(tmp_path, DDL)
    versions = [_version(catalog)]
    assert _version(catalog) == versions[0]
    reloaded = Catalog(DocumentDirectory.of(tmp_path))  # the data directory reloaded
    assert _version(reloaded) == versions[0]
    for text in [
        "CREATE TABLE ks.more (pk int PRIMARY KEY)",
        "ALTER TABLE ks.more ADD v text",
        "ALTER TABLE ks.more WITH comment = 'c'",
        "ALTER TABLE ks.more WITH cdc = {'enabled': true}",
        "CREATE TYPE ks.pt (x int)",
        "ALTER TYPE ks.pt ADD y int",
        "ALTER KEYSPACE other WITH replication = {'class': 'NetworkTopologyStrategy', "
        "'datacenter1': 1}",
        "DROP TABLE ks.more",
        "CREATE TABLE ks.more (pk int PRIMARY KEY)",  # the same again: a new table id
        "CREATE KEYSPACE third WITH replication = {'class': 'SimpleStrategy', "
        "'replication_factor': 1}",
    ]:
        catalog.execute(parse_statement(text), None)
        versions.append(_version(catalog))
    assert len(set(versions)) == len(versions)
    assert all(isinstance(v, uuid.UUID) for v in versions)


def test_the_modules_examples_run() -> None:
    for module in (system_schema, system_tables, schema_extensions):
        assert doctest.testmod(module).failed == 0
