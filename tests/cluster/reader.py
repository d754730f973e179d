"""One pyspark driver on the cluster for everything here that only reads (a driver's start
and its executors' are the cost): first the rig's probes (where tasks run, what they can
open), then ``spark.read.format("cqlcdc")`` of a data directory.

The driver waits for a line on its stdin between the two, so the test process can count the
tasks the workers finished for the probes alone before the reads add theirs.

>>> reader = ClusterReader.start(master, s3_dir, env, tmp)  # doctest: +SKIP
>>> reader.probe()["executors"], reader.read()["cks.t"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.rig import SparkCluster

TIMEOUT_S = 300.0
TABLES = ("cks.t", "cks.t_scylla_cdc_log", "cks.bulk")
PROBE_TASKS = 4  # two stages of two tasks

DRIVER = r"""
import json, os, sys, time
from pathlib import Path

from pyspark import BarrierTaskContext

from cqlcdc.pipeline.spark import executor_count, get_spark

master, driver_file, data_dir = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
tables = sys.argv[4:]
driver_file.write_text("written by the driver")
spark = get_spark(master)
deadline = time.monotonic() + 60
while executor_count(spark) < 2 and time.monotonic() < deadline:
    time.sleep(0.2)  # the barrier stage below needs both slots registered
sc = spark.sparkContext


def where():
    # the executor JVM is an ancestor of this Python worker: its command line names it
    pid, executor = os.getpid(), None
    while pid > 1 and executor is None:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"--executor-id" in args:
            executor = args[args.index(b"--executor-id") + 1].decode()
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return {"pid": os.getpid(), "executor": executor, "mnt": os.readlink("/proc/self/ns/mnt"),
            "host": os.uname().nodename}


def try_open(_):
    try:
        return [{"opened": Path(str(driver_file)).read_text(), **where()}]
    except FileNotFoundError as e:
        return [{"error": type(e).__name__, "message": str(e), **where()}]


def who(_):
    BarrierTaskContext.get().barrier()  # both tasks at once: one on each worker's slot
    return [where()]


out = {
    "driver": {"pid": os.getpid(), "mnt": os.readlink("/proc/self/ns/mnt"),
               "host": os.uname().nodename},
    "executors": executor_count(spark),
    "open": sc.parallelize(range(2), 2).mapPartitions(try_open).collect(),
    "who": sc.parallelize(range(2), 2).barrier().mapPartitions(who).collect(),
}
print("PROBE " + json.dumps(out), flush=True)
if sys.stdin.readline().strip() == "read":
    rows = {}
    for table in tables:
        df = spark.read.format("cqlcdc").option("path", data_dir).option("table", table).load()
        rows[table] = [r.asDict(recursive=True) for r in df.collect()]
    print("ROWS " + json.dumps(rows, default=str), flush=True)
spark.stop()
"""


@dataclass
class ClusterReader:
    """The driver process, its stdout lines as they come, and the workers' finished tasks
    counted around its steps."""

    proc: subprocess.Popen[str]
    cluster: SparkCluster
    driver_file: Path
    stderr_file: Path
    tasks_before: int
    lines: queue.Queue[str]
    probed: dict[str, Any] | None = None
    rows: dict[str, list[dict[str, Any]]] | None = None

    @classmethod
    def start(
        cls, cluster: SparkCluster, data_dir: str, env: dict[str, str], tmp: Path
    ) -> ClusterReader:
        """Start the driver (it probes at once); ``tmp`` is hidden from the workers."""
        driver_file = tmp / "driver-only.txt"
        stderr_file = tmp / "reader-stderr.log"
        before = sum(cluster.finished_tasks())
        with open(stderr_file, "w") as err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    DRIVER,
                    cluster.master_url,
                    str(driver_file),
                    data_dir,
                    *TABLES,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
                cwd=env["TMPDIR"],
            )
        lines: queue.Queue[str] = queue.Queue()

        def drain() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put("")  # EOF

        threading.Thread(target=drain, daemon=True).start()
        return cls(proc, cluster, driver_file, stderr_file, before, lines)

    def _line(self, prefix: str) -> Any:
        """The JSON after ``prefix`` on the driver's next line that has it."""
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT_S)
            except queue.Empty:
                self.close()
                raise AssertionError(f"no {prefix!r} line in {TIMEOUT_S:g} s") from None
            if not line:
                self.proc.wait(timeout=60)
                raise AssertionError(
                    f"the driver exited ({self.proc.returncode}) before {prefix!r}:\n"
                    + self.stderr_file.read_text(errors="replace")[-4000:]
                )
            if line.startswith(prefix + " "):
                return json.loads(line[len(prefix) + 1 :])

    def probe(self) -> dict[str, Any]:
        """The probes' results, with ``finished_on_workers`` (the tasks the workers finished
        for them, from their logs) and ``driver_file`` (what the tasks tried to open)."""
        if self.probed is None:
            probed: dict[str, Any] = self._line("PROBE")
            # an executor logs a finished task just after sending its result: the count is
            # polled until the 4 probe tasks' lines are there (or a while has passed)
            deadline = time.monotonic() + 30
            while True:
                finished = sum(self.cluster.finished_tasks()) - self.tasks_before
                if finished >= PROBE_TASKS or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            probed["finished_on_workers"] = finished
            probed["driver_file"] = str(self.driver_file)
            self.probed = probed
        return self.probed

    def read(self) -> dict[str, list[dict[str, Any]]]:
        """Every table of ``TABLES`` as the driver read it (rows as dicts; values in their
        JSON text forms). Asserts the reads ran as tasks on the workers and the driver
        exited 0."""
        if self.rows is None:
            self.probe()
            before = sum(self.cluster.finished_tasks())
            assert self.proc.stdin is not None
            self.proc.stdin.write("read\n")
            self.proc.stdin.close()
            rows: dict[str, list[dict[str, Any]]] = self._line("ROWS")
            code = self.proc.wait(timeout=TIMEOUT_S)
            assert code == 0, self.stderr_file.read_text(errors="replace")[-4000:]
            assert sum(self.cluster.finished_tasks()) > before  # the reads ran on the workers
            self.rows = rows
        return self.rows

    def close(self) -> None:
        """End the driver: told to skip the reads if they were not asked for, killed if it
        does not exit."""
        if self.proc.poll() is None and self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write("done\n")
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=60)
