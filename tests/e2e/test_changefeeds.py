"""Changefeeds through the engine: records per row change, offsets, barriers, initial scan
(YDB's three rules), retention gaps, consumer offsets, dropping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.cli import main
from cqlcdc.errors import InvalidRequest
from cqlcdc.feed_reader import FeedConsumer, FeedReader, OffsetOutOfRange

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, v text, s int static, m map<int, text>, "
    "PRIMARY KEY (pk, ck))"
)


@pytest.fixture
def session(session: Any) -> Any:
    """The shared fresh engine (conftest) with table ks.t."""
    session.execute(TABLE)
    return session


def values(s: Any, feed: str, partition: int | None = None) -> list[Any]:
    s.flush()
    return [m.value for m in FeedReader(s.data_dir, feed).read(partition)]


def test_range_and_partition_deletes_erase_each_row(session: Any) -> None:
    session.execute("ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'OLD_IMAGE', FORMAT = 'JSON')")
    session.execute_many(
        [f"INSERT INTO ks.t (pk, ck, v) VALUES (1, {ck}, 'v{ck}')" for ck in range(4)]
    )
    session.execute("DELETE FROM ks.t WHERE pk = 1 AND ck >= 1 AND ck < 3")
    session.execute("DELETE FROM ks.t WHERE pk = 1")
    erases = [v for v in values(session, "ks.t/f") if "erase" in v]
    assert [e["key"] for e in erases] == [[1, 1], [1, 2], [1, 0], [1, 3]]
    assert erases[0]["oldImage"] == {"v": "v1", "m": None}


def test_offsets_are_dense_and_barriers_reach_every_partition(session: Any) -> None:
    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 3, VIRTUAL_TIMESTAMPS = TRUE, "
        "BARRIERS_INTERVAL = Interval('PT0.001S'))"
    )
    session.execute_many([f"UPDATE ks.t SET v = 'x' WHERE pk = {i} AND ck = 0" for i in range(30)])
    reader = FeedReader(session.data_dir, "ks.t/f")
    seen_ts: list[list[int]] = []
    for p in range(3):
        msgs = list(reader.read(p))
        assert [m.offset for m in msgs] == list(range(len(msgs)))
        assert msgs[-1].value.keys() == {"resolved"}
        resolved = msgs[-1].value["resolved"]
        data = [m.value["ts"] for m in msgs if "ts" in m.value]
        assert all(ts <= resolved for ts in data) and data == sorted(data)
        seen_ts += data
    assert len(seen_ts) == 30


def test_initial_scan_follows_ydb_rules(session: Any) -> None:
    session.execute_many(
        [f"INSERT INTO ks.t (pk, ck, v) VALUES ({pk}, 0, 'old{pk}')" for pk in range(3)]
    )
    session.coordinator.autoscan = False
    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'NEW_AND_OLD_IMAGES', "
        "FORMAT = 'DEBEZIUM_JSON', INITIAL_SCAN = TRUE)"
    )
    from cqlcdc.cql import ast

    scanner = session.start_initial_scan(ast.QualifiedName("ks", "t"), "f")
    order = [pk for pk, _ in scanner.pending]
    del order
    # rule 1: a row changed before the scan reached it: its old value, then the change
    session.execute("UPDATE ks.t SET v = 'new0' WHERE pk = 0 AND ck = 0")
    scanner.run()  # rule 2: partition 0 is not exported again by the scan
    # rule 3: an already scanned row that changes: only the change
    session.execute("UPDATE ks.t SET v = 'new1' WHERE pk = 1 AND ck = 0")
    by_key: dict[int, list[tuple[str, Any, Any]]] = {}
    for v in values(session, "ks.t/f"):
        p = v["payload"]
        pk = (p.get("after") or p.get("before"))["pk"]
        by_key.setdefault(pk, []).append(
            (p["op"], (p.get("after") or {}).get("v"), p["source"]["snapshot"])
        )
    assert by_key[0] == [("r", "old0", True), ("u", "new0", False)]
    assert by_key[1] == [("r", "old1", True), ("u", "new1", False)]
    assert by_key[2] == [("r", "old2", True)]


def test_retention_gap_and_consumer_offsets(session: Any) -> None:
    import time

    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON', "
        "RETENTION_PERIOD = Interval('PT1M'))"
    )
    session.execute_many([f"UPDATE ks.t SET v = '{i}' WHERE pk = 0 AND ck = {i}" for i in range(5)])
    consumer = FeedConsumer(session.data_dir, "ks.t/f", "g1")
    first = consumer.poll(max_records=2)
    assert [m.offset for m in first] == [0, 1]
    consumer.commit()
    again = FeedConsumer(session.data_dir, "ks.t/f", "g1")  # a restarted consumer
    rest = again.poll()
    assert [m.offset for m in rest] == [2, 3, 4]
    # retention removes everything older than the period, read or not
    session.engine.maintenance.clock = lambda: time.time() + 3600
    session.engine.purge_expired()
    session.execute("UPDATE ks.t SET v = 'late' WHERE pk = 0 AND ck = 9")
    reader = FeedReader(session.data_dir, "ks.t/f")
    with pytest.raises(OffsetOutOfRange, match="earliest retained offset is 5"):
        list(reader.read(0, 0))
    gap, *tail = list(reader.read(0, 0, on_gap="notice"))
    assert gap.value == {"gap": {"from": 0, "to": 5}}
    assert [m.offset for m in tail] == [5]


def test_bad_options_and_drop(session: Any) -> None:
    with pytest.raises(InvalidRequest, match="RETENTION_PERIOD"):
        session.execute(
            "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON', "
            "RETENTION_PERIOD = Interval('P31D'))"
        )
    session.execute("ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON')")
    session.execute("ALTER TABLE ks.t DROP CHANGEFEED f")
    with pytest.raises(InvalidRequest, match="does not exist"):
        FeedReader(session.data_dir, "ks.t/f")
    session.execute("ALTER TABLE ks.t ADD CHANGEFEED g WITH (MODE = 'UPDATES', FORMAT = 'JSON')")
    session.execute("DROP TABLE ks.t")
    with pytest.raises(InvalidRequest, match="unconfigured table t"):
        FeedReader(session.data_dir, "ks.t/g")


def test_spark_reads_a_feed_batch_and_streaming(session: Any, spark: Any, tmp_path: Path) -> None:
    import json

    from cqlcdc.pipeline.feed_source import register

    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 2)"
    )
    session.execute_many([f"UPDATE ks.t SET v = '{i}' WHERE pk = {i} AND ck = 0" for i in range(6)])
    register(spark)
    opts = {"path": str(session.data_dir), "feed": "ks.t/f"}
    batch = spark.read.format("cqlcdc_changefeed").options(**opts).load().collect()
    assert sorted(json.loads(r.value)["update"]["v"] for r in batch) == [str(i) for i in range(6)]

    stream = spark.readStream.format("cqlcdc_changefeed").options(**opts).load()
    query = (
        stream.writeStream.format("memory")
        .queryName("feed_sink")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        session.execute_many(
            [f"UPDATE ks.t SET v = 'n{i}' WHERE pk = {i} AND ck = 1" for i in range(3)]
        )
        session.flush()
        query.processAllAvailable()
        assert query.exception() is None
        rows = spark.sql("SELECT partition, offset FROM feed_sink").collect()
        assert len(rows) == 9 and len({(r.partition, r.offset) for r in rows}) == 9
    finally:
        query.stop()


def test_ttl_expiry_events(session: Any) -> None:
    import time

    session.coordinator.sweep_interval_s = 3600.0  # the test sweeps by hand
    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'NEW_AND_OLD_IMAGES', FORMAT = 'JSON', "
        "EXPIRY_EVENTS = TRUE)"
    )
    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED d WITH (MODE = 'NEW_AND_OLD_IMAGES', "
        "FORMAT = 'DYNAMODB_STREAMS_JSON', EXPIRY_EVENTS = TRUE)"
    )
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 'short') USING TTL 5")
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (1, 2, 'long')")
    session.execute("UPDATE ks.t USING TTL 5 SET m = m + {1: 'x'} WHERE pk = 1 AND ck = 2")
    later = int(time.time()) + 10
    assert session.sweep_expired(later) >= 1
    records = values(session, "ks.t/f")[3:]
    assert [(r["key"], "erase" in r, r.get("expired")) for r in records] == [
        ([1, 1], True, True),
        ([1, 2], False, True),
    ]
    assert records[1]["newImage"] == {"m": None, "v": "long"}
    dynamo = [v for v in values(session, "ks.t/d") if v.get("eventName") == "REMOVE"]
    assert dynamo[0]["userIdentity"] == {
        "principalId": "dynamodb.amazonaws.com",
        "type": "Service",
    }
    assert session.sweep_expired(later) == 0  # swept once


def test_idle_table_still_gets_barriers(session: Any) -> None:
    import time

    session.coordinator.sweep_interval_s = 3600.0  # ticks by hand
    session.execute(
        "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 2, BARRIERS_INTERVAL = Interval('PT1S'))"
    )
    session.execute("UPDATE ks.t SET v = 'x' WHERE pk = 1 AND ck = 1")
    later = time.time_ns() // 1_000_000 + 5000
    assert session.tick_idle_feeds(later) == 1
    assert session.tick_idle_feeds(later + 10) == 0  # one per interval
    for p in range(2):
        last = values(session, "ks.t/f", p)[-1]
        assert last == {"resolved": [later, last["resolved"][1]]}


# -- incarnations: a feed dropped and added again is a new topic (YDB) -----------------------

KV = "CREATE TABLE ks.kv (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
ADD_F = "ALTER TABLE ks.kv ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON'{})"
DROP_F = "ALTER TABLE ks.kv DROP CHANGEFEED f"


def cli_read(data_dir: Path, feed: str, capsys: Any) -> list[dict[str, Any]]:
    """``cqlcdc changefeed read <feed> --data-dir <data_dir>``: its JSON lines."""
    capsys.readouterr()
    code = main(["changefeed", "read", feed, "--data-dir", str(data_dir)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def write(text: str) -> Any:
    """A parsed write statement (``row_records`` takes the AST)."""
    from cqlcdc.cql import ast, parse_statement

    stmt = parse_statement(text)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch)
    return stmt


def updates(lines: list[dict[str, Any]]) -> list[tuple[int, Any, Any]]:
    return [(m["offset"], m["key"], m["value"].get("update")) for m in lines]


def test_a_feed_added_again_starts_empty_at_offset_0(session: Any, capsys: Any) -> None:
    s = session
    s.execute(KV)
    s.execute(ADD_F.format(""))
    s.execute("INSERT INTO ks.kv (pk, v) VALUES (1, 1)")
    s.execute("INSERT INTO ks.kv (pk, v) VALUES (2, 2)")
    s.flush()
    old = FeedConsumer(s.data_dir, "ks.kv/f", "g")
    assert [m.key for m in old.poll()] == [[1], [2]]
    old.commit()
    old_topic = FeedReader(s.data_dir, "ks.kv/f").table
    s.execute(DROP_F)
    with pytest.raises(InvalidRequest, match=r"Changefeed f does not exist in table ks\.kv"):
        FeedReader(s.data_dir, "ks.kv/f")
    s.execute(ADD_F.format(""))
    s.execute("INSERT INTO ks.kv (pk, v) VALUES (3, 3)")
    s.flush()
    # the issue's reproduction (it printed offsets 0, 1, 2, the dropped feed's records first)
    assert updates(cli_read(s.data_dir, "ks.kv/f", capsys)) == [(0, [3], {"v": 3})]
    reader = FeedReader(s.data_dir, "ks.kv/f")
    assert reader.table != old_topic and reader.table.parent == old_topic.parent
    assert [(m.offset, m.key) for m in reader.read()] == [(0, [3])]
    assert reader.next_offsets() == {0: 1} and reader.earliest_offsets() == {0: 0}
    # the old incarnation's committed offset (2) does not apply to the new topic
    again = FeedConsumer(s.data_dir, "ks.kv/f", "g")
    assert again.committed == {0: 0}
    assert [(m.offset, m.key) for m in again.poll()] == [(0, [3])]


def test_a_new_incarnation_scans_again(session: Any, capsys: Any) -> None:
    """The old feed's initial-scan state (the partitions it exported) is not the new one's:
    a new feed with INITIAL_SCAN exports every row again, and only its own records."""
    s = session
    s.execute(KV)
    s.execute_many([f"INSERT INTO ks.kv (pk, v) VALUES ({i}, {i})" for i in (1, 2)])
    scan = ", INITIAL_SCAN = TRUE"
    s.execute(ADD_F.format(scan))
    s.coordinator.background.join_scans()
    s.execute("UPDATE ks.kv SET v = 20 WHERE pk = 2")
    s.flush()
    assert len(cli_read(s.data_dir, "ks.kv/f", capsys)) == 3
    s.execute(DROP_F)
    s.execute(ADD_F.format(scan))
    s.coordinator.background.join_scans()
    s.flush()
    lines = cli_read(s.data_dir, "ks.kv/f", capsys)
    assert [m["offset"] for m in lines] == [0, 1]
    assert sorted((m["key"], m["value"]["update"]) for m in lines) == [
        ([1], {"v": 1}),
        ([2], {"v": 20}),
    ]


def test_writes_validated_before_the_drop_never_reach_the_new_feed(session: Any) -> None:
    """Writes made against the old feed's schema but applied after DROP + ADD (another
    connection's writes that the DDL's flush did not see) belong to the dropped incarnation,
    even when they share a micro-batch and a bucket with the new incarnation's writes: row
    writes and bulk chunks alike."""
    from cqlcdc.writes import bulk_records, row_records

    s, c = session, session.coordinator
    s.execute(KV)
    s.execute(ADD_F.format(""))
    s.execute("INSERT INTO ks.kv (pk, v) VALUES (1, 1)")
    insert = s.prepare("INSERT INTO ks.kv (pk, v) VALUES (?, ?)")
    with c.lock:  # validated now, appended after the DDL below
        next_seq = c.next_seq
        bulk = bulk_records(c, [insert, insert], [(2, 2), (4, 4)], None)
        assert bulk is not None
        row, _ = row_records(
            c, write("UPDATE ks.kv SET v = 44 WHERE pk = 4"), None, None, bulk[-1].seq + 1
        )
        early = [*bulk, *row]
    s.execute(DROP_F)
    s.execute(ADD_F.format(""))
    with c.lock:  # one append: one ingest file, one micro-batch
        assert c.next_seq == next_seq  # the DDL took no seq: these are still the next ones
        late, _ = row_records(
            c,
            write(
                "BEGIN BATCH INSERT INTO ks.kv (pk, v) VALUES (2, 3); "
                "INSERT INTO ks.kv (pk, v) VALUES (4, 5); APPLY BATCH"
            ),
            None,
            None,
            early[-1].seq + 1,
        )
        assert {r.schema_version for r in late} == {max(r.schema_version for r in early) + 2}
        c.append([*early, *late])
    c.wait(late[-1].seq)
    messages = list(FeedReader(s.data_dir, "ks.kv/f").read())
    assert [m.offset for m in messages] == [0, 1]
    assert sorted((m.key, m.value["update"]) for m in messages) == [
        ([2], {"v": 3}),
        ([4], {"v": 5}),
    ]
    assert sorted(tuple(r) for r in s.execute("SELECT pk, v FROM ks.kv")) == [
        (1, 1),
        (2, 3),
        (4, 5),
    ]


@pytest.mark.parametrize("drop", ["DROP TABLE ks.kv", "DROP KEYSPACE ks"])
def test_a_table_made_again_has_new_feeds(session: Any, capsys: Any, drop: str) -> None:
    s = session
    s.execute(KV)
    s.execute(ADD_F.format(""))
    s.execute("INSERT INTO ks.kv (pk, v) VALUES (1, 1)")
    s.flush()
    old = FeedConsumer(s.data_dir, "ks.kv/f", "g")
    assert len(old.poll()) == 1
    old.commit()
    s.execute(drop)
    capsys.readouterr()
    assert main(["changefeed", "read", "ks.kv/f", "--data-dir", str(s.data_dir)]) == 1
    assert capsys.readouterr().err == "cqlcdc: InvalidRequest: unconfigured table kv\n"
    if drop.startswith("DROP KEYSPACE"):
        s.execute(KS)
    s.execute(KV)
    s.execute(ADD_F.format(""))
    s.execute("INSERT INTO ks.kv (pk, v) VALUES (5, 5)")
    s.flush()
    assert updates(cli_read(s.data_dir, "ks.kv/f", capsys)) == [(0, [5], {"v": 5})]
    again = FeedConsumer(s.data_dir, "ks.kv/f", "g")
    assert [(m.offset, m.key) for m in again.poll()] == [(0, [5])]


def test_topic_ids_survive_a_restart_and_old_directories_stay_readable(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    """A feed keeps its topic across sessions; a data directory whose catalog predates topic
    ids (no ``feed_topics``, topics at ``feed/<table_id>/<feed name>``) reads as before."""
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        s.execute(KS)
        s.execute(KV)
        s.execute(ADD_F.format(""))
        s.execute("INSERT INTO ks.kv (pk, v) VALUES (1, 1)")
        topic = FeedReader(data, "ks.kv/f").output
    finally:
        s.close()
    assert updates(cli_read(data, "ks.kv/f", capsys)) == [(0, [1], {"v": 1})]
    # make the directory what an older cqlcdc wrote: the topic named after the feed
    legacy = topic.rsplit("/", 1)[0] + "/f"
    catalog = json.loads((data / "catalog.json").read_text())
    _strip_feed_topics(catalog)
    (data / "catalog.json").write_text(json.dumps(catalog))
    manifest = data / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"{topic}"', f'"{legacy}"'))
    (data / "tables" / topic).rename(data / "tables" / legacy)
    assert FeedReader(data, "ks.kv/f").output == legacy
    assert updates(cli_read(data, "ks.kv/f", capsys)) == [(0, [1], {"v": 1})]
    consumer = FeedConsumer(data, "ks.kv/f", "g")
    assert len(consumer.poll()) == 1
    consumer.commit()
    assert (data / "consumers" / legacy / "g.json").exists()
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        s.execute("INSERT INTO ks.kv (pk, v) VALUES (2, 2)")
        s.flush()
        assert updates(cli_read(data, "ks.kv/f", capsys)) == [
            (0, [1], {"v": 1}),
            (1, [2], {"v": 2}),
        ]
        assert [m.offset for m in FeedConsumer(data, "ks.kv/f", "g").poll()] == [1]
        s.execute(DROP_F)  # dropped and added again: a topic id of its own from now on
        s.execute(ADD_F.format(""))
        s.execute("INSERT INTO ks.kv (pk, v) VALUES (3, 3)")
        s.flush()
        assert FeedReader(data, "ks.kv/f").output not in (legacy, topic)
        assert updates(cli_read(data, "ks.kv/f", capsys)) == [(0, [3], {"v": 3})]
    finally:
        s.close()


def _strip_feed_topics(node: Any) -> None:
    """Remove every ``feed_topics`` entry of a saved catalog document, in place."""
    if isinstance(node, dict):
        node.pop("feed_topics", None)
        for value in node.values():
            _strip_feed_topics(value)
    elif isinstance(node, list):
        for value in node:
            _strip_feed_topics(value)
