"""The data directory's format, without Spark: the ingest log (``ingest``), ingest records
and the engine/core contract (``records``), Delta commits, the manifest and snapshots
(``commit``), file compaction and vacuum (``compaction``), failed-write recovery and the
directory lock (``recovery``).

The engine (``cqlcdc.pipeline``), the session and the readers all read and write through
it, so none of them needs Spark to open a data directory.
"""
