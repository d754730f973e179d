"""``cqlcdc changefeed publish`` against a real Kafka-API broker (Tansu, started here).

What a ``read_committed`` consumer gets is checked two ways: with confluent-kafka by partition
assignment (``isolation.level = read_committed``), and with ``kafka_log.read_committed``, which
applies the log's transaction markers itself. The second is the oracle wherever transactions
were aborted: Tansu 0.6 does not tell fetchers which transactions aborted, so librdkafka
hands out their records (see kafka_log.py).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from cqlcdc.feed_reader import FeedReader
from cqlcdc.publish import PublishConfig, PublishError, publish
from cqlcdc.publish.kafka_client import OFFSET_HEADER
from tests.e2e.kafka_broker import Tansu, free_port, tansu
from tests.e2e.kafka_log import read_committed, read_log

pytestmark = pytest.mark.spark

Record = tuple[int, str | None, str]  # feed offset, key JSON text, value JSON text


@pytest.fixture(scope="module")
def tansu_broker(tmp_path_factory: Any) -> Iterator[Tansu]:
    with tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as running:
        yield running


@pytest.fixture
def broker(tansu_broker: Tansu) -> str:
    return tansu_broker.bootstrap


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cqlcdc.cli", "changefeed", "publish", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cqlcdc.cli", "changefeed", "publish", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def feed_records(data_dir: Path | str, feed: str) -> dict[int, list[Record]]:
    reader = FeedReader(data_dir, feed)
    return {p: reader.raw_records(p) for p in range(reader.partitions)}


def as_record(key: bytes | None, value: bytes | None, headers: Any) -> Record:
    offset = dict(headers or [])[OFFSET_HEADER]
    return (int(offset), None if key is None else key.decode(), (value or b"").decode())


def upto(records: dict[int, list[Record]], positions: dict[int, int]) -> dict[int, list[Record]]:
    """Each partition's records before ``positions`` (a publish's next offsets): what the
    publish sent, although the feed may have gained records since (idle-feed barriers)."""
    assert all(len(records[p]) >= n for p, n in positions.items()), (records, positions)
    return {p: rows[: positions[p]] for p, rows in records.items()}


def oracle(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    host, port = bootstrap.split(":")
    return {
        p: [as_record(r.key, r.value, r.headers) for r in read_committed(host, int(port), topic, p)]
        for p in range(partitions)
    }


def consume(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Record]]:
    """Every committed message, by partition assignment with read_committed (no group join)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tests-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[Record]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while True:
            at = {tp.partition: tp.offset for tp in consumer.position(list(_tps(topic, ends)))}
            if all(at[p] >= ends[p] or ends[p] == 0 for p in ends):
                return out
            assert time.monotonic() < deadline, f"consuming {topic} stalled at {at} of {ends}"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out[msg.partition()].append(as_record(msg.key(), msg.value(), msg.headers()))
    finally:
        consumer.close()


def _tps(topic: str, ends: dict[int, int]) -> Iterator[TopicPartition]:
    return (TopicPartition(topic, p) for p in ends)


def kill_inside_a_transaction(
    proc: subprocess.Popen[str], bootstrap: str, topic: str, partitions: int
) -> bool:
    """SIGKILL ``proc`` as soon as some partition has records beyond its last stable
    offset (an open transaction). False if the publisher finished first."""
    consumers = {
        level: Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"tests-{uuid.uuid4()}",
                "isolation.level": level,
                "log_level": 0,
            }
        )
        for level in ("read_committed", "read_uncommitted")
    }
    try:
        while proc.poll() is None:
            for p in range(partitions):
                tp = TopicPartition(topic, p)
                stable, high = (
                    consumers[level].get_watermark_offsets(tp, timeout=10, cached=False)[1]
                    for level in ("read_committed", "read_uncommitted")
                )
                if high > stable:
                    proc.kill()
                    proc.wait()
                    return True
        return False
    finally:
        for consumer in consumers.values():
            consumer.close()


def default_group(data_dir: Path | str, feed: str, topic: str) -> str:
    """The publisher's default group: one per Kafka topic and feed incarnation (topic id)."""
    return f"cqlcdc-publish.{topic}.{FeedReader(data_dir, feed).output.rsplit('/', 1)[-1]}"


def group_positions(bootstrap: str, topic: str, partitions: int, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        got = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: max(tp.offset, 0) for tp in got}
    finally:
        consumer.close()


def new_topic() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


