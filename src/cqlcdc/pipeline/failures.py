"""Which failures of the pipeline are retried, and which stop a table or the pipeline.

One place decides it, for failures inside a micro-batch (``Engine.process_batch``) and for
a streaming query that dies outside one (the Python worker of the ingest source, Spark's
checkpoint):

- ``ENVIRONMENT``: the machine, not the data: a full disk, a quota, memory, file handles.
  Retried for as long as it lasts, with a backoff capped at ``MAX_BACKOFF_S``: the
  pipeline comes back by itself once space is freed. Never a table stop, however often the
  same batch fails so (a disk still full is not the table's fault), even when the error
  arrives tagged with a table (delta-rs reports a full disk as its own error, not OSError).
- ``TRANSIENT``: anything else that names no table and no record: Spark's machinery (a
  Python worker that did not start or connect back, a lost executor, a JVM hiccup).
  Retried from the last committed batch, with the same capped backoff, for as long as it
  lasts: a failure that names no table and no record leaves nothing to contain or skip,
  and stopping the pipeline for it would only wait for a restart that does the same.
- ``DATA``: the core named the table (``[in table ...]``) or the record (``cannot apply
  ingest record seq=...``) it cannot apply, or an ingest file is damaged. Retried once
  (a failure must repeat on the same batch to be the data's); then the table stops alone
  (containment), or, when no table can be blamed, the pipeline stops at the record.
- ``FATAL``: this process no longer owns the data directory: nothing may be committed or
  retried.

A replay is harmless: the manifest's ``max_seq`` skips what is committed everywhere,
``batch.json`` replays a half-committed batch exactly, and an output's Delta app
transaction makes a second commit of the same batch a no-op.

>>> classify(OSError(28, "No space left on device"))
<FailureKind.ENVIRONMENT: 'environment'>
>>> classify(RuntimeError("Python worker failed to connect back."))
<FailureKind.TRANSIENT: 'transient'>
"""

from __future__ import annotations

import enum
import errno
import re

from cqlcdc.datadir.containment import failed_table
from cqlcdc.datadir.recovery import unapplied_failure
from cqlcdc.errors import CorruptIngestFile, DataDirLocked, LeaseLost, UnappliedWrite

# a data-attributed failure is the data's once it repeats on the same batch
DATA_ATTEMPTS = 2
# the backoff between retries: doubled from the first, never above the cap (a disk freed
# is noticed within it)
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 5.0
# the first start of the query (``connect()`` waits for it) gives up after so many tries of a
# retried failure: about 18 s of backoff, enough for Spark's pool to shed dead workers
FIRST_START_ATTEMPTS = 8

_ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.EROFS}
)
# the same conditions as text: from delta-rs (``... (os error 28)``), from the JVM
# (``java.io.IOException: No space left on device``, ``OutOfMemoryError``) through Py4J
_ENVIRONMENT_TEXT = re.compile(
    r"No space left on device|Disk quota exceeded|os error (?:28|122)|Too many open files"
    r"|Read-only file system|Cannot allocate memory|OutOfMemoryError|"
    r"Not enough space|insufficient disk space",
    re.IGNORECASE,
)


class FailureKind(enum.Enum):
    """What a failure is, hence what the engine does about it (module docstring)."""

    ENVIRONMENT = "environment"
    TRANSIENT = "transient"
    DATA = "data"
    FATAL = "fatal"


def classify(error: BaseException) -> FailureKind:
    """The kind of a pipeline failure, from its type, its causes and its text (a Spark
    executor's error arrives as text only)."""
    chain = list(_chain(error))
    if any(isinstance(e, LeaseLost | DataDirLocked) for e in chain):
        return FailureKind.FATAL
    text = "\n".join(str(e) for e in chain)
    if any(_is_environment(e) for e in chain) or _ENVIRONMENT_TEXT.search(text):
        return FailureKind.ENVIRONMENT
    if (
        any(isinstance(e, UnappliedWrite | CorruptIngestFile) for e in chain)
        or failed_table(text) is not None
        or unapplied_failure(text, 0) is not None
    ):
        return FailureKind.DATA
    return FailureKind.TRANSIENT


def attempts_allowed(kind: FailureKind) -> int | None:
    """How many times in a row one batch may fail so before the failure is the data's
    (None: retried for as long as it lasts; 1: never retried)."""
    if kind in (FailureKind.ENVIRONMENT, FailureKind.TRANSIENT):
        return None
    if kind is FailureKind.DATA:
        return DATA_ATTEMPTS
    return 1


def backoff_s(attempt: int) -> float:
    """The wait before retry number ``attempt`` (1, 2, ...): doubling, capped.

    >>> [backoff_s(n) for n in (1, 2, 3, 6, 9)]
    [0.25, 0.5, 1.0, 5.0, 5.0]
    """
    return min(FIRST_BACKOFF_S * float(2 ** max(attempt - 1, 0)), MAX_BACKOFF_S)


def _is_environment(error: BaseException) -> bool:
    if isinstance(error, MemoryError):
        return True
    return isinstance(error, OSError) and error.errno in _ENVIRONMENT_ERRNOS


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes (``raise ... from``, or raised while handling one)."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


__all__ = [
    "DATA_ATTEMPTS",
    "FIRST_START_ATTEMPTS",
    "MAX_BACKOFF_S",
    "FailureKind",
    "attempts_allowed",
    "backoff_s",
    "classify",
]
