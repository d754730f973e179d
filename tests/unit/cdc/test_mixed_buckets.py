"""A bucket holding bulk writes and the row path's records at once.

For a table whose log needs no state, the bulk writes are made column-wise and the other
records take the row path beside them when no partition has both: the result is what
applying every write one by one gives, and the state is read for the row path's partitions
only. A partition with both takes the row path for all of them (a later record must see the
earlier bulk writes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cqlcdc.cdc.columnar import expanded
from cqlcdc.cdc.processor import CoreProcessor
from cqlcdc.cql import parse_statement
from cqlcdc.datadir.records import IngestRecord, records_to_arrow
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import VERSION, make_chunks, plan_bulk
from tests.bulk_writes import chunk_writes

from .test_feed_incarnations import KS, NoState, record, run

NOW_US = 1_700_000_000_000_000


class RecordingState(NoState):
    """An empty ``StateReader`` that notes the partitions asked for."""

    def __init__(self) -> None:
        self.asked: set[bytes] = set()

    def read(self, output: str, bucket: int, pks: Any, *rest: Any) -> pa.Table:
        self.asked |= set(pks.to_pylist() if isinstance(pks, pa.Array) else pks)
        return super().read(output, bucket, pks, *rest)


@pytest.fixture
def table(tmp_path: Path) -> TableSchema:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    return run(
        cat, KS, "CREATE TABLE ks.t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
    )


def _chunk(table: TableSchema, pks: list[int]) -> IngestRecord:
    plan = plan_bulk(table, parse_statement("INSERT INTO ks.t (pk, v) VALUES (?, ?)"), None, 0)
    assert plan is not None
    writes = chunk_writes(table, [plan], [0] * len(pks), [(pk, pk * 10) for pk in pks])
    chunks = make_chunks(table, writes, 1, NOW_US, 1)
    assert chunks is not None
    ((seq, bucket, token, pk, payload),) = chunks
    return IngestRecord(seq, table.table_id, table.schema_version, bucket, token, pk, payload)


def _sorted(rows: pa.Table) -> list[dict[str, object]]:
    return sorted(rows.to_pylist(), key=repr)


@pytest.mark.parametrize("overlap", [False, True], ids=["disjoint", "shared-partition"])
def test_bulk_writes_beside_row_records_give_what_one_by_one_gives(
    table: TableSchema, tmp_path: Path, overlap: bool
) -> None:
    chunk = _chunk(table, list(range(20)))  # seqs 1..20
    rows = [record(table, 21 + i, 100 + i, i) for i in range(5)]
    if overlap:
        rows.append(record(table, 26, 3, 333))  # a partition of the chunk's
    processor = CoreProcessor(DocumentDirectory.of(tmp_path))
    (group,) = processor.bucket_groups(records_to_arrow([chunk, *rows]))
    assert group.parts is not None and group.records.num_rows == len(rows)
    state = RecordingState()
    out = processor.process_bucket(group, state)

    bulk = group.parts
    versions = bulk.table.column(VERSION).to_pylist()
    one_by_one = group.records.to_pylist() + expanded(table, bulk.table, bulk.statements, versions)
    expected = processor._apply_rows(table, group.bucket, one_by_one, RecordingState(), None)
    assert sorted(out) == sorted(expected)
    for output in out:
        assert _sorted(out[output]) == _sorted(expected[output]), output
    row_pks = {r.pk for r in rows}
    if overlap:
        assert state.asked == row_pks | set(bulk.table.column("_pk").to_pylist())
    else:
        assert state.asked == row_pks  # the bulk writes' partitions are not read
