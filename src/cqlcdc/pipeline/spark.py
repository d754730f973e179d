"""The SparkSession cqlcdc runs on: small, local-friendly defaults, loopback by default, and
the same engine on a cluster (``spark://host:port``, ``local-cluster[...]``) with executors
that are told which Python to run and that are checked to exist before the engine starts.

>>> spark = get_spark("local[2]")  # doctest: +SKIP
>>> spark = get_spark("spark://127.0.0.1:7077")  # doctest: +SKIP
"""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from cqlcdc.errors import NoExecutors

# Why each setting: a cqlcdc micro-batch is usually tiny, so Spark's per-job overheads dominate.
_CONF: dict[str, str] = {
    # a handful of shuffle partitions; buckets are repartitioned explicitly anyway
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    # no UI, no event log: nothing listens on a port but the driver's loopback RPC
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.eventLog.enabled": "false",
    # Arrow for toArrow()/mapInArrow and pandas conversions
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    # reuse Python workers between tasks (a fork per task would cost ~100 ms)
    "spark.python.worker.reuse": "true",
    # streaming: skip empty batches, keep the checkpoint small. The poll for new ingest files
    # (a directory listing and offset planning in the JVM) runs every pollingDelay while no
    # data waits: at 5 ms an idle engine burnt ~70% of a core and slowed busy ones (the two
    # cores are shared with the Python processing); at 100 ms ~12% idle, and acknowledged
    # writes measured no slower (ack p50 84 ms vs 105 ms at 5 ms)
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.streaming.pollingDelay": "100ms",
    "spark.sql.streaming.minBatchesToRetain": "20",
    "spark.sql.streaming.fileSource.log.compactInterval": "50",
    "spark.sql.streaming.metricsEnabled": "false",
    # the checkpoint's offset and commit logs: plain FileSystem renames, no .crc side files
    # (the FileContext default costs ~30 ms per log entry here, this ~5 ms)
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    ),
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    # a small batch reads one small file: do not split or pack files across tasks
    "spark.sql.files.openCostInBytes": "1048576",
    "spark.sql.parquet.enableVectorizedReader": "true",
    "spark.sql.session.timeZone": "UTC",
    # local mode: the driver is also the executor (a cluster's executors: cluster_conf)
    "spark.driver.memory": "1g",
    "spark.network.timeout": "300s",
    "spark.scheduler.mode": "FIFO",
    # a micro-batch of more than 32 ingest files (the default) would start a Spark job just
    # to list them; the engine reads them itself, so the driver lists them in place
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # format("cqlcdc") applies filters itself (Spark refuses a pushFilters reader without it)
    "spark.sql.python.filterPushdown.enabled": "true",
}


# an executor's size on a cluster, unless the environment says otherwise (Spark's own names)
DEFAULT_EXECUTOR_MEMORY = "1g"
DEFAULT_EXECUTOR_CORES = "1"
# how long a cluster gets to give the application its first executor (CQLCDC_EXECUTOR_WAIT_S)
DEFAULT_EXECUTOR_WAIT_S = 60.0


def is_cluster(master: str) -> bool:
    """True when executors are processes of their own (``spark://``, ``local-cluster[...]``,
    ``k8s://``, ``yarn``), false for ``local[...]``, where the driver runs every task."""
    return not (master == "local" or master.startswith("local["))


