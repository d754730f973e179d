"""A real cluster on 127.0.0.1: an S3 server (moto's server mode, its own process) and a Spark
standalone master with two workers started by pyspark's own launcher (``bin/spark-class``).

Each worker runs in its own mount namespace (``unshare -m``, the tests run as root) with a
tmpfs mounted over the driver's temporary directories, so a task that opens a path the driver
wrote fails with FileNotFoundError, as on a worker on another machine. What the workers run
from (the checkout, its venv, pyspark) stays visible even inside such a directory (a clone
under ``/tmp``): it is bound back over the tmpfs (``Mask``). Everything listens on loopback
only; every process is stopped (its whole process group) when the block ends.

>>> with moto_server(log_dir) as s3, spark_cluster(log_dir, [tmp], s3.env) as cluster:
...     cluster.master_url  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

import cqlcdc

SPARK_HOME = Path(pyspark.__file__).resolve().parent
# the directory that holds the cqlcdc package this test run imports (the worktree's src)
CQLCDC_SRC = Path(cqlcdc.__file__).resolve().parents[1]
ROOT = Path(__file__).resolve().parents[2]
# what the workers run from: the checkout (cqlcdc's source and these tests), the venv and
# pyspark (spark-class, the executors' Python), and the interpreter the venv is made from
RUNS_FROM = (ROOT, CQLCDC_SRC, SPARK_HOME, Path(sys.prefix), Path(sys.base_prefix))
BUCKET = "cqlcdc-test"
WORKER_MEMORY = "1g"  # exactly what cqlcdc asks for an executor (pipeline.spark)
DAEMON_MEMORY = "192m"  # the master's and workers' own JVMs (Spark's default is 1g)
# the daemons and spark-class's launcher JVM start faster with the client compiler only and
# the serial collector (they do little work); the master's REST server (a fixed port,
# 6066) is not needed
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
WORKER_TMPFS_SIZE = "1g"  # a bound on what a worker's executor can write as scratch
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """moto's S3 API on ``endpoint``; ``env`` is what a process needs to use it."""

    endpoint: str
    env: dict[str, str]


