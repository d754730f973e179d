"""The Spark side of cqlcdc: the streaming engine and the Spark data sources.

The only package that imports pyspark. What the engine writes and reads (the ingest log,
Delta commits, the manifest, records) is the data directory's format, ``cqlcdc.store``,
which never imports Spark.
"""

from cqlcdc.pipeline.engine import Engine
from cqlcdc.pipeline.spark import get_spark

__all__ = ["Engine", "get_spark"]
