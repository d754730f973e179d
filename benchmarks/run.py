"""The comparison benchmark: cqlcdc against delta-rs merge + change data feed and a Parquet floor.

One invocation, one generated workload (deterministic, seeded): UPDATEs ``SET v = ?, w = ?`` of
(pk, ck) rows and 5% row DELETEs, over ``--partitions`` partitions of 20 clustering rows each.

    (a) cqlcdc, delta only   ``WITH cdc = {'enabled': true}``
    (b) cqlcdc, full images  ``{'enabled': true, 'preimage': 'full', 'postimage': true}``
    (c) the peer: delta-rs ``DeltaTable.merge`` into a table with
        ``delta.enableChangeDataFeed = true`` (source deduplicated per key per batch: the peer
        keeps only the last change of a key per batch, while cqlcdc logs every change)
    (d) the I/O floor: the mutation rows written once with ``pyarrow.parquet.write_table``

Each of (a)-(d) is measured ``--repeat`` times (3; fresh tables and files each time, the two
cqlcdc options alternating) and the median is reported beside every sample: one measurement
of the same code on a shared 2-core machine varies by +-15%, the peer's as much as ours.

cqlcdc runs the mutations through prepared statements and ``Session.execute_many`` in groups of
``--group`` writes (one durable append per group, acknowledged once durable, as a bulk load
does; the time runs to the commit of the last group); the peer merges the same
groups. Then the scaling run: one fixed batch of mutations applied, as one group, to tables of
two sizes (cqlcdc ``--repeat`` times at each size, the peer once for reference), and the ack
latency: sequential single-row UPDATEs through ``Session.execute`` on the running engine.

    .venv/bin/python benchmarks/run.py           # 1M mutations / 100k partitions; ~6 minutes
    .venv/bin/python benchmarks/run.py --quick   # a smaller version, under 5 minutes

``--data-dir s3://bucket/prefix`` runs the cqlcdc parts (not the scaling) a second time on that
object-store data directory, through ``s3_proxy.py`` (``--s3-latency-ms``, 20 by default; 0:
the store's own latency), starting a moto server when ``AWS_ENDPOINT_URL`` is unset, and
reports both directories' rows/s and ack latency and the store's requests per 1,000
acknowledged writes by kind (``run-*-s3.json``).

Prints a table of rows/s with the ratios to (c) and (d), writes benchmarks/results/run.json
(``run-quick.json``) and a PNG chart beside it; with ``--quick`` the last line printed is one
JSON object with the headline numbers. ``--profile`` also writes cProfile summaries of the
cqlcdc path (the client thread, and the engine's batch function in the driver) to
benchmarks/results/profile-*.txt.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

RESULTS = ROOT / "benchmarks" / "results"
CK_PER_PARTITION = 20
DELETE_FRACTION = 0.05
SEED = 20240611

KEYSPACE_DDL = (
    "CREATE KEYSPACE bench WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
)
TABLE_DDL = "CREATE TABLE bench.{name} (pk int, ck int, v int, w text, PRIMARY KEY (pk, ck))"
CDC_DELTA = "WITH cdc = {'enabled': true}"
CDC_IMAGES = "WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}"


# -- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Mutations in order: ``delete[i]`` tells a row DELETE from an UPDATE of ``(v[i], w[i])``."""

    pk: np.ndarray
    ck: np.ndarray
    v: np.ndarray
    delete: np.ndarray
    partitions: int

    def __len__(self) -> int:
        return len(self.pk)

    def w(self, i: int) -> str:
        return f"w-{int(self.v[i]):010d}"

    def arrow(self, lo: int = 0, hi: int | None = None) -> pa.Table:
        """The mutation rows ``lo:hi`` as Arrow (``op``: 0 update, 1 delete)."""
        hi = len(self) if hi is None else hi
        v = self.v[lo:hi]
        return pa.table(
            {
                "pk": pa.array(self.pk[lo:hi], pa.int32()),
                "ck": pa.array(self.ck[lo:hi], pa.int32()),
                "v": pa.array(v, pa.int32()),
                "w": pa.array([f"w-{int(x):010d}" for x in v], pa.string()),
                "op": pa.array(self.delete[lo:hi].astype(np.int8), pa.int8()),
            }
        )


