"""ScyllaDB's CDC operation counters (its ``cdc/stats.hh``), under ScyllaDB's names.

ScyllaDB counts, at the coordinator that augments a write of a CDC table, one *operation*
per write (a batch is one): whether it was split into several changes (label ``split``),
the preimage selects it made, whether its tables had a preimage or postimage, and which
parts of a partition it touched (static row, clustering row, list, set, map, UDT, range
tombstone, partition delete, row delete). cqlcdc counts the same at the same point: where
the session turns a write of a CDC-enabled table into its mutations (``cqlcdc.writes``).

An operation is counted once its write's ingest append settles, as ScyllaDB counts once
the write's replica writes finish: in the ``total`` counters always, and in ScyllaDB's
``*_failed`` twins too when the append failed (the write was refused). The counters are
plain integers summed at scrape time, as ScyllaDB's are, so a write pays a few additions.
prometheus_client gives a counter the ``_total`` suffix; ScyllaDB's ``*_failed`` names
have none, so those are exposed untyped under ScyllaDB's exact names.

>>> stats = CdcOperationStats()
>>> stats.count(Operation(frozenset({"clustering_row"}), split=False, preimage=False,
...                       postimage=False, preimage_selects=0), failed=True)
>>> stats.total.unsplit, stats.failed.unsplit
(1, 1)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

# what a write did is the core's (``cqlcdc.cdc.operation_parts``); this module counts it
from cqlcdc.cdc.operation_parts import PARTS as PARTS
from cqlcdc.cdc.operation_parts import Operation as Operation


class Counters:
    """One kind of ScyllaDB's counters (``stats::counters``: ``total`` or ``failed``)."""

    def __init__(self) -> None:
        self.unsplit = 0
        self.split = 0
        self.preimage_selects = 0
        self.with_preimage = 0
        self.with_postimage = 0
        self.touches = dict.fromkeys(PARTS, 0)

    def add(self, op: Operation, times: int) -> None:
        if op.split:
            self.split += times
        else:
            self.unsplit += times
        self.preimage_selects += op.preimage_selects * times
        self.with_preimage += times if op.preimage else 0
        self.with_postimage += times if op.postimage else 0
        for part in op.parts:
            self.touches[part] += times

    def families(self, kind: str) -> Iterator[Metric]:
        """ScyllaDB's series of this kind: ``<name>_total`` counters, ``<name>_failed``
        untyped (its exact names)."""

        def family(name: str, doc: str, labels: list[str] | None = None) -> Metric:
            if kind == "total":
                return CounterMetricFamily(f"scylla_cdc_{name}", doc, labels=labels)
            return Metric(f"scylla_cdc_{name}_{kind}", doc, "unknown")

        def add(metric: Metric, value: int, labels: dict[str, str] | None = None) -> None:
            metric.add_sample(
                metric.name + ("_total" if kind == "total" else ""), labels or {}, value
            )

        operations = family("operations", f"number of {kind} CDC operations", ["split"])
        add(operations, self.unsplit, {"split": "false"})
        add(operations, self.split, {"split": "true"})
        yield operations
        for name, doc, value in (
            ("preimage_selects", f"number of {kind} preimage queries performed",
             self.preimage_selects),
            ("operations_with_preimage", f"number of {kind} operations that included preimage",
             self.with_preimage),
            ("operations_with_postimage",
             f"number of {kind} operations that included postimage", self.with_postimage),
        ):  # fmt: skip
            metric = family(name, doc)
            add(metric, value)
            yield metric
        for part in PARTS:
            metric = family(
                f"operations_on_{part}_performed",
                f"number of {kind} CDC operations that processed a {part}",
            )
            add(metric, self.touches[part])
            yield metric


class CdcOperationStats(Collector):
    """ScyllaDB's ``cdc::stats`` (``counters_total``, ``counters_failed``) as a collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = Counters()
        self.failed = Counters()

    def count(self, op: Operation, times: int = 1, failed: bool = False) -> None:
        """Count ``times`` operations like ``op`` (a bulk load counts many at once) whose
        write settled; ``failed``: its append failed."""
        with self._lock:
            self.total.add(op, times)
            if failed:
                self.failed.add(op, times)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self.total.families("total")
            yield from self.failed.families("failed")
