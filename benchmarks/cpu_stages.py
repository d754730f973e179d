"""Fold a ``py-spy record --format raw --threads`` profile of the server into the stages of
a write's path: frame decode/encode, bind, the combiner, the ingest append, the micro-batch
on the driver side, its JVM round-trips, the event loop. py-spy samples threads on the CPU
only (without ``--idle``), so a stage's share of the samples is its share of the Python
threads' CPU.

>>> stage_of(["_run (cqlcdc/server/combiner.py:117)", "append (cqlcdc/datadir/ingest.py:330)"])
'ingest append'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

DECODE = "frame decode/encode"
BIND = "bind"
ENCODE = "result encoding"
DISPATCH = "request dispatch (a task and an executor hand-off each)"
COMBINER = "combiner (bulk chunks)"
APPEND = "ingest append"
ACKS = "acknowledgement"
BATCH = "micro-batch, driver side"
PY4J = "JVM round-trips (py4j, pyspark API)"
HANDOFF = "thread-pool hand-offs (wake-ups, futures)"
LOOP = "event loop"
OTHER = "other"
STAGES = (DECODE, BIND, ENCODE, DISPATCH, COMBINER, APPEND, ACKS, BATCH, PY4J, HANDOFF, LOOP, OTHER)

# (stage, module paths): a sample goes to the first stage (in this order) one of whose
# modules is on its stack, so a stage that calls into another's modules keeps its own
# samples: the engine reads the ingest files through datadir/ingest but is the micro-batch;
# the combiner calls the ingest append, which is a stage of its own
_BY_MODULE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (BATCH, ("cqlcdc/pipeline/", "cqlcdc/datadir/commit.py", "cqlcdc/datadir/compaction.py")),
    (
        APPEND,
        ("cqlcdc/datadir/ingest.py", "cqlcdc/datadir/durable.py", "cqlcdc/datadir/records.py"),
    ),
    (APPEND, ("cqlcdc/coordinator/group_commit.py",)),
    (APPEND, ("cqlcdc/coordinator/owner.py:append", "cqlcdc/coordinator/owner.py:acknowledge")),
    (ACKS, ("cqlcdc/server/combiner.py:_acknowledge",)),
    # the combiner binds a group's values column-wise: that part is the bind
    (BIND, ("cqlcdc/storage/bulk.py:bound_columns", "cqlcdc/server/binds.py")),
    (COMBINER, ("cqlcdc/server/combiner.py",)),
    (BIND, ("cqlcdc/server/statements.py",)),
    (BIND, ("cqlcdc/server/column_cells.py", "cqlcdc/server/typecodes.py")),
    (ENCODE, ("cqlcdc/server/results.py", "cqlcdc/server/responses.py")),
    (DECODE, ("cqlcdc/server/framing.py", "cqlcdc/server/frames.py")),
    (DECODE, ("cqlcdc/server/segments.py", "cqlcdc/server/requests.py")),
    (DECODE, ("cqlcdc/server/compression.py",)),
    (DISPATCH, ("cqlcdc/server/",)),
    # what is left in a pool's thread, outside any stage: waking for the next work item,
    # setting a future's result (the request threads of the server, the engine's pools)
    (HANDOFF, ("concurrent/futures/",)),
    (LOOP, ("asyncio/",)),
)
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _where(frame: str) -> str:
    """``file:function`` of a py-spy frame ``function (file:line)``."""
    m = _FRAME.match(frame)
    if m is None:
        return frame
    return f"{m['file']}:{m['function']}"


# the engine's own pools: whatever their threads run is the micro-batch
_BATCH_THREADS = ("cqlcdc-bucket", "cqlcdc-write", "cqlcdc-tip")


def stage_of(frames: Sequence[str], thread: str = "") -> str:
    """The stage of one sample, its frames from the thread's root to the leaf, on the
    thread named ``thread``.

    A sample whose leaf-most frame of a known package is py4j's or pyspark's waits on (or
    talks to) the JVM: a round-trip, whoever called it."""
    wheres = [_where(f) for f in frames]
    for where in reversed(wheres):
        if "cqlcdc/" in where:
            break
        if "py4j/" in where or "pyspark/" in where:
            return PY4J
    if thread.startswith(_BATCH_THREADS):
        return BATCH
    for stage, modules in _BY_MODULE:
        if any(module in where for where in wheres for module in modules):
            return stage
    return OTHER


@dataclass
class Profile:
    """Samples per stage of each thread of the processes sampled, and within each stage per
    leaf-most cqlcdc module (where in a stage the time goes), by process id."""

    samples: dict[int, dict[int, dict[str, int]]] = field(default_factory=dict)  # pid, tid
    names: dict[int, dict[int, str]] = field(default_factory=dict)  # pid -> tid -> name
    # pid -> stage -> the leaf-most cqlcdc module of the sample -> n
    leaves: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)
    unread: int = 0  # samples without a frame

    def add(self, pid: int, tid: int, name: str, frames: Sequence[str], count: int) -> None:
        stage = stage_of(frames, name)
        by_stage = self.samples.setdefault(pid, {}).setdefault(tid, {})
        by_stage[stage] = by_stage.get(stage, 0) + count
        self.names.setdefault(pid, {})[tid] = name
        leaf = next((w for w in map(_where, reversed(frames)) if "cqlcdc/" in w), None)
        module = "(outside cqlcdc)" if leaf is None else leaf.split(":")[0]
        by_leaf = self.leaves.setdefault(pid, {}).setdefault(stage, {})
        by_leaf[module] = by_leaf.get(module, 0) + count

    def stage_samples(self, pid: int) -> dict[str, int]:
        """Samples per stage of one process, all its threads together."""
        out: dict[str, int] = {}
        for by_stage in self.samples.get(pid, {}).values():
            for stage, n in by_stage.items():
                out[stage] = out.get(stage, 0) + n
        return out


_PROCESS = re.compile(r'process (\d+):"(?:[^"\\]|\\.)*"$')
_THREAD = re.compile(r"thread \((?P<tid>(?:0x)?[0-9A-Fa-f]+)\)(?:: (?P<name>.*))?$")


def parse_raw(lines: Iterable[str]) -> Profile:
    """A profile from py-spy's raw (collapsed-stack) output: ``process P:"cmd";...;thread
    (tid): name;frame;...;frame COUNT``, one stack a line, the leaf last. With
    ``--subprocesses`` the chain of processes comes first; the sample is the last one's."""
    profile = Profile()
    for line in lines:
        line = line.rstrip("\n")
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        parts = stack.split(";")
        pid, tid, thread, frames = 0, 0, "", []
        for i, part in enumerate(parts):
            p = _PROCESS.match(part)
            if p is not None:
                pid = int(p.group(1))
                continue
            t = _THREAD.match(part)
            if t is not None:
                tid = int(t["tid"], 0)
                thread = t["name"] or part
                frames = parts[i + 1 :]
                break
        else:
            frames = [p for p in parts if _PROCESS.match(p) is None]
        if not frames:
            # a stack py-spy could not read (--nonblocking reads it while it changes): not
            # a stage; the thread's CPU goes by its other samples
            profile.unread += int(count)
            continue
        profile.add(pid, tid, thread, frames, int(count))
    return profile