FORMATS = {
    "json": "FORMAT = 'JSON', VIRTUAL_TIMESTAMPS = TRUE, BARRIERS_INTERVAL = Interval('PT0.001S')",
    "debezium": "FORMAT = 'DEBEZIUM_JSON'",
    "dynamodb": "FORMAT = 'DYNAMODB_STREAMS_JSON', AWS_REGION = 'eu-west-1'",
}


def test_each_format_reads_back_equal_per_partition_in_order(session: Any, broker: str) -> None:
    session.execute(
        "CREATE TABLE ks.t (pk int, ck int, v text, s int static, m map<int, text>, "
        "PRIMARY KEY (pk, ck))"
    )
    for name, options in FORMATS.items():
        session.execute(
            f"ALTER TABLE ks.t ADD CHANGEFEED {name} WITH (MODE = 'NEW_AND_OLD_IMAGES', "
            f"{options}, TOPIC_MIN_ACTIVE_PARTITIONS = 3)"
        )
    session.execute_many(
        [
            f"INSERT INTO ks.t (pk, ck, v, m) VALUES ({i % 7}, {i}, 'v{i}', {{1: 'é{i}'}})"
            for i in range(60)
        ]
        + [f"UPDATE ks.t SET s = {i} WHERE pk = {i}" for i in range(7)]
        + [
            "DELETE FROM ks.t WHERE pk = 1 AND ck >= 10 AND ck < 40",
            "DELETE FROM ks.t WHERE pk = 2",
        ]
        + [f"UPDATE ks.t SET v = null WHERE pk = 3 AND ck = {ck}" for ck in (3, 10, 17)]
    )
    session.flush()
    for name in FORMATS:
        feed = f"ks.t/{name}"
        flushed = feed_records(session.data_dir, feed)
        assert all(len(rows) > 5 for rows in flushed.values())  # every partition has records
        if name == "json":
            # an idle table's feed with BARRIERS_INTERVAL gains a barrier in every partition
            # whenever the sweeper ticks (a second after the last write), so records may
            # land between the read above and a publish: here one tick does, every run
            assert session.tick_idle_feeds(time.time_ns() // 1_000_000 + 2000) == 1
            session.flush()
        topic = new_topic()
        result = publish(
            PublishConfig(session.data_dir, feed, broker, topic, slice_records=25),
            progress=sys.stderr,
        )
        # a publish (not following) publishes what the feed holds when it starts: at least
        # every record flushed before, and exactly the feed's prefix up to its positions
        published = upto(feed_records(session.data_dir, feed), result.positions)
        assert all(published[p][: len(rows)] == rows for p, rows in flushed.items())
        if name == "json":  # the tick's barriers (and maybe the sweeper's since)
            assert sum(map(len, published.values())) >= sum(map(len, flushed.values())) + 3
        assert result.records == sum(len(rows) for rows in published.values())
        assert result.transactions > 3  # several slices
        assert consume(broker, topic, 3) == published
        assert oracle(broker, topic, 3) == published
        # published once: a second run publishes only what the feed gained since (an idle
        # feed's periodic barriers may land in between), and the topic equals the feed
        again = publish(PublishConfig(session.data_dir, feed, broker, topic))
        now = upto(feed_records(session.data_dir, feed), again.positions)
        assert again.records == sum(len(rows) for rows in now.values()) - result.records
        assert all(now[p][: len(rows)] == rows for p, rows in published.items())
        assert oracle(broker, topic, 3) == now
        group = default_group(session.data_dir, feed, topic)
        assert group_positions(broker, topic, 3, group) == {p: len(r) for p, r in now.items()}
    # the barriers of the JSON feed are messages without a key
    json_rows = feed_records(session.data_dir, "ks.t/json")
    assert any(key is None for rows in json_rows.values() for _, key, _ in rows)


def test_kill_9_at_random_points_neither_loses_nor_duplicates(
    session: Any, broker: str, tmp_path: Path
) -> None:
    session.execute("CREATE TABLE ks.big (pk int, ck int, v text, PRIMARY KEY (pk, ck))")
    session.execute(
        "ALTER TABLE ks.big ADD CHANGEFEED f WITH (MODE = 'NEW_AND_OLD_IMAGES', "
        "FORMAT = 'JSON', TOPIC_MIN_ACTIVE_PARTITIONS = 4, VIRTUAL_TIMESTAMPS = TRUE)"
    )
    update = session.prepare("UPDATE ks.big SET v = ? WHERE pk = ? AND ck = ?")
    total = 100_000
    for start in range(0, total, 50_000):  # the bulk path: one Arrow chunk per bucket
        n = min(50_000, total - start)
        session.execute_many(
            [update] * n, [(f"w{i}", i % 997, i % 13) for i in range(start, start + n)]
        )
    session.flush()
    expected = feed_records(session.data_dir, "ks.big/f")
    assert sum(len(r) for r in expected.values()) == total
    topic = new_topic()
    group = default_group(session.data_dir, "ks.big/f", topic)
    args = ["ks.big/f", "--data-dir", str(session.data_dir), "--bootstrap", broker]
    args += ["--topic", topic, "--slice", "8000", "--progress", "0.01"]
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    kills: list[int] = []  # records committed when each kill landed mid-publish
    for _ in range(5):
        proc = spawn(*args)
        assert proc.stderr is not None
        slices = rng.randint(1, 2)  # a random number of committed slices in (a line each)
        while slices:
            line = proc.stderr.readline()
            if not line or line.startswith("cqlcdc publish: published"):
                break
            slices -= line.startswith("cqlcdc publish: publishing:")
        time.sleep(rng.uniform(0, 0.06))  # then a random point of the next one
        proc.kill()
        proc.wait()
        committed = sum(group_positions(broker, topic, 4, group).values())
        if 0 < committed < total:
            kills.append(committed)
        if committed > total * 0.6:  # leave slices for the kill below
            break
    # and one kill that surely lands inside a transaction: when the broker holds records
    # that are not committed yet
    proc = spawn(*args)
    open_txn = kill_inside_a_transaction(proc, broker, topic, 4)
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    got = oracle(broker, topic, 4)
    for p in range(4):
        assert got[p] == expected[p], f"partition {p} differs (seed {seed}, kills {kills})"
    assert len(kills) >= 3, f"too few kills landed mid-publish (seed {seed}): {kills}"
    assert open_txn, "the publisher finished before a transaction was seen open"
    assert group_positions(broker, topic, 4, group) == {p: len(r) for p, r in expected.items()}
    # kills inside transactions left records in the log that no read_committed reader sees
    host, port = broker.split(":")
    aborted = sum(len(read_log(host, int(port), topic, p)[1]) for p in range(4))
    print(f"seed {seed}: kills at {kills} committed records; {aborted} aborted records")
    assert aborted > 0, f"no kill landed inside a transaction (seed {seed})"


def test_follow_publishes_new_writes_and_sigterm_finishes(session: Any, broker: str) -> None:
    session.execute("CREATE TABLE ks.f (pk int PRIMARY KEY, v int)")
    session.execute(
        "ALTER TABLE ks.f ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'DEBEZIUM_JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 2)"
    )
    session.execute_many([f"INSERT INTO ks.f (pk, v) VALUES ({i}, {i})" for i in range(50)])
    topic = new_topic()
    group = default_group(session.data_dir, "ks.f/f", topic)
    proc = spawn(
        "ks.f/f",
        "--data-dir",
        str(session.data_dir),
        "--bootstrap",
        broker,
        "--topic",
        topic,
        "--follow",
        "--progress",
        "0.1",
    )
    try:
        for round_ in range(3):
            if round_:
                session.execute_many(
                    [f"UPDATE ks.f SET v = {round_} WHERE pk = {i}" for i in range(0, 50, 3)]
                )
                session.flush()
            expected = feed_records(session.data_dir, "ks.f/f")
            want = sum(len(r) for r in expected.values())
            deadline = time.monotonic() + 30
            while sum(group_positions(broker, topic, 2, group).values()) < want:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "the follower did not publish new records"
                time.sleep(0.1)
            assert oracle(broker, topic, 2) == expected
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"published {want:,} records to {topic}" in err
    assert consume(broker, topic, 2) == expected


def test_topic_with_fewer_partitions_is_an_error(session: Any, broker: str) -> None:
    session.execute("CREATE TABLE ks.p (pk int PRIMARY KEY, v int)")
    session.execute(
        "ALTER TABLE ks.p ADD CHANGEFEED f WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 3)"
    )
    session.execute("INSERT INTO ks.p (pk, v) VALUES (1, 1)")
    session.flush()
    topic = new_topic()
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=-1)])[topic].result()
    done = cli(
        "ks.p/f", "--data-dir", str(session.data_dir), "--bootstrap", broker, "--topic", topic
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"cqlcdc publish: Kafka topic {topic} has 2 partition(s), fewer than the 3 of changefeed "
        f"ks.p/f: feed partition i is published to Kafka partition i, so the topic needs at "
        f"least 3 (add partitions, or publish to another topic)"
    )
    assert oracle(broker, topic, 2) == {0: [], 1: []}
    # a missing topic is created with the feed's partition count
    fresh = new_topic()
    done = cli(
        "ks.p/f", "--data-dir", str(session.data_dir), "--bootstrap", broker, "--topic", fresh
    )
    assert done.returncode == 0, done.stderr
    assert f"created Kafka topic {fresh} with 3 partition(s)" in done.stderr
    assert len(admin.list_topics(timeout=10).topics[fresh].partitions) == 3


