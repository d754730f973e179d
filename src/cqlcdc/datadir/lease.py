"""Who owns a data directory: a lease object, ``<data_dir>/lease.json``.

One process owns a data directory at a time. In an object store the lease is the guard: it
is created with a conditional PUT (``If-None-Match: *``), renewed by the holder every
``ttl/3`` with ``If-Match: <etag>``, and taken over by another process only after it has
expired, again with ``If-Match`` on the etag that process read (docs/deploy.md argues why
this is safe from S3's documented semantics). On a local directory the kernel's ``flock``
stays the guard (it frees at once when its process dies, even by kill -9) and
``lease.json`` beside it only records who holds it, for the refusal line and for status.

>>> lease = Lease("s3://bucket/d1", ttl_s=30); lease.acquire()  # doctest: +SKIP
>>> lease.valid()  # doctest: +SKIP
True

The holder checks :meth:`Lease.valid` (or :meth:`Lease.check`) right before each commit; a
lease that could not be renewed in time, or was taken over, is lost for good, and the
callbacks given to :meth:`Lease.on_lost` are called once, from the renewal thread.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import IO, Any

from cqlcdc.errors import DataDirLocked, LeaseLost
from cqlcdc.location import Location, s3_client
from cqlcdc.observe import events

log = logging.getLogger(__name__)

LEASE_FILE = "lease.json"
# the kernel lock of a local data directory (its name from before the lease)
LOCK_FILE = ".engine.lock"
DEFAULT_LEASE_TTL_S = 30.0
LEASE_TTL_ENV = "CQLCDC_LEASE_TTL"
# HTTP dates (Date, Last-Modified) have whole seconds: a lease's age read from them may be
# short by up to this much, so a taker waits this much beyond the ttl
_HTTP_DATE_RESOLUTION_S = 1.0
# conditional writes that race (If-None-Match on a key being created) may answer 409
# ConditionalRequestConflict: read again and decide again, a few times
_ACQUIRE_ATTEMPTS = 5


def _elapsed_s() -> float:
    """The holder's clock for its own deadline: CLOCK_BOOTTIME where there is one, since
    CLOCK_MONOTONIC stops while the machine is suspended and a laptop waking up would
    believe in a lease that expired while it slept."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


def lease_ttl_s(ttl_s: float | None = None) -> float:
    """The lease ttl to use: ``ttl_s`` if given, else ``$CQLCDC_LEASE_TTL``, else 30 s.

    Raises:
        ValueError: a ttl that is not a positive number of seconds.
    """
    if ttl_s is None:
        text = os.environ.get(LEASE_TTL_ENV, "").strip()
        ttl_s = float(text) if text else DEFAULT_LEASE_TTL_S
    if not ttl_s > 0:
        raise ValueError(f"a lease ttl is a positive number of seconds, not {ttl_s}")
    return float(ttl_s)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """What ``lease.json`` holds: who holds the data directory, and until when.

    Times are the holder's wall clock, ISO 8601 UTC, for people and ``cqlcdc status``;
    expiry is decided on the store's clock (see :meth:`Lease.acquire`), never on these.

    Attributes:
        host: the holder's host name.
        pid: the holder's process id.
        token: random per acquisition: tells two holders with one host and pid apart.
        acquired_at: when the holder took the lease.
        renewed_at: the holder's last renewal (``acquired_at`` until the first).
        expires_at: ``renewed_at + ttl_s``; None on a local directory (the kernel lock
            is held while the process lives).
        ttl_s: the holder's ttl; None on a local directory.
        renewals: renewals so far (each write's body differs, so its etag does).
        guard: ``flock`` (a local directory) or ``conditional-put`` (an object store).
    """

    host: str
    pid: int
    token: str
    acquired_at: str
    renewed_at: str
    expires_at: str | None
    ttl_s: float | None
    renewals: int
    guard: str

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode("utf-8")

    @staticmethod
    def from_json(data: bytes) -> LeaseRecord:
        fields = json.loads(data)
        return LeaseRecord(**{name: fields.get(name) for name in LeaseRecord.__slots__})

    def describe(self) -> str:
        """``host h, pid p, since T, ...``: the holder as the refusal line names it."""
        until = (
            f"its lease expires at {self.expires_at} unless renewed"
            if self.expires_at is not None
            else "until it exits"
        )
        return f"host {self.host}, pid {self.pid}, since {self.acquired_at}; {until}"


