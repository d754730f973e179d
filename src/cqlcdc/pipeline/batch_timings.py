"""The timings of an engine's recent micro-batches, bounded for a server that runs for weeks.

A batch's record (``batch_id``, ``rows``, seconds per phase) goes to the metrics as it
finishes (``observe.events.batch_finished``); what stays here is for benchmarks and tests
that ask how a batch went: the last ``KEEP`` records and how many batches ran, so memory
stays flat however long the engine runs.

>>> timings = BatchTimings(keep=2)
>>> for batch_id in range(5):
...     timings.record({"batch_id": float(batch_id)})
>>> timings.count, [t["batch_id"] for t in timings.since(2)]
(5, [3.0, 4.0])
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping

# records kept: a benchmark reads the batches of its last step, never thousands back
KEEP = 1024


class BatchTimings:
    """The last ``keep`` batch records of one engine, and the count of all of them.

    Written by the batch thread, read by any (a benchmark polling for its batch).
    """

    def __init__(self, keep: int = KEEP) -> None:
        self._recent: deque[dict[str, float]] = deque(maxlen=keep)
        self._count = 0
        self._lock = threading.Lock()

    def record(self, timing: Mapping[str, float]) -> None:
        """Keep the record of the batch that just finished (the oldest kept one goes)."""
        with self._lock:
            self._recent.append(dict(timing))
            self._count += 1

    @property
    def count(self) -> int:
        """How many batches finished since the engine was made (kept or not)."""
        with self._lock:
            return self._count

    @property
    def last(self) -> dict[str, float] | None:
        """The record of the last batch that finished, or None before the first."""
        with self._lock:
            return dict(self._recent[-1]) if self._recent else None

    def since(self, count: int) -> list[dict[str, float]]:
        """The records of the batches that finished after the first ``count`` ones, oldest
        first, as far as they are still kept (the last ``keep``)."""
        with self._lock:
            first_kept = self._count - len(self._recent)
            start = max(count - first_kept, 0)
            return [dict(t) for t in list(self._recent)[start:]]
