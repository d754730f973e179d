"""CPU of a process tree from ``/proc``, grouped as the server's processes are: the serving
Python process (the coordinator), its protocol workers, its JVM and Spark's Python workers;
and CPU per thread of one process. Read before and after a run; the difference divided by
the writes the run acknowledged is the cost per write of each group.

>>> before = tree_cpu(os.getpid()); after = tree_cpu(os.getpid())  # doctest: +SKIP
>>> spent_by_group(before, after)  # doctest: +SKIP
{'server': 0.01, ...}
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")

SERVER = "server"
WORKERS = "protocol workers"
JVM = "JVM"
SPARK_PYTHON = "Spark Python workers"
OTHER = "other"
_POOL_INDEX = re.compile(r"_\d+$")
GROUPS = (SERVER, WORKERS, JVM, SPARK_PYTHON, OTHER)
# what a process that ended during a run is found as: its CPU lands in its parent's
# cutime/cstime once the parent waits for it, so a parent's rise of those goes to the group
# its children belong to
CHILDREN_OF = {SERVER: OTHER, WORKERS: OTHER, JVM: SPARK_PYTHON, SPARK_PYTHON: SPARK_PYTHON}


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of ``/proc/<pid>/stat`` (or ``task/<tid>/stat``) this module reads."""

    pid: int
    comm: str
    ppid: int
    cpu_s: float  # utime + stime
    children_cpu_s: float  # cutime + cstime: children waited for
    start_ticks: int  # since boot: tells a reused pid from the process that had it


def parse_stat(text: str) -> Stat:
    """One ``stat`` line; ``comm`` sits in parentheses and may hold spaces or ')'."""
    head, _, tail = text.rpartition(")")
    pid_text, _, comm = head.partition(" (")
    fields = tail.split()
    # fields[0] is the state (field 3 of proc(5)): field n is fields[n - 3]
    ticks = [int(fields[n - 3]) for n in (14, 15, 16, 17)]
    return Stat(
        pid=int(pid_text),
        comm=comm,
        ppid=int(fields[1]),
        cpu_s=(ticks[0] + ticks[1]) / TICKS_PER_S,
        children_cpu_s=(ticks[2] + ticks[3]) / TICKS_PER_S,
        start_ticks=int(fields[22 - 3]),
    )


@dataclass(frozen=True, slots=True)
class Proc:
    """One process of the tree: what it is and the CPU it has used so far."""

    stat: Stat
    group: str
    cmdline: tuple[str, ...]


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None  # it ended between the listing and the read


