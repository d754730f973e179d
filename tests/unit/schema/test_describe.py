"""DESCRIBE text as ScyllaDB prints it (test_describe.py / cql_query_test.cc formats)."""

from __future__ import annotations

import pytest

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.describe import (
    CDC_LOG_DESC_PREFIX,
    CDC_LOG_DESC_SUFFIX,
    describe_statement,
    listing,
    maybe_quote,
)
from cqlcdc.schema.model import Column, Keyspace, TableSchema
from cqlcdc.schema.system_catalog import SystemCatalog
from cqlcdc.types import native_type

from .helpers import T, cdc, create_table, new_catalog, pkck, qn, s

DEFAULTS = """    AND bloom_filter_fp_chance = 0.01
    AND caching = {'keys': 'ALL', 'rows_per_partition': 'ALL'}
    AND comment = ''
    AND compaction = {'class': 'SizeTieredCompactionStrategy'}
    AND compression = {'sstable_compression': 'LZ4WithDictsCompressor'}
    AND crc_check_chance = 1
    AND default_time_to_live = 0
    AND gc_grace_seconds = 864000
    AND max_index_interval = 2048
    AND memtable_flush_period_in_ms = 0
    AND min_index_interval = 128
    AND speculative_retry = '99.0PERCENTILE'
"""


def desc(cat: Catalog, kind: str, name: str | None = None, current: str | None = None) -> str:
    qname = None if name is None else ast.QualifiedName(None if kind == "KEYSPACE" else "ks", name)
    return describe_statement(cat, ast.Describe(kind, qname), current)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("pk", "pk"),
        ("cdc$time", '"cdc$time"'),
        ("COL2", '"COL2"'),
        ("to", '"to"'),
        ("table", '"table"'),
        ("key", "key"),
        ("ttl", "ttl"),
        ("1a", '"1a"'),
        ('a"b', '"a""b"'),
        ("", '""'),
    ],
)
def test_maybe_quote(name: str, quoted: str) -> None:
    assert maybe_quote(name) == quoted


def test_describe_table_exact() -> None:
    cat = new_catalog()
    cat.execute(
        create_table(
            "t",
            [
                ("pk", T("blob")),
                ("pk2", T("blob")),
                ("CK", T("blob")),
                ("col1", T("blob")),
                ("COL2", T("blob")),
            ],
            pk=("pk", "pk2"),
            ck=("CK",),
            clustering_order=(("CK", "DESC"),),
            options=(("gc_grace_seconds", ast.Constant("integer", "954000")),),
        ),
        None,
    )
    expected = (
        "CREATE TABLE ks.t (\n"
        "    pk blob,\n"
        "    pk2 blob,\n"
        '    "CK" blob,\n'
        '    "COL2" blob,\n'
        "    col1 blob,\n"
        '    PRIMARY KEY ((pk, pk2), "CK")\n'
        ') WITH CLUSTERING ORDER BY ("CK" DESC)\n'
        + DEFAULTS.replace("864000", "954000")
        + "    AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '3600'};\n"
    )
    assert desc(cat, "TABLE", "t") == expected


def test_describe_table_without_clustering_and_with_cdc() -> None:
    cat = new_catalog()
    cat.execute(
        create_table(
            "t",
            [("p", T("int")), ("v", T("int"))],
            pk=("p",),
            ck=(),
            options=(cdc(enabled="true", preimage="full"),),
        ),
        None,
    )
    text = desc(cat, "TABLE", "t")
    assert text.startswith(
        "CREATE TABLE ks.t (\n    p int,\n    v int,\n    PRIMARY KEY (p)\n"
        ") WITH bloom_filter_fp_chance = 0.01\n"
    )
    assert (
        "    AND cdc = {'delta': 'full', 'enabled': 'true', 'postimage': 'false', "
        "'preimage': 'full', 'ttl': '86400'}\n"
    ) in text
    assert "\nALTER TABLE ks.t_scylla_cdc_log WITH bloom_filter_fp_chance = 0.01\n" in text


