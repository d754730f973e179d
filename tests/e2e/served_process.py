"""``cqlcdc serve`` as a process of its own (its own JVM, Python workers and environment),
for the tests that act on its processes or its disk and for the benchmarks that measure it
(``benchmarks/serve_process.py``): one launcher for both. Its stderr is collected as it
comes (and copied to a log file), its metrics endpoint is scraped, and the Python workers
its JVM started can be listed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServedProcess:
    """``cqlcdc serve --data-dir DATA --master MASTER --metrics PORT`` (and ``--workers N``
    when given: without the flag it serves in one process) with ``env`` added to this
    process's environment, run from ``cwd`` (where Spark's scratch files, derby and
    warehouse, land; default: this process's); started at once, ready when it says it
    serves.

    Raises:
        RuntimeError: it exited, or did not say it serves within ``START_TIMEOUT_S``.
    """

    def __init__(
        self,
        data: Path,
        env: dict[str, str] | None = None,
        log_file: Path | None = None,
        *,
        master: str = "local[1]",
        workers: int | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.port, self.metrics_port = free_port(), free_port()
        self.metrics_url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        argv = [sys.executable, "-m", "cqlcdc.cli", "serve", "--data-dir", str(data)]
        argv += ["--port", str(self.port), "--master", master]
        argv += ["--metrics", f"127.0.0.1:{self.metrics_port}"]
        if workers is not None:
            argv += ["--workers", str(workers)]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        self.lines: list[str] = []
        # the same lines, for a failed test's reader
        self.log_file = log_file or data.parent / "server.log"
        self._served = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._served.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"cqlcdc serve did not start:\n{self.log()[-6000:]}")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        with open(self.log_file, "a") as copy:
            for line in self.proc.stderr:
                self.lines.append(line)
                copy.write(line)
                copy.flush()
                if "serving" in line:
                    self._served.set()

    def log(self) -> str:
        """The server's stderr so far (its cqlcdc log lines, Spark's warnings)."""
        return "".join(self.lines)

    def metrics_text(self) -> str:
        """The metrics endpoint's Prometheus exposition now."""
        with urllib.request.urlopen(self.metrics_url, timeout=30) as response:
            text: str = response.read().decode()
        return text

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(
            sample.value
            for family in text_string_to_metric_families(self.metrics_text())
            for sample in family.samples
            if sample.name == name and wanted <= set(sample.labels.items())
        )

    def python_workers(self) -> dict[int, str]:
        """The Python processes the server's JVM started (never the server itself)."""
        return python_workers_of(self.proc.pid)

    def stop(self) -> int:
        """SIGTERM, as an operator stops it; the exit status (0: every acknowledged write
        committed). Killed if it has not exited within ``STOP_TIMEOUT_S``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=10)
        return code

    def stop_cleanly(self) -> None:
        """``stop``, for a caller with no assertion of its own (a benchmark).

        Raises:
            RuntimeError: it exited with another status than 0 (its stderr's tail).
        """
        code = self.stop()
        if code != 0:
            raise RuntimeError(f"cqlcdc serve exited {code}:\n{self.log()[-4000:]}")


def python_workers_of(root: int) -> dict[int, str]:
    """The Python processes Spark started under process ``root`` (daemons, workers, the
    streaming source's runner), by pid, with their command lines: never ``root`` itself,
    nor the JVM (whose class path names pyspark)."""
    rows = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    children: dict[int, list[tuple[int, str]]] = {}
    for row in rows:
        pid_text, ppid_text, args = row.split(None, 2)
        children.setdefault(int(ppid_text), []).append((int(pid_text), args))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for pid, args in children.get(todo.pop(), []):
            todo.append(pid)
            if " -m pyspark." in args:
                found[pid] = args
    return found
