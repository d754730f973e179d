"""What ScyllaDB's CDC consumer libraries (scylla-cdc-go on scylladb/gocql) need of the
catalog, through the real server and the cassandra-driver, alone and behind two protocol
workers (issue 35, items 1-3):

- gocql sends ``DESCRIBE KEYSPACE ks WITH INTERNALS`` whenever it loads a keyspace's
  metadata, ``system_distributed`` (the stream generations) included: every system keyspace
  is described, in ScyllaDB's four columns;
- scripts written for ScyllaDB 6+ create keyspaces with ``tablets = {'enabled': false}``,
  exactly our vnodes layout: accepted; tablets themselves are refused, with ScyllaDB's
  messages for bad options;
- a driver refreshes only the tables a SCHEMA_CHANGE event names: a CDC log is announced
  with its base (created, altered, dropped), in ScyllaDB's order, so another client's
  metadata holds the log without a manual refresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy
from cassandra.protocol import ConfigurationException, SyntaxException

from cqlcdc.schema import maybe_quote
from cqlcdc.server import CqlServer
from cqlcdc.session import Session
from tests.e2e.serving import until

pytestmark = pytest.mark.spark

SIMPLE = "replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
LOG = "_scylla_cdc_log"


def _cluster(srv: CqlServer) -> Cluster:
    return Cluster([srv.host], port=srv.port, load_balancing_policy=RoundRobinPolicy())


# -- item 1: DESCRIBE of the system keyspaces ----------------------------------------------


def test_every_system_keyspace_is_described_with_its_tables(cql: Any) -> None:
    """What gocql's getCreateStatements reads (``iter.Scan(nil, nil, nil, &stmt)``): for
    every keyspace system_schema lists, DESCRIBE KEYSPACE ... WITH INTERNALS answers the
    keyspace's CREATE, then each of its tables' CREATE (with its ID), by name."""
    keyspaces = sorted(
        r.keyspace_name for r in cql.execute("SELECT * FROM system_schema.keyspaces")
    )
    assert {"system", "system_distributed", "system_schema"} <= set(keyspaces)
    for ks in keyspaces:
        rows = list(cql.execute(f"DESCRIBE KEYSPACE {ks} WITH INTERNALS"))
        assert rows[0] == (ks, "keyspace", ks, rows[0].create_statement)
        assert rows[0].create_statement.startswith(f"CREATE KEYSPACE {ks} WITH replication = ")
        listed = sorted(
            r.table_name
            for r in cql.execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (ks,)
            )
        )
        if ks == "ks":
            continue  # user tables made by other tests: checked below
        # names quoted where CQL needs it ("IndexInfo"), as ScyllaDB sends them
        assert [(r.keyspace_name, r.type, r.name) for r in rows[1:]] == [
            (ks, "table", maybe_quote(n)) for n in listed
        ]
        for row, name in zip(rows[1:], listed, strict=True):
            assert row.create_statement.startswith(f"CREATE TABLE {ks}.{maybe_quote(name)} (")
            assert ") WITH ID = " in row.create_statement


def test_the_cdc_discovery_tables_are_described(cql: Any) -> None:
    """The tables ScyllaDB's CDC libraries read the generations from, as ScyllaDB describes
    them (their columns and keys), with and without WITH INTERNALS."""
    rows = list(cql.execute("DESCRIBE KEYSPACE system_distributed WITH INTERNALS"))
    assert [(r.type, r.name) for r in rows] == [
        ("keyspace", "system_distributed"),
        ("table", "cdc_generation_timestamps"),
        ("table", "cdc_streams_descriptions_v2"),
    ]
    assert rows[0].create_statement == (
        "CREATE KEYSPACE system_distributed WITH replication = {'class': "
        "'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '3'} AND "
        "durable_writes = true AND tablets = {'enabled': false};"
    )
    streams = cql.execute("DESCRIBE TABLE system_distributed.cdc_streams_descriptions_v2").one()
    assert streams.create_statement.startswith(
        "CREATE TABLE system_distributed.cdc_streams_descriptions_v2 (\n"
        "    time timestamp,\n    range_end bigint,\n    streams frozen<set<blob>>,\n"
        "    PRIMARY KEY (time, range_end)\n) WITH CLUSTERING ORDER BY (range_end ASC)"
    )
    stamps = cql.execute("DESC TABLE system_distributed.cdc_generation_timestamps").one()
    assert "PRIMARY KEY (key, time)\n) WITH CLUSTERING ORDER BY (time DESC)" in (
        stamps.create_statement
    )
    local = cql.execute("DESCRIBE TABLE system.local").one()
    assert (local.keyspace_name, local.type, local.name) == ("system", "table", "local")
    assert "    host_id uuid," in local.create_statement
    assert "PRIMARY KEY (key)" in local.create_statement


# what gocql's metadata_scylla.go sends to load one keyspace (querySystem: prepared, bound)
GOCQL_KEYSPACE_QUERIES = (
    "SELECT durable_writes, replication FROM system_schema.keyspaces WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.tables WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.scylla_tables WHERE keyspace_name = ?",
    "SELECT table_name, column_name, clustering_order, type, kind, position "
    "FROM system_schema.columns WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.types WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.functions WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.aggregates WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.indexes WHERE keyspace_name = ?",
    "SELECT * FROM system_schema.views WHERE keyspace_name = ?",
)
# and to load one table again after an event names it (invalidateTableSchema)
GOCQL_TABLE_QUERIES = (
    "SELECT * FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?",
    "SELECT * FROM system_schema.scylla_tables WHERE keyspace_name = ? AND table_name = ?",
    "SELECT table_name, column_name, clustering_order, type, kind, position "
    "FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
    "SELECT * FROM system_schema.indexes WHERE keyspace_name = ? AND table_name = ?",
    "SELECT * FROM system_schema.views WHERE keyspace_name = ? AND base_table_name = ? "
    "ALLOW FILTERING",
)


def test_gocqls_keyspace_metadata_load_answers_for_a_cdc_keyspace(cql: Any) -> None:
    """Every query gocql sends to load the metadata of the keyspace a CDC reader reads
    (its log table listed) and of system_distributed; then its DESCRIBE ... WITH INTERNALS."""
    cql.execute(
        "CREATE TABLE IF NOT EXISTS go (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
    )
    for ks in ("ks", "system_distributed"):
        for text in GOCQL_KEYSPACE_QUERIES:
            cql.execute(cql.prepare(text), (ks,))
        tables = cql.execute(cql.prepare(GOCQL_KEYSPACE_QUERIES[1]), (ks,))
        names = {r.table_name for r in tables}
        expected = (
            {"go", f"go{LOG}"}
            if ks == "ks"
            else {"cdc_generation_timestamps", "cdc_streams_descriptions_v2"}
        )
        assert expected <= names
        statements = [r[3] for r in cql.execute(f"DESCRIBE KEYSPACE {ks} WITH INTERNALS")]
        assert all(statements)
    for text in GOCQL_TABLE_QUERIES:
        cql.execute(cql.prepare(text), ("ks", f"go{LOG}"))
    columns = cql.execute(cql.prepare(GOCQL_TABLE_QUERIES[2]), ("ks", f"go{LOG}"))
    assert {"cdc$stream_id", "cdc$time", "pk", "v"} <= {r.column_name for r in columns}
    # the log is described as ScyllaDB does: an ALTER after its base
    described = {r.name: r.create_statement for r in cql.execute("DESC KEYSPACE ks")}
    assert described[f"go{LOG}"].startswith(f"ALTER TABLE ks.go{LOG} WITH ")


def test_describe_in_a_system_keyspace_names_what_is_missing(cql: Any) -> None:
    with pytest.raises(InvalidRequest, match="Table 'nope' not found in keyspace 'system'"):
        cql.execute("DESCRIBE TABLE system.nope")
    with pytest.raises(InvalidRequest, match="Type 'nope' not found in keyspace 'system'"):
        cql.execute("DESCRIBE TYPE system.nope")
    with pytest.raises(InvalidRequest, match="'nope' not found in keyspaces"):
        cql.execute("DESCRIBE KEYSPACE nope WITH INTERNALS")


def test_the_python_api_describes_a_system_keyspace(served: CqlServer) -> None:
    """The same text through the in-process session (cqlsh's layout)."""
    session = Session(served.coordinator)
    text = session.execute("DESCRIBE KEYSPACE system_distributed").describe
    assert text is not None
    assert text.startswith("CREATE KEYSPACE system_distributed WITH replication")
    assert "CREATE TABLE system_distributed.cdc_generation_timestamps (" in text


# -- item 2: tablets = {...} ----------------------------------------------------------------


def test_a_keyspace_without_tablets_is_made_described_and_used(cql: Any) -> None:
    cql.execute(f"CREATE KEYSPACE vn WITH {SIMPLE} AND tablets = {{'enabled': false}}")
    described = cql.execute("DESCRIBE KEYSPACE vn").one().create_statement
    assert described == (
        "CREATE KEYSPACE vn WITH replication = {'class': "
        "'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '1'} AND "
        "durable_writes = true AND tablets = {'enabled': false};"
    )
    cql.execute("CREATE TABLE vn.t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    cql.execute("INSERT INTO vn.t (pk, v) VALUES (1, 2)")
    assert [tuple(r) for r in cql.execute(f"SELECT pk, v FROM vn.t{LOG}")] == [(1, 2)]
    # as ScyllaDB's ALTER: false again is no change of flavour
    cql.execute("ALTER KEYSPACE vn WITH tablets = {'enabled': 'false'} AND durable_writes = false")
    assert "durable_writes = false AND tablets = {'enabled': false};" in (
        cql.execute("DESCRIBE KEYSPACE vn").one().create_statement
    )


@pytest.mark.parametrize(
    "tablets",
    ["{'enabled': true}", "{'initial': 8}", "{'enabled': 'true', 'initial': 4}"],
)
def test_a_keyspace_with_tablets_is_refused_and_not_made(cql: Any, tablets: str) -> None:
    """cqlcdc keeps CDC on vnodes (an 'initial' count alone asks for tablets too)."""
    with pytest.raises(InvalidRequest, match=r"Tablets are not supported.*'enabled': false"):
        cql.execute(f"CREATE KEYSPACE tab WITH {SIMPLE} AND tablets = {tablets}")
    assert (
        cql.execute("SELECT * FROM system_schema.keyspaces WHERE keyspace_name = 'tab'").one()
        is None
    )


@pytest.mark.parametrize(
    ("tablets", "message"),
    [
        ("{'enabled': 'maybe'}", "Tablets enabled value must be true or false; found: maybe"),
        ("{'enabled': true, 'initial': 'x'}", "Initial tablets value should be numeric; found x"),
        ("{'initial': 2, 'z': 1, 'b': 1}", "Unrecognized tablets option b"),
    ],
)
def test_bad_tablets_options_get_scyllas_messages(cql: Any, tablets: str, message: str) -> None:
    with pytest.raises(ConfigurationException, match=message):
        cql.execute(f"CREATE KEYSPACE bad WITH {SIMPLE} AND tablets = {tablets}")


def test_a_keyspace_cannot_be_altered_to_tablets(cql: Any) -> None:
    cql.execute(f"CREATE KEYSPACE IF NOT EXISTS vn2 WITH {SIMPLE}")
    with pytest.raises(InvalidRequest, match="Cannot alter replication strategy vnode/tablets"):
        cql.execute("ALTER KEYSPACE vn2 WITH tablets = {'enabled': true}")
    with pytest.raises(SyntaxException, match=r"property 'tablets'\. It should be a map"):
        cql.execute("ALTER KEYSPACE vn2 WITH tablets = true")


# -- item 3: schema-change events for the CDC log -------------------------------------------


class Events:
    """A driver connection of its own, REGISTERed for SCHEMA_CHANGE: the events in order."""

    def __init__(self, cluster: Cluster) -> None:
        host = next(iter(cluster.metadata.all_hosts()))
        self.connection = cluster.connection_factory(host.endpoint)
        self.seen: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self.connection.register_watchers({"SCHEMA_CHANGE": self._on}, register_timeout=10)

    def _on(self, event: dict[str, Any]) -> None:
        if event.get("target_type") == "TABLE":
            with self._lock:
                self.seen.append((event["change_type"], event["keyspace"], event["table"]))

    def after(self, run: Callable[[], object], expected: int) -> list[tuple[str, str, str]]:
        """The table events ``run`` causes (waiting for ``expected`` of them, then a moment
        for any more)."""
        with self._lock:
            self.seen.clear()
        run()
        until(lambda: len(self.seen) >= expected, 10)
        time.sleep(0.3)
        with self._lock:
            return list(self.seen)


@pytest.fixture()
def events(cql: Any, cluster: Cluster) -> Iterator[Events]:
    watcher = Events(cluster)
    yield watcher
    watcher.connection.close()


def test_a_cdc_log_is_announced_with_its_base_in_scyllas_order(cql: Any, events: Events) -> None:
    """``schema_applier``'s order: dropped bases then logs, created bases then logs, altered
    bases then logs; the log altered with every change of a CDC base (cdc/log.cc)."""
    base, log = ("CREATED", "ks", "ev"), ("CREATED", "ks", f"ev{LOG}")
    made = "CREATE TABLE ev (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
    assert events.after(lambda: cql.execute(made), 2) == [base, log]
    updated = [("UPDATED", "ks", "ev"), ("UPDATED", "ks", f"ev{LOG}")]
    assert events.after(lambda: cql.execute("ALTER TABLE ev ADD w int"), 2) == updated
    # turning CDC off leaves the log (detached) as it is; on again re-attaches it
    off = "ALTER TABLE ev WITH cdc = {'enabled': false}"
    assert events.after(lambda: cql.execute(off), 1) == [("UPDATED", "ks", "ev")]
    on = "ALTER TABLE ev WITH cdc = {'enabled': true}"
    assert events.after(lambda: cql.execute(on), 2) == updated
    dropped = [("DROPPED", "ks", "ev"), ("DROPPED", "ks", f"ev{LOG}")]
    assert events.after(lambda: cql.execute("DROP TABLE ev"), 2) == dropped


def test_cdc_enabled_by_alter_announces_the_new_log_first(cql: Any, events: Events) -> None:
    """Creations are notified before alterations: the new log, then its base."""
    cql.execute("CREATE TABLE late (pk int PRIMARY KEY, v int)")
    enable = "ALTER TABLE late WITH cdc = {'enabled': true, 'preimage': true}"
    assert events.after(lambda: cql.execute(enable), 2) == [
        ("CREATED", "ks", f"late{LOG}"),
        ("UPDATED", "ks", "late"),
    ]
    # an IF NOT EXISTS that makes nothing announces nothing: the next change's event is the
    # first to come (a connection's events come in the order the changes were made)
    again = "CREATE TABLE IF NOT EXISTS late (pk int PRIMARY KEY)"
    fence = "CREATE TABLE late_fence (pk int PRIMARY KEY)"
    assert events.after(lambda: (cql.execute(again), cql.execute(fence)), 1) == [
        ("CREATED", "ks", "late_fence")
    ]


def test_the_python_api_reports_the_same_changes(served: CqlServer, cql: Any) -> None:
    session = Session(served.coordinator, keyspace="ks")
    rows = session.execute("CREATE TABLE api (pk int PRIMARY KEY) WITH cdc = {'enabled': true}")
    assert [(e.change, e.target, e.name) for e in rows.schema_changes] == [
        ("CREATED", "TABLE", "api"),
        ("CREATED", "TABLE", f"api{LOG}"),
    ]
    dropped = session.execute("DROP KEYSPACE IF EXISTS gone").schema_changes
    assert dropped == ()


def test_another_clients_metadata_learns_of_the_log_without_a_refresh(
    served: CqlServer, cql: Any
) -> None:
    """What gocql needs before reading a log: its metadata (refreshed on events only)."""
    other = _cluster(served)
    try:
        other.connect()

        def tables() -> set[str]:
            keyspace = other.metadata.keyspaces.get("ks")
            return set() if keyspace is None else set(keyspace.tables)

        cql.execute("CREATE TABLE seen (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
        assert until(lambda: {"seen", f"seen{LOG}"} <= tables()), tables()
        log_columns = other.metadata.keyspaces["ks"].tables[f"seen{LOG}"].columns
        assert {"cdc$stream_id", "cdc$time", "cdc$operation", "v"} <= set(log_columns)
        cql.execute("ALTER TABLE seen ADD extra int")
        assert until(lambda: "extra" in other.metadata.keyspaces["ks"].tables[f"seen{LOG}"].columns)
        cql.execute("DROP TABLE seen")
        assert until(lambda: not {"seen", f"seen{LOG}"} & tables()), tables()
    finally:
        other.shutdown()
