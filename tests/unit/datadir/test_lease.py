"""The lease of a data directory: on a local directory (flock + record) and on S3 (moto):
acquire, refuse naming the holder, renew, expiry and takeover, the old holder learning it
lost the lease, release; the conditional paths where moto answers deterministically."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import boto3
import pytest

from cqlcdc.datadir.lease import LEASE_FILE, Lease, lease_ttl_s, read_lease
from cqlcdc.errors import DataDirLocked, LeaseLost
from cqlcdc.location import Location


def _until(condition: Callable[[], bool], timeout_s: float) -> None:
    """Poll ``condition`` until it holds (a lease expires on the clock; nothing to wait on)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _s3_object(location: Location) -> tuple[str, str]:
    bucket, _, key = location.child(LEASE_FILE).fs_path.partition("/")
    return bucket, key


def _taken(lease: Lease) -> bool:
    try:
        lease.acquire()
    except DataDirLocked:
        return False
    return True


# --- a local directory -----------------------------------------------------------------------


def test_local_acquire_records_the_holder_and_release_removes_it(tmp_path: Path) -> None:
    lease = Lease(tmp_path)
    lease.acquire()
    record = read_lease(tmp_path)
    assert record is not None
    assert (record.pid, record.guard, record.expires_at) == (os.getpid(), "flock", None)
    assert lease.valid()
    lease.check()
    lease.release()
    assert read_lease(tmp_path) is None
    assert not lease.valid()
    with pytest.raises(LeaseLost, match="not held"):
        lease.check()
    Lease(tmp_path).acquire()  # free again


def test_local_second_holder_refused_in_one_line_naming_the_first(tmp_path: Path) -> None:
    first = Lease(tmp_path)
    first.acquire()
    try:
        with pytest.raises(DataDirLocked) as refused:
            Lease(tmp_path).acquire()
        message = refused.value.message
        assert "\n" not in message
        assert f"pid {os.getpid()}" in message
        assert "since " in message and "until it exits" in message
        assert refused.value.pid == os.getpid()
    finally:
        first.release()


