"""A group of bulk writes is one chunk whatever buckets it touches, and the pipeline's
split gives every bucket the writes, in seq order, that chunks of one bucket each would.

Checked against the other way of making the same writes' chunks (one per bucket, what a
group larger than ``GROUP_CHUNK_MAX`` gets), through ``split_chunks`` and the processor's
``bucket_groups`` beside the row path's own records.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqlcdc.cdc.processor import CoreProcessor
from cqlcdc.cql import parse_statement
from cqlcdc.datadir.records import IngestRecord, records_to_arrow
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage import bulk
from cqlcdc.storage.bulk import BUCKET_OF, MIXED_BUCKETS, SEQ, VERSION, make_chunks, plan_bulk
from cqlcdc.storage.chunk_groups import split_chunks
from cqlcdc.storage.vectorized import token_buckets
from tests.bulk_writes import chunk_writes

NUM_BUCKETS = 16
NOW_US = 1_700_000_000_000_000


@pytest.fixture(scope="module")
def schema() -> TableSchema:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(
        parse_statement(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
            "'replication_factor': 1}"
        ),
        None,
    )
    catalog.execute(
        parse_statement(
            "CREATE TABLE ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) "
            "WITH cdc = {'enabled': true}"
        ),
        None,
    )
    table = catalog.table("ks", "t")
    assert table is not None
    return table


def _plans(schema: TableSchema) -> tuple[bulk.BulkStatement, ...]:
    texts = [
        "INSERT INTO ks.t (pk, ck, v) VALUES (?, ?, ?)",
        "DELETE FROM ks.t WHERE pk = ? AND ck = ?",
    ]
    plans = []
    for text in texts:
        plan = plan_bulk(schema, parse_statement(text), None, 0)
        assert plan is not None
        plans.append(plan)
    return tuple(plans)


def _records(
    schema: TableSchema, chunks: list[tuple[int, int, int, bytes, bytes]]
) -> list[IngestRecord]:
    return [
        IngestRecord(seq, schema.table_id, schema.schema_version, b, token, pk, payload)
        for seq, b, token, pk, payload in chunks
    ]


writes_st = st.lists(
    st.tuples(st.integers(0, 1), st.integers(-50, 50), st.integers(0, 3), st.text(max_size=3)),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(writes=writes_st)
def test_one_chunk_per_group_splits_to_what_chunks_per_bucket_hold(
    schema: TableSchema, writes: list[tuple[int, int, int, str]], monkeypatch: Any
) -> None:
    plans = _plans(schema)
    which = [w for w, *_ in writes]
    params = [(pk, ck, v) if w == 0 else (pk, ck) for w, pk, ck, v in writes]
    group = chunk_writes(schema, plans, which, params)

    one = make_chunks(schema, group, 100, NOW_US, NUM_BUCKETS)
    assert one is not None and len(one) == 1
    with monkeypatch.context() as patched:
        patched.setattr(bulk, "GROUP_CHUNK_MAX", 0)  # what a bulk load's group gets
        per_bucket = make_chunks(schema, group, 100, NOW_US, NUM_BUCKETS)
    assert per_bucket is not None
    assert all(b >= 0 for _, b, *_ in per_bucket)  # each is one bucket's
    assert len({b for _, b, *_ in per_bucket}) == len(per_bucket)
    (seq, b, *_), last = one[0], per_bucket[-1]
    assert seq == last[0] == 100 + len(writes) - 1  # the same seqs, the chunk's is its last
    assert b == (per_bucket[0][1] if len(per_bucket) == 1 else MIXED_BUCKETS)

    split_one = split_chunks(records_to_arrow(_records(schema, one)))
    split_per_bucket = split_chunks(records_to_arrow(_records(schema, per_bucket)))
    assert sorted(split_one) == sorted(split_per_bucket)
    for key, part in split_one.items():
        other = split_per_bucket[key]
        assert part.statements == other.statements
        assert part.table.equals(other.table)
        seqs = part.table.column(SEQ).to_numpy()
        assert (np.diff(seqs) > 0).all()  # in seq order
        tokens = part.table.column("_token").to_numpy()
        assert set(token_buckets(tokens, NUM_BUCKETS).tolist()) == {key[1]}
        assert BUCKET_OF not in part.table.column_names
        assert set(part.table.column(VERSION).to_pylist()) == {schema.schema_version}
        assert part.record_seqs == (seq, seq)
        assert other.record_seqs[0] == other.record_seqs[1] >= max(seqs)


def test_a_bucket_gets_its_row_records_and_its_share_of_chunks(
    schema: TableSchema, tmp_path: Path
) -> None:
    """``CoreProcessor.bucket_groups``: the row path's records of a bucket and the bulk
    writes of the batch's chunks in that bucket are one group, naming every record's seq."""
    plans = _plans(schema)
    params = [(pk, 0, "x") for pk in range(40)]
    group = chunk_writes(schema, plans, [0] * len(params), params)
    chunks = make_chunks(schema, group, 10, NOW_US, NUM_BUCKETS)
    assert chunks is not None
    ((chunk_seq, mixed, *_),) = chunks
    assert mixed == MIXED_BUCKETS
    split = split_chunks(records_to_arrow(_records(schema, chunks)))
    some_bucket = min(split)[1]
    row = IngestRecord(60, schema.table_id, schema.schema_version, some_bucket, 5, b"k", b"")
    records = records_to_arrow([*_records(schema, chunks), row])
    catalog = Catalog(DocumentDirectory.of(tmp_path))
    groups = CoreProcessor(DocumentDirectory.of(tmp_path), catalog).bucket_groups(records)
    assert [(g.table_id, g.bucket) for g in groups] == sorted(split)
    for g in groups:
        assert g.parts.table.equals(split[(g.table_id, g.bucket)].table)
        if g.bucket == some_bucket:
            assert g.records.column("seq").to_pylist() == [60]
            assert (g.first_seq, g.last_seq) == (chunk_seq, 60)
        else:
            assert g.records.num_rows == 0
            assert (g.first_seq, g.last_seq) == (chunk_seq, chunk_seq)
    assert sum(g.parts.table.num_rows for g in groups) == len(params)
    assert pa.concat_tables([g.parts.table for g in groups]).column(SEQ).to_pylist() == sorted(
        range(10, 50)
    )
