"""The contract between the pipeline and the semantic core: ingest records in, Arrow rows out.

>>> IngestRecord(seq=1, table_id="ks.t", schema_version=1, bucket=0, token=-5, pk=b"k",
...              payload=b"").seq
1
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from cqlcdc.bucket_groups import BucketGroup, record_groups

# The Arrow schema of ingest files; Spark reads them with the same schema (engine.INGEST_DDL).
INGEST_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("table_id", pa.string(), nullable=False),
        pa.field("schema_version", pa.int32(), nullable=False),
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("token", pa.int64(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("payload", pa.binary(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class IngestRecord:
    """One write, as the session made it durable.

    Attributes:
        seq: global, strictly increasing, assigned by the session.
        table_id: the table the write is for.
        schema_version: the table schema version the payload was encoded with.
        bucket: token bucket (the unit of parallelism), ``0..num_buckets-1``; or a
            negative value the processor gave a record whose payload spans buckets (its
            ``bucket_groups`` splits it; every executor task reads it).
        token: Murmur3 token of the partition key (int64).
        pk: the serialized partition key.
        payload: an encoded mutation, opaque to the pipeline.
    """

    seq: int
    table_id: str
    schema_version: int
    bucket: int
    token: int
    pk: bytes
    payload: bytes


def records_to_arrow(records: list[IngestRecord]) -> pa.Table:
    """Convert records to an Arrow table of :data:`INGEST_SCHEMA`, in the given order."""
    return pa.Table.from_pydict(
        {
            "seq": [r.seq for r in records],
            "table_id": [r.table_id for r in records],
            "schema_version": [r.schema_version for r in records],
            "bucket": [r.bucket for r in records],
            "token": [r.token for r in records],
            "pk": [r.pk for r in records],
            "payload": [r.payload for r in records],
        },
        schema=INGEST_SCHEMA,
    )


class StateReader(Protocol):
    """Read access to the committed outputs, given to the core for each bucket."""

    def read(
        self,
        output: str,
        bucket: int,
        pks: Sequence[bytes] | pa.Array,
        columns: list[str] | None = None,
        tokens: Sequence[int] | pa.Array | None = None,
    ) -> pa.Table:
        """Committed rows of output table `output` whose `bucket` and `pk` columns match
        (only ``columns`` of them, if given). ``pks`` as bytes or as an Arrow binary array
        (what a bucket of bulk writes has already: no Python bytes made for a read).
        ``tokens``, the tokens of ``pks`` if known, let a read skip the row groups whose
        token statistics cannot hold them (base files are sorted by token).

        "Committed" means: as of the last batch whose commit completed in every output
        (the manifest), which includes every earlier batch and none of the current one, even
        when the current batch is a replay after a crash that committed part of it.
        An output that does not exist yet reads as an empty table with no columns.
        """
        ...


class BucketProcessor(Protocol):
    """The semantic core, as the pipeline calls it: every hook the engine calls, each saying
    where it runs.

    ``process_bucket`` runs in the driver (small batches) or inside a Spark executor (large
    ones), so an implementation must be picklable and deterministic: a replayed batch must
    return the same rows. It is called for two buckets at once (threads of one process), so
    what it keeps between calls must be safe to share; the ``StateReader`` it gets is. The
    core (``cdc.processor.CoreProcessor``, below the pipeline in the layering) implements
    every hook and is checked against this protocol by mypy; other processors subclass it
    and inherit the defaults, which do nothing special.
    """

    def bucket_groups(self, records: pa.Table) -> list[BucketGroup]:
        """The batch's work by (table_id, bucket), in that order (driver or executor, before
        ``process_bucket``): where the processor splits records that span buckets. Default:
        each record is its bucket's (:func:`record_groups`)."""
        return record_groups(records)

    def process_bucket(self, group: BucketGroup, state: StateReader) -> dict[str, pa.Table]:
        """Process one table's records of one bucket in this micro-batch (driver or executor).

        Args:
            group: the table, the bucket, its records and what ``bucket_groups`` split off
                for it.
            state: committed state of the outputs (see :class:`StateReader`).

        Returns:
            Rows to append, keyed by output table name (e.g. ``base/<table_id>``); every
            table has a ``bucket`` (int32) and a ``pk`` (binary) column.
        """
        ...

    def driver_cost(self, records: pa.Table) -> int:
        """How costly ``records`` are to process (driver, before the batch): a batch costing
        at most the engine's ``driver_max_rows`` runs in the driver, a larger one on the
        executors. Default: one per record."""
        rows: int = records.num_rows
        return rows

    def is_staged(self, output: str) -> bool:
        """Whether rows of `output` are staged for ``finalize_batch`` rather than final
        (driver). Default: none are."""
        return False

    def finalize_batch(
        self, batch_id: int, max_seq: int, staged: dict[str, pa.Table], extra: dict[str, Any]
    ) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        """Turn a batch's staged outputs into final ones in one sequential pass (driver,
        after every bucket; deterministic). Called once per table that staged rows (its
        staged outputs only, so a failure stops that table alone), or once with none;
        ``extra`` is the processor's state from the manifest, threaded through the calls;
        the new state returned is committed with the batch. Default: as staged."""
        return staged, extra

    def expiry_column(self, output: str) -> str | None:
        """The column (epoch seconds, 0: never) by which rows of `output` expire and are
        purged between batches (driver). Default: none expire."""
        return None

    def table_name(self, table_id: str) -> str:
        """How the engine names a table to people (the log line of a stopped table;
        driver). Default: its id."""
        return table_id

    def compact_rows(self, output: str, rows: pa.Table) -> pa.Table | None:
        """The rows of some files of `output` merged into fewer rows, for compaction
        between batches (driver); None keeps them as they are (only the files are joined).
        Default: None."""
        return None
