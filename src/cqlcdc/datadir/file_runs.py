"""Which buckets' rows of a micro-batch share a data file: runs of consecutive buckets.

The core hands back each output's rows bucket by bucket, in bucket order. Written one file
per bucket, a batch of 1,000 single-row writes made ~16 files of ~60 rows per output: an
object write each in an object store. Joined into runs of at least ``TARGET_FILE_BYTES``, a
small batch writes one file per output, while a bulk batch, whose buckets hold
``ALONE_ROWS`` rows or more each, still writes one file per bucket, each as soon as its
bucket is done.

>>> runs = BucketRuns(target_bytes=1 << 20)
>>> runs.add("log/t", 0, pa.table({"_bucket": [0]}))
[]
>>> runs.add("log/t", 3, pa.table({"_bucket": [3]}))
[]
>>> [(output, rows.column("_bucket").to_pylist()) for output, rows in runs.drain()]
[('log/t', [0, 3])]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from cqlcdc.datadir.commit import ROW_GROUP_ROWS

#: A run of buckets is written once its rows reach this many bytes (of Arrow data). Small
#: enough that a bulk batch's buckets (tens of MiB each) are files of their own, written in
#: parallel while the next buckets are processed, and that a run waits in memory for little;
#: big enough that a micro-batch of thousands of single-row writes (~1 MiB per output) is
#: one file per output: a PUT per output and batch in an object store, not one per bucket.
#: Well below compaction's ``small_file_bytes`` (64 MiB), so runs of many buckets are small
#: files that compaction splits into files of one bucket each.
TARGET_FILE_BYTES = 8 * 1024 * 1024
#: A bucket with this many rows is a file of its own, whatever its bytes: a state read of one
#: bucket (the image path reads the state of every partition a batch writes) then reads only
#: its own file. Reading a bucket from files it shares with others reads and filters their
#: rows in the row groups it shares too: measured (median of 8, 16 buckets, 3 batches of
#: files) +24% for 12.5k-row buckets in files of 4 buckets, +43% in files of 16; +19% and
#: +25% for 2,000-row buckets. So every bucket of a bulk batch (the run.py groups of 40k
#: writes: 2,500 rows a bucket and more) stays a file of its own, as before, while a small
#: batch (the server's ~100 rows a bucket) is one file per output until compaction splits it.
ALONE_ROWS = ROW_GROUP_ROWS // 4


@dataclass(slots=True)
class _Run:
    """The rows gathered for one output's next file."""

    schema: pa.Schema
    last_bucket: int
    parts: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0

    def rows(self) -> pa.Table:
        return self.parts[0] if len(self.parts) == 1 else pa.concat_tables(self.parts)


class BucketRuns:
    """Gathers each output's per-bucket rows into files of consecutive buckets.

    ``add`` a bucket's rows of an output (buckets of an output in ascending order); it
    returns the rows of the files that are now complete. A run closes once it holds
    ``target_bytes``, before a bucket that is not above its last one (outputs shared by
    several tables, e.g. ``errors``, start again at each table), before rows of another
    schema (a table altered within the batch: each file keeps one schema), and before a
    bucket of ``alone_rows`` rows or more, which is a file of its own. So every file holds
    whole buckets in ascending order, each bucket's rows as the core made them. ``drain``
    returns the open runs, one file per output.

    Args:
        target_bytes: the Arrow bytes at which a run is complete.
        alone_rows: a bucket with at least this many rows is a file by itself.
    """

    def __init__(self, target_bytes: int = TARGET_FILE_BYTES, alone_rows: int = ALONE_ROWS) -> None:
        self.target_bytes = target_bytes
        self.alone_rows = alone_rows
        self._runs: dict[str, _Run] = {}

    def add(self, output: str, bucket: int, rows: pa.Table) -> list[pa.Table]:
        """Add the rows of ``bucket`` of ``output``; returns the files this completes."""
        done: list[pa.Table] = []
        run = self._runs.get(output)
        alone = rows.num_rows >= self.alone_rows
        if run is not None and (alone or bucket <= run.last_bucket or rows.schema != run.schema):
            done.append(self._runs.pop(output).rows())
            run = None
        if alone:
            done.append(rows)
            return done
        if run is None:
            run = self._runs[output] = _Run(rows.schema, bucket)
        run.parts.append(rows)
        run.last_bucket = bucket
        run.nbytes += rows.nbytes
        if run.nbytes >= self.target_bytes:
            done.append(self._runs.pop(output).rows())
        return done

    def drain(self) -> list[tuple[str, pa.Table]]:
        """The files of the runs still open, by output name; none are open after."""
        runs, self._runs = self._runs, {}
        return [(output, runs[output].rows()) for output in sorted(runs)]
