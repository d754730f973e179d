"""``cqlcdc serve`` as a process of its own (its own JVM, Python workers and environment),
for tests that act on its processes or its disk: its stderr is collected as it comes, its
metrics endpoint is scraped, and the Python workers its JVM started can be listed."""

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ServedProcess:
    """``cqlcdc serve --data-dir DATA --master local[1] --metrics PORT`` with ``env`` added
    to this process's environment; started at once, ready when it says it serves."""

    def __init__(
        self, data: Path, env: dict[str, str] | None = None, log_file: Path | None = None
    ) -> None:
        self.port, self.metrics_port = free_port(), free_port()
        cli = Path(sys.executable).with_name("cqlcdc")
        self.proc = subprocess.Popen(
            [
                str(cli),
                "serve",
                "--data-dir",
                str(data),
                "--port",
                str(self.port),
                "--master",
                "local[1]",
                "--metrics",
                str(self.metrics_port),
            ],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[str] = []
        # the same lines, for a failed test's reader
        self.log_file = log_file or data.parent / "server.log"
        self._served = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 180
        while not self._served.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"cqlcdc serve did not start:\n{self.log()}")

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

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels``."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode()
        wanted = set(labels.items())
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name and wanted <= set(sample.labels.items())
        )

    def python_workers(self) -> dict[int, str]:
        """The Python processes the server's JVM started (never the server itself)."""
        return python_workers_of(self.proc.pid)

    def stop(self) -> int:
        """SIGTERM; the exit status (0: every acknowledged write committed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._reader.join(timeout=10)
        return code


def python_workers_of(root: int) -> dict[int, str]:
    """The Python processes Spark started under process ``root`` (daemons, workers, the
    streaming source's runner), by pid, with their command lines: never ``root`` itself,
    nor the JVM (whose class path names pyspark)."""
    rows = subprocess.run(
        ["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    children: dict[int, list[tuple[int, str]]] = {}
    for row in rows:
        pid, ppid, args = row.split(None, 2)
        children.setdefault(int(ppid), []).append((int(pid), args))
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for pid, args in children.get(todo.pop(), []):
            todo.append(pid)
            if " -m pyspark." in args:
                found[pid] = args
    return found