def make_workload(mutations: int, partitions: int, seed: int = SEED) -> Workload:
    """``mutations`` writes over ``partitions`` x 20 rows; 5% are row DELETEs. Deterministic."""
    rng = np.random.default_rng(seed)
    return Workload(
        pk=rng.integers(0, partitions, mutations, dtype=np.int32),
        ck=rng.integers(0, CK_PER_PARTITION, mutations, dtype=np.int32),
        v=rng.integers(0, 2**31 - 1, mutations, dtype=np.int32),
        delete=rng.random(mutations) < DELETE_FRACTION,
        partitions=partitions,
    )


def groups(n: int, size: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, size):
        yield lo, min(lo + size, n)


# -- memory ----------------------------------------------------------------------------------


def _tree_rss_bytes(root: int) -> int:
    """RSS of ``root`` and all its descendants (the Spark JVM and its Python workers)."""
    try:
        import psutil

        proc = psutil.Process(root)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return int(total)
    except ImportError:
        pass
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in tree:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except OSError:
            continue
    return total


class PeakMemory:
    """Samples the RSS of this process tree in the background; ``peak_mb`` is the maximum."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))

    @property
    def peak_mb(self) -> float:
        return round(self.peak / 2**20, 1)


# -- cqlcdc ----------------------------------------------------------------------------------


class Profiler:
    """cProfile of the client thread and of the engine's batch function (the driver path)."""

    def __init__(self, session: Any) -> None:
        self.client = cProfile.Profile()
        self.engine = cProfile.Profile()
        engine = session.engine
        original: Callable[[Any, int], None] = engine._process_batch
        profile = self.engine

        def profiled(df: Any, batch_id: int) -> None:
            profile.enable()
            try:
                original(df, batch_id)
            finally:
                profile.disable()

        engine._process_batch = profiled

    def write(self, name: str, top: int = 30) -> str:
        out = io.StringIO()
        for title, prof in (("client thread", self.client), ("engine batch", self.engine)):
            out.write(f"=== {title} (cumulative) ===\n")
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
            out.write(f"=== {title} (tottime) ===\n")
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
        out.write("=== where the time of the main functions goes (callees) ===\n")
        for prof, pattern in (
            (self.client, r"\(execute_many\)"),
            (self.client, r"\(_records\)"),
            (self.engine, r"\(_process_batch\)"),
            (self.engine, r"\(process_groups\)"),
            (self.engine, r"\(process_bucket\)"),
            (self.engine, r"\(_apply\)"),
        ):
            stats = pstats.Stats(prof, stream=out).sort_stats("cumulative")
            stats.print_callees(pattern)
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"profile-{name}.txt"
        path.write_text(out.getvalue())
        return str(path.relative_to(ROOT))


def settle(session: Any) -> None:
    """Wait for everything written so far, incl. the maintenance that follows its commit."""
    session.flush()
    engine = session.engine
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        committed = engine.snapshot().manifest.batch_id
        last = engine.batch_timings.last
        if committed < 0 or (last is not None and int(last["batch_id"]) >= committed):
            return
        time.sleep(0.01)


def apply_cqlcdc(
    session: Any,
    table: str,
    work: Workload,
    group: int,
    lo: int = 0,
    hi: int | None = None,
    profiler: Profiler | None = None,
) -> float:
    """Apply mutations ``lo:hi`` to ``bench.<table>`` in groups; returns seconds to the commit."""
    update = session.prepare(f"UPDATE bench.{table} SET v = ?, w = ? WHERE pk = ? AND ck = ?")
    delete = session.prepare(f"DELETE FROM bench.{table} WHERE pk = ? AND ck = ?")
    hi = len(work) if hi is None else hi
    pk, ck, v, dele = work.pk.tolist(), work.ck.tolist(), work.v.tolist(), work.delete.tolist()
    # the groups are built before the clock starts, as the peer's Arrow batches are
    batches: list[tuple[list[Any], list[Any]]] = []
    for g_lo, g_hi in groups(hi - lo, group):
        statements: list[Any] = []
        params: list[Any] = []
        for i in range(lo + g_lo, lo + g_hi):
            if dele[i]:
                statements.append(delete)
                params.append((pk[i], ck[i]))
            else:
                statements.append(update)
                params.append((v[i], f"w-{v[i]:010d}", pk[i], ck[i]))
        batches.append((statements, params))
    settle(session)
    start = time.perf_counter()
    if profiler is not None:
        profiler.client.enable()
    try:
        for statements, params in batches:
            # a bulk load: each group is acknowledged once durable, the last one committed
            for result in session.execute_many(statements, params, wait=False):
                if isinstance(result, Exception):
                    raise result
        session.flush()
    finally:
        if profiler is not None:
            profiler.client.disable()
    return time.perf_counter() - start