def cluster_conf(master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The settings that depend on where executors run, from ``environ``.

    The driver listens on ``SPARK_LOCAL_IP`` (loopback by default: nothing is exposed).
    On a cluster, executors get an explicit size (``SPARK_EXECUTOR_MEMORY``, default 1g,
    and ``SPARK_EXECUTOR_CORES``, default 1, so a standalone worker's cores are not all
    given to one executor) and, through ``spark.executorEnv``, the Python interpreter to
    run (``PYSPARK_PYTHON``: the same path must exist on every worker) and the object
    store's endpoint and region, so tasks read the data directory where the driver does.
    ``SPARK_LOCAL_IP`` is passed on only when it is a loopback address: then the driver is
    reachable from this machine alone, so every executor runs here too; on other machines
    each worker's own ``SPARK_LOCAL_IP`` stands.

    >>> cluster_conf("local[2]", {"SPARK_LOCAL_IP": "127.0.0.1"})["spark.driver.host"]
    '127.0.0.1'
    """
    local_ip = environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {"spark.driver.host": local_ip, "spark.driver.bindAddress": local_ip}
    if not is_cluster(master):
        return conf
    conf["spark.executor.memory"] = environ.get("SPARK_EXECUTOR_MEMORY", DEFAULT_EXECUTOR_MEMORY)
    conf["spark.executor.cores"] = environ.get("SPARK_EXECUTOR_CORES", DEFAULT_EXECUTOR_CORES)
    conf["spark.executorEnv.PYSPARK_PYTHON"] = environ.get("PYSPARK_PYTHON", sys.executable)
    if _is_loopback(local_ip):
        conf["spark.executorEnv.SPARK_LOCAL_IP"] = local_ip
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION"):
        if environ.get(name):
            conf[f"spark.executorEnv.{name}"] = environ[name]
    return conf


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # a host name
        return address == "localhost"


def get_spark(
    master: str = "local[*]", app_name: str = "cqlcdc", log_file: str | Path | None = None
) -> SparkSession:
    """Return the active SparkSession, or build one tuned for small local micro-batches.

    Works with ``local[N]``, ``local-cluster[W,C,M]`` (separate executor JVMs on this
    machine) and a standalone cluster's ``spark://host:port`` (see :func:`cluster_conf`
    for what executors are given). Python workers use this interpreter unless
    ``PYSPARK_PYTHON`` says otherwise.

    Args:
        master: the Spark master URL, e.g. ``local[*]`` or ``spark://10.0.0.5:7077``.
        app_name: the Spark application name.
        log_file: where the JVM's console output goes (its start-up warnings, log4j, the
            Python workers' stderr), appended; None: this process's stderr.

    Returns:
        The active session if there is one (its master is kept), else a new one; either
        way with the ``cqlcdc`` and ``cqlcdc_changefeed`` data sources registered.

    Raises:
        NoExecutors: a cluster gave the application no executor within
            ``CQLCDC_EXECUTOR_WAIT_S`` seconds (default 60); the session is stopped.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        register_sources(active)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {**_CONF, **cluster_conf(master, os.environ)}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate() if log_file is None else _quietly(builder, Path(log_file))
    spark.sparkContext.setLogLevel("ERROR")
    if is_cluster(master):
        wait_s = float(os.environ.get("CQLCDC_EXECUTOR_WAIT_S", DEFAULT_EXECUTOR_WAIT_S))
        try:
            wait_for_executors(spark, wait_s)
        except NoExecutors:
            spark.stop()
            raise
    register_sources(spark)
    return spark


def executor_count(spark: SparkSession) -> int:
    """Executors registered with this application now (the driver's block manager is not
    one of them)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    return int(status.size()) - 1


def wait_for_executors(spark: SparkSession, timeout_s: float) -> int:
    """Wait until the cluster has given this application an executor; return how many.

    A standalone master that has no worker with the executor's memory and cores free keeps
    the application waiting for resources forever and tells it nothing (the driver's log
    warns ``Initial job has not accepted any resources`` only once a job waits): the engine
    would start and hang at its first micro-batch. Failing here, in one line that names
    what was asked, is the error a user can act on.

    Raises:
        NoExecutors: none registered within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while (count := executor_count(spark)) < 1:
        if time.monotonic() >= deadline:
            conf = spark.sparkContext.getConf()
            master = conf.get("spark.master")
            memory = conf.get("spark.executor.memory", DEFAULT_EXECUTOR_MEMORY)
            cores = conf.get("spark.executor.cores", DEFAULT_EXECUTOR_CORES)
            raise NoExecutors(
                f"no Spark executor registered with {master} within {timeout_s:g} s: "
                f"each executor asks for spark.executor.memory = {memory} and "
                f"spark.executor.cores = {cores}, and a cluster whose workers offer less "
                "(a standalone worker's --memory, its memory already in use) leaves the "
                "application waiting forever with no error; start workers with at least that "
                "free, or set SPARK_EXECUTOR_MEMORY / SPARK_EXECUTOR_CORES"
            )
        time.sleep(0.1)
    return count


def register_sources(spark: SparkSession) -> None:
    """Register cqlcdc's Spark data sources: ``format("cqlcdc")`` (base and log tables)
    and ``format("cqlcdc_changefeed")`` (changefeed topics)."""
    from cqlcdc.pipeline import feed_source, table_source

    feed_source.register(spark)
    table_source.register(spark)


def _quietly(builder: SparkSession.Builder, log_file: Path) -> SparkSession:
    """Start Spark with file descriptor 2 pointing at ``log_file``: the JVM (and every
    process it forks) inherits it as its stderr, so its start-up noise and later log lines
    go there, while this process's stderr is restored at once."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    target = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(target, 2)
        return builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)
