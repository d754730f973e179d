"""The pipeline's retries: a batch's failures retried in the batch, the query restarted.

A failure inside a micro-batch is retried in the batch (``retry_batch``), by its kind
(``cqlcdc.pipeline.failures``). What ends the query otherwise is Spark's machinery or the
machine (the ingest source's Python worker did not start or died, Spark's checkpoint could
not be written on a full disk): the ``Supervisor`` starts the query again from the
manifest, after a backoff that grows while the restarts fail (``failures.backoff_s``,
capped). Only a lost lease (``FailureKind.FATAL``) stops it for good.

>>> supervisor.first_start(); supervisor.watch()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from pyspark.sql.streaming.query import StreamingQuery

from cqlcdc.errors import ServerError
from cqlcdc.observe import events
from cqlcdc.pipeline.failures import (
    FIRST_START_ATTEMPTS,
    FailureKind,
    attempts_allowed,
    backoff_s,
    classify,
)


def retry_batch(
    run: Callable[[], None],
    batch_id: Callable[[], int],
    contain: Callable[[Exception, int], bool],
    note_retry: Callable[[BaseException], None],
    halt: threading.Event,
) -> None:
    """Run one micro-batch (``run``), retrying its failures from the last committed batch
    by their kind: one of the machine's (a full disk) for as long as it lasts, one of
    Spark's a few times, one the core blames on a table or record once. A failure that
    repeats on the same batch beyond that is the data's: ``contain`` stops the table it is
    attributed to and the batch runs again at once with its records held.

    Args:
        run: applies the batch (and any half-committed batch before it).
        batch_id: the batch being applied (it moves when ``run`` commits one).
        contain: stops the table a failure names; False when none can be blamed.
        note_retry: records the failure being retried.
        halt: set when the engine stops: a retry in progress gives up.

    Raises:
        Exception: the failure no retry and no containment got past (the pipeline
            stops at it), or the one met while stopping (the next start replays it).
    """
    attempts: dict[FailureKind, int] = {}
    failed_batch = -1
    while True:
        try:
            run()
            return
        except Exception as err:
            if halt.is_set():
                raise  # stopping: the next start replays the batch
            current = batch_id()
            if current != failed_batch:
                attempts, failed_batch = {}, current
            kind = classify(err)
            attempt = attempts[kind] = attempts.get(kind, 0) + 1
            allowed = attempts_allowed(kind)
            if allowed is None or attempt < allowed:
                delay = 0.0 if kind is FailureKind.DATA else backoff_s(attempt)
                events.pipeline_retried(current, kind.value, attempt, delay, err, restart=False)
                note_retry(err)
                if halt.wait(delay):
                    raise
                continue
            if kind is FailureKind.FATAL or not contain(err, current):
                raise
            attempts = {}


class Supervisor:
    """Starts one engine's streaming query and restarts it while it fails of what is not
    the data's.

    Args:
        start_query: starts a query from the manifest (called with ``query_lock`` held).
        current_query: the running query, if any.
        next_batch: the id of the batch the pipeline is at (the last committed + 1).
        fail: records a failure that stops the pipeline (writers are told it).
        has_failed: whether the pipeline stopped at a failure already (a batch's).
        note_retry: records the failure being retried (a waiter that times out is told).
        halt: set by the engine's stop: no retry, no restart.
        query_lock: held by a start or restart and by the engine's stop, so they never
            interleave.
    """

    def __init__(
        self,
        start_query: Callable[[], None],
        current_query: Callable[[], StreamingQuery | None],
        next_batch: Callable[[], int],
        fail: Callable[[BaseException], None],
        has_failed: Callable[[], bool],
        note_retry: Callable[[BaseException], None],
        halt: threading.Event,
        query_lock: threading.Lock,
    ) -> None:
        self._start_query = start_query
        self._current_query = current_query
        self._next_batch = next_batch
        self._fail = fail
        self._has_failed = has_failed
        self._note_retry = note_retry
        self.halt = halt
        self.query_lock = query_lock
        self._thread: threading.Thread | None = None

    def first_start(self) -> None:
        """Start the query, retrying what ``watch`` would retry of a restart: a failure
        of Spark's machinery or of the machine (the Python worker that plans the ingest
        source did not start, or Spark's pool still holds one that died), with the same
        backoff. A start is the caller's to wait for, so it gives up after
        ``FIRST_START_ATTEMPTS`` and raises the last failure: a Spark that cannot start the
        query at all is an error of ``connect()``, not writes that time out later."""
        attempt = 0
        while True:
            try:
                with self.query_lock:
                    self._start_query()
                return
            except Exception as err:
                attempt += 1
                kind = classify(err)
                retried = kind in (FailureKind.TRANSIENT, FailureKind.ENVIRONMENT)
                if not retried or attempt >= FIRST_START_ATTEMPTS:
                    raise
                delay = backoff_s(attempt)
                events.pipeline_retried(
                    self._next_batch(), kind.value, attempt, delay, err, restart=True
                )
                time.sleep(delay)

    def watch(self) -> None:
        """Watch the query from a thread of its own until ``halt`` is set."""
        self._thread = threading.Thread(
            target=self._supervise, name="cqlcdc-supervisor", daemon=True
        )
        self._thread.start()

    def join(self) -> None:
        """Wait for the watching thread to end (``halt`` set; not from that thread)."""
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _supervise(self) -> None:
        """Restart the streaming query when it dies of a failure that is not the data's.

        What ends the query is either the data's (``has_failed``: the pipeline stays
        stopped, as the writers are told) or outside any batch. Then the query is started
        again from the manifest, after the backoff: writers keep waiting meanwhile, none is
        refused."""
        attempt, at_batch = 0, -1
        pending: BaseException | None = None  # a restart that failed
        while not self.halt.is_set():
            if pending is None:
                query = self._current_query()
                if query is None:
                    return
                try:
                    if not query.awaitTermination(1):
                        continue
                    error: BaseException | None = query.exception()
                except Exception as err:  # awaitTermination raises the query's failure
                    error = err
            else:
                error, pending = pending, None
            if self.halt.is_set() or self._has_failed():
                return
            failure = error or ServerError("the streaming query stopped with no error")
            batch_id = self._next_batch()
            if batch_id != at_batch:
                attempt, at_batch = 0, batch_id
            attempt += 1
            kind = classify(failure)
            if kind is FailureKind.FATAL:
                events.pipeline_failed(batch_id, failure)
                self._fail(failure)
                return
            delay = backoff_s(attempt)
            events.pipeline_retried(batch_id, kind.value, attempt, delay, failure, restart=True)
            self._note_retry(failure)
            if self.halt.wait(delay):
                return
            if query is not None:
                with contextlib.suppress(Exception):  # its error is the one reported above
                    query.stop()  # ended already: this frees what it held
            try:
                with self.query_lock:
                    if self.halt.is_set():
                        return
                    self._start_query()
            except Exception as err:
                pending = err