def log_rows(session: Any, table: str) -> int:
    from deltalake import DeltaTable

    name = f"bench.{table}_scylla_cdc_log"
    version = session.committed_version(name)
    if version is None:
        return 0
    where = session.table_location(name)
    return int(
        DeltaTable(where.delta_uri, version=version, storage_options=where.delta_options())
        .to_pyarrow_dataset()
        .count_rows()
    )


# -- the peer and the floor ------------------------------------------------------------------

DELTA_SCHEMA = pa.schema(
    [("pk", pa.int32()), ("ck", pa.int32()), ("v", pa.int32()), ("w", pa.string())]
)


def last_per_key(batch: pa.Table) -> pa.Table:
    """The last mutation of each (pk, ck) in ``batch`` (what a merge source must be)."""
    batch = batch.append_column("_i", pa.array(np.arange(batch.num_rows), pa.int64()))
    last = batch.group_by(["pk", "ck"]).aggregate([("_i", "max")]).column("_i_max")
    return batch.take(last).drop_columns(["_i"])


def create_deltars(path: str, rows: int = 0) -> None:
    from deltalake import write_deltalake

    data = DELTA_SCHEMA.empty_table()
    if rows:
        i = np.arange(rows, dtype=np.int64)
        data = pa.table(
            {
                "pk": pa.array(i // CK_PER_PARTITION, pa.int32()),
                "ck": pa.array(i % CK_PER_PARTITION, pa.int32()),
                "v": pa.array(i, pa.int32()),
                "w": pa.array([f"w-{x:010d}" for x in range(rows)], pa.string()),
            }
        )
    write_deltalake(
        path,
        data,
        mode="overwrite",
        configuration={"delta.enableChangeDataFeed": "true"},
    )


def merge_deltars(
    path: str, work: Workload, group: int, lo: int = 0, hi: int | None = None
) -> float:
    """Merge mutations ``lo:hi`` into the Delta table at ``path`` batch by batch; seconds."""
    from deltalake import DeltaTable

    hi = len(work) if hi is None else hi
    batches = [work.arrow(lo + g_lo, lo + g_hi) for g_lo, g_hi in groups(hi - lo, group)]
    dt = DeltaTable(path)
    start = time.perf_counter()
    for batch in batches:
        source = last_per_key(batch)
        (
            dt.merge(source, "t.pk = s.pk AND t.ck = s.ck", source_alias="s", target_alias="t")
            .when_matched_delete(predicate="s.op = 1")
            .when_matched_update(updates={"v": "s.v", "w": "s.w"}, predicate="s.op = 0")
            .when_not_matched_insert(
                updates={"pk": "s.pk", "ck": "s.ck", "v": "s.v", "w": "s.w"}, predicate="s.op = 0"
            )
            .execute()
        )
    return time.perf_counter() - start


def cdf_rows(path: str) -> int:
    from deltalake import DeltaTable

    reader = DeltaTable(path).load_cdf(starting_version=0)
    return sum(b.num_rows for b in reader)


def parquet_floor(work: Workload, path: str) -> float:
    import pyarrow.parquet as pq

    data = work.arrow()
    start = time.perf_counter()
    pq.write_table(data, path)
    return time.perf_counter() - start


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    mutations: int
    partitions: int
    group: int
    scaling_rows: tuple[int, int]
    scaling_batch: int
    ack_writes: int
    repeat: int


QUICK = Sizes(
    mutations=400_000,
    partitions=40_000,
    group=40_000,
    scaling_rows=(100_000, 1_000_000),  # the larger one is cut by the build budget
    scaling_batch=10_000,
    ack_writes=30,
    repeat=3,
)
FULL = Sizes(
    mutations=1_000_000,
    partitions=100_000,
    group=40_000,
    scaling_rows=(1_000_000, 10_000_000),
    scaling_batch=100_000,
    ack_writes=1_000,
    repeat=3,
)


def quick_caveat(peer_rows: int) -> str:
    """Why the quick ratios are not the full run's (printed in quick mode)."""
    note = (
        f"quick mode: the ratios to delta-rs are lower than a full run's. A delta-rs MERGE "
        f"rewrites the files its keys fall in, so its cost per batch grows with the table, "
        f"which stays small here (its change feed: {peer_rows:,} rows); cqlcdc's batch cost "
        f"does not grow with the table (see the scaling run). Run without --quick for the "
        f"figures of record"
    )
    full = RESULTS / "run.json"
    if full.exists():
        ratios = {
            k: v["ratio_to_deltars"] for k, v in json.loads(full.read_text())["approaches"].items()
        }
        note += (
            f"; the last full run: delta only {ratios['delta_only']:.2f}x, "
            f"pre+postimage {ratios['images']:.2f}x"
        )
    return note + "."


def scaling_run(
    session: Any,
    sizes: Sizes,
    group: int,
    build_budget_s: float,
    scratch: str,
) -> tuple[list[dict[str, Any]], bool]:
    """Grow one cqlcdc table to each size (stopping the last one at ``build_budget_s`` of
    building), applying the same batch at each; the peer gets the same batch at the same sizes.
    Returns the points and whether the largest size was reached."""
    session.execute(TABLE_DDL.format(name="s") + " " + CDC_DELTA)
    # the batch touches rows of the smallest table only, so it means the same at every size
    batch = make_workload(sizes.scaling_batch, sizes.scaling_rows[0] // CK_PER_PARTITION, SEED + 1)
    points: list[dict[str, Any]] = []
    built, build_s, reached = 0, 0.0, True
    for target in sizes.scaling_rows:
        started = time.perf_counter()
        while built < target:
            if build_s + (time.perf_counter() - started) > build_budget_s and built > 0:
                reached = False
                break
            step = min(group * 25, target - built)  # groups of `group`, one commit wait
            build_cqlcdc_range(session, "s", built, built + step, group)
            built += step
        build_s += time.perf_counter() - started
        if points and built == points[-1]["table_rows"]:
            break  # out of build budget before growing at all
        # the batch applied `sizes.repeat` times (the same rows again: the table keeps its
        # size), the median reported
        runs: list[tuple[float, dict[str, float]]] = []
        for _ in range(sizes.repeat):
            settle(session)
            done = session.engine.batch_timings.count
            seconds = apply_cqlcdc(session, "s", batch, len(batch))
            settle(session)
            later = session.engine.batch_timings.since(done)
            runs.append((seconds, later[0] if later else {}))
        runs.sort(key=lambda run: run[0])
        batch_s, timing = runs[len(runs) // 2]
        peer = os.path.join(scratch, f"peer-{built}")
        create_deltars(peer, built)
        peer_s = merge_deltars(peer, batch, len(batch))
        shutil.rmtree(peer, ignore_errors=True)
        points.append(
            {
                "table_rows": built,
                "build_s": round(build_s, 1),
                "batch_s": round(batch_s, 3),
                "batch_samples_s": [round(run[0], 3) for run in runs],
                "process_s": round(timing.get("process_s", 0.0), 3),
                "commit_s": round(timing.get("commit_s", 0.0), 3),
                "maintain_s": round(timing.get("maintain_s", 0.0), 3),
                "deltars_batch_s": round(peer_s, 3),
            }
        )
        print(f"  scaling: {points[-1]}", flush=True)
        if not reached:
            break
    return points, reached


def build_cqlcdc_range(session: Any, table: str, lo: int, hi: int, group: int) -> None:
    insert = session.prepare(f"INSERT INTO bench.{table} (pk, ck, v, w) VALUES (?, ?, ?, ?)")
    for g_lo, g_hi in groups(hi - lo, group):
        params = [
            (i // CK_PER_PARTITION, i % CK_PER_PARTITION, i, f"w-{i:010d}")
            for i in range(lo + g_lo, lo + g_hi)
        ]
        for result in session.execute_many([insert] * len(params), params, wait=False):
            if isinstance(result, Exception):
                raise result
    session.flush()


def ack_latency(session: Any, table: str, writes: int) -> list[float]:
    update = session.prepare(f"UPDATE bench.{table} SET v = ?, w = ? WHERE pk = ? AND ck = ?")
    settle(session)
    latencies = []
    for i in range(writes):
        t0 = time.perf_counter()
        session.execute(update, (i, f"ack-{i}", i % 1000, i % CK_PER_PARTITION))
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def chart(result: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install matplotlib)", file=sys.stderr)
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = ["(a) cqlcdc delta", "(b) cqlcdc images", "(c) delta-rs merge+CDF", "(d) parquet"]
    keys = ["delta_only", "images", "deltars", "parquet_floor"]
    rates = [result["approaches"][k]["rows_per_s"] for k in keys]
    bars = left.bar(names, rates, color=["#4c72b0", "#55a868", "#c44e52", "#8172b2"])
    left.set_yscale("log")
    left.set_ylim(bottom=min(rates) / 5)
    left.set_ylabel("mutations/s (log)")
    left.set_title(f"{result['workload']['mutations']:,} mutations, group {result['group']:,}")
    left.bar_label(bars, labels=[f"{r:,.0f}" for r in rates], fontsize=8)
    left.tick_params(axis="x", labelsize=8)
    points = result["scaling"]["points"]
    xs = [p["table_rows"] for p in points]
    right.plot(xs, [p["batch_s"] for p in points], "o-", label="cqlcdc")
    right.plot(xs, [p["deltars_batch_s"] for p in points], "s-", label="delta-rs merge")
    right.set_xscale("log")
    right.set_xlabel("table rows")
    right.set_ylabel("seconds for the batch")
    right.set_title(f"one {result['scaling']['batch_mutations']:,}-mutation batch")
    right.legend()
    fig.suptitle("cqlcdc benchmark (2-core machine, shared load: indicative)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path.relative_to(ROOT))


def cqlcdc_pass(
    data_dir: str,
    work: Workload,
    sizes: Sizes,
    args: argparse.Namespace,
    scratch: str,
    scaling: bool = False,
    proxy: Any = None,
) -> dict[str, Any]:
    """The cqlcdc parts on one data directory: warm-up, delta only and images ``repeat``
    times each, the scaling run if asked, the ack latency. With ``proxy`` (an ``S3Proxy``),
    the object-store requests of each measured part, by kind."""
    import cqlcdc

    started = time.perf_counter()
    session = cqlcdc.connect(data_dir=data_dir)
    spark_start_s = time.perf_counter() - started
    session.execute(KEYSPACE_DDL)
    # warm up (first Spark jobs, Python workers, imports, the JVM's compiled paths) on
    # tables of their own, one per measured CDC option, each through the paths its
    # measured run takes (the executor path too when the groups take it)
    warm_n = min(len(work), sizes.group, session.engine.config.driver_max_rows + 1_000)
    warm = make_workload(warm_n, sizes.partitions, SEED + 2)
    for name, cdc in (("warm_delta", CDC_DELTA), ("warm", CDC_IMAGES)):
        session.execute(TABLE_DDL.format(name=name) + " " + cdc)
        apply_cqlcdc(session, name, warm, sizes.group)
    approaches: dict[str, dict[str, Any]] = {}
    requests: dict[str, list[dict[str, int]]] = {}
    profiles: dict[str, str] = {}
    where = "local" if proxy is None else "s3"
    # the two CDC options alternate (a drift of the machine meets both alike), each on
    # fresh tables
    for r in range(sizes.repeat):
        for key, cdc in (("delta_only", CDC_DELTA), ("images", CDC_IMAGES)):
            table = f"{key}_{r}"
            session.execute(TABLE_DDL.format(name=table) + " " + cdc)
            profiler = Profiler(session) if args.profile and r == 0 and not proxy else None
            settle(session)
            if proxy is not None:
                proxy.reset()
            seconds = apply_cqlcdc(session, table, work, sizes.group, profiler=profiler)
            settle(session)  # the requests of the batch's maintenance count too
            if proxy is not None:
                requests.setdefault(key, []).append(proxy.reset())
            entry = approaches.setdefault(key, {"samples_s": []})
            entry["samples_s"].append(seconds)
            entry["log_rows"] = log_rows(session, table)
            if profiler is not None:
                session.engine.__dict__.pop("_process_batch", None)
                profiles[key] = profiler.write(f"{key}{'-quick' if args.quick else ''}")
            print(f"  cqlcdc {key} ({where}): {seconds:.1f}s", flush=True)
    points: list[dict[str, Any]] = []
    reached = False
    if scaling:
        points, reached = scaling_run(session, sizes, sizes.group, args.budget_s, scratch)
    settle(session)
    if proxy is not None:
        proxy.reset()
    ack_writes = sizes.ack_writes if proxy is None else args.s3_ack_writes
    latencies = ack_latency(session, "delta_only_0", ack_writes) if ack_writes else [0.0]
    settle(session)
    if proxy is not None:
        requests["ack"] = [proxy.reset()]
    print(f"  cqlcdc ack latency ({where}): p50 {statistics.median(latencies):.1f} ms", flush=True)
    session.close()
    return {
        "approaches": approaches,
        "scaling": points,
        "reached": reached,
        "latencies": latencies,
        "profiles": profiles,
        "requests": requests,
        "spark_start_s": spark_start_s,
        "wall_s": time.perf_counter() - started,
    }


@contextlib.contextmanager
def object_store_for(uri: str, latency_ms: float, scratch: str) -> Iterator[Any]:
    """The counting proxy (``s3_proxy.py``, ``latency_ms`` per request) in front of the
    store ``uri`` names: ``AWS_ENDPOINT_URL``'s, or a moto server started here (its bucket
    created) when the environment names none. The environment points at the proxy for the
    block (cqlcdc's Locations, delta-rs and pyarrow all read it)."""
    from urllib.parse import urlsplit

    sys.path.insert(0, str(ROOT))
    from benchmarks.s3_proxy import S3Proxy
    from tests.cluster.rig import moto_server

    url = urlsplit(uri)
    if url.scheme != "s3" or not url.netloc:
        raise SystemExit(f"--data-dir: an s3://bucket/prefix URI, not {uri!r}")
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    }
    with contextlib.ExitStack() as stack:
        upstream = os.environ.get("AWS_ENDPOINT_URL")
        if not upstream:
            logs = Path(scratch) / "moto-logs"
            logs.mkdir(exist_ok=True)
            server = stack.enter_context(moto_server(logs))
            os.environ.update(server.env)
            upstream = server.endpoint
        proxy = stack.enter_context(S3Proxy(upstream, latency_s=latency_ms / 1000))
        os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
        import boto3

        s3 = boto3.client("s3", endpoint_url=upstream)
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=url.netloc)
        try:
            yield proxy
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def per_thousand(counts: list[dict[str, int]], writes: int) -> dict[str, float]:
    """Requests by kind per 1,000 acknowledged writes (the median run's of several)."""
    totals = sorted(counts, key=lambda c: sum(c.values()))[len(counts) // 2]
    kinds = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")
    return {k: round(totals.get(k, 0) * 1000 / writes, 2) for k in kinds}


def object_store_result(
    args: argparse.Namespace, remote: dict[str, Any], mutations: int
) -> dict[str, Any]:
    approaches = remote["approaches"]
    for entry in approaches.values():
        entry["seconds"] = round(statistics.median(entry["samples_s"]), 3)
        entry["rows_per_s"] = round(mutations / entry["seconds"], 1)
        entry["samples_s"] = [round(x, 3) for x in entry["samples_s"]]
    latencies = remote["latencies"]
    requests = remote["requests"]
    return {
        "data_dir": args.data_dir,
        "latency_ms": args.s3_latency_ms,
        "approaches": approaches,
        "ack": {
            "writes": len(latencies),
            "p50_ms": round(statistics.median(latencies), 1),
            "p99_ms": round(percentile(latencies, 0.99), 1),
            "max_ms": round(max(latencies), 1),
        },
        "requests_per_1000_writes": {
            "delta_only": per_thousand(requests["delta_only"], mutations),
            "images": per_thousand(requests["images"], mutations),
            "ack": per_thousand(requests["ack"], max(1, len(latencies))),
        },
        "requests": requests,
        "spark_start_s": round(remote["spark_start_s"], 1),
    }


def print_object_store(
    local: dict[str, Any], local_ack: dict[str, Any], store: dict[str, Any]
) -> None:
    print(f"\nlocal directory against {store['data_dir']} (+{store['latency_ms']:g} ms a request)")
    print(f"{'':28}{'local rows/s':>14}{'s3 rows/s':>14}")
    for key in ("delta_only", "images"):
        print(
            f"{key:<28}{local[key]['rows_per_s']:>14,.0f}"
            f"{store['approaches'][key]['rows_per_s']:>14,.0f}"
        )
    print(
        f"{'ack p50 / p99 ms':<28}{local_ack['p50_ms']:>7} / {local_ack['p99_ms']:<5}"
        f"{store['ack']['p50_ms']:>7} / {store['ack']['p99_ms']}"
    )
    print("object-store requests per 1,000 acknowledged writes (s3; POST: multipart uploads)")
    kinds = ("PUT", "POST", "GET", "HEAD", "LIST", "DELETE")
    print(f"{'':28}" + "".join(f"{k:>9}" for k in kinds))
    for part, counts in store["requests_per_1000_writes"].items():
        print(f"{part:<28}" + "".join(f"{counts[k]:>9.2f}" for k in kinds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run, under 5 minutes")
    parser.add_argument("--mutations", type=int, help="workload size")
    parser.add_argument("--partitions", type=int, help="partitions (20 rows each)")
    parser.add_argument("--group", type=int, help="writes per execute_many / merge batch")
    parser.add_argument("--ack-writes", type=int, help="sequential acknowledged writes")
    parser.add_argument(
        "--build-budget", type=float, help="seconds to spend building the scaling table"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the cqlcdc path")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument(
        "--repeat", type=int, help="measurements of each approach (the median is reported)"
    )
    parser.add_argument(
        "--data-dir",
        help="also run the cqlcdc parts (no scaling) on this s3://bucket/prefix data directory; "
        "without AWS_ENDPOINT_URL a moto server is started for it",
    )
    parser.add_argument(
        "--s3-latency-ms",
        type=float,
        default=20.0,
        help="latency the counting proxy adds to each object-store request (0: the store alone)",
    )
    parser.add_argument(
        "--s3-ack-writes",
        type=int,
        default=50,
        help="sequential acknowledged writes on the s3 data directory (each waits its batch)",
    )
    args = parser.parse_args()
    base = QUICK if args.quick else FULL
    sizes = Sizes(
        mutations=args.mutations or base.mutations,
        partitions=args.partitions or base.partitions,
        group=args.group or base.group,
        scaling_rows=base.scaling_rows,
        scaling_batch=base.scaling_batch,
        ack_writes=args.ack_writes if args.ack_writes is not None else base.ack_writes,
        repeat=max(1, args.repeat or base.repeat),
    )
    build_budget = args.build_budget or (100.0 if args.quick else 1800.0)
    args.budget_s = build_budget
    wall = time.perf_counter()

    work = make_workload(sizes.mutations, sizes.partitions)
    scratch = tempfile.mkdtemp(prefix="cqlcdc-run-")
    approaches: dict[str, dict[str, Any]] = {}
    with PeakMemory() as memory:
        print(f"workload: {len(work):,} mutations, {int(work.delete.sum()):,} deletes", flush=True)
        # (d) the floor, (c) the peer: no Spark needed; each measured `repeat` times (fresh
        # files and tables each time), the median reported: on a shared 2-core machine one
        # measurement of the same code varies by +-15%
        floor = [
            parquet_floor(work, os.path.join(scratch, f"floor-{r}.parquet"))
            for r in range(sizes.repeat)
        ]
        approaches["parquet_floor"] = {"samples_s": floor}
        peer_samples: list[float] = []
        for r in range(sizes.repeat):
            peer = os.path.join(scratch, f"peer-{r}")
            create_deltars(peer)
            peer_samples.append(merge_deltars(peer, work, sizes.group))
            approaches["deltars"] = {"cdf_rows": cdf_rows(peer)}
            shutil.rmtree(peer, ignore_errors=True)
        approaches["deltars"]["samples_s"] = peer_samples
        print(f"  delta-rs merge: {', '.join(f'{x:.1f}s' for x in peer_samples)}", flush=True)

        local = cqlcdc_pass(
            os.path.join(scratch, "cqlcdc"),
            work,
            sizes,
            args,
            scratch,
            scaling=not args.skip_scaling,
        )
        spark_start_s = local["spark_start_s"]
        approaches.update(local["approaches"])
        scaling, reached = local["scaling"], local["reached"]
        latencies, profiles = local["latencies"], local["profiles"]
        object_store: dict[str, Any] | None = None
        if args.data_dir:
            with object_store_for(args.data_dir, args.s3_latency_ms, scratch) as proxy:
                remote = cqlcdc_pass(args.data_dir, work, sizes, args, scratch, proxy=proxy)
            object_store = object_store_result(args, remote, len(work))
    shutil.rmtree(scratch, ignore_errors=True)

    for entry in approaches.values():
        entry["seconds"] = round(statistics.median(entry["samples_s"]), 3)
        entry["rows_per_s"] = round(len(work) / entry["seconds"], 1)
        entry["samples_s"] = [round(x, 3) for x in entry["samples_s"]]
    peer_rate = approaches["deltars"]["rows_per_s"]
    floor_rate = approaches["parquet_floor"]["rows_per_s"]
    for entry in approaches.values():
        entry["ratio_to_deltars"] = round(entry["rows_per_s"] / peer_rate, 4)
        entry["ratio_to_parquet"] = round(entry["rows_per_s"] / floor_rate, 5)

    result: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "workload": {
            "mutations": len(work),
            "partitions": sizes.partitions,
            "rows_per_partition": CK_PER_PARTITION,
            "deletes": int(work.delete.sum()),
            "seed": SEED,
        },
        "group": sizes.group,
        "approaches": approaches,
        "scaling": {
            "batch_mutations": sizes.scaling_batch,
            "target_rows": list(sizes.scaling_rows),
            "largest_reached": reached,
            "points": scaling,
        },
        "ack": {
            "writes": sizes.ack_writes,
            "p50_ms": round(statistics.median(latencies), 1),
            "p99_ms": round(percentile(latencies, 0.99), 1),
            "max_ms": round(max(latencies), 1),
        },
        "peak_rss_mb": memory.peak_mb,
        "spark_start_s": round(spark_start_s, 1),
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "wall_s": round(time.perf_counter() - wall, 1),
        "profiles": profiles,
    }
    if object_store is not None:
        result["object_store"] = object_store
    stem = "run-quick" if args.quick else "run"
    custom = (
        args.mutations,
        args.partitions,
        args.group,
        args.ack_writes,
        args.build_budget,
        args.repeat,
    )
    if args.profile or args.skip_scaling or any(x is not None for x in custom):
        stem += "-custom"  # the standard result files hold standard runs only
    if args.data_dir:
        stem += "-s3"
    RESULTS.mkdir(parents=True, exist_ok=True)
    result["chart"] = chart(result, RESULTS / f"{stem}.png") if scaling else None
    (RESULTS / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")

    print()
    print(f"{'approach':<28}{'rows/s':>14}{'x (c) delta-rs':>16}{'x (d) parquet':>16}")
    labels = {
        "delta_only": "(a) cqlcdc delta only",
        "images": "(b) cqlcdc pre+postimage",
        "deltars": "(c) delta-rs merge + CDF",
        "parquet_floor": "(d) parquet write floor",
    }
    for key, label in labels.items():
        e = approaches[key]
        print(
            f"{label:<28}{e['rows_per_s']:>14,.0f}"
            f"{e['ratio_to_deltars']:>16.4f}{e['ratio_to_parquet']:>16.5f}"
        )
    print(
        f"group size {sizes.group:,}; log rows a={approaches['delta_only']['log_rows']:,} "
        f"b={approaches['images']['log_rows']:,}; delta-rs CDF rows "
        f"{approaches['deltars']['cdf_rows']:,}"
    )
    if args.quick:
        print(quick_caveat(approaches["deltars"]["cdf_rows"]))
    if scaling:
        print(f"\nscaling: one {sizes.scaling_batch:,}-mutation batch")
        print(f"{'table rows':>12}{'cqlcdc s':>12}{'delta-rs s':>12}{'build s':>10}")
        for p in scaling:
            print(
                f"{p['table_rows']:>12,}{p['batch_s']:>12.2f}"
                f"{p['deltars_batch_s']:>12.2f}{p['build_s']:>10.0f}"
            )
    print(
        f"\nack latency ({sizes.ack_writes} writes): p50 {result['ack']['p50_ms']} ms, "
        f"p99 {result['ack']['p99_ms']} ms; peak RSS {memory.peak_mb} MB; "
        f"wall {result['wall_s']} s"
    )
    if object_store is not None:
        print_object_store(result["approaches"], result["ack"], object_store)
    summary: dict[str, Any] = {
        "rows_per_s_delta_only": approaches["delta_only"]["rows_per_s"],
        "rows_per_s_images": approaches["images"]["rows_per_s"],
        "rows_per_s_deltars": peer_rate,
        "rows_per_s_parquet_floor": floor_rate,
    }
    by_rows = {p["table_rows"]: p["batch_s"] for p in scaling}
    if by_rows:
        small, large = scaling[0]["table_rows"], scaling[-1]["table_rows"]
        summary["batch_s_1m"] = by_rows.get(1_000_000, by_rows[small])
        summary["batch_s_10m"] = by_rows.get(10_000_000, by_rows[large])
        if large != 10_000_000:
            summary["scaling_rows"] = [small, large]
    summary.update(
        {
            "ack_p50_ms": result["ack"]["p50_ms"],
            "ack_p99_ms": result["ack"]["p99_ms"],
            "peak_rss_mb": memory.peak_mb,
            "group": sizes.group,
        }
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
