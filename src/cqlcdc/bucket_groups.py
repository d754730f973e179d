"""The unit of a micro-batch's work: one table's bucket, as the engine hands it to the core.

Apart from the engine/core contract (``cqlcdc.datadir.records``) so that the core, which
makes groups of its own records (``CoreProcessor.bucket_groups``), needs nothing of the
data directory's format to do it.

>>> record_groups(pa.table({"seq": pa.array([], pa.int64())}))
[]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# The order the core receives the records of one (table_id, bucket) group in.
SORT_KEYS: tuple[str, ...] = ("token", "pk", "seq")
_GROUP_ORDER = [("table_id", "ascending"), ("bucket", "ascending")] + [
    (key, "ascending") for key in SORT_KEYS
]


@dataclass(frozen=True, slots=True)
class BucketGroup:
    """The work of one table's bucket in a micro-batch, as ``process_bucket`` gets it.

    Attributes:
        table_id: the table.
        bucket: the bucket.
        records: the group's ingest rows (``cqlcdc.datadir.records.INGEST_SCHEMA``), sorted by
            :data:`SORT_KEYS`; may be empty when ``parts`` holds all of its work.
        first_seq, last_seq: the seqs of the ingest records the group draws on (what a
            failure of the group names).
        parts: what the processor's ``bucket_groups`` made of the records it split (a
            record spanning buckets): opaque to the engine, handed back with the group.
    """

    table_id: str
    bucket: int
    records: pa.Table
    first_seq: int
    last_seq: int
    parts: Any = None


def record_groups(records: pa.Table) -> list[BucketGroup]:
    """The records of each (table_id, bucket), in that order, each sorted by
    :data:`SORT_KEYS`: the groups of a batch whose records are each one bucket's."""
    if records.num_rows == 0:
        return []
    records = records.sort_by(_GROUP_ORDER)
    table_ids = records.column("table_id")
    buckets = records.column("bucket")
    changed = pc.or_(
        pc.not_equal(table_ids.slice(1), table_ids.slice(0, len(table_ids) - 1)),
        pc.not_equal(buckets.slice(1), buckets.slice(0, len(buckets) - 1)),
    )
    starts = [0, *(int(i) + 1 for i in pc.indices_nonzero(changed).to_pylist()), len(records)]
    groups = []
    for start, end in itertools.pairwise(starts):
        group = records.slice(start, end - start).combine_chunks()
        seqs = group.column("seq")
        groups.append(
            BucketGroup(
                group.column("table_id")[0].as_py(),
                group.column("bucket")[0].as_py(),
                group,
                pc.min(seqs).as_py(),
                pc.max(seqs).as_py(),
            )
        )
    return groups
