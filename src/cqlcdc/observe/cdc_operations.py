"""ScyllaDB's CDC operation counters (its ``cdc/stats.hh``), under ScyllaDB's names.

ScyllaDB counts, at the coordinator that augments a write of a CDC table, one *operation*
per write (a batch is one): whether it was split into several changes (label ``split``),
the preimage selects it made, whether its tables had a preimage or postimage, and which
parts of a partition it touched (static row, clustering row, list, set, map, UDT, range
tombstone, partition delete, row delete). cqlcdc counts the same at the same point: where
the session turns a write of a CDC-enabled table into its mutations (``cqlcdc.writes``).

The counters are plain integers summed at scrape time, as ScyllaDB's are, so a write pays
a few additions. ScyllaDB's ``*_failed`` twins count operations whose replica writes
failed; cqlcdc does not export them (see docs/operations.md).

>>> stats = CdcOperationStats()
>>> stats.count(Operation(frozenset({"clustering_row"}), split=False, preimage=False,
...                       postimage=False, preimage_selects=0))
>>> stats.unsplit
1
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

# ScyllaDB's part names, in its order (``stats::part_type``)
PARTS = (
    "static_row",
    "clustering_row",
    "map",
    "set",
    "list",
    "udt",
    "range_tombstone",
    "partition_delete",
    "row_delete",
)


@dataclass(frozen=True, slots=True)
class Operation:
    """What one write of CDC tables did (ScyllaDB's ``operation_details``)."""

    parts: frozenset[str]  # members of PARTS
    split: bool
    preimage: bool
    postimage: bool
    preimage_selects: int  # one per partition of a table with a preimage or postimage


class CdcOperationStats(Collector):
    """ScyllaDB's ``cdc::stats`` counters (the ``total`` kind) as a collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.unsplit = 0
        self.split = 0
        self.preimage_selects = 0
        self.with_preimage = 0
        self.with_postimage = 0
        self.touches = dict.fromkeys(PARTS, 0)

    def count(self, op: Operation, times: int = 1) -> None:
        """Count ``times`` operations like ``op`` (a bulk load counts many at once)."""
        with self._lock:
            if op.split:
                self.split += times
            else:
                self.unsplit += times
            self.preimage_selects += op.preimage_selects * times
            self.with_preimage += times if op.preimage else 0
            self.with_postimage += times if op.postimage else 0
            for part in op.parts:
                self.touches[part] += times

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            operations = CounterMetricFamily(
                "scylla_cdc_operations", "number of total CDC operations", labels=["split"]
            )
            operations.add_metric(["false"], self.unsplit)
            operations.add_metric(["true"], self.split)
            yield operations
            yield CounterMetricFamily(
                "scylla_cdc_preimage_selects",
                "number of total preimage queries performed",
                value=self.preimage_selects,
            )
            yield CounterMetricFamily(
                "scylla_cdc_operations_with_preimage",
                "number of total operations that included preimage",
                value=self.with_preimage,
            )
            yield CounterMetricFamily(
                "scylla_cdc_operations_with_postimage",
                "number of total operations that included postimage",
                value=self.with_postimage,
            )
            for part in PARTS:
                yield CounterMetricFamily(
                    f"scylla_cdc_operations_on_{part}_performed",
                    f"number of total CDC operations that processed a {part}",
                    value=self.touches[part],
                )