def test_broker_down_is_a_clear_error_within_the_bound(session: Any) -> None:
    session.execute("CREATE TABLE ks.d (pk int PRIMARY KEY, v int)")
    session.execute("ALTER TABLE ks.d ADD CHANGEFEED f WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON')")
    session.execute("INSERT INTO ks.d (pk, v) VALUES (1, 1)")
    session.flush()
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there
    start = time.monotonic()
    done = cli(
        "ks.d/f",
        "--data-dir",
        str(session.data_dir),
        "--bootstrap",
        bootstrap,
        "--topic",
        "x",
        "--timeout",
        "2",
    )
    seconds = time.monotonic() - start
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"cqlcdc publish: cannot reach the Kafka broker at {bootstrap} within 2 s ("
    ), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # no librdkafka log noise
    assert seconds < 2 + 8  # the bound, plus the interpreter's start


def test_message_too_large_and_deleted_topic_are_errors_not_skips(
    session: Any, broker: str
) -> None:
    session.execute("CREATE TABLE ks.m (pk int PRIMARY KEY, v text)")
    session.execute("ALTER TABLE ks.m ADD CHANGEFEED f WITH (MODE = 'NEW_IMAGE', FORMAT = 'JSON')")
    session.execute_many(
        [
            f"INSERT INTO ks.m (pk, v) VALUES ({i}, '{'x' * (5000 if i == 7 else 10)}')"
            for i in range(20)
        ]
    )
    session.flush()
    expected = feed_records(session.data_dir, "ks.m/f")
    big = next(o for o, _, v in expected[0] if len(v) > 5000)
    topic = new_topic()
    base = ["ks.m/f", "--data-dir", str(session.data_dir), "--bootstrap", broker, "--topic", topic]
    done = cli(*base, "--kafka-config", "message.max.bytes=2000")
    assert done.returncode == 1
    assert f"cqlcdc publish: record {big} of partition 0 of ks.m/f (" in done.stderr
    assert "is larger than the broker accepts" in done.stderr
    assert "nothing of its transaction was published and it is not skipped" in done.stderr
    assert oracle(broker, topic, 1) == {0: []}
    done = cli(*base)
    assert done.returncode == 0, done.stderr
    assert oracle(broker, topic, 1) == expected
    # the topic deleted under a following publisher: an error, not records sent nowhere
    proc = spawn(*base, "--follow", "--progress", "0")
    # running and following once a new record reaches the topic (a fixed sleep raced a slow
    # start: the publisher then re-created the topic the test had deleted)
    session.execute("INSERT INTO ks.m (pk, v) VALUES (99, 'before')")
    session.flush()
    deadline = time.monotonic() + 60
    while len(oracle(broker, topic, 1)[0]) <= len(expected[0]):
        assert time.monotonic() < deadline and proc.poll() is None, "the publisher did not follow"
        time.sleep(0.2)
    admin = AdminClient({"bootstrap.servers": broker})
    admin.delete_topics([topic])[topic].result()
    session.execute("INSERT INTO ks.m (pk, v) VALUES (100, 'after')")
    session.flush()
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert f"cqlcdc publish: Kafka topic {topic} was deleted while publishing" in err


