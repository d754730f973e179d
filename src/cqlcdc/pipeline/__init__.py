"""The Spark side of cqlcdc: the streaming engine and the Spark data sources.

The only package that imports pyspark. What the engine writes and reads (the ingest log,
Delta commits, the manifest, records) is the data directory's format, ``cqlcdc.datadir``,
which never imports Spark.

``Engine``, ``EngineConfig`` and ``get_spark`` are imported when first named: Spark's Python
workers import this package to unpickle a data source's reader (``ingest_source``, every
micro-batch's read planning), and must not pay for the engine and everything it imports (a
second of CPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cqlcdc.pipeline.engine import Engine
    from cqlcdc.pipeline.engine_config import EngineConfig
    from cqlcdc.pipeline.spark import get_spark

__all__ = ["Engine", "EngineConfig", "get_spark"]


def __getattr__(name: str) -> Any:
    if name == "Engine":
        from cqlcdc.pipeline.engine import Engine

        return Engine
    if name == "EngineConfig":
        from cqlcdc.pipeline.engine_config import EngineConfig

        return EngineConfig
    if name == "get_spark":
        from cqlcdc.pipeline.spark import get_spark

        return get_spark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
