"""The Spark side of cqlcdc: the ingest log, the streaming engine and Delta commits.

The only package that imports pyspark.
"""

from cqlcdc.pipeline.commit import Manifest, Snapshot
from cqlcdc.pipeline.engine import Engine
from cqlcdc.pipeline.ingest import IngestLog, read_ingest_file
from cqlcdc.pipeline.records import BucketProcessor, IngestRecord, StateReader
from cqlcdc.pipeline.spark import get_spark

__all__ = [
    "BucketProcessor",
    "Engine",
    "IngestLog",
    "IngestRecord",
    "Manifest",
    "Snapshot",
    "StateReader",
    "get_spark",
    "read_ingest_file",
]
