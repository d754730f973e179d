"""The coordinator of one data directory: one per process, every session a facade over it.

``owner.Coordinator`` holds the engine, the lease, the catalog and the lock; beside it are
its parts, each in a module named for what it holds.

>>> from cqlcdc.coordinator import Coordinator  # doctest: +SKIP
"""

from cqlcdc.coordinator.background import InitialScan
from cqlcdc.coordinator.owner import DEFAULT_BUCKETS, WRITE_TIMEOUT_S, Coordinator, DdlOutcome

__all__ = ["DEFAULT_BUCKETS", "WRITE_TIMEOUT_S", "Coordinator", "DdlOutcome", "InitialScan"]
