"""``benchmarks/serve_process.py``: the appends and micro-batches of a run, read from the
server's Prometheus exposition (the same metric names, exposed by prometheus_client)."""

from __future__ import annotations

from benchmarks.serve_process import engine_counters, per_run
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest


def _exposition(appends: list[int], batches: list[tuple[float, int]], plan_s: float) -> str:
    registry = CollectorRegistry()
    group = Histogram("cqlcdc_group_commit_records", "", registry=registry)
    duration = Histogram("cqlcdc_batch_duration_seconds", "", registry=registry)
    rows = Histogram("cqlcdc_batch_rows", "", registry=registry)
    phase = Counter("cqlcdc_batch_phase_seconds", "", ["phase"], registry=registry)
    for records in appends:
        group.observe(records)
    for seconds, applied in batches:
        duration.observe(seconds)
        rows.observe(applied)
    phase.labels("plan").inc(plan_s)
    phase.labels("commit").inc(0.0)
    return generate_latest(registry).decode()


def test_engine_counters_read_appends_batches_and_phases() -> None:
    counted = engine_counters(_exposition([3, 5], [(0.5, 40)], plan_s=0.2))
    assert counted == {
        "appends": 2,
        "records appended": 8,
        "micro-batches": 1,
        "micro-batch seconds": 0.5,
        "records applied": 40,
        "phase plan seconds": 0.2,
        "phase commit seconds": 0.0,
    }


def test_per_run_is_the_rise_between_readings() -> None:
    before = engine_counters(_exposition([3], [(0.5, 40)], plan_s=0.2))
    after = engine_counters(_exposition([3, 4, 6, 10], [(0.5, 40), (1.0, 60), (0.3, 9)], 0.6))
    run = per_run(before, after, writes=600)
    assert run == {
        "appends": 3,
        "appends_per_1000_writes": 5.0,
        "records_per_append": 6.67,
        "micro_batches": 2,
        "micro_batch_wall_ms": 650.0,
        "micro_batch_plan_ms": 200.0,
        "micro_batch_commit_ms": 0.0,
    }
    assert per_run(after, after, writes=0)["appends_per_1000_writes"] == 0.0
