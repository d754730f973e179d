"""Spark's Python daemon with the imports its workers need already done.

Spark starts a Python daemon per kind of worker (``python -m <daemon module> <worker
module>``) and forks a worker from it for each use. The workers that plan a micro-batch's
read of the ingest source (``pyspark.sql.worker.plan_data_source_read``) are forked anew
for every micro-batch and imported pyarrow, ``pyspark.sql.datasource`` and the source's
module each time: 0.2-1.4 s of CPU per batch, 200-400 µs per write at a thousand writes a
second through the server (issue 28's profile). Imported here once, before the first fork,
a worker inherits them. ``spark.python.daemon.module`` names this module
(``pipeline.spark``); the workers themselves are Spark's, unchanged.
"""

from __future__ import annotations

import importlib
import sys

# what every cqlcdc data source's worker imports; pyarrow starts no thread on import, so
# forking after it is safe
import pyarrow  # noqa: F401
import pyspark.sql.datasource  # noqa: F401
from pyspark.daemon import manager

import cqlcdc.pipeline.ingest_source  # noqa: F401


def preload(worker_module: str) -> None:
    """Import the worker module the daemon will run (a name Spark passes; a module
    that cannot be imported here fails in the worker, with Spark's own error)."""
    try:
        importlib.import_module(worker_module)
    except ImportError:
        pass


if __name__ == "__main__":
    if len(sys.argv) > 1:
        preload(sys.argv[1])
    manager()
