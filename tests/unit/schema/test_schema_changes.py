"""The schema-change events of a DDL statement (``cqlcdc.schema.changes``), as ScyllaDB
notifies them (``schema_applier::post_commit``, ``notify_tables_and_views``), and the
keyspace ``tablets`` option (``cqlcdc.schema.tablets``)."""

from __future__ import annotations

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.errors import ConfigurationError, InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.changes import schema_changes
from cqlcdc.schema.describe import describe_statement

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _catalog(*statements: str) -> Catalog:
    catalog = Catalog(None)
    for text in (KS, *statements):
        catalog.execute(parse_statement(text), "ks")
    return catalog


def _events(catalog: Catalog, text: str) -> list[tuple[str, str, str]]:
    after = catalog.copy()
    after.execute(parse_statement(text), "ks")
    return [(e.change, e.target, e.name) for e in schema_changes(catalog, after)]


CDC = "CREATE TABLE t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
LOG = "t_scylla_cdc_log"


def test_a_dropped_keyspace_announces_its_types_and_tables_after_it() -> None:
    catalog = _catalog("CREATE TYPE ut (a int)", CDC, "CREATE TABLE plain (pk int PRIMARY KEY)")
    assert _events(catalog, "DROP KEYSPACE ks") == [
        ("DROPPED", "KEYSPACE", ""),
        ("DROPPED", "TYPE", "ut"),
        ("DROPPED", "TABLE", "plain"),
        ("DROPPED", "TABLE", "t"),
        ("DROPPED", "TABLE", LOG),
    ]


def test_an_altered_type_announces_the_tables_using_it_and_their_logs() -> None:
    catalog = _catalog(
        "CREATE TYPE ut (a int)",
        "CREATE TABLE u (pk int PRIMARY KEY, d frozen<ut>) WITH cdc = {'enabled': true}",
        "CREATE TABLE other (pk int PRIMARY KEY)",
    )
    assert _events(catalog, "ALTER TYPE ut ADD b text") == [
        ("UPDATED", "TYPE", "ut"),
        ("UPDATED", "TABLE", "u"),
        ("UPDATED", "TABLE", "u_scylla_cdc_log"),
    ]


def test_index_and_option_changes_alter_the_base_and_its_log() -> None:
    catalog = _catalog(CDC)
    updated = [("UPDATED", "TABLE", "t"), ("UPDATED", "TABLE", LOG)]
    assert _events(catalog, "CREATE INDEX ON t (v)") == updated
    assert _events(catalog, "ALTER TABLE t WITH comment = 'c'") == updated


def test_options_of_the_log_alone_announce_the_log_alone() -> None:
    catalog = _catalog(CDC)
    assert _events(catalog, f"ALTER TABLE {LOG} WITH comment = 'c'") == [("UPDATED", "TABLE", LOG)]


def test_a_table_made_again_under_its_name_is_dropped_then_created() -> None:
    catalog = _catalog(CDC, "DROP TABLE t")
    assert _events(catalog, CDC) == [("CREATED", "TABLE", "t"), ("CREATED", "TABLE", LOG)]


def test_a_detached_log_goes_with_its_base() -> None:
    """CDC off leaves the log; DROP TABLE drops it with the base (cdc/log.cc)."""
    catalog = _catalog(CDC)
    assert _events(catalog, "ALTER TABLE t WITH cdc = {'enabled': false}") == [
        ("UPDATED", "TABLE", "t")
    ]
    detached = _catalog(CDC, "ALTER TABLE t WITH cdc = {'enabled': false}")
    assert _events(detached, "DROP TABLE t") == [
        ("DROPPED", "TABLE", "t"),
        ("DROPPED", "TABLE", LOG),
    ]


def test_nothing_changed_announces_nothing() -> None:
    catalog = _catalog(CDC)
    assert _events(catalog, "CREATE TABLE IF NOT EXISTS t (pk int PRIMARY KEY)") == []
    assert _events(catalog, f"{KS.replace('KEYSPACE', 'KEYSPACE IF NOT EXISTS')}") == []


# -- tablets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tablets",
    [
        "{'enabled': false}",
        "{'enabled': 'false'}",
        # ScyllaDB's get_initial_tablets stops at 'enabled': false
        "{'enabled': false, 'initial': 8}",
        "{}",  # no option given: the default, vnodes here
    ],
)
def test_vnodes_keyspaces_are_made(tablets: str) -> None:
    catalog = _catalog(f"{KS.replace('ks', 'vn')} AND tablets = {tablets}")
    text = describe_statement(catalog, parse_statement("DESCRIBE KEYSPACE vn"), None)
    assert text.rstrip().endswith("AND durable_writes = true AND tablets = {'enabled': false};")


@pytest.mark.parametrize(
    ("tablets", "error", "message"),
    [
        ("{'enabled': true}", InvalidRequest, "Tablets are not supported"),
        ("{'initial': 0}", InvalidRequest, "Tablets are not supported"),
        ("{'enabled': 'TRUE'}", ConfigurationError, "must be true or false; found: TRUE"),
        ("{'initial': 'x1'}", ConfigurationError, "should be numeric; found x1"),
        ("{'enabled': true, 'mode': 1}", ConfigurationError, "Unrecognized tablets option mode"),
    ],
)
def test_tablets_are_refused_and_nothing_is_made(
    tablets: str, error: type[Exception], message: str
) -> None:
    catalog = _catalog()
    with pytest.raises(error, match=message):
        catalog.execute(parse_statement(f"{KS.replace('ks', 'tb')} AND tablets = {tablets}"), None)
    assert catalog.keyspace("tb") is None


def test_altering_to_tablets_is_refused_and_changes_nothing() -> None:
    catalog = _catalog()
    before = catalog.keyspace("ks")
    with pytest.raises(InvalidRequest, match="Cannot alter replication strategy vnode/tablets"):
        alter = "ALTER KEYSPACE ks WITH durable_writes = false AND tablets = {'initial': 2}"
        catalog.execute(parse_statement(alter), None)
    assert catalog.keyspace("ks") == before
