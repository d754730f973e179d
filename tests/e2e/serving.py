"""A CQL server over a session's data directory, for the e2e tests' fixtures."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from cqlcdc.server import CqlServer
from cqlcdc.session import Session

# the suites that must hold whatever process decodes a frame run against both: the server
# alone, and two protocol workers in front of it (``cqlcdc serve --workers 2``)
WORKERS = (1, 2)


def until(check: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Poll ``check`` (what a server or a client's metadata comes to) until it holds or the
    time is up; its last answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def workers_id(count: int) -> str:
    return f"{count}-worker" if count == 1 else f"{count}-workers"


@contextmanager
def serving(session: Session, **options: Any) -> Iterator[CqlServer]:
    """``CqlServer`` on a free loopback port over ``session``'s coordinator, in a thread;
    on exit the server stops and the session closes (options: ``CqlServer``'s, e.g.
    ``auth=True``, ``protocol_workers=2``)."""
    server = CqlServer(session.coordinator, port=0, **options)
    server.start_in_thread()
    try:
        yield server
    finally:
        server.stop_thread()
        session.close()