UNSAMPLED = "threads never sampled (native: Arrow's pools, delta-rs' runtime)"


def per_write_us(
    samples: Mapping[int, Mapping[str, int]],
    cpu_s: Mapping[int, float],
    ended_s: float,
    writes: float,
) -> dict[str, float]:
    """Each stage's µs per write in one process, thread by thread: a thread's CPU over the
    run (``cpu_s`` by thread id, from ``/proc``) split by its samples' stages. Threads that
    ended during the run (a micro-batch's pools) are gone from ``/proc``; their CPU,
    ``ended_s`` (the process's rise less its live threads'), is split by the samples of the
    threads no longer alive. Live threads with CPU but no sample are ``UNSAMPLED``.

    Splitting per thread keeps one thread's misread samples (py-spy may count a thread in
    a blocking call it does not know, such as ``fsync``, as active) inside that thread's
    measured CPU."""
    if writes <= 0:
        return {}
    out: dict[str, float] = {}

    def spread(by_stage: Mapping[str, int], seconds: float) -> None:
        total = sum(by_stage.values())
        for stage, n in by_stage.items():
            out[stage] = out.get(stage, 0.0) + n / total * seconds

    ended: dict[str, int] = {}
    for tid, by_stage in samples.items():
        if tid in cpu_s:
            spread(by_stage, cpu_s[tid])
        else:
            for stage, n in by_stage.items():
                ended[stage] = ended.get(stage, 0) + n
    if ended:
        spread(ended, ended_s)
    unsampled = sum(s for tid, s in cpu_s.items() if tid not in samples)
    if unsampled > 0:
        out[UNSAMPLED] = unsampled
    return {
        stage: seconds / writes * 1e6
        for stage, seconds in sorted(out.items(), key=lambda kv: -kv[1])
    }


def split_by_module(
    leaves: Mapping[str, Mapping[str, int]], stage_us: Mapping[str, float], top: int = 8
) -> dict[str, dict[str, float]]:
    """Each stage's µs per write split by the leaf-most cqlcdc module of its samples, the
    ``top`` largest first."""
    out: dict[str, dict[str, float]] = {}
    for stage, modules in leaves.items():
        total = sum(modules.values())
        if stage not in stage_us or total == 0:
            continue
        ranked = sorted(modules.items(), key=lambda kv: -kv[1])[:top]
        out[stage] = {m: round(n / total * stage_us[stage], 1) for m, n in ranked}
    return out
