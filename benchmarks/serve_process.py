"""``cqlcdc serve`` as a process of its own for the benchmarks (the tests' launcher,
``tests.e2e.served_process``), and a write run against it measured from ``/proc``: each
process group's CPU per acknowledged write, the serving process's CPU per thread, the
client's own CPU per request, and (on request) a py-spy profile folded into the stages of
a write's path.

A client prints ``go`` on a line of its own when its timed loop starts and one JSON summary
as its last line (with ``client_cpu_s``, its own CPU over the loop); the readings are taken
at ``go`` and after the client exits and a read through the server has waited for the
engine to apply every acknowledged write (so the micro-batches of the run's tail count).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.cpu_accounting import (
    GROUPS,
    SERVER,
    WORKERS,
    spent_by_group,
    spent_by_thread,
    thread_cpu,
    tree_cpu,
)
from benchmarks.cpu_stages import parse_raw, per_write_us, split_by_module
from tests.e2e.served_process import ServedProcess

ENDED = "(threads that ended during the run)"


def py_spy() -> str | None:
    """The py-spy command beside this interpreter (the dev extras), else on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def start_served(data_dir: Path, master: str, workers: int | None) -> ServedProcess:
    """The server on ``data_dir`` (the tests' launcher, ``tests/e2e/served_process.py``),
    run from beside the data (Spark's scratch files with it), once it says it serves
    (``--workers`` passed only when given: a server without the flag serves in one
    process). Its ``--metrics`` endpoint counts the appends and micro-batches of each run
    (their cost, under 1% of the server's CPU: ``--metrics-overhead``): ``counters``."""
    return ServedProcess(data_dir, master=master, workers=workers, cwd=data_dir.parent)


def counters(served: ServedProcess) -> dict[str, float]:
    """The server's counters of appends and micro-batches now (``engine_counters``)."""
    return engine_counters(served.metrics_text())


COUNTED = {
    "cqlcdc_group_commit_records_count": "appends",
    "cqlcdc_group_commit_records_sum": "records appended",
    "cqlcdc_batch_duration_seconds_count": "micro-batches",
    "cqlcdc_batch_duration_seconds_sum": "micro-batch seconds",
    "cqlcdc_batch_rows_sum": "records applied",
}


def engine_counters(text: str) -> dict[str, float]:
    """The appends (``cqlcdc_group_commit_records``: records a durable append carried; a
    bulk chunk of combined writes is one record), micro-batches and their phases' wall
    seconds from a Prometheus exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in COUNTED:
                out[COUNTED[sample.name]] = sample.value
            elif sample.name == "cqlcdc_batch_phase_seconds_total":
                out[f"phase {sample.labels['phase']} seconds"] = sample.value
    return out


def per_run(before: dict[str, float], after: dict[str, float], writes: float) -> dict[str, float]:
    """A run's appends and micro-batches from two ``engine_counters`` readings: records per
    append, appends per 1,000 writes, and each phase's wall ms per micro-batch."""
    rise = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    appends, batches = rise.get("appends", 0.0), rise.get("micro-batches", 0.0)
    out = {
        "appends": appends,
        "appends_per_1000_writes": appends / writes * 1000 if writes else 0.0,
        "records_per_append": rise.get("records appended", 0.0) / appends if appends else 0.0,
        "micro_batches": batches,
    }
    if batches:
        out["micro_batch_wall_ms"] = rise.get("micro-batch seconds", 0.0) / batches * 1000
        for key, seconds in rise.items():
            if key.startswith("phase "):
                phase = key.split()[1]
                out[f"micro_batch_{phase}_ms"] = seconds / batches * 1000
    return {k: round(v, 2) for k, v in out.items()}


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names of ``pid`` by OS thread id (``py-spy dump``: Python 3.11's
    threading does not name OS threads); empty without py-spy."""
    command = py_spy()
    if command is None:
        return {}
    done = subprocess.run(
        [command, "dump", "--pid", str(pid), "--json"], capture_output=True, text=True
    )
    if done.returncode != 0:
        return {}
    return {t["os_thread_id"]: t["thread_name"] for t in json.loads(done.stdout)}


def _threads_of(tree: dict[int, Any]) -> dict[int, dict[int, tuple[str, float]]]:
    """Per-thread CPU of the server's own Python processes (the serving one, its workers)."""
    return {pid: thread_cpu(pid) for pid, p in tree.items() if p.group in (SERVER, WORKERS)}


