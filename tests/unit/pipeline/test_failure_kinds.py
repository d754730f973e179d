"""``cqlcdc.pipeline.failures``: which pipeline failures are retried, and for how long."""

from __future__ import annotations

import errno

import pytest

from cqlcdc.datadir.containment import table_tag
from cqlcdc.errors import CorruptIngestFile, LeaseLost, ServerError, UnappliedWrite
from cqlcdc.pipeline.failures import (
    MAX_BACKOFF_S,
    FailureKind,
    attempts_allowed,
    backoff_s,
    classify,
)


def _raised_from(cause: BaseException, error: Exception) -> Exception:
    try:
        raise error from cause
    except Exception as err:
        return err


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        MemoryError(),
        # delta-rs reports the disk in its own error, which the engine tags with the table
        ServerError(
            f"{table_tag('t1')} cannot commit output log/t1: CommitFailedError: Failed to "
            "commit transaction: Generic LocalFileSystem error: No space left on device "
            "(os error 28)"
        ),
        # the JVM's, through Py4J: Spark's checkpoint on the full disk
        RuntimeError("StreamingQueryException: java.io.IOException: No space left on device"),
        _raised_from(OSError(errno.ENOSPC, "full"), ServerError("Micro-batch 3 failed")),
    ],
)
def test_the_machine_is_retried_for_as_long_as_it_lasts(error: BaseException) -> None:
    assert classify(error) is FailureKind.ENVIRONMENT
    assert attempts_allowed(FailureKind.ENVIRONMENT) is None


@pytest.mark.parametrize(
    "text",
    [
        "Python worker failed to connect back.",
        "Job aborted due to stage failure: ExecutorLostFailure (executor 1 exited)",
        "Py4JNetworkError: Error while sending or receiving",
        "java.io.IOException: Stream closed",
    ],
)
def test_spark_machinery_is_transient(text: str) -> None:
    assert classify(ServerError(f"Micro-batch 7 failed: {text}")) is FailureKind.TRANSIENT
    assert attempts_allowed(FailureKind.TRANSIENT) is None  # nothing to contain or skip


def test_what_the_core_blames_on_a_table_or_record_is_the_datas_once_repeated() -> None:
    tagged = UnappliedWrite(f"{table_tag('t1')} cannot apply ingest records seq=4..9 (...)")
    untagged = ServerError("Micro-batch 2 failed: ... cannot apply ingest record seq=12 (...)")
    for error in (tagged, untagged, CorruptIngestFile("ingest file x is damaged")):
        assert classify(error) is FailureKind.DATA
    assert attempts_allowed(FailureKind.DATA) == 2  # the first failure is retried once


def test_a_lost_lease_is_never_retried() -> None:
    error = _raised_from(LeaseLost("/d", "taken over"), ServerError("commit refused"))
    assert classify(error) is FailureKind.FATAL
    assert attempts_allowed(FailureKind.FATAL) == 1


def test_the_backoff_doubles_and_is_capped() -> None:
    waits = [backoff_s(n) for n in range(1, 12)]
    assert waits == sorted(waits) and waits[0] > 0
    assert waits[1] == 2 * waits[0]
    assert max(waits) == MAX_BACKOFF_S == 5.0
