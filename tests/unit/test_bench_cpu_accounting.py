"""``benchmarks/cpu_accounting.py``: /proc stat lines parsed, the server's processes grouped,
and CPU between two readings counted for processes that lived, started or ended."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from benchmarks.cpu_accounting import (
    JVM,
    OTHER,
    SERVER,
    SPARK_PYTHON,
    TICKS_PER_S,
    WORKERS,
    Proc,
    Stat,
    classify,
    parse_stat,
    spent_by_group,
    spent_by_thread,
    thread_cpu,
    tree_cpu,
)


def _line(pid: int, comm: str, ppid: int, ticks: tuple[int, int, int, int], start: int) -> str:
    """A stat line as proc(5) lays it out: fields 14-17 the CPU ticks, 22 the start time."""
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(t) for t in ticks] + ["0"] * 4 + [str(start)]
    return f"{pid} ({comm}) " + " ".join(fields + ["0"] * 30)


def test_parse_stat_takes_comm_with_spaces_and_parentheses() -> None:
    stat = parse_stat(_line(42, "a (b) c", 7, (100, 50, 20, 10), 12345))
    assert (stat.pid, stat.comm, stat.ppid, stat.start_ticks) == (42, "a (b) c", 7, 12345)
    assert stat.cpu_s == 150 / TICKS_PER_S
    assert stat.children_cpu_s == 30 / TICKS_PER_S


def test_parse_stat_of_this_process_is_live() -> None:
    with open(f"/proc/{os.getpid()}/stat") as f:
        stat = parse_stat(f.read())
    assert stat.pid == os.getpid() and stat.ppid == os.getppid()


def test_classify_the_server_tree() -> None:
    assert classify(("python", "-m", "cqlcdc.cli", "serve"), "python", None) == SERVER
    java = ("/usr/lib/jvm/bin/java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit")
    assert classify(java, "java", SERVER) == JVM
    assert classify(("python3", "-m", "pyspark.daemon"), "python3", JVM) == SPARK_PYTHON
    assert classify(("python3", "-m", "pyspark.daemon"), "python3", SPARK_PYTHON) == SPARK_PYTHON
    runner = ("python3", "-m", "pyspark.sql.streaming.python_streaming_source_runner")
    assert classify(runner, "python3", JVM) == SPARK_PYTHON
    worker = (sys.executable, "-m", "cqlcdc.cli", "serve-worker", "3")
    assert classify(worker, "python", SERVER) == WORKERS
    spawned = (sys.executable, "-c", "from multiprocessing.spawn import spawn_main; spawn_main()")
    assert classify(spawned, "python3.11", SERVER) == WORKERS  # a multiprocessing child
    assert classify(("/bin/bash", "spark-class"), "bash", SERVER) == OTHER
    assert classify(("/bin/sh", "-c", "x"), "sh", JVM) == OTHER  # not Python, not the server's


def _proc(pid: int, ppid: int, group: str, cpu: int, children: int = 0, start: int = 1) -> Proc:
    stat = Stat(pid, "p", ppid, cpu / 100, children / 100, start)
    return Proc(stat, group, ())


def test_spent_by_group_counts_rises_newcomers_and_reaped_children() -> None:
    before = {
        1: _proc(1, 0, SERVER, 1000),
        2: _proc(2, 1, JVM, 5000),
        3: _proc(3, 2, SPARK_PYTHON, 300),  # the daemon
        4: _proc(4, 3, SPARK_PYTHON, 40),  # a worker that ends during the run
    }
    after = {
        1: _proc(1, 0, SERVER, 1200),
        2: _proc(2, 1, JVM, 5600),
        3: _proc(3, 2, SPARK_PYTHON, 310, children=70),  # reaped worker 4 at 70
        5: _proc(5, 3, SPARK_PYTHON, 25, start=9),  # a worker started during the run
    }
    spent = spent_by_group(before, after)
    assert spent[SERVER] == 2.0
    assert spent[JVM] == 6.0
    # daemon +0.1, worker 4's last 0.3 (0.7 reaped less 0.4 before), worker 5's 0.25
    assert round(spent[SPARK_PYTHON], 6) == 0.65


def test_spent_by_group_tells_a_reused_pid_from_its_first_process() -> None:
    before = {1: _proc(1, 0, SERVER, 100), 7: _proc(7, 1, WORKERS, 500, start=2)}
    after = {1: _proc(1, 0, SERVER, 100, children=600), 7: _proc(7, 1, WORKERS, 30, start=8)}
    spent = spent_by_group(before, after)
    assert round(spent[WORKERS], 6) == 0.3  # the new process 7 from its start
    assert round(spent[OTHER], 6) == 1.0  # the old one's last second, found in its parent


def test_a_real_child_is_found_and_its_cpu_counted() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass\ninput()",
        ],
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        before = tree_cpu(os.getpid())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            after = tree_cpu(os.getpid())
            if child.pid in after and after[child.pid].stat.cpu_s >= 0.25:
                break
        assert after[os.getpid()].group == SERVER
        assert after[child.pid].group == WORKERS  # a python child of the "server"
        assert spent_by_group(before, after)[WORKERS] > 0
    finally:
        child.communicate("\n", timeout=10)


def test_spent_by_thread_names_python_threads_and_keeps_native_ones() -> None:
    before = {10: ("python", 1.0), 11: ("python", 2.0), 12: ("arrow-pool", 0.5)}
    after = {
        10: ("python", 1.5),
        11: ("python", 2.25),
        12: ("arrow-pool", 0.75),
        13: ("python", 0.1),
    }
    spent = spent_by_thread(before, after, {10: "MainThread", 11: "cql-server", 13: "Thread-3"})
    assert spent == {
        "MainThread": 0.5,
        "cql-server": 0.25,
        "native:arrow-pool": 0.25,
        "Thread-3": 0.1,
    }


def test_spent_by_thread_without_python_names_uses_os_names() -> None:
    spent = spent_by_thread({}, {10: ("python", 1.0), 12: ("tokio-rt-worker", 0.5)}, {})
    assert spent == {"python": 1.0, "tokio-rt-worker": 0.5}


def test_thread_cpu_lists_this_process_threads() -> None:
    threads = thread_cpu(os.getpid())
    assert os.getpid() in threads  # the main thread's id is the pid