def measured_run(
    server_pid: int,
    client_argv: Sequence[str],
    settle: Callable[[], None],
    profile_seconds: float | None = None,
    profile_path: Path | None = None,
    batch_id: Callable[[], int] | None = None,
    counters: Callable[[], dict[str, float]] | None = None,
) -> dict[str, Any]:
    """Run one client and account for the CPU the server's tree spent between its ``go``
    and its end (after ``settle``, a read that waits for the engine to apply the run).

    With ``profile_seconds``, py-spy samples the server's Python processes (and their
    Python children) from ``go`` on for that long, on the CPU only, to ``profile_path``;
    its stages come back scaled to µs per write by the sampled threads' CPU. With
    ``batch_id`` (the engine's last committed micro-batch), the micro-batches the run took
    and the server's CPU per micro-batch; with ``counters`` (``counters(served)``),
    the run's appends and micro-batch phases (``per_run``)."""
    client = subprocess.Popen(
        list(client_argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert client.stdout is not None and client.stderr is not None
    errors: list[str] = []
    stderr = client.stderr
    threading.Thread(target=lambda: errors.extend(stderr), daemon=True).start()
    before: dict[int, Any] | None = None
    first_batch = 0
    counted: dict[str, float] = {}
    threads_before: dict[int, dict[int, tuple[str, float]]] = {}
    spy: subprocess.Popen[bytes] | None = None
    last = ""
    for line in client.stdout:
        if line.strip() == "go" and before is None:
            first_batch = batch_id() if batch_id is not None else 0
            counted = counters() if counters is not None else {}
            before = tree_cpu(server_pid)
            threads_before = _threads_of(before)
            if profile_seconds is not None and profile_path is not None:
                spy = _start_spy(server_pid, profile_seconds, profile_path)
        elif line.strip():
            last = line
    code = client.wait()
    if code != 0 or before is None:
        raise RuntimeError(f"the client {client_argv[0]} failed ({code}):\n{''.join(errors)}")
    if spy is not None:
        spy.wait()
    settle()
    after = tree_cpu(server_pid)
    threads_after = _threads_of(after)
    result: dict[str, Any] = json.loads(last)
    writes = result["writes"]
    groups = spent_by_group(before, after)
    result["cpu_us_per_write"] = {g: groups[g] / writes * 1e6 for g in GROUPS}
    result["server_cpu_us_per_write"] = sum(groups.values()) / writes * 1e6
    result["client_cpu_us_per_request"] = result["client_cpu_s"] / writes * 1e6
    if counters is not None:
        result["engine"] = per_run(counted, counters(), writes)
    if batch_id is not None:
        batches = batch_id() - first_batch
        result["micro_batches"] = batches
        result["writes_per_batch"] = writes / max(batches, 1)
        result["server_cpu_ms_per_batch"] = sum(groups.values()) / max(batches, 1) * 1e3
    names: dict[int, str] = {}
    for pid in threads_after:
        names.update(thread_names(pid))
    threads: dict[str, float] = {}
    for pid, now in threads_after.items():
        spent = spent_by_thread(threads_before.get(pid, {}), now, names)
        for name, cpu_s in spent.items():
            key = name if len(threads_after) == 1 else f"{pid}:{name}"
            threads[key] = threads.get(key, 0.0) + cpu_s
        if pid in before:  # threads that ended during the run (a micro-batch's pools)
            alive_s = sum(spent.values())
            ended_s = after[pid].stat.cpu_s - before[pid].stat.cpu_s - alive_s
            key = ENDED if len(threads_after) == 1 else f"{pid}:{ENDED}"
            threads[key] = threads.get(key, 0.0) + max(0.0, ended_s)
    result["thread_cpu_us_per_write"] = {
        n: round(s / writes * 1e6, 1) for n, s in sorted(threads.items(), key=lambda kv: -kv[1])
    }
    if spy is not None and profile_path is not None:
        result["stages"] = _stages(
            profile_path, before, after, threads_before, threads_after, writes
        )
    return result


def idle_cpu(server_pid: int, seconds: float) -> dict[str, float]:
    """Each group's CPU (cores, i.e. CPU seconds per second) while no client writes: the
    fixed cost a run's figures include (the streaming query's triggers, the JVM's own)."""
    before = tree_cpu(server_pid)
    threading.Event().wait(seconds)  # nothing to wait for: a fixed window of no load
    groups = spent_by_group(before, tree_cpu(server_pid))
    return {g: groups[g] / seconds for g in GROUPS}


def _start_spy(pid: int, seconds: float, path: Path) -> subprocess.Popen[bytes] | None:
    command = py_spy()
    if command is None:
        return None
    argv = [command, "record", "--pid", str(pid), "--subprocesses", "--threads"]
    argv += ["--nonblocking", "--rate", "100", "--format", "raw", "--output", str(path)]
    argv += ["--duration", str(max(1, int(seconds)))]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stages(
    path: Path,
    before: dict[int, Any],
    after: dict[int, Any],
    threads_before: dict[int, dict[int, tuple[str, float]]],
    threads_after: dict[int, dict[int, tuple[str, float]]],
    writes: float,
) -> dict[str, Any]:
    """The profile's stages in µs per write for each of the server's Python processes,
    thread by thread (``per_write_us``): each thread's CPU from ``/proc`` split by its
    samples."""
    if not path.exists():
        return {}
    with path.open() as f:
        profile = parse_raw(f)
    out: dict[str, Any] = {}
    for pid, now in threads_after.items():
        if pid not in profile.samples or pid not in before:
            continue
        then_all = threads_before.get(pid, {})
        rises: dict[int, float] = {}
        for tid, (_, cpu_s) in now.items():
            then = then_all.get(tid)
            rise = cpu_s - then[1] if then is not None else cpu_s
            rises[tid] = cpu_s if rise < 0 else rise  # a new thread given an ended one's id
        process_s = after[pid].stat.cpu_s - before[pid].stat.cpu_s
        ended_s = max(0.0, process_s - sum(rises.values()))
        stages = per_write_us(profile.samples[pid], rises, ended_s, writes)
        out[str(pid)] = {
            "samples": sum(profile.stage_samples(pid).values()),
            "us_per_write": {k: round(v, 1) for k, v in stages.items()},
            "samples_by_stage": profile.stage_samples(pid),
            "us_per_write_by_module": split_by_module(profile.leaves.get(pid, {}), stages),
        }
    return out


def python_client_argv(script: str, port: int, in_flight: int, seconds: float) -> list[str]:
    return [sys.executable, script, "--client", f"127.0.0.1:{port}:{in_flight}:{seconds}"]


def node_client_argv(port: int, in_flight: int, seconds: float, base: int) -> list[str]:
    script = Path(__file__).resolve().parent / "node_writes.js"
    return ["node", str(script), "127.0.0.1", str(port), str(in_flight), str(seconds), str(base)]
