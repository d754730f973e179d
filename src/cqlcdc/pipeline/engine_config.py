"""How an engine runs: one frozen object instead of a dozen keyword arguments.

The defaults are what ``cqlcdc.connect`` and ``cqlcdc serve`` run with; a test or a
benchmark changes one field with ``dataclasses.replace``. The engine reads
``driver_max_rows`` at each batch and ``trigger_interval``, ``max_records_per_trigger`` at
each start of its query, so a config replaced on a running engine (``engine.config = ...``)
takes those at once; the others are taken at construction.

>>> EngineConfig(driver_max_rows=0).driver_max_rows  # every batch on the executors
0
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cqlcdc.datadir.compaction import CompactionPolicy


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The settings of one ``Engine``.

    Attributes:
        driver_max_rows: batches whose cost is at most this run the core in the driver;
            costlier ones run it in executor tasks, one per slice of the buckets. The cost is
            the processor's ``driver_cost(records)`` if it has one (the writes it applies
            one by one), else the number of records.
        trigger_interval: Spark processingTime trigger; "0 seconds" polls continuously.
        max_records_per_trigger: the most records one micro-batch takes. It bounds a batch's
            memory when a bulk load is far ahead of the engine: a batch's records are read
            whole (2M writes are ~200 MB of chunks).
        num_partitions: partitions of the executor path (None: Spark's default parallelism).
        app_id: the Delta app transaction id the batch ids are recorded under.
        purge_interval_s: how often expired rows (CDC log TTL) are deleted, at most.
        compaction: when to compact small files and vacuum (None: never; docs/pipeline.md).
        clock: seconds since the epoch, for maintenance (injectable for tests).
        scratch_dir: where the local scratch goes (None: a new temp directory, removed at
            stop).
        batch_interval_s: the least time between two batches' views of the log while no one
            waits for a write (None: 0 on a local disk, ``OBJECT_STORE_BATCH_INTERVAL_S``
            in an object store; ``CQLCDC_BATCH_INTERVAL_S`` overrides the default).
    """

    driver_max_rows: int = 20_000
    trigger_interval: str = "0 seconds"
    max_records_per_trigger: int = 2_000_000
    num_partitions: int | None = None
    app_id: str = "cqlcdc"
    purge_interval_s: float = 300.0
    compaction: CompactionPolicy | None = field(default_factory=CompactionPolicy)
    clock: Callable[[], float] = time.time
    scratch_dir: str | Path | None = None
    batch_interval_s: float | None = None
