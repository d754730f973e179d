"""YDB's changefeed behaviours through the real engine (Spark): ``ALTER CHANGEFEED ...
DISABLE`` on every write path, YDB's MD5 partition choice, and the server-wide ``awsRegion``
default of DynamoDB Streams records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.changefeed.partitioner import md5_partition, partition_for, ydb_partition_key
from cqlcdc.errors import InvalidRequest
from cqlcdc.feed_reader import FeedReader

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
KV = "CREATE TABLE ks.kv (pk int PRIMARY KEY, v int)"
INSERT = "INSERT INTO ks.kv (pk, v) VALUES (?, ?)"


@pytest.fixture
def session(spark: Any, tmp_path: Path) -> Any:
    s = cqlcdc.connect(data_dir=tmp_path / "data", master="local[2]", aws_region="eu-north-1")
    s.execute(KS)
    s.execute(KV)
    yield s
    s.close()


def keys(s: Any, feed: str) -> list[Any]:
    s.flush()
    return sorted(m.value["key"] for m in FeedReader(s.data_dir, feed).read())


def write_every_way(s: Any, first: int) -> None:
    """Keys first..first+5: text, prepared, batch, and bulk (execute_many, column-wise)."""
    s.execute(f"INSERT INTO ks.kv (pk, v) VALUES ({first}, 1)")
    s.execute(s.prepare(INSERT), (first + 1, 1))
    s.execute(
        f"BEGIN BATCH INSERT INTO ks.kv (pk, v) VALUES ({first + 2}, 1); "
        f"UPDATE ks.kv SET v = 2 WHERE pk = {first + 3}; APPLY BATCH"
    )
    s.execute_many([s.prepare(INSERT)] * 2, [(first + 4, 1), (first + 5, 1)])


def test_a_disabled_feed_takes_no_records_and_stays_readable(
    session: Any, spark: Any, tmp_path: Path
) -> None:
    from cqlcdc.pipeline.feed_source import register

    session.execute(
        "ALTER TABLE ks.kv ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 2)"
    )
    session.execute("ALTER TABLE ks.kv ADD CHANGEFEED g WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON')")
    write_every_way(session, 0)
    before = [[k] for k in range(6)]
    assert keys(session, "ks.kv/f") == before

    session.execute("ALTER TABLE ks.kv ALTER CHANGEFEED f DISABLE")
    write_every_way(session, 10)
    session.execute("DELETE FROM ks.kv WHERE pk = 0")
    # the disabled feed: what it had, nothing more; the other feed goes on
    assert keys(session, "ks.kv/f") == before
    assert keys(session, "ks.kv/g") == sorted([*before, [0], *([k] for k in range(10, 16))])
    # the base table took every write
    assert len(session.execute("SELECT * FROM ks.kv").all()) == 11
    # Spark's feed source reads the disabled feed's records
    register(spark)
    opts = {"path": str(session.data_dir), "feed": "ks.kv/f"}
    rows = spark.read.format("cqlcdc_changefeed").options(**opts).load().collect()
    assert sorted(json.loads(r.value)["key"] for r in rows) == before
    # DESCRIBE shows the state; YDB's rules
    (text,) = session.execute("DESCRIBE TABLE ks.kv").one()
    assert "ALTER TABLE ks.kv ALTER CHANGEFEED f DISABLE;" in text
    assert "ALTER CHANGEFEED g DISABLE" not in text
    with pytest.raises(InvalidRequest, match="from Disabled to Disabled"):
        session.execute("ALTER TABLE ks.kv ALTER CHANGEFEED f DISABLE")
    # after a restart too
    data_dir = session.data_dir
    session.close()
    again = cqlcdc.connect(data_dir=data_dir, master="local[2]")
    try:
        again.execute("INSERT INTO ks.kv (pk, v) VALUES (20, 1)")
        assert keys(again, "ks.kv/f") == before
        # until it is dropped
        again.execute("ALTER TABLE ks.kv DROP CHANGEFEED f")
        with pytest.raises(InvalidRequest, match="Changefeed f does not exist"):
            FeedReader(data_dir, "ks.kv/f")
    finally:
        again.close()


def test_records_go_to_ydbs_md5_partition(session: Any) -> None:
    session.execute("CREATE TABLE ks.t (pk int, ck text, v int, PRIMARY KEY (pk, ck))")
    for fmt in ("JSON", "DEBEZIUM_JSON"):
        session.execute(
            f"ALTER TABLE ks.t ADD CHANGEFEED {fmt.lower()} WITH (MODE = 'UPDATES', "
            f"FORMAT = '{fmt}', TOPIC_MIN_ACTIVE_PARTITIONS = 4)"
        )
    session.execute_many(
        [f"INSERT INTO ks.t (pk, ck, v) VALUES ({i}, 'é{i}', 1)" for i in range(40)]
    )
    session.flush()
    seen = set()
    for msg in FeedReader(session.data_dir, "ks.t/json").read():
        text = json.dumps(msg.value["key"], separators=(",", ":"), ensure_ascii=False)
        assert msg.partition == md5_partition(ydb_partition_key(text), 4)
        seen.add(msg.partition)
    assert seen == {0, 1, 2, 3}
    for msg in FeedReader(session.data_dir, "ks.t/debezium_json").read():
        # the Debezium key's values in key order are the JSON key array
        values = list(msg.key["payload"].values())
        text = json.dumps(values, separators=(",", ":"), ensure_ascii=False)
        assert msg.partition == md5_partition(ydb_partition_key(text), 4)


def test_a_feed_made_before_keeps_its_murmur3_partitions(session: Any, tmp_path: Path) -> None:
    """A data directory's existing feeds (no partitioner in the catalog) keep their
    partitions: the same key never lands in two partitions of one topic."""
    session.execute(
        "ALTER TABLE ks.kv ADD CHANGEFEED f WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 4)"
    )
    data_dir = session.data_dir.path
    session.close()
    catalog = json.loads((data_dir / "catalog.json").read_text())
    _strip(catalog, "feed_partitioners")
    (data_dir / "catalog.json").write_text(json.dumps(catalog))
    s = cqlcdc.connect(data_dir=data_dir, master="local[2]")
    try:
        s.execute_many([f"INSERT INTO ks.kv (pk, v) VALUES ({i}, 1)" for i in range(20)])
        s.execute("INSERT INTO ks.kv (pk, v) VALUES (100, 1)")
        s.flush()
        msgs = list(FeedReader(data_dir, "ks.kv/f").read())
        assert len(msgs) == 21
        for msg in msgs:
            (pk,) = msg.value["key"]
            assert msg.partition == partition_for(pk.to_bytes(4, "big", signed=True), 4)
    finally:
        s.close()


def test_dynamodb_records_take_the_servers_aws_region(session: Any) -> None:
    for name, region in (
        ("plain", ""),
        ("own", ", AWS_REGION = 'us-east-2'"),
        ("empty", ", AWS_REGION = ''"),
    ):
        session.execute(
            f"ALTER TABLE ks.kv ADD CHANGEFEED {name} WITH (MODE = 'NEW_IMAGE', "
            f"FORMAT = 'DYNAMODB_STREAMS_JSON'{region})"
        )
    session.execute("INSERT INTO ks.kv (pk, v) VALUES (1, 1)")  # row path
    session.execute_many([session.prepare(INSERT)], [(2, 2)])  # bulk path
    session.flush()
    for name, expected in (("plain", "eu-north-1"), ("own", "us-east-2"), ("empty", "")):
        msgs = list(FeedReader(session.data_dir, f"ks.kv/{name}").read())
        assert [m.value["awsRegion"] for m in msgs] == [expected, expected]


def _strip(node: Any, key: str) -> None:
    if isinstance(node, dict):
        node.pop(key, None)
        for value in node.values():
            _strip(value, key)
    elif isinstance(node, list):
        for value in node:
            _strip(value, key)


def test_over_the_wire_with_the_cassandra_driver(session: Any) -> None:
    """``cqlcdc serve``'s path: the driver disables a feed (an ALTER TABLE schema change)
    and its later writes give no records; the server's awsRegion reaches DynamoDB records."""
    from cassandra import InvalidRequest as DriverInvalidRequest
    from cassandra.cluster import Cluster
    from cassandra.policies import RoundRobinPolicy

    from cqlcdc.server import CqlServer

    srv = CqlServer(session.coordinator, port=0)
    srv.start_in_thread()
    cluster = Cluster(
        [srv.host], port=srv.port, load_balancing_policy=RoundRobinPolicy(), connect_timeout=10
    )
    try:
        cql = cluster.connect("ks")
        cql.execute(
            "ALTER TABLE kv ADD CHANGEFEED d WITH (MODE = 'KEYS_ONLY', "
            "FORMAT = 'DYNAMODB_STREAMS_JSON')"
        )
        insert = cql.prepare(INSERT)
        cql.execute(insert, (1, 1))
        cql.execute("ALTER TABLE kv ALTER CHANGEFEED d DISABLE")
        cql.execute(insert, (2, 2))
        with pytest.raises(DriverInvalidRequest, match="from Disabled to Disabled"):
            cql.execute("ALTER TABLE kv ALTER CHANGEFEED d DISABLE")
        with pytest.raises(DriverInvalidRequest, match="MODE alter is not supported"):
            cql.execute("ALTER TABLE kv ALTER CHANGEFEED d SET (MODE = 'UPDATES')")
        session.flush()
        msgs = list(FeedReader(session.data_dir, "ks.kv/d").read())
        assert [(m.key, m.value["awsRegion"]) for m in msgs] == [({"pk": {"N": "1"}}, "eu-north-1")]
        assert len(cql.execute("SELECT * FROM kv").all()) == 2
    finally:
        cluster.shutdown()
        srv.stop_thread()


