"""The SparkSession cqlcdc runs on: small, local-friendly defaults, loopback only.

>>> spark = get_spark("local[2]")  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

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
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
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
    # local mode: the driver is also the executor
    "spark.driver.memory": "1g",
    "spark.executor.memory": "1g",
    "spark.network.timeout": "300s",
    "spark.scheduler.mode": "FIFO",
    # a micro-batch of more than 32 ingest files (the default) would start a Spark job just
    # to list them; the engine reads them itself, so the driver lists them in place
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # format("cqlcdc") applies filters itself (Spark refuses a pushFilters reader without it)
    "spark.sql.python.filterPushdown.enabled": "true",
}


def get_spark(
    master: str = "local[*]", app_name: str = "cqlcdc", log_file: str | Path | None = None
) -> SparkSession:
    """Return the active SparkSession, or build one tuned for small local micro-batches.

    Works with ``local[N]`` and ``local-cluster[W,C,M]`` (separate executor JVMs on this
    machine). Python workers use this interpreter unless ``PYSPARK_PYTHON`` says otherwise.

    Args:
        master: the Spark master URL, e.g. ``local[*]`` or ``local-cluster[2,1,1024]``.
        app_name: the Spark application name.
        log_file: where the JVM's console output goes (its start-up warnings, log4j, the
            Python workers' stderr), appended; None: this process's stderr.

    Returns:
        The active session if there is one (its master is kept), else a new one; either
        way with the ``cqlcdc`` and ``cqlcdc_changefeed`` data sources registered.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        register_sources(active)
        return active
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in _CONF.items():
        builder = builder.config(key, value)
    if master.startswith("local-cluster"):
        # executors are separate JVMs: they find the Python interpreter through the env
        builder = builder.config("spark.executorEnv.PYSPARK_PYTHON", os.environ["PYSPARK_PYTHON"])
        builder = builder.config("spark.executorEnv.SPARK_LOCAL_IP", "127.0.0.1")
    spark = builder.getOrCreate() if log_file is None else _quietly(builder, Path(log_file))
    spark.sparkContext.setLogLevel("ERROR")
    register_sources(spark)
    return spark


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