def test_disabled_cdc_still_shown_and_no_alter() -> None:
    cat = new_catalog()
    cat.execute(create_table("t", pkck(), options=(cdc(enabled="true"),)), None)
    cat.execute(ast.AlterTable(qn("t"), ast.SetOptions((cdc(enabled="false"),))), None)
    text = desc(cat, "TABLE", "t")
    assert "AND cdc = {'delta': 'full', 'enabled': 'false'" in text
    assert "ALTER TABLE" not in text
    # the detached log is an ordinary table again for DESCRIBE
    log = desc(cat, "TABLE", "t_scylla_cdc_log")
    assert log.startswith("CREATE TABLE ks.t_scylla_cdc_log (\n")
    assert "t_scylla_cdc_log" in desc(cat, "TABLES", current="ks")


def test_describe_log_table_exact() -> None:
    # test/cqlpy/test_describe.py::test_describe_cdc_log_table_create_statement
    cat = new_catalog()
    cat.execute(
        create_table(
            "t", [("p", T("int")), ("v", T("vector", T("float"), size=3))], pk=("p",), ck=()
        ),
        None,
    )
    cat.execute(ast.AlterTable(qn("t"), ast.SetOptions((cdc(enabled="true"),))), None)
    expected = (
        CDC_LOG_DESC_PREFIX + "CREATE TABLE ks.t_scylla_cdc_log (\n"
        '    "cdc$stream_id" blob,\n'
        '    "cdc$time" timeuuid,\n'
        '    "cdc$batch_seq_no" int,\n'
        '    "cdc$deleted_v" boolean,\n'
        '    "cdc$end_of_batch" boolean,\n'
        '    "cdc$operation" tinyint,\n'
        '    "cdc$ttl" bigint,\n'
        "    p int,\n"
        "    v vector<float, 3>,\n"
        '    PRIMARY KEY ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no")\n'
        ') WITH CLUSTERING ORDER BY ("cdc$time" ASC, "cdc$batch_seq_no" ASC)\n'
        "    AND bloom_filter_fp_chance = 0.01\n"
        "    AND caching = {'enabled': 'false', 'keys': 'NONE', 'rows_per_partition': 'NONE'}\n"
        "    AND comment = 'CDC log for ks.t'\n"
        "    AND compaction = {'class': 'TimeWindowCompactionStrategy', "
        "'compaction_window_size': '60', 'compaction_window_unit': 'MINUTES', "
        "'expired_sstable_check_frequency_seconds': '1800'}\n"
        "    AND compression = {'sstable_compression': 'LZ4WithDictsCompressor'}\n"
        "    AND crc_check_chance = 1\n"
        "    AND default_time_to_live = 0\n"
        "    AND gc_grace_seconds = 0\n"
        "    AND max_index_interval = 2048\n"
        "    AND memtable_flush_period_in_ms = 0\n"
        "    AND min_index_interval = 128\n"
        "    AND speculative_retry = '99.0PERCENTILE'\n"
        "    AND tombstone_gc = {'mode': 'timeout', 'propagation_delay_in_seconds': '3600'};\n"
        + CDC_LOG_DESC_SUFFIX
        + "\n"
    )
    assert desc(cat, "TABLE", "t_scylla_cdc_log") == expected


def test_log_ttl_zero_keeps_gc_grace() -> None:
    cat = new_catalog()
    cat.execute(create_table("t", pkck(), options=(cdc(enabled="true", ttl="0"),)), None)
    text = desc(cat, "TABLE", "t_scylla_cdc_log")
    assert "compaction = {'class': 'TimeWindowCompactionStrategy'}\n" in text
    assert "gc_grace_seconds = 864000\n" in text


def test_describe_type_and_keyspace() -> None:
    cat = new_catalog()
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")), ("b", T("int")), ("c", T("int")))), None)
    assert desc(cat, "TYPE", "ut") == "CREATE TYPE ks.ut (\n    a int,\n    b int,\n    c int\n);\n"
    cat.execute(ast.CreateType(qn("a0"), (("x", T("frozen", T("ut"))),)), None)
    text = desc(cat, "KEYSPACE", "ks")
    assert text.startswith(
        "CREATE KEYSPACE ks WITH replication = {'class': "
        "'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '1'} "
        "AND durable_writes = true AND tablets = {'enabled': false};\n\nCREATE TYPE ks.ut"
    )
    assert text.index("CREATE TYPE ks.ut") < text.index("CREATE TYPE ks.a0")  # dependencies first
    assert "x frozen<ut>" in text


