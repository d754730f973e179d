"""Golden records of every MODE x FORMAT, produced by the engine for one statement sequence
covering insert, update, static update, column delete, row delete, range delete, partition
delete and TTL expiry on a table with atomic, static, map, set, list and UDT columns.

The golden files (tests/e2e/golden/changefeeds/*.jsonl) hold the records with the values that
change from run to run (virtual timestamps, creation times, sequence numbers) replaced by
placeholders. Regenerate after an intended change with ``CQLCDC_UPDATE_GOLDEN=1`` and review
the diff.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.feed_reader import FeedReader

pytestmark = pytest.mark.spark

GOLDEN = Path(__file__).with_name("golden") / "changefeeds"
MODES = ["KEYS_ONLY", "UPDATES", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]
FORMATS = ["JSON", "DEBEZIUM_JSON", "DYNAMODB_STREAMS_JSON"]
STATEMENTS = [
    "INSERT INTO ks.t (pk, ck, v, m, st, l, u) "
    "VALUES (1, 1, 1, {1: 'a'}, {1}, [1], {a: 1, b: 'x'})",
    "UPDATE ks.t SET v = 2, m = m + {2: 'b'}, st = st - {1}, l = l + [2], u.a = 2 "
    "WHERE pk = 1 AND ck = 1",
    "UPDATE ks.t SET s = 9 WHERE pk = 1",
    "DELETE v FROM ks.t WHERE pk = 1 AND ck = 1",
    "INSERT INTO ks.t (pk, ck, v) VALUES (1, 2, 2)",
    "INSERT INTO ks.t (pk, ck, v) VALUES (1, 3, 3)",
    "INSERT INTO ks.t (pk, ck, v) VALUES (1, 4, 4)",
    "DELETE FROM ks.t WHERE pk = 1 AND ck = 2",
    "DELETE FROM ks.t WHERE pk = 1 AND ck >= 3",
    "INSERT INTO ks.t (pk, ck, v) VALUES (2, 1, 1)",
    "DELETE FROM ks.t WHERE pk = 2",
    "INSERT INTO ks.t (pk, ck, v) VALUES (3, 1, 5) USING TTL 2",
]
VARYING = {
    "ts",
    "ts_ms",
    "step",
    "txId",
    "ApproximateCreationDateTime",
    "SequenceNumber",
    "eventID",
}


def _normalize(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("<varies>" if k in VARYING else _normalize(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return value


@pytest.fixture(scope="module")
def feeds(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("golden") / "data", master="local[2]")
    try:
        s.coordinator.sweep_interval_s = 3600.0
        s.execute(
            "CREATE KEYSPACE ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        s.execute("CREATE TYPE ks.ut (a int, b text)")
        s.execute(
            "CREATE TABLE ks.t (pk int, ck int, v int, s int static, m map<int, text>, "
            "st set<int>, l list<int>, u ut, PRIMARY KEY (pk, ck))"
        )
        for mode in MODES:
            for fmt in FORMATS:
                region = ", AWS_REGION = 'eu-west-1'" if fmt == "DYNAMODB_STREAMS_JSON" else ""
                s.execute(
                    f"ALTER TABLE ks.t ADD CHANGEFEED {mode.lower()}_{fmt.lower()} WITH ("
                    f"MODE = '{mode}', FORMAT = '{fmt}', EXPIRY_EVENTS = TRUE{region})"
                )
        for stmt in STATEMENTS:
            s.execute(stmt)
        s.sweep_expired(int(time.time()) + 60)
        s.flush()
        out = {}
        for mode in MODES:
            for fmt in FORMATS:
                name = f"{mode.lower()}_{fmt.lower()}"
                reader = FeedReader(s.data_dir, f"ks.t/{name}")
                out[name] = [_normalize(m.to_json()) for m in reader.read()]
        return out
    finally:
        s.close()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_feed_matches_golden(feeds: dict[str, list[Any]], mode: str, fmt: str) -> None:
    name = f"{mode.lower()}_{fmt.lower()}"
    actual = feeds[name]
    path = GOLDEN / f"{name}.jsonl"
    if os.environ.get("CQLCDC_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in actual))
    expected = [json.loads(line) for line in path.read_text().splitlines()]
    assert actual == expected
