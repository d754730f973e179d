"""How often the streaming source is shown new writes: the tip file, paced.

The ingest source learns the log's end from a tip file in the engine's scratch
(``ingest_source.write_tip``). On a local disk the tip follows every append, except while a
micro-batch runs: Spark reads the tip only when it plans the next one, so the batch's end
writes it once (``hold``/``release``) instead of every append meanwhile (a file written and
renamed each time, ~5% of a write's CPU at 64 in flight). In an object store a micro-batch
costs requests whatever it holds, so the tip moves at most once per batch interval, unless
someone waits for a write (a read after a write, backpressure): then at once. A timer
thread moves a tip held back once its interval has passed.

>>> pacer = TipPacer(scratch / "tip", interval_s=2.0)  # doctest: +SKIP
>>> pacer.show(log_end); pacer.want(seq)  # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from cqlcdc.location import Location
from cqlcdc.pipeline import ingest_source

# On an object store a micro-batch costs requests whatever it holds (a data file per output,
# a Delta commit per output, the manifest, batch.json: each a PUT at tens of milliseconds),
# so the source is shown new writes at most this often, unless someone waits for them (a
# read after a write, backpressure): then at once. A local disk's batches cost no requests
# and go as soon as the last one ends (0). ``CQLCDC_BATCH_INTERVAL_S`` overrides it.
OBJECT_STORE_BATCH_INTERVAL_S = 2.0


def batch_interval_s(data_dir: Location, configured: float | None) -> float:
    """The least time between two batches' views of the log while no one waits:
    `configured` if given, else ``$CQLCDC_BATCH_INTERVAL_S``, else 0 on a local disk and
    ``OBJECT_STORE_BATCH_INTERVAL_S`` in an object store."""
    if configured is not None:
        return configured
    default = 0.0 if data_dir.is_local else OBJECT_STORE_BATCH_INTERVAL_S
    return float(os.environ.get("CQLCDC_BATCH_INTERVAL_S", default))


class TipPacer:
    """The tip file of one engine, and the timer that moves it on the interval.

    Args:
        tip: the tip file (in the engine's scratch directory).
        interval_s: the least time between two moves of the tip while no one waits (0:
            the tip follows every append).
    """

    def __init__(self, tip: Path, interval_s: float) -> None:
        self.tip = tip
        self.interval_s = interval_s
        # the tip as written (what the source may take), the log's end as appended, and the
        # highest seq someone waits for; a timer thread moves the tip on the interval
        self._cond = threading.Condition()
        self._tip_seq = -1
        self._tip_time = 0.0
        self._log_end = 0
        self._wanted = 0
        self._timer: threading.Thread | None = None
        self._stopping = False
        self._holding = False  # a micro-batch runs: its end writes the tip (local disk)

    def reset(self, log_end: int) -> None:
        """Forget the tip as written (a query starts: its scratch may be new) and take the
        log's end to be ``log_end`` (the manifest's seq) until appends report more."""
        with self._cond:
            self._tip_seq, self._log_end, self._wanted = -1, log_end, 0

    def show(self, log_end: int, now: bool = False) -> None:
        """Let the source see the log up to ``log_end``: at once on a local disk, when asked
        (``now``), or when someone waits for a seq the tip does not reach; else when the
        batch interval has passed since the tip last moved (the timer thread)."""
        with self._cond:
            self._log_end = max(self._log_end, log_end)
            if now or self._wanted > self._tip_seq:
                self._write_tip()
                return
            if self.interval_s <= 0:
                if not self._holding:
                    self._write_tip()
                return
            if self._timer is None:
                self._stopping = False
                self._timer = threading.Thread(
                    target=self._move_tip, name="cqlcdc-tip", daemon=True
                )
                self._timer.start()
            self._cond.notify_all()

    def hold(self) -> None:
        """A micro-batch starts: on a local disk, appends leave the tip to ``release``."""
        with self._cond:
            self._holding = True

    def release(self) -> None:
        """The micro-batch ends (Spark plans the next one from the tip): the tip follows
        the appends made meanwhile."""
        with self._cond:
            self._holding = False
            if self.interval_s <= 0:
                self._write_tip()

    def want(self, seq: int) -> None:
        """Someone waits for ``seq``: the source sees the log now, not on the interval (and
        sees it again each time this is called while the tip stays short of ``seq``: its
        disk may have refused the last write)."""
        with self._cond:
            if seq > self._tip_seq:
                self._wanted = max(self._wanted, seq)
                self._write_tip()

    def _write_tip(self) -> None:
        """Write the log's end to the tip file (with ``_cond`` held).

        The tip is scratch, written after an append made its records durable: a failure
        to write it (the scratch disk full) must not fail the append, whose writers would be
        told their write failed although it is in the log. The tip stays behind, and is
        written again by the next append or by a writer waiting (``want``)."""
        if self._log_end > self._tip_seq or not self.tip.exists():
            try:
                self.tip.parent.mkdir(parents=True, exist_ok=True)
                ingest_source.write_tip(self.tip, self._log_end)
            except OSError:
                return
            self._tip_seq = self._log_end
            self._tip_time = time.monotonic()

    def _move_tip(self) -> None:
        """The timer: the tip follows the log at most once per batch interval."""
        with self._cond:
            while not self._stopping:
                if self._log_end <= self._tip_seq:
                    self._cond.wait()
                    continue
                left = self._tip_time + self.interval_s - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._write_tip()

    def stop(self) -> None:
        """End the timer thread (a later ``show`` starts another)."""
        with self._cond:
            timer, self._timer = self._timer, None
            self._stopping = True
            self._cond.notify_all()
        if timer is not None:
            timer.join()
