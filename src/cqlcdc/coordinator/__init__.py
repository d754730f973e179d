"""The coordinator of one data directory: one per process, every session a facade over it.

``owner.Coordinator`` holds the engine, the lease, the catalog and the lock; its parts are
the write clocks (``clocks``), the group commit of ingest appends (``group_commit``) and
the writes no client sent: sweeps, ticks, initial scans, CDC generations (``background``).
The parts never import the owner (they name what they need of it as Protocols).

>>> from cqlcdc.coordinator import Coordinator  # doctest: +SKIP
"""

from cqlcdc.coordinator.background import InitialScan
from cqlcdc.coordinator.owner import DEFAULT_BUCKETS, WRITE_TIMEOUT_S, Coordinator, DdlOutcome

__all__ = ["DEFAULT_BUCKETS", "WRITE_TIMEOUT_S", "Coordinator", "DdlOutcome", "InitialScan"]
