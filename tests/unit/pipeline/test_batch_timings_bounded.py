"""The engine's batch timings stay bounded however many batches a long-running server runs,
and still answer what their readers ask: the last batch, the count, the batches after a
count (benchmarks/run.py and scaling.py, test_pipeline_engine)."""

from __future__ import annotations

import threading

from cqlcdc.pipeline.batch_timings import KEEP, BatchTimings


def _timing(batch_id: int) -> dict[str, float]:
    return {"batch_id": float(batch_id), "rows": 10.0, "plan_s": 0.001, "process_s": 0.002}


def test_a_long_run_keeps_at_most_keep_records_and_counts_them_all() -> None:
    timings = BatchTimings()
    for batch_id in range(KEEP * 5 + 3):
        timings.record(_timing(batch_id))
    kept = timings.since(0)
    assert len(kept) == KEEP
    assert timings.count == KEEP * 5 + 3
    assert [t["batch_id"] for t in kept] == [float(b) for b in range(KEEP * 4 + 3, KEEP * 5 + 3)]
    assert timings.last == _timing(KEEP * 5 + 2)


def test_the_batches_after_a_count_are_those_a_benchmark_waits_for() -> None:
    timings = BatchTimings(keep=4)
    assert timings.last is None and timings.count == 0 and timings.since(0) == []
    for batch_id in range(3):
        timings.record(_timing(batch_id))
    done = timings.count
    assert timings.since(done) == []
    for batch_id in range(3, 9):
        timings.record(_timing(batch_id))
    # batches 3..8 ran after `done`; only the last four are kept
    assert [t["batch_id"] for t in timings.since(done)] == [5.0, 6.0, 7.0, 8.0]
    assert [t["batch_id"] for t in timings.since(7)] == [7.0, 8.0]
    assert timings.since(100) == []


def test_a_reader_gets_copies_not_the_kept_records() -> None:
    timings = BatchTimings(keep=2)
    timings.record(_timing(1))
    last = timings.last
    assert last is not None
    last["rows"] = -1.0
    assert timings.since(0)[0]["rows"] == 10.0


def test_records_from_many_threads_are_all_counted_and_still_bounded() -> None:
    timings = BatchTimings(keep=16)

    def record_many() -> None:
        for batch_id in range(1000):
            timings.record(_timing(batch_id))

    threads = [threading.Thread(target=record_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert timings.count == 4000 and len(timings.since(0)) == 16