def _all_stats() -> dict[int, tuple[Stat, tuple[str, ...]]]:
    out: dict[int, tuple[Stat, tuple[str, ...]]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        text = _read(entry / "stat")
        raw = None if text is None else _read(entry / "cmdline")
        if text is None or raw is None:
            continue
        out[int(entry.name)] = (parse_stat(text), tuple(a for a in raw.split("\0") if a))
    return out


def classify(cmdline: tuple[str, ...], comm: str, parent_group: str | None) -> str:
    """The group of a descendant of the server, from its command line and its parent's
    group (``None`` for the server itself)."""
    if parent_group is None:
        return SERVER
    words = " ".join(cmdline)
    program = os.path.basename(cmdline[0]) if cmdline else comm
    if parent_group in (JVM, SPARK_PYTHON) and (program.startswith("python") or "pyspark" in words):
        # pyspark.daemon and its forks, the streaming source's runner
        # (pyspark.sql.streaming.python_streaming_source_runner): Spark's Python
        return SPARK_PYTHON
    if parent_group == SPARK_PYTHON:
        return SPARK_PYTHON  # forked workers of the daemon, whatever they call themselves
    if program == "java" or comm == "java":
        return JVM
    if parent_group in (SERVER, WORKERS) and (program.startswith("python") or "cqlcdc" in words):
        return WORKERS
    return OTHER


def tree_cpu(root: int) -> dict[int, Proc]:
    """Every live process under ``root`` (itself included), with its group and CPU."""
    stats = _all_stats()
    if root not in stats:
        return {}
    children: dict[int, list[int]] = {}
    for pid, (stat, _) in stats.items():
        children.setdefault(stat.ppid, []).append(pid)
    out: dict[int, Proc] = {}
    todo: list[tuple[int, str | None]] = [(root, None)]
    while todo:
        pid, parent_group = todo.pop()
        stat, cmdline = stats[pid]
        group = classify(cmdline, stat.comm, parent_group)
        out[pid] = Proc(stat, group, cmdline)
        todo.extend((child, group) for child in children.get(pid, ()))
    return out


def spent_by_group(before: Mapping[int, Proc], after: Mapping[int, Proc]) -> dict[str, float]:
    """CPU seconds each group used between two ``tree_cpu`` readings.

    A process alive at both counts its rise; one that started during the run counts all of
    its CPU; one that ended and was waited for is counted through its parent's rise of
    ``children_cpu_s`` (less what it had already used at ``before``). One that ended and
    was not waited for by the end (a zombie counts; a process gone with its parent does
    not) is counted only up to ``before``."""
    spent = dict.fromkeys(GROUPS, 0.0)
    for pid, now in after.items():
        then = before.get(pid)
        if then is not None and then.stat.start_ticks == now.stat.start_ticks:
            spent[now.group] += now.stat.cpu_s - then.stat.cpu_s
            reaped = now.stat.children_cpu_s - then.stat.children_cpu_s
        else:
            spent[now.group] += now.stat.cpu_s
            reaped = now.stat.children_cpu_s
        spent[CHILDREN_OF.get(now.group, OTHER)] += reaped
    for pid, then in before.items():
        now_proc = after.get(pid)
        if now_proc is None or now_proc.stat.start_ticks != then.stat.start_ticks:
            # its whole CPU is in its parent's children_cpu_s if the parent waited for it
            parent = after.get(then.stat.ppid)
            if parent is not None:
                spent[CHILDREN_OF.get(parent.group, OTHER)] -= then.stat.cpu_s
    return {group: max(0.0, s) for group, s in spent.items()}


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of each live thread of ``pid`` by thread id, with its ``comm`` (the OS
    thread name: Python's threading leaves it as the process's, native pools set theirs)."""
    out: dict[int, tuple[str, float]] = {}
    try:
        tids = [int(e.name) for e in (PROC / str(pid) / "task").iterdir()]
    except FileNotFoundError:
        return out
    for tid in tids:
        text = _read(PROC / str(pid) / "task" / str(tid) / "stat")
        if text is not None:
            stat = parse_stat(text)
            out[tid] = (stat.comm, stat.cpu_s)
    return out


def spent_by_thread(
    before: Mapping[int, tuple[str, float]],
    after: Mapping[int, tuple[str, float]],
    names: Mapping[int, str],
) -> dict[str, float]:
    """CPU seconds per thread name between two ``thread_cpu`` readings. ``names`` maps a
    thread id to its Python thread name (from ``py-spy dump``); other threads go by their
    OS name, prefixed ``native:`` (Arrow's and the Rust runtimes' pools name theirs). Threads
    of one name add up (Spark's callback threads are all ``Thread-N``-like, pools share a
    name). Threads that ended during the run are not here: their CPU is the process's rise
    less the sum of these."""
    out: dict[str, float] = {}
    for tid, (comm, cpu_s) in after.items():
        then = before.get(tid)
        rise = cpu_s - then[1] if then is not None else cpu_s
        if rise < 0:  # a new thread that was given an ended one's id
            rise = cpu_s
        # without any Python name (no py-spy) every thread goes by its OS name alone
        name = _POOL_INDEX.sub("_*", names.get(tid) or (f"native:{comm}" if names else comm))
        out[name] = out.get(name, 0.0) + rise
    return out
