"""Crash safety: a writer killed with SIGKILL (driver and Spark JVM) at random points while a
long load runs, restarted each time. Afterwards the base table equals the core's model of the
same input, every write's log row and feed record exist exactly once, feed offsets are dense,
per-key order holds, and a consumer resumes from its committed offsets without loss or
duplicates. A short variant runs in the suite; ``-m slow`` runs the long one."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.feed_reader import FeedConsumer, FeedMessage, FeedReader
from tests.core_model import CoreModel
from tests.e2e.crash_driver import KS, TABLE, statement

DRIVER = Path(__file__).with_name("crash_driver.py")
ROOT = Path(__file__).resolve().parents[2]


def _spawn(data_dir: Path, total: int, group: int, mode: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    with open(_driver_log(data_dir), "ab") as log:  # every run's stderr, for a failure's report
        return subprocess.Popen(
            [sys.executable, str(DRIVER), str(data_dir), str(total), str(group), mode],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,  # its own process group: the kill takes the JVM too
        )


def _driver_log(data_dir: Path) -> Path:
    return data_dir.parent / "driver-stderr.log"


def _acked(data_dir: Path) -> int:
    path = data_dir / "acked.txt"
    if not path.exists():
        return -1
    lines = path.read_text().split()
    return int(lines[-1]) if lines else -1


def run_with_kills(
    tmp_path: Path, total: int, group: int, kills: int, seed: int, mode: str = "bulk"
) -> None:
    data_dir, consumed = load_with_kills(tmp_path, total, group, kills, seed, mode)
    verify(data_dir, total, consumed, mode != "bulk-nofeed")


def load_with_kills(
    tmp_path: Path, total: int, group: int, kills: int, seed: int, mode: str = "bulk"
) -> tuple[Path, list[FeedMessage]]:
    """The load, killed ``kills`` times at random points and then run to its end. Returns
    the data directory and what a consumer read meanwhile (for ``verify``)."""
    feed = mode != "bulk-nofeed"
    rng = random.Random(seed)
    data_dir = tmp_path / "data"
    consumed: list[FeedMessage] = []
    for _ in range(kills):
        before = _acked(data_dir)
        proc = _spawn(data_dir, total, group, mode)
        # wait until this run has made progress, then kill at a random moment
        deadline = time.monotonic() + 120
        while _acked(data_dir) == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(rng.uniform(0.0, 2.0))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if feed:
            consumed += _consume_some(data_dir, rng.randint(10, 200))
    proc = _spawn(data_dir, total, group, mode)
    out, _ = proc.communicate(timeout=600)
    log = _driver_log(data_dir).read_text(errors="replace")
    errors = [line for line in log.splitlines() if "Error" in line or "Traceback" in line]
    assert proc.returncode == 0 and b"DONE" in out, "\n".join(errors[-20:]) or log[-3000:]
    if feed:
        consumed += _consume_some(data_dir, 10**9)
    return data_dir, consumed


def _consume_some(data_dir: Path, n: int) -> list[FeedMessage]:
    """A consumer that reads up to n records, commits, and goes away (like a restart)."""
    if not (data_dir / "manifest.json").exists():
        return []
    try:
        consumer = FeedConsumer(data_dir, "ks.t/f", "checker")
    except cqlcdc.InvalidRequest:  # the feed was not created before the kill
        return []
    got = consumer.poll(max_records=n)
    consumer.commit()
    return got


def verify(data_dir: Path, total: int, consumed: list[FeedMessage], feed: bool = True) -> None:
    session = cqlcdc.connect(data_dir=data_dir, master="local[2]")
    try:
        model = CoreModel()
        model.run(KS)
        model.run(TABLE)
        for i in range(total):
            model.run(statement(i))
        actual = sorted(tuple(r) for r in session.execute("SELECT pk, ck, v FROM ks.t"))
        assert actual == sorted(model.run("SELECT pk, ck, v FROM ks.t"))
        values = [r[0] for r in session.execute("SELECT v FROM ks.t_scylla_cdc_log")]
        assert sorted(values, key=lambda v: int(v[1:])) == [f"w{i}" for i in range(total)]
        if not feed:
            return
        reader = FeedReader(data_dir, "ks.t/f")
        per_key: dict[tuple[int, int], list[int]] = defaultdict(list)
        count = 0
        for p in range(reader.partitions):
            msgs = list(reader.read(p))
            assert [m.offset for m in msgs] == list(range(len(msgs)))
            for m in msgs:
                per_key[tuple(m.key)].append(int(m.value["newImage"]["v"][1:]))
            count += len(msgs)
        assert count == total
        for seq in per_key.values():
            assert seq == sorted(seq)
        seen = [(m.partition, m.offset) for m in consumed]
        assert len(seen) == len(set(seen)) == total  # the consumer lost and repeated nothing
    finally:
        session.close()


MODES = ("bulk", "bulk-nofeed")
TOTAL = 1200
# each kill lands a random 0-2 s after a run's first acknowledged group (seed 1: 0.27 s and
# 0.51 s), while the next group's bulk chunks are in the pipeline (a group waits for its
# commit): the first kills the run that made the keyspace, the table, the feed and the first
# micro-batches; the second kills a run that resumed after a kill (its writes resent from the
# ingest log's last durable one, a consumer's offsets committed in between). A third kill
# (1.52 s) repeated the second case; ``-m slow`` kills 10 times.
KILLS = 2


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[FeedMessage]]]:
    """Each mode's load with kills, both at once: they are independent processes on their
    own data directories, and this process only waits on them (the cores are two)."""
    with ThreadPoolExecutor(len(MODES)) as pool:
        futures = {
            mode: pool.submit(
                load_with_kills, tmp_path_factory.mktemp(mode), TOTAL, 100, KILLS, 1, mode
            )
            for mode in MODES
        }
        return {mode: future.result() for mode, future in futures.items()}


@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_kill_9_while_loading(
    spark: Any, loaded: dict[str, tuple[Path, list[FeedMessage]]], mode: str
) -> None:
    data_dir, consumed = loaded[mode]
    verify(data_dir, TOTAL, consumed, mode != "bulk-nofeed")


@pytest.mark.spark
@pytest.mark.slow
def test_kill_9_while_loading_long(spark: Any, tmp_path: Path) -> None:
    run_with_kills(tmp_path, total=50_000, group=500, kills=10, seed=2)
