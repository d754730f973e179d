"""The notable events of the engine and the store: each call counts it and logs one line.

The engine, the coordinator and the feed reader call these in one line each, so their code
stays about their work. A log line names what happened and where (table, seq, error), for
a person and a log shipper alike (``cqlcdc.observe.logs``).

>>> batch_finished({"batch_id": 3.0, "rows": 10.0, "plan_s": 0.1, "process_s": 0.2,
...                 "commit_s": 0.1, "maintain_s": 0.0})
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from cqlcdc.observe import instruments
from cqlcdc.observe.cdc_operations import Operation

log = logging.getLogger("cqlcdc")  # the one logger the server shows (cqlcdc.observe.logs)

# a micro-batch this slow is worth a line: writers wait on it (backpressure, reads)
SLOW_BATCH_S = 10.0
_PHASES = ("plan", "process", "commit", "maintain")


def group_committed(records: int) -> None:
    """One ingest append made ``records`` records durable (group commit)."""
    if instruments.enabled:
        instruments.GROUP_COMMIT.observe(records)


def batch_finished(timing: Mapping[str, float]) -> None:
    """A micro-batch committed; ``timing`` is the engine's record of it (``batch_id``,
    ``rows`` and seconds per phase: ``plan_s``, ``process_s``, ``commit_s``,
    ``maintain_s``). A slow one is logged."""
    total_s = sum(float(timing.get(f"{phase}_s", 0.0)) for phase in _PHASES)
    if instruments.enabled:
        for phase in _PHASES:
            instruments.BATCH_PHASE.labels(phase=phase).inc(float(timing.get(f"{phase}_s", 0.0)))
        instruments.BATCH_DURATION.observe(total_s)
        instruments.BATCH_ROWS.observe(float(timing.get("rows", 0.0)))
    if total_s >= SLOW_BATCH_S:
        phases = ", ".join(f"{p} {float(timing.get(f'{p}_s', 0.0)):.1f} s" for p in _PHASES)
        log.warning(
            "slow micro-batch %d: %.1f s for %d records (%s)",
            int(timing.get("batch_id", -1)),
            total_s,
            int(timing.get("rows", 0)),
            phases,
        )


def compacted(output: str, commits: int) -> None:
    """Compaction rewrote ``commits`` buckets of ``output`` (``base/<table id>``...)."""
    kind = output.split("/", 1)[0]
    instruments.COMPACTIONS.labels(output=kind).inc(commits)
    log.info("compacted %d bucket(s) of %s", commits, output)


def table_stopped(line: str) -> None:
    """A failure attributed to one table stopped it alone (``line`` says which, at which
    seq, why, and the ``cqlcdc recover`` command)."""
    instruments.PIPELINE_FAILURES.labels(scope="table").inc()
    log.error("%s", line)


def pipeline_failed(batch_id: int, error: BaseException) -> None:
    """A micro-batch failed and no table could be blamed: the pipeline stopped. Logged at
    once (the writers waiting learn it from their own errors)."""
    instruments.PIPELINE_FAILURES.labels(scope="pipeline").inc()
    text = " ".join(str(error).split()) or type(error).__name__
    log.error("pipeline stopped at micro-batch %d: %s: %s", batch_id, type(error).__name__, text)


def pipeline_retried(
    batch_id: int, cause: str, attempt: int, delay_s: float, error: BaseException, restart: bool
) -> None:
    """A failure (``cause``: environment, transient, data) ended micro-batch ``batch_id``,
    or the streaming query itself (``restart``); it runs again from the last committed
    batch in ``delay_s``. One line per retry."""
    instruments.PIPELINE_RETRIES.labels(cause=cause).inc()
    text = " ".join(str(error).split()) or type(error).__name__
    if len(text) > 300:
        text = f"{text[:300]}..."
    what = "streaming query stopped at" if restart else "failed:"
    again = "restarting it" if restart else "retrying it"
    log.warning(
        "micro-batch %d %s %s failure (attempt %d), %s in %.1f s: %s: %s",
        batch_id,
        what,
        cause,
        attempt,
        again,
        delay_s,
        type(error).__name__,
        text,
    )


def retention_gap(feed: str, partition: int, from_offset: int, earliest: int) -> None:
    """A read of ``feed`` asked for offsets retention removed (it gets a gap notice, or
    an OffsetOutOfRange error)."""
    instruments.RETENTION_GAPS.labels(feed=feed).inc()
    log.warning(
        "changefeed %s partition %d: a read from offset %d met a retention gap (offsets up to "
        "%d are no longer retained)",
        feed,
        partition,
        from_offset,
        earliest - 1,
    )


def ownership_changed(data_dir: str, holder: str, taken: bool) -> None:
    """This process took (or let go of) the data directory's lock or lease."""
    if taken:
        log.info("took ownership of %s (%s)", data_dir, holder)
    else:
        log.info("released ownership of %s (%s)", data_dir, holder)


def cdc_operation(op: Operation, times: int, failed: bool) -> None:
    """``times`` writes of CDC tables like ``op`` settled: their append succeeded, or
    ``failed`` (ScyllaDB's ``operation_result_tracker``)."""
    if instruments.enabled:
        instruments.CDC_OPERATIONS.count(op, times, failed)