def test_listings_hide_attached_logs() -> None:
    cat = new_catalog()
    cat.execute(create_table("b", pkck()), None)
    cat.execute(create_table("a", pkck(), options=(cdc(enabled="true"),)), None)
    assert desc(cat, "TABLES", current="ks") == "a  b\n"
    assert desc(cat, "TABLES") == "Keyspace ks\n-----------\na  b\n"
    assert desc(cat, "KEYSPACES") == "ks\n"
    keyspace = desc(cat, "KEYSPACE", "ks")
    assert "CREATE TABLE ks.a_scylla_cdc_log" not in keyspace
    assert "ALTER TABLE ks.a_scylla_cdc_log WITH" in keyspace
    assert desc(cat, "SCHEMA") == keyspace


def test_listings_include_the_system_keyspaces_and_tables_sorted_and_quoted() -> None:
    """ScyllaDB's listing_describe_statement: every keyspace, system ones too, sorted; each
    keyspace's tables sorted; a name that needs it quoted (cqlsh's layout)."""
    cat = new_catalog()
    simple = (("class", "SimpleStrategy"), ("replication_factor", "1"))
    cat.execute(ast.CreateKeyspace("aa", simple), None)
    cat.execute(create_table("Zed", pkck()), None)
    cat.execute(create_table("select", pkck()), None)
    cat.execute(create_table("b", pkck()), None)
    key = (Column("key", native_type("text"), "partition_key"),)
    system = SystemCatalog(
        (Keyspace("system"), Keyspace("system_auth")),
        tuple(TableSchema("system", n, key) for n in ("peers", "local", "IndexInfo")),
    )
    keyspaces = describe_statement(cat, ast.Describe("KEYSPACES", None), None, system)
    assert keyspaces == "aa  ks  system  system_auth\n"
    tables = describe_statement(cat, ast.Describe("TABLES", None), None, system)
    # a keyspace without tables (aa, system_auth) has no row, so no block
    assert tables == (
        'Keyspace ks\n-----------\n"Zed"  b  "select"\n\n'
        'Keyspace system\n---------------\n"IndexInfo"  local  peers\n'
    )
    used = describe_statement(cat, ast.Describe("TABLES", None), "system", system)
    assert used == '"IndexInfo"  local  peers\n'
    assert describe_statement(cat, ast.Describe("TABLES", None), "aa", system) == "\n"


def test_the_real_system_tables_are_listed() -> None:
    from cqlcdc.system.tables import system_listing

    listed = dict(listing(new_catalog(), None, "TABLES", system_listing()))
    assert {"local", "peers"} <= set(listed["system"])
    assert {"tables", "columns", "keyspaces"} <= set(listed["system_schema"])
    assert listed["system_distributed"] == sorted(listed["system_distributed"])


def test_describe_errors() -> None:
    cat = new_catalog()
    with pytest.raises(InvalidRequest, match=r"^Table 'nope' not found in keyspace 'ks'$"):
        desc(cat, "TABLE", "nope")
    with pytest.raises(InvalidRequest, match=r"^Type 'nope' not found in keyspace 'ks'$"):
        desc(cat, "TYPE", "nope")
    with pytest.raises(InvalidRequest, match=r"^'nope' not found in keyspaces$"):
        desc(cat, "KEYSPACE", "nope")


def test_table_options_shown() -> None:
    cat = new_catalog()
    cat.execute(
        create_table(
            "t",
            pkck(),
            options=(
                ("comment", s("it's")),
                ("compaction", ast.MapLiteral(((s("class"), s("LeveledCompactionStrategy")),))),
                ("bloom_filter_fp_chance", ast.Constant("float", "0.1")),
                ("default_time_to_live", ast.Constant("integer", "60")),
            ),
        ),
        None,
    )
    text = desc(cat, "TABLE", "t")
    assert "    AND comment = 'it''s'\n" in text
    assert "    AND compaction = {'class': 'LeveledCompactionStrategy'}\n" in text
    assert "WITH CLUSTERING ORDER BY (ck ASC)\n    AND bloom_filter_fp_chance = 0.1\n" in text
    assert "    AND default_time_to_live = 60\n" in text