def test_publish_error_is_raised_by_the_library(session: Any) -> None:
    session.execute("CREATE TABLE ks.e (pk int PRIMARY KEY, v int)")
    session.execute("ALTER TABLE ks.e ADD CHANGEFEED f WITH (MODE = 'KEYS_ONLY', FORMAT = 'JSON')")
    with pytest.raises(PublishError, match="cannot reach the Kafka broker"):
        publish(
            PublishConfig(session.data_dir, "ks.e/f", f"127.0.0.1:{free_port()}", "x", timeout_s=1)
        )


def test_broker_unresponsive_mid_stream_is_retried_and_stays_exactly_once(
    session: Any, tansu_broker: Tansu
) -> None:
    broker = tansu_broker.bootstrap
    session.execute("CREATE TABLE ks.r (pk int, ck int, v text, PRIMARY KEY (pk, ck))")
    session.execute(
        "ALTER TABLE ks.r ADD CHANGEFEED f WITH (MODE = 'NEW_IMAGE', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 2)"
    )
    update = session.prepare("UPDATE ks.r SET v = ? WHERE pk = ? AND ck = ?")
    session.execute_many([update] * 20_000, [(f"r{i}", i % 101, i % 7) for i in range(20_000)])
    session.flush()
    expected = feed_records(session.data_dir, "ks.r/f")
    topic = new_topic()
    proc = spawn(
        "ks.r/f",
        "--data-dir",
        str(session.data_dir),
        "--bootstrap",
        broker,
        "--topic",
        topic,
        "--slice",
        "1000",
        "--progress",
        "0.01",
        "--timeout",
        "1",
        "--retries",
        "8",
    )
    assert proc.stderr is not None
    try:
        while not proc.stderr.readline().startswith("cqlcdc publish: publishing:"):
            assert proc.poll() is None
        tansu_broker.process.send_signal(signal.SIGSTOP)  # the broker stops answering
        time.sleep(3)
        tansu_broker.process.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        tansu_broker.process.send_signal(signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "attempt 1 of 9 failed (" in err
    assert oracle(broker, topic, 2) == expected


def test_a_feed_added_again_is_published_whole_and_a_follower_of_a_dropped_one_stops(
    session: Any, broker: str
) -> None:
    """A re-added feed is a new topic starting at offset 0 (as in YDB): none of its records
    may be skipped because the old incarnation had reached a higher offset in Kafka."""
    add = (
        "ALTER TABLE ks.again ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 2)"
    )
    session.execute("CREATE TABLE ks.again (pk int PRIMARY KEY, v int)")
    session.execute(add)
    session.execute_many([f"INSERT INTO ks.again (pk, v) VALUES ({i}, {i})" for i in range(40)])
    session.flush()
    topic = new_topic()
    args = ["ks.again/f", "--data-dir", str(session.data_dir), "--bootstrap", broker]
    args += ["--topic", topic]
    first = feed_records(session.data_dir, "ks.again/f")
    follower = spawn(*args, "--follow", "--progress", "0.1")
    try:
        group = default_group(session.data_dir, "ks.again/f", topic)
        deadline = time.monotonic() + 30
        while sum(group_positions(broker, topic, 2, group).values()) < 40:
            assert follower.poll() is None, follower.communicate()[1]
            assert time.monotonic() < deadline, "the follower did not publish"
            time.sleep(0.1)
        session.execute("ALTER TABLE ks.again DROP CHANGEFEED f")
        _, err = follower.communicate(timeout=30)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 1, err
    assert "cqlcdc publish: changefeed ks.again/f was dropped" in err
    session.execute(add)
    session.execute_many([f"UPDATE ks.again SET v = -1 WHERE pk = {i}" for i in range(0, 40, 4)])
    session.flush()
    second = feed_records(session.data_dir, "ks.again/f")
    assert sum(len(r) for r in second.values()) == 10  # the new incarnation's own records
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "published 10 records" in done.stderr
    got = oracle(broker, topic, 2)  # the old incarnation's records, then the new one's
    for p in range(2):
        assert got[p] == first[p] + second[p]


def test_a_disabled_feed_publishes_what_it_holds_in_ydbs_partitions(
    session: Any, broker: str
) -> None:
    """ALTER CHANGEFEED ... DISABLE: later writes give no records, what the feed holds is
    still published; each record is in the partition YDB computes from its key."""
    import hashlib

    session.execute("CREATE TABLE ks.d (pk int PRIMARY KEY, v text)")
    session.execute(
        "ALTER TABLE ks.d ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON', "
        "TOPIC_MIN_ACTIVE_PARTITIONS = 3)"
    )
    session.execute_many([f"INSERT INTO ks.d (pk, v) VALUES ({i}, 'a')" for i in range(30)])
    session.execute("ALTER TABLE ks.d ALTER CHANGEFEED f DISABLE")
    session.execute_many([f"INSERT INTO ks.d (pk, v) VALUES ({i}, 'b')" for i in range(30, 40)])
    session.flush()
    expected = feed_records(session.data_dir, "ks.d/f")
    assert sum(len(rows) for rows in expected.values()) == 30
    topic = new_topic()
    result = publish(PublishConfig(session.data_dir, "ks.d/f", broker, topic))
    assert result.records == 30
    published = consume(broker, topic, 3)
    assert published == expected
    for partition, rows in published.items():
        for _, key, _ in rows:
            assert key is not None
            value = int(hashlib.md5(key.encode()).hexdigest(), 16)
            assert partition == min(value // ((2**128 - 1) // 3), 2)