def test_local_lock_frees_at_once_when_the_holder_is_killed(tmp_path: Path) -> None:
    """kill -9 leaves the record behind; the kernel lock goes with the process."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from cqlcdc.datadir.lease import Lease; l = Lease(sys.argv[1]); "
            "l.acquire(); print('held', flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(DataDirLocked, match=f"pid {holder.pid}"):
            Lease(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait(10)
    stale = read_lease(tmp_path)
    assert stale is not None and stale.pid == holder.pid
    with Lease(tmp_path) as lease:
        assert lease.valid()
        record = read_lease(tmp_path)
        assert record is not None and record.pid == os.getpid()


def test_ttl_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CQLCDC_LEASE_TTL", raising=False)
    assert lease_ttl_s() == 30.0
    monkeypatch.setenv("CQLCDC_LEASE_TTL", "3")
    assert lease_ttl_s() == 3.0
    assert lease_ttl_s(7) == 7.0
    with pytest.raises(ValueError, match="positive"):
        lease_ttl_s(0)


# --- S3 (moto) -------------------------------------------------------------------------------


def test_s3_acquire_refuse_and_release(s3_data_dir: Location) -> None:
    first = Lease(s3_data_dir, ttl_s=30)
    first.acquire()
    try:
        record = read_lease(s3_data_dir)
        assert record is not None
        assert (record.pid, record.guard, record.ttl_s) == (os.getpid(), "conditional-put", 30)
        assert first.valid()
        with pytest.raises(DataDirLocked) as refused:
            Lease(s3_data_dir, ttl_s=30).acquire()
        message = refused.value.message
        assert "\n" not in message
        assert s3_data_dir.uri in message
        assert f"pid {os.getpid()}" in message
        assert f"since {record.acquired_at}" in message
        assert f"expires at {record.expires_at}" in message
    finally:
        first.release()
    assert read_lease(s3_data_dir) is None
    with Lease(s3_data_dir, ttl_s=30) as second:
        assert second.valid()


def test_s3_renewal_writes_a_new_record_and_keeps_it_valid(s3_data_dir: Location) -> None:
    with Lease(s3_data_dir, ttl_s=30, renew=False) as lease:
        before = read_lease(s3_data_dir)
        lease.renew()
        after = read_lease(s3_data_dir)
        assert before is not None and after is not None
        assert (after.token, after.renewals) == (before.token, 1)
        assert after.expires_at is not None and before.expires_at is not None
        assert after.expires_at >= before.expires_at
        lease.renew()  # renews with the etag of its last renewal, not its first
        assert lease.valid()


def test_s3_background_renewal_outlives_the_ttl(s3_data_dir: Location) -> None:
    with Lease(s3_data_dir, ttl_s=1.5) as lease:
        _until(lambda: lease.record is not None and lease.record.renewals >= 4, 10)
        assert lease.valid()
        assert not _taken(Lease(s3_data_dir, ttl_s=1.5))


def test_s3_renewal_with_a_stale_etag_loses_the_lease(s3_data_dir: Location) -> None:
    """Someone else wrote the lease object: the If-Match renewal is refused (412)."""
    lost: list[str] = []
    lease = Lease(s3_data_dir, ttl_s=30, renew=False)
    lease.acquire()
    lease.on_lost(lost.append)
    bucket, key = _s3_object(s3_data_dir)
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=b"{}")
    with pytest.raises(LeaseLost, match="taken over or removed"):
        lease.renew()
    assert not lease.valid()
    assert len(lost) == 1 and "412" in lost[0]
    lease.release()  # conditional on our etag: leaves the other writer's object alone
    assert boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read() == b"{}"


def test_s3_renewal_of_a_deleted_lease_loses_it(s3_data_dir: Location) -> None:
    lease = Lease(s3_data_dir, ttl_s=30, renew=False)
    lease.acquire()
    bucket, key = _s3_object(s3_data_dir)
    boto3.client("s3").delete_object(Bucket=bucket, Key=key)
    with pytest.raises(LeaseLost):
        lease.renew()
    lease.release()


def test_s3_create_is_conditional(s3_data_dir: Location) -> None:
    """Absent when read, present when written: If-None-Match refuses the write, the lease
    is read again and the live holder named."""
    holder = Lease(s3_data_dir, ttl_s=30)
    racer = Lease(s3_data_dir, ttl_s=30)
    real_get = racer._get
    calls = []

    def absent_then_real() -> object:
        calls.append(1)
        if len(calls) == 1:
            holder.acquire()  # lands between the racer's read and its write
            return None
        return real_get()

    racer._get = absent_then_real  # type: ignore[method-assign]
    try:
        with pytest.raises(DataDirLocked, match=f"pid {os.getpid()}"):
            racer.acquire()
        assert len(calls) == 2
        assert holder.valid() and not racer.held
    finally:
        holder.release()


def test_s3_expiry_takeover_and_the_old_holder_learns_it_lost(s3_data_dir: Location) -> None:
    ttl_s = 1.0
    lost: list[str] = []
    old = Lease(s3_data_dir, ttl_s=ttl_s, renew=False)  # as if hung: it never renews
    old.acquire()
    old.on_lost(lost.append)
    new = Lease(s3_data_dir, ttl_s=30)
    assert not _taken(new)  # live: refused
    # the old holder gives up on its own clock, before the store's clock lets anyone in
    _until(lambda: not old.valid(), 5)
    assert lost and "not renewed within" in lost[0]
    _until(lambda: _taken(new), 10)
    try:
        record = read_lease(s3_data_dir)
        assert record is not None and new.record is not None
        assert record.token == new.record.token
        with pytest.raises(LeaseLost):
            old.renew()
        with pytest.raises(LeaseLost, match="lost the lease"):
            old.check()
        old.release()  # must not delete the new holder's lease
        assert read_lease(s3_data_dir) == record
        assert new.valid()
        assert not _taken(old)
    finally:
        new.release()
    old.acquire()  # a lost lease is taken afresh once it is free
    assert old.valid() and old.lost_reason is None
    old.release()


def test_s3_takeover_refused_by_a_renewal_between_read_and_write(s3_data_dir: Location) -> None:
    """The taker read an expired-looking lease; the holder renewed before the taker wrote:
    If-Match on the etag the taker read is refused, and the holder keeps its lease."""
    holder = Lease(s3_data_dir, ttl_s=30, renew=False)
    holder.acquire()
    taker = Lease(s3_data_dir, ttl_s=30)
    real_get = taker._get

    def renewed_after_read() -> object:
        found = real_get()
        assert found is not None
        record, etag, _ = found
        holder.renew()
        return record, etag, 10_000.0  # as if long expired

    taker._get = renewed_after_read  # type: ignore[method-assign]
    try:
        with pytest.raises(DataDirLocked):
            taker.acquire()
        assert holder.valid()
        holder.renew()
    finally:
        holder.release()


def test_s3_lease_lost_callback_fires_once_from_the_renewal_thread(
    s3_data_dir: Location,
) -> None:
    lost = threading.Event()
    reasons: list[str] = []
    lease = Lease(s3_data_dir, ttl_s=1.5)
    lease.acquire()
    lease.on_lost(lambda reason: (reasons.append(reason), lost.set()))
    bucket, key = _s3_object(s3_data_dir)
    boto3.client("s3").put_object(Bucket=bucket, Key=key, Body=json.dumps({}).encode())
    assert lost.wait(10)
    assert not lease.valid()
    lease.release()
    assert len(reasons) == 1


# --- two processes, each with its own local directories, on one s3:// data directory -------

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from cqlcdc.errors import DataDirLocked
    from cqlcdc.datadir.lease import Lease
    lease = Lease(sys.argv[1], ttl_s=float(sys.argv[2]))
    while True:
        try:
            lease.acquire()
            break
        except DataDirLocked as e:
            print("refused:", e.message, flush=True)
            if sys.argv[3] == "once":
                sys.exit(1)
            time.sleep(0.1)
    print("held", flush=True)
    sys.stdin.read()
    lease.release()
    print("released", flush=True)
    """
)