def test_with_internals_shows_the_id_and_the_dropped_columns() -> None:
    """ScyllaDB's test_cdc.py::test_reattach_cdc_log_table_after_altering_base: a log
    re-attached after its base lost a column and renamed a key has dropped those columns
    (``schema::get_create_statement`` with internals: made in the CREATE, dropped after)."""
    import re

    from cqlcdc.cql import parse_statement

    cat = new_catalog()

    def run(text: str) -> str | None:
        stmt = parse_statement(text)
        if isinstance(stmt, ast.Describe):
            return describe_statement(cat, stmt, "ks")
        cat.execute(stmt, "ks")
        return None

    run(
        "CREATE TABLE t (p int, v int, u int, a int, PRIMARY KEY (p, v)) "
        "WITH cdc = {'enabled': true}"
    )
    run("ALTER TABLE t WITH cdc = {'enabled': false}")
    run("ALTER TABLE t DROP a")
    run("ALTER TABLE t ADD b double")
    run("ALTER TABLE t RENAME v TO v2")
    run("ALTER TABLE t WITH cdc = {'enabled': true}")
    text = run("DESC TABLE ks.t_scylla_cdc_log WITH INTERNALS")
    assert text is not None
    expected = (
        "CREATE TABLE ks.t_scylla_cdc_log (\n"
        '    "cdc$stream_id" blob,\n'
        '    "cdc$time" timeuuid,\n'
        '    "cdc$batch_seq_no" int,\n'
        "    b double,\n"
        '    "cdc$deleted_b" boolean,\n'
        '    "cdc$deleted_u" boolean,\n'
        '    "cdc$end_of_batch" boolean,\n'
        '    "cdc$operation" tinyint,\n'
        '    "cdc$ttl" bigint,\n'
        "    p int,\n"
        "    u int,\n"
        "    v2 int,\n"
        "    v int,\n"
        '    "cdc$deleted_a" boolean,\n'
        "    a int,\n"
        '    PRIMARY KEY ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no")\n'
        ")"
    )
    assert expected in text
    for column in ("v", '"cdc$deleted_a"', "a"):
        assert f"ALTER TABLE ks.t_scylla_cdc_log DROP {column} USING TIMESTAMP" in text
    (table_id,) = re.findall(r"WITH ID = (\S+)\nAND ", text)
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None and table_id == log.table_id
    # without INTERNALS: neither
    plain = run("DESC TABLE ks.t_scylla_cdc_log")
    assert (
        plain is not None and "ID =" not in plain and "DROP" not in plain and "a int" not in plain
    )
    # a dropped column added again: made, dropped, added
    run("ALTER TABLE t DROP u USING TIMESTAMP 5")
    run("ALTER TABLE t ADD u text")
    base = run("DESCRIBE TABLE ks.t WITH INTERNALS")
    assert base is not None
    assert "    u int,\n    a int,\n    PRIMARY KEY" in base
    assert "ALTER TABLE ks.t DROP u USING TIMESTAMP 5;\nALTER TABLE ks.t ADD u text;" in base
    keyspace = run("DESCRIBE KEYSPACE ks WITH INTERNALS")
    assert keyspace is not None and "ALTER TABLE ks.t DROP u USING TIMESTAMP 5;" in keyspace


@pytest.mark.parametrize("target", ["values(s)", "s"])
def test_an_index_on_a_sets_values_is_described_as_values(target: str) -> None:
    """ScyllaDB keeps it as keys(s) (a set's elements are its keys) but describes it as
    values(s), the only form that creates it (schema.cc); the described DDL runs again."""
    from cqlcdc.cql import parse_statement

    table = "CREATE TABLE ks.t (p int PRIMARY KEY, s set<int>, m map<int, int>)"
    cat = new_catalog()
    cat.execute(parse_statement(table), None)
    cat.execute(parse_statement(f"CREATE INDEX si ON ks.t ({target})"), None)
    cat.execute(parse_statement("CREATE INDEX mk ON ks.t (keys(m))"), None)
    index = desc(cat, "INDEX", "si")
    assert index == "CREATE INDEX si ON ks.t(values(s));\n"
    assert desc(cat, "INDEX", "mk") == "CREATE INDEX mk ON ks.t(keys(m));\n"
    assert "CREATE INDEX si ON ks.t(values(s));" in desc(cat, "TABLE", "t")
    again = new_catalog()
    again.execute(parse_statement(table), None)
    again.execute(parse_statement(index.strip()), None)
    assert desc(again, "INDEX", "si") == index
