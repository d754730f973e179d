"""``cqlcdc serve`` as a process of its own (the driver), and the cassandra-driver clients the
cluster tests use against it.

>>> with serving("spark://127.0.0.1:7077", "s3://cqlcdc-test/d1", env) as server:
...     cluster, session = server.connect()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

from tests.cluster.rig import free_port

START_TIMEOUT_S = 180.0


@dataclass
class Served:
    """A running ``cqlcdc serve``: its process, port and stderr lines so far."""

    proc: subprocess.Popen[str]
    port: int
    lines: list[str] = field(default_factory=list)
    listening: threading.Event = field(default_factory=threading.Event)

    def connect(self) -> tuple[Cluster, Any]:
        return connect(self.port)

    def stderr(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        """SIGTERM, as an operator stops it: every acknowledged write is applied first."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=180)

    def kill(self) -> None:
        """SIGKILL: no flush, no shutdown, no lease release."""
        self.proc.kill()
        self.proc.wait(timeout=60)


REQUEST_TIMEOUT_S = 120.0


def connect(port: int) -> tuple[Cluster, Any]:
    """A cassandra-driver cluster and session on a server at 127.0.0.1:``port``.

    Requests may take longer than the driver's default 10 s here: the machine's cores are
    shared with the cluster's JVMs, and a read waits for the pipeline to apply the writes
    before it (the first micro-batch starts the executors' Python workers)."""
    cluster = Cluster(["127.0.0.1"], port=port, load_balancing_policy=RoundRobinPolicy())
    session = cluster.connect()
    session.default_timeout = REQUEST_TIMEOUT_S
    return cluster, session


def start(master: str, data_dir: str, env: Mapping[str, str], extra: Sequence[str] = ()) -> Served:
    """Start ``cqlcdc serve`` and wait until it listens or exits (then ``proc`` has
    exited and ``lines`` say why)."""
    port = free_port()
    command = [sys.executable, "-m", "cqlcdc.cli", "serve", "--master", master]
    command += ["--data-dir", data_dir, "--port", str(port), *extra]
    proc = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(env),
        cwd=env.get("TMPDIR", os.getcwd()),
    )
    served = Served(proc, port)

    def drain() -> None:  # keeps the pipe from filling while the server runs
        assert proc.stderr is not None
        for line in proc.stderr:
            served.lines.append(line)
            if "serving" in line:
                served.listening.set()
        served.listening.set()  # EOF: it exited

    threading.Thread(target=drain, daemon=True).start()
    if not served.listening.wait(START_TIMEOUT_S):
        proc.kill()
        raise AssertionError(f"cqlcdc serve did not start: {served.stderr()}")
    if proc.poll() is None and not any("serving" in line for line in served.lines):
        proc.wait(timeout=30)
    return served


@contextlib.contextmanager
def serving(
    master: str, data_dir: str, env: Mapping[str, str], extra: Sequence[str] = ()
) -> Iterator[Served]:
    """A server until the block ends (stopped with SIGTERM, which must exit 0)."""
    with running(start(master, data_dir, env, extra)) as served:
        yield served


@contextlib.contextmanager
def running(served: Served) -> Iterator[Served]:
    """``serving`` for a server already started (``start``, e.g. in a thread while the
    caller did other work): it must be running; stopped with SIGTERM when the block ends,
    which must exit 0."""
    if served.proc.poll() is not None:
        raise AssertionError(f"cqlcdc serve exited {served.proc.returncode}: {served.stderr()}")
    try:
        yield served
    except BaseException:
        if served.proc.poll() is None:
            served.kill()
        raise
    code = served.stop()
    assert code == 0, served.stderr()[-4000:]
