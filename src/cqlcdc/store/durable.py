"""Durable file writes: whole files built in Arrow memory, then written and fsynced at once.

Arrow writers given a Python file object call back into Python (taking the GIL) for every
page they write. The engine writes files from several threads while the client binds rows
in Python on another, and each of those calls then waits for the GIL holder's switch
interval: a log file of a few thousand rows took ~10x longer next to one busy Python thread
in a measurement here. Building the file in an Arrow buffer keeps the writer native; the
file is then written with one call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def parquet_bytes(rows: pa.Table, **options: Any) -> pa.Buffer:
    """``rows`` as one Parquet file in memory (``options`` as for ``pq.write_table``)."""
    sink = pa.BufferOutputStream()
    pq.write_table(rows, sink, **options)
    return sink.getvalue()


def write_synced(path: Path, data: pa.Buffer | bytes) -> int:
    """Write ``data`` as the file ``path`` and fsync it; returns its size in bytes."""
    with open(path, "wb") as sink:
        sink.write(memoryview(data))
        sink.flush()
        os.fsync(sink.fileno())
    return len(memoryview(data))


def fsync_dir(path: Path) -> None:
    """Make a rename or a new entry in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