def _holder(tmp_path: Path, name: str, uri: str, ttl_s: float, mode: str) -> subprocess.Popen[str]:
    scratch = tmp_path / name
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "HOME": str(scratch)}
    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, uri, str(ttl_s), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=scratch,
    )


def test_two_processes_one_s3_data_dir(tmp_path: Path, s3_data_dir: Location) -> None:
    ttl_s = 3.0
    first = _holder(tmp_path, "first", s3_data_dir.uri, ttl_s, "once")
    second: subprocess.Popen[str] | None = None
    try:
        assert first.stdout is not None and first.stdout.readline() == "held\n"
        refused = _holder(tmp_path, "refused", s3_data_dir.uri, ttl_s, "once")
        out, _ = refused.communicate(timeout=60)
        assert refused.returncode == 1
        lines = out.splitlines()
        assert len(lines) == 1, out
        assert lines[0].startswith(f"refused: data directory {s3_data_dir.uri} is in use")
        assert f"pid {first.pid}" in lines[0] and "expires at" in lines[0]
        second = _holder(tmp_path, "second", s3_data_dir.uri, ttl_s, "retry")
        assert second.stdout is not None
        assert second.stdout.readline().startswith("refused:")  # while the first lives
        first.kill()
        first.wait(10)
        killed_at = time.monotonic()
        while (line := second.stdout.readline()) != "held\n":
            assert line.startswith("refused:"), line
        # not before the lease ran out: a killed holder's lease is honoured for its ttl
        assert time.monotonic() - killed_at >= ttl_s / 3 * 2 - 0.5
        record = read_lease(s3_data_dir)
        assert record is not None and record.pid == second.pid
        out, _ = second.communicate("", timeout=60)
        assert out == "released\n"
        assert read_lease(s3_data_dir) is None
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(10)


# --- a store that cannot be used --------------------------------------------------------------


def test_s3_missing_bucket_is_an_error_not_a_holder(moto_s3: str) -> None:
    with pytest.raises(OSError, match="NoSuchBucket"):
        Lease("s3://cqlcdc-no-such-bucket/d1", ttl_s=30).acquire()


def test_s3_unreachable_store_is_one_os_error() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    location = Location.of(
        "s3://bucket/d1",
        {
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
        },
    )
    with pytest.raises(OSError, match=re.escape("s3://bucket/d1/lease.json")):
        Lease(location, ttl_s=3).acquire()


def test_s3_renewals_that_cannot_reach_the_store_lose_the_lease_at_its_ttl(
    s3_data_dir: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    ttl_s = 1.5
    lost = threading.Event()
    reasons: list[str] = []
    lease = Lease(s3_data_dir, ttl_s=ttl_s)
    lease.acquire()
    acquired = time.monotonic()
    lease.on_lost(lambda reason: (reasons.append(reason), lost.set()))
    attempts: list[float] = []

    def unreachable(*args: object, **kwargs: object) -> str:
        attempts.append(time.monotonic())
        raise OSError("connection refused")

    monkeypatch.setattr(lease, "_put", unreachable)
    assert lost.wait(10)
    assert time.monotonic() - acquired >= ttl_s - 0.1  # valid until its ttl ran out
    assert reasons == [f"not renewed within its ttl of {ttl_s:g} s"]
    assert len(attempts) >= 2  # retried before giving up
    assert not lease.valid()
    monkeypatch.undo()
    lease.release()  # the record it could not renew is still ours: deleted
    assert read_lease(s3_data_dir) is None