def test_the_commands_take_aws_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cqlcdc serve --aws-region`` (and every command opening an engine) passes it to
    ``connect()``; ``$CQLCDC_AWS_REGION`` is its default."""
    import cqlcdc.session
    from cqlcdc import cli
    from cqlcdc.cli.sessions import open_session

    seen: dict[str, Any] = {}
    monkeypatch.setattr(cqlcdc.session, "connect", lambda **kwargs: seen.update(kwargs))
    args = cli.build_parser().parse_args(["serve", "--aws-region", "ap-south-1"])
    open_session(args)
    assert seen["aws_region"] == "ap-south-1"
    monkeypatch.setenv("CQLCDC_AWS_REGION", "sa-east-1")
    open_session(cli.build_parser().parse_args(["shell"]))
    assert seen["aws_region"] == "sa-east-1"
    for command in (["load", "ks.t", "rows.csv"], ["replay", "ks.t_scylla_cdc_log", "ks.c"]):
        args = cli.build_parser().parse_args([*command, "--aws-region", "me-south-1"])
        assert args.aws_region == "me-south-1"


def test_a_feed_still_scanning_cannot_be_disabled(session: Any) -> None:
    """YDB disables only a Ready feed: during its initial scan (state Scan) it refuses."""
    from cqlcdc.cql import ast

    session.execute_many([f"INSERT INTO ks.kv (pk, v) VALUES ({i}, {i})" for i in range(3)])
    session.coordinator.autoscan = False
    session.execute(
        "ALTER TABLE ks.kv ADD CHANGEFEED s WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON', "
        "INITIAL_SCAN = TRUE)"
    )
    scanner = session.start_initial_scan(ast.QualifiedName("ks", "kv"), "s")
    with pytest.raises(InvalidRequest, match="from Scan to Disabled"):
        session.execute("ALTER TABLE ks.kv ALTER CHANGEFEED s DISABLE")
    scanner.run()
    session.execute("ALTER TABLE ks.kv ALTER CHANGEFEED s DISABLE")
    session.execute("INSERT INTO ks.kv (pk, v) VALUES (9, 9)")
    assert keys(session, "ks.kv/s") == [[0], [1], [2]]  # the scan's rows, nothing after
