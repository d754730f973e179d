"""``benchmarks/cpu_stages.py``: py-spy's raw stacks folded into the stages of a write's
path, and the targets table beside them."""

from __future__ import annotations

from benchmarks.cpu_stages import (
    APPEND,
    BATCH,
    BIND,
    COMBINER,
    DECODE,
    ENCODE,
    HANDOFF,
    LOOP,
    OTHER,
    PY4J,
    UNSAMPLED,
    parse_raw,
    per_write_us,
    split_by_module,
    stage_of,
)
from benchmarks.targets import format_rows, target_rows

LOOP_ROOT = [
    "run (asyncio/runners.py:118)",
    "_run_once (asyncio/base_events.py:1922)",
    "_run (asyncio/events.py:80)",
]


def test_stages_by_module_with_the_caller_first() -> None:
    assert stage_of([*LOOP_ROOT, "feed (cqlcdc/server/framing.py:90)"]) == DECODE
    bind = [*LOOP_ROOT, "handle (cqlcdc/server/connection.py:300)"]
    bind += ["bind (cqlcdc/server/binds.py:50)", "serialize (cqlcdc/types/ints.py:12)"]
    assert stage_of(bind) == BIND
    assert stage_of([*LOOP_ROOT, "void (cqlcdc/server/results.py:20)"]) == ENCODE
    assert stage_of([*LOOP_ROOT, "select (selectors.py:469)"]) == LOOP
    pool = ["_bootstrap (threading.py:1002)", "_worker (concurrent/futures/thread.py:81)"]
    assert stage_of(pool) == HANDOFF
    combiner = ["_run (cqlcdc/server/combiner.py:117)", "_bulk (cqlcdc/server/combiner.py:150)"]
    assert stage_of([*combiner, "bulk_records (cqlcdc/storage/bulk.py:40)"]) == COMBINER
    assert stage_of([*combiner, "make_durable (cqlcdc/coordinator/group_commit.py:150)"]) == APPEND
    assert stage_of([*combiner, "bound_columns (cqlcdc/storage/bulk.py:90)"]) == BIND
    acks = ["_acknowledge (cqlcdc/server/combiner.py:170)"]
    assert stage_of([*acks, "append (cqlcdc/datadir/ingest.py:330)"]) == APPEND
    # the engine reads the ingest files: its micro-batch, not the append
    engine = ["run_batch (cqlcdc/pipeline/engine.py:500)", "read (cqlcdc/datadir/ingest.py:400)"]
    assert stage_of(engine) == BATCH
    decode = ["process_bucket (cqlcdc/cdc/processor.py:9)", "typed (cqlcdc/storage/codec.py:5)"]
    assert stage_of(decode, "cqlcdc-bucket_1") == BATCH  # the engine's pool
    assert stage_of(decode, "cql_3") == OTHER
    assert stage_of(["main (somewhere.py:1)"]) == OTHER


def test_py4j_at_the_leaf_is_a_round_trip_not_at_the_root() -> None:
    callback = ["run (py4j/clientserver.py:480)", "call (pyspark/sql/utils.py:120)"]
    batch = [*callback, "process (cqlcdc/pipeline/engine.py:600)"]
    assert stage_of(batch) == BATCH
    assert stage_of([*batch, "send_command (py4j/clientserver.py:500)"]) == PY4J
    assert stage_of([*batch, "recv_into (socket.py:700)", "x (py4j/java_gateway.py:1)"]) == PY4J


SERVE = 'process 100:"python -m cqlcdc.cli serve"'
RAW = [
    f"{SERVE};thread (100): MainThread;run (asyncio/runners.py:118);"
    "feed (cqlcdc/server/framing.py:90) 30",
    f"{SERVE};thread (101): cql-write-combiner;_run (cqlcdc/server/combiner.py:117) 10",
    f"{SERVE};thread (101): cql-write-combiner;_run (cqlcdc/server/combiner.py:117);"
    "append (cqlcdc/datadir/ingest.py:330) 20",
    f'{SERVE};process 200:"python -m cqlcdc.cli worker";thread (201): MainThread;'
    "bind (cqlcdc/server/binds.py:1) 5",
    f"{SERVE};thread (0x1F): cqlcdc-bucket_0;run (cqlcdc/pipeline/engine.py:1) 8",
    f"{SERVE};thread (100): MainThread 4",
    "not a stack line",
]


def test_parse_raw_by_process_thread_and_stage() -> None:
    profile = parse_raw(RAW)
    assert profile.samples[100] == {
        100: {DECODE: 30},
        101: {COMBINER: 10, APPEND: 20},
        31: {BATCH: 8},
    }
    assert profile.names[100][101] == "cql-write-combiner"
    assert profile.unread == 4  # a stack without a frame: no stage
    assert profile.samples[200] == {201: {BIND: 5}}  # the child's own samples, apart
    assert profile.stage_samples(100) == {DECODE: 30, COMBINER: 10, APPEND: 20, BATCH: 8}
    assert profile.leaves[100][APPEND] == {"cqlcdc/datadir/ingest.py": 20}
    us = split_by_module(profile.leaves[100], {APPEND: 40.0, DECODE: 30.0})
    assert us == {
        APPEND: {"cqlcdc/datadir/ingest.py": 40.0},
        DECODE: {"cqlcdc/server/framing.py": 30.0},
    }


def test_per_write_us_splits_each_thread_cpu_by_its_own_samples() -> None:
    samples = {
        100: {DECODE: 30, LOOP: 10},  # 0.4 s of CPU: 0.3 decode, 0.1 loop
        101: {COMBINER: 10, APPEND: 30},  # 0.2 s: 0.05 combiner, 0.15 append
        7: {BATCH: 3, HANDOFF: 1},  # ended: the ended threads' 0.8 s split by their samples
        8: {BATCH: 1},
    }
    cpu_s = {100: 0.4, 101: 0.2, 102: 0.1}  # 102: never sampled (a native pool)
    us = per_write_us(samples, cpu_s, ended_s=0.8, writes=1000)
    assert {k: round(v, 6) for k, v in us.items()} == {
        BATCH: 640.0,  # the ended threads' samples: 4 of 5
        DECODE: 300.0,
        HANDOFF: 160.0,
        APPEND: 150.0,
        LOOP: 100.0,
        UNSAMPLED: 100.0,
        COMBINER: 50.0,
    }
    assert next(iter(us)) == BATCH  # largest first
    assert per_write_us(samples, cpu_s, 0.8, 0) == {}


def test_targets_table_marks_met_missing_and_the_window_ratio() -> None:
    summary = {
        "cpu_us_per_write_64": 540.0,
        "writes_per_s_64": 6000.0,
        "ack_p50_ms_1": 2.5,
        "window_read_p50_ms": 15.0,
        "window_ratio": 2.5,
    }
    rows = {r.figure.split(",")[0]: r for r in target_rows(summary)}
    assert rows["CPU of all cqlcdc processes per acknowledged write"].met is False
    assert rows["acknowledged writes/s"].met is True
    assert rows["ack p50"].met is True
    assert rows["ack p99"].met is None and rows["ack p99"].measured == "not measured"
    window = rows["CDC window read p50 through the server (1"]
    assert window.met is False  # 15 ms, but 2.5x the in-process read
    assert "2.5x" in window.measured
    lines = format_rows(target_rows(summary))
    assert len(lines) == 8 and "NOT met" in lines[1]