def is_within(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or below it."""
    return path == root or root in path.parents


@dataclass(frozen=True)
class Mask:
    """What a worker's namespace mounts, in this order: a tmpfs over each of ``covered``; each
    of ``kept`` (a directory the worker runs from, inside a covered one) bound back in its
    place from a descriptor opened before; a tmpfs over each of ``covered_inside`` (hidden
    directories inside a kept one)."""

    covered: list[Path]
    kept: list[Path]
    covered_inside: list[Path]


def mask(hide: Sequence[Path], keep: Sequence[Path]) -> Mask:
    """The mounts that hide every directory of ``hide`` from a worker and none of ``keep``.

    Raises:
        ValueError: a directory to keep is one to hide, or inside a hidden one inside a
            kept one (no order of mounts shows it).
    """
    hidden = sorted({h.resolve() for h in hide})
    keep = [k.resolve() for k in keep]
    for h in hidden:
        if h in keep:
            raise ValueError(f"cannot hide {h} from the workers: they run from it")
    kept = outermost([k for k in keep if any(k != h and is_within(k, h) for h in hidden)])
    inside = [h for h in hidden if any(is_within(h, k) for k in kept)]
    plan = Mask(outermost([h for h in hidden if h not in inside]), kept, outermost(inside))
    for k in keep:
        if any(is_within(k, h) for h in plan.covered_inside):
            raise ValueError(f"cannot keep {k} visible to the workers: a hidden directory holds it")
    return plan


@dataclass
class SparkCluster:
    """A standalone master (``master_url``) and its workers."""

    master_url: str
    ui_url: str
    mask: Mask
    worker_logs: list[Path] = field(default_factory=list)
    # each worker's process and work directory (inside its own namespace's tmpfs)
    workers: list[tuple[subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def finished_tasks(self) -> list[int]:
        """Tasks each worker's executors have finished so far, from their logs.

        The executors' logs are in the worker's work directory, which only its namespace
        sees: they are read through ``/proc/PID/root``, the worker's own view of the files.
        """
        counts = []
        for proc, work_dir in self.workers:
            root = Path(f"/proc/{proc.pid}/root") / work_dir.relative_to("/")
            counts.append(
                sum(
                    log.read_text(errors="replace").count("Executor: Finished task")
                    for log in root.glob("app-*/*/stderr")
                )
            )
        return counts

    def alive_workers(self) -> list[dict[str, object]]:
        """The master's view of its workers (its web UI's JSON)."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as answer:
            state = json.load(answer)
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM the process group (a worker's executors and Python workers are in it), then
    SIGKILL what is left after ``grace_s``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group, if any
    proc.wait(timeout=grace_s)


def _wait(what: str, ready: object, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``ready()`` until it is true; fail with the process's log if it exits or the
    deadline passes."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():  # type: ignore[operator]
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{what} not ready in {START_TIMEOUT_S:g} s:\n{log.read_text()[-4000:]}"
            )
        time.sleep(0.2)


@contextlib.contextmanager
def moto_server(log_dir: Path) -> Iterator[S3Server]:
    """moto's S3 API server (``s3_process.py``) on a free loopback port, with bucket
    ``cqlcdc-test``; stopped by closing its stdin."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = log_dir / "moto.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("s3_process.py")), str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
    try:

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=2):
                    return True
            except (urllib.error.URLError, OSError):
                return False

        _wait("the moto S3 server", answers, proc, log)
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
        }
        import boto3

        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)
        yield S3Server(endpoint, env)
        if proc.poll() is not None:  # every request since failed: say why, once
            raise RuntimeError(
                f"the moto S3 server exited during the tests ({proc.returncode}):\n"
                + log.read_text()[-2000:]
            )
    finally:
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()  # its signal to stop
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def outermost(paths: Sequence[Path]) -> list[Path]:
    """The paths (resolved, outermost first) that are not inside another one of them (a
    tmpfs over the outer one hides the inner ones already)."""
    resolved = sorted({p.resolve() for p in paths}, key=lambda p: (len(p.parts), p))
    kept: list[Path] = []
    for p in resolved:
        if not any(is_within(p, k) for k in kept):
            kept.append(p)
    return kept


def mask_script(plan: Mask) -> str:
    """The shell commands that make ``plan``'s mounts in a new mount namespace.

    A kept directory is opened (a descriptor, 3 and up) before the tmpfs covers it, then
    bound from ``/proc/self/fd/N`` onto the same path in the tmpfs; ``-c`` (no
    canonicalization) keeps mount from turning that link back into the now covered path.
    """
    if len(plan.kept) > 7:  # sh redirects descriptors 0-9 only
        raise ValueError(f"too many directories to keep visible: {plan.kept}")

    def tmpfs(d: Path) -> str:
        quoted = shlex.quote(str(d))
        return f"mount -t tmpfs -o size={WORKER_TMPFS_SIZE},mode=1777 cqlcdc-hidden {quoted}"

    fds = list(enumerate(plan.kept, start=3))
    steps = [f"exec {fd}<{shlex.quote(str(k))}" for fd, k in fds]
    steps += [tmpfs(d) for d in plan.covered]
    for fd, k in fds:
        quoted = shlex.quote(str(k))
        steps += [f"mkdir -p {quoted}", f"mount --rbind -c /proc/self/fd/{fd} {quoted}"]
        steps.append(f"exec {fd}<&-")
    steps += [tmpfs(d) for d in plan.covered_inside]
    return " && ".join(steps)


def worker_command(plan: Mask, work_dir: Path, master_url: str) -> list[str]:
    """A worker under ``unshare -m``: the mounts of ``plan``, then the worker (its work
    directory is inside the first tmpfs, so it vanishes with the namespace)."""
    mounts = mask_script(plan)
    launcher = [
        str(SPARK_HOME / "bin" / "spark-class"),
        "org.apache.spark.deploy.worker.Worker",
        "--host",
        "127.0.0.1",
        "--cores",
        "1",
        "--memory",
        WORKER_MEMORY,
        "--webui-port",
        str(free_port()),
        "--work-dir",
        str(work_dir),
        master_url,
    ]
    script = f"{mounts} && mkdir -p {shlex.quote(str(work_dir))} && exec {shlex.join(launcher)}"
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def daemon_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of the master and workers: pyspark's launcher, small daemon heaps,
    loopback, and a PYTHONPATH through which executors' Python workers import cqlcdc."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.update(extra)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
        SPARK_LAUNCHER_OPTS=QUICK_JVM,
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_NO_DAEMONIZE="1",
        PYTHONPATH=os.pathsep.join([str(CQLCDC_SRC), str(ROOT)]),
    )
    return env


@contextlib.contextmanager
def spark_cluster(
    log_dir: Path, hide: Sequence[Path], env: Mapping[str, str], workers: int = 2
) -> Iterator[SparkCluster]:
    """A master and ``workers`` workers (1 core, 1g each) on loopback, until the block ends.

    Args:
        log_dir: where the daemons' logs go (the driver's side; workers write them through
            a descriptor opened before their namespace hides this directory).
        hide: directories the workers must not see (the driver's temporary roots); what
            they run from (``RUNS_FROM``) stays visible inside them.
        env: extra environment of the daemons (and so of executors): the S3 settings.
    """
    plan = mask(hide, RUNS_FROM)
    port, ui_port = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    cluster = SparkCluster(master_url, f"http://127.0.0.1:{ui_port}", plan)
    daemon = daemon_env(env)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        log = log_dir / "master.log"
        with open(log, "wb") as out:
            master = subprocess.Popen(
                [
                    str(SPARK_HOME / "bin" / "spark-class"),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui_port),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=daemon,
                start_new_session=True,
            )
        procs.append(master)
        for i in range(workers):
            wlog = log_dir / f"worker-{i}.log"
            cluster.worker_logs.append(wlog)
            work_dir = plan.covered[0] / f"spark-worker-{i}"
            with open(wlog, "wb") as out:
                worker = subprocess.Popen(
                    worker_command(plan, work_dir, master_url),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=daemon,
                    start_new_session=True,
                )
            procs.append(worker)
            cluster.workers.append((worker, work_dir))

        def registered() -> bool:
            for p, wl in zip(procs[1:], cluster.worker_logs, strict=True):
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark worker exited:\n{wl.read_text()[-4000:]}")
            try:
                return len(cluster.alive_workers()) == workers
            except (urllib.error.URLError, OSError, ValueError):
                return False

        _wait("the Spark master and its workers", registered, master, log)
        yield cluster
    finally:
        for proc in reversed(procs):
            _stop(proc)


def driver_env(s3: S3Server, tmp: Path) -> dict[str, str]:
    """The environment of a driver process (``cqlcdc serve``, a pyspark script): this
    run's cqlcdc and tests, the S3 settings, and a temporary directory (``TMPDIR``, Spark's
    local dirs) that the workers cannot see."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(s3.env)
    env.update(
        PYTHONPATH=os.pathsep.join([str(CQLCDC_SRC), str(ROOT)]),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(tmp),
        TMPDIR=str(tmp),
    )
    return env