def read_lease(data_dir: Location | str | os.PathLike[str]) -> LeaseRecord | None:
    """The lease record of a data directory (None: nobody holds it, or it is unreadable).
    A record may outlive its holder (kill -9): on a local directory the lock decides, in
    an object store its expiry."""
    location = Location.of(data_dir)
    text = location.child(LEASE_FILE).read_text()
    if not text:
        return None
    try:
        return LeaseRecord.from_json(text.encode("utf-8"))
    except (ValueError, TypeError):
        return None


class Lease:
    """The lease of one data directory, held by the process that runs its engine.

    Args:
        data_dir: the data directory (a local path or an ``s3://`` Location).
        ttl_s: how long a lease lives without renewal (None: ``$CQLCDC_LEASE_TTL``, else
            30 s). A holder killed with kill -9 keeps an object-store directory for this
            long (plus a second); a local one is free at once.
        renew: renew in a background thread every ``ttl_s / 3`` (tests turn it off to
            let a lease lapse).

    Example:
        >>> with Lease("/tmp/d"):  # doctest: +SKIP
        ...     run_the_engine()
    """

    def __init__(
        self,
        data_dir: Location | str | os.PathLike[str],
        ttl_s: float | None = None,
        *,
        renew: bool = True,
    ) -> None:
        self.location = Location.of(data_dir)
        self.ttl_s = lease_ttl_s(ttl_s)
        self.renew_in_background = renew
        self.record: LeaseRecord | None = None
        self._object = self.location.child(LEASE_FILE)
        self._file: IO[str] | None = None  # the flock, on a local directory
        self._etag: str | None = None  # our lease object's, in an object store
        self._valid_until = 0.0  # _elapsed_s() after which we may have lost it
        self._lost: str | None = None
        self._callbacks: list[Callable[[str], None]] = []
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the holder's API -----------------------------------------------------------------

    def acquire(self) -> None:
        """Take the lease (a no-op while this object holds it and it is valid; a lost one
        is released and taken afresh, if it can be).

        In an object store a lease is expired when the store's own clock says so: the
        ``Date`` of the response that read it minus the object's ``Last-Modified`` is more
        than the holder's ttl (plus a second for the dates' resolution). The holder gives
        up its lease ``ttl_s`` after it *sent* its last successful renewal, by its own
        clock, which is before the store stamped that renewal: so no two
        processes hold it at once, whatever the clocks of their machines say.

        Raises:
            DataDirLocked: another process holds a live lease (the one line names it).
        """
        if self.held:
            if self.valid():
                return
            self.release()
        self._stop.clear()
        self._lost = None
        if self.location.is_local:
            self._acquire_local()
            events.ownership_changed(self.location.uri, _holder(self.record), True)
            return
        self._acquire_object()
        events.ownership_changed(self.location.uri, _holder(self.record), True)
        if self.renew_in_background:
            self._thread = threading.Thread(
                target=self._renew_loop, name=f"cqlcdc-lease-{self.location.name}", daemon=True
            )
            self._thread.start()

    def release(self) -> None:
        """Give the lease up: delete the record (in an object store only if it is still
        ours: conditional on our etag) and free the lock."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._mutex:
            handle, self._file = self._file, None
            etag, self._etag = self._etag, None
            if handle is not None or etag is not None:
                events.ownership_changed(self.location.uri, _holder(self.record), False)
            self.record = None
            self._valid_until = 0.0
        if handle is not None:
            try:
                self._object.delete()
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                handle.close()
        elif etag is not None:
            self._delete_object(etag)

    @property
    def held(self) -> bool:
        """This object took the lease and has not released it (it may be lost since)."""
        return self._file is not None or self._etag is not None

    def valid(self) -> bool:
        """The lease is held and cannot have been taken over: commit only while this is
        True. False for good once the lease could not be renewed in time or was taken."""
        if self._file is not None:
            return True
        if self._etag is None or self._lost is not None:
            return False
        if _elapsed_s() >= self._valid_until:
            self._mark_lost(f"not renewed within its ttl of {self.ttl_s:g} s")
            return False
        return True

    def check(self) -> None:
        """Raise unless :meth:`valid`: the engine calls it right before it commits.

        Raises:
            LeaseLost: the lease is lost (or was never taken).
        """
        if not self.valid():
            raise LeaseLost(self.location.uri, self._lost or "the lease is not held")

    @property
    def lost_reason(self) -> str | None:
        """Why the lease was lost (None while it is valid, or before it was taken)."""
        return self._lost

    def on_lost(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` once when the lease is lost (at once if it is)."""
        with self._mutex:
            lost = self._lost
            if lost is None:
                self._callbacks.append(callback)
        if lost is not None:
            callback(lost)

    def renew(self) -> None:
        """Renew the lease now (the background thread does this every ``ttl_s / 3``).

        Raises:
            LeaseLost: the lease was taken over, deleted, or could not be renewed within
                its ttl; it is lost for good.
            OSError: the store could not be reached this time (the lease may still be
                valid: :meth:`valid` says until when).
        """
        if self._file is not None:
            return
        if not self.valid():
            self.check()
        etag, record = self._etag, self.record
        assert etag is not None and record is not None
        sent = _elapsed_s()
        now = _now_text()
        renewed = LeaseRecord(
            **{
                **asdict(record),
                "renewed_at": now,
                "expires_at": _time_text(time.time() + self.ttl_s),
                "renewals": record.renewals + 1,
            }
        )
        outcome = self._put(renewed, if_match=etag)
        if isinstance(outcome, _Refused):
            self._mark_lost(f"taken over or removed ({outcome.reason})")
            self.check()
        assert isinstance(outcome, str)
        with self._mutex:
            if self._etag is None:
                return  # released meanwhile
            self._etag = outcome  # the object is ours either way: release() deletes it
            self.record = renewed
            if self._lost is None and _elapsed_s() < sent + self.ttl_s:
                self._valid_until = sent + self.ttl_s
                return
        # it came back after the old lease's time was up: another process may have seen
        # it expire meanwhile and acted on that; stay lost rather than guess
        self._mark_lost(f"renewal answered only after its ttl of {self.ttl_s:g} s")
        self.check()

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # --- a local directory: the kernel lock ------------------------------------------------

    def _acquire_local(self) -> None:
        self.location.makedirs()
        handle = open(self.location.path / LOCK_FILE, "a+")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            holder = read_lease(self.location)
            raise DataDirLocked(
                self.location.uri,
                holder.pid if holder is not None else None,
                holder.describe() if holder is not None else None,
            ) from None
        try:
            record = self._new_record(guard="flock", ttl_s=None)
            self._object.write_atomically(record.to_json())
        except BaseException:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
            raise
        with self._mutex:
            self._file = handle
            self.record = record

    # --- an object store: conditional puts -------------------------------------------------

    def _acquire_object(self) -> None:
        for _ in range(_ACQUIRE_ATTEMPTS):
            current = self._get()
            if current is None:
                if self._take(if_none_match=True):
                    return
                continue
            holder, etag, age_s = current
            holder_ttl = holder.ttl_s if holder is not None and holder.ttl_s else self.ttl_s
            if age_s < holder_ttl + _HTTP_DATE_RESOLUTION_S:
                raise DataDirLocked(
                    self.location.uri,
                    holder.pid if holder is not None else None,
                    holder.describe() if holder is not None else "holder unreadable",
                )
            if self._take(if_match=etag):
                if holder is not None:
                    log.warning(
                        "took over the expired lease of %s from %s",
                        self.location.uri,
                        holder.describe(),
                    )
                return
        raise DataDirLocked(
            self.location.uri, None, "other processes keep changing its lease; try again"
        )

    def _take(self, *, if_none_match: bool = False, if_match: str | None = None) -> bool:
        """Write a new lease of ours if the object is still absent / still ``if_match``."""
        record = self._new_record(guard="conditional-put", ttl_s=self.ttl_s)
        sent = _elapsed_s()
        outcome = self._put(record, if_match=if_match, if_none_match=if_none_match)
        if isinstance(outcome, _Refused):
            return False
        with self._mutex:
            self._etag = outcome
            self.record = record
            self._valid_until = sent + self.ttl_s
        return True

    def _new_record(self, *, guard: str, ttl_s: float | None) -> LeaseRecord:
        now = time.time()
        return LeaseRecord(
            host=socket.gethostname(),
            pid=os.getpid(),
            token=secrets.token_hex(8),
            acquired_at=_time_text(now),
            renewed_at=_time_text(now),
            expires_at=_time_text(now + ttl_s) if ttl_s is not None else None,
            ttl_s=ttl_s,
            renewals=0,
            guard=guard,
        )

    def _bucket_key(self) -> tuple[str, str]:
        bucket, _, key = self._object.fs_path.partition("/")
        return bucket, key

    def _get(self) -> tuple[LeaseRecord | None, str, float] | None:
        """The lease object: its record (None if unreadable), etag, and age by the store's
        clock. None: there is none."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = self._bucket_key()
        try:
            response = self._client().get_object(Bucket=bucket, Key=key)
            body = response["Body"].read()
        except ClientError as e:
            if _code(e) == "NoSuchKey":
                return None
            raise _os_error(e, self._object.uri) from e
        except BotoCoreError as e:  # the store unreachable, a timeout
            raise _os_error(e, self._object.uri) from e
        try:
            record: LeaseRecord | None = LeaseRecord.from_json(body)
        except (ValueError, TypeError):
            record = None
        date = response["ResponseMetadata"].get("HTTPHeaders", {}).get("date")
        if date:
            server_now = parsedate_to_datetime(date)
            if server_now.tzinfo is None:  # "-0000": UTC with no zone said (RFC 5322)
                server_now = server_now.replace(tzinfo=UTC)
            age_s = (server_now - response["LastModified"]).total_seconds()
        else:  # a store that sends no Date: fall back on our clock (skew counts then)
            age_s = time.time() - response["LastModified"].timestamp()
        return record, str(response["ETag"]), age_s

    def _put(
        self, record: LeaseRecord, *, if_match: str | None = None, if_none_match: bool = False
    ) -> str | _Refused:
        """One conditional PUT of ``record``: its new etag, or why the store refused it."""
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = self._bucket_key()
        kwargs: dict[str, Any] = {}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        try:
            response = self._client().put_object(
                Bucket=bucket,
                Key=key,
                Body=record.to_json(),
                ContentType="application/json",
                **kwargs,
            )
        except ClientError as e:
            # 412: the condition did not hold; 409: a concurrent conditional write won;
            # 404 NoSuchKey: If-Match on an object that is gone (NoSuchBucket is no answer)
            if _status(e) in (409, 412) or _code(e) == "NoSuchKey":
                return _Refused(f"HTTP {_status(e)} {_code(e)}")
            raise _os_error(e, self._object.uri) from e
        except BotoCoreError as e:
            raise _os_error(e, self._object.uri) from e
        return str(response["ETag"])

    def _delete_object(self, etag: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket, key = self._bucket_key()
        try:
            self._client().delete_object(Bucket=bucket, Key=key, IfMatch=etag)
        except ClientError as e:
            if _status(e) in (409, 412) or _code(e) == "NoSuchKey":
                return  # not ours any more: whoever holds it now keeps it
            log.warning("could not delete the lease of %s: %s", self.location.uri, e)
        except BotoCoreError as e:  # it expires by itself
            log.warning("could not delete the lease of %s: %s", self.location.uri, e)

    def _client(self) -> Any:
        # one attempt per call, short enough that a renewal's answer comes in its ttl
        return s3_client(self.location.delta_options() or {}, min(5.0, self.ttl_s / 6))

    # --- renewal ---------------------------------------------------------------------------

    def _renew_loop(self) -> None:
        """Renew every ttl/3; on a failure to reach the store, try again sooner, until the
        lease runs out (then it is lost: the engine stops committing)."""
        interval = self.ttl_s / 3
        retry = max(0.05, min(1.0, self.ttl_s / 10))
        wait = interval
        while not self._stop.wait(wait):
            try:
                self.renew()
                wait = interval
            except LeaseLost:
                return
            except Exception as e:  # the store unreachable, for now: try again, until it runs out
                if not self.valid():
                    return
                log.warning("could not renew the lease of %s: %s", self.location.uri, e)
                wait = min(retry, max(0.0, self._valid_until - _elapsed_s()))

    def _mark_lost(self, reason: str) -> None:
        with self._mutex:
            if self._lost is not None or self._etag is None:
                return
            self._lost = reason
            callbacks, self._callbacks = self._callbacks, []
        log.error("lost the lease of data directory %s: %s", self.location.uri, reason)
        for callback in callbacks:
            callback(reason)


@dataclass(frozen=True, slots=True)
class _Refused:
    """A conditional write the store refused (the lease is someone else's)."""

    reason: str


def _holder(record: LeaseRecord | None) -> str:
    return f"lease: {record.describe()}" if record is not None else "lease"


def _status(error: Any) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _code(error: Any) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _os_error(error: Any, uri: str) -> OSError:
    return OSError(f"{uri}: {error}")


def _time_text(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _now_text() -> str:
    return _time_text(time.time())


__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "LEASE_FILE",
    "LEASE_TTL_ENV",
    "Lease",
    "LeaseRecord",
    "lease_ttl_s",
    "read_lease",
]
