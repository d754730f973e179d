"""Changefeed records of bulk writes built column-wise (JSON, Debezium, DynamoDB Streams)
equal the per-record path's.

The differential property: random bulk writes (every bulk type, strings that need JSON
escaping, NaN and infinities, nulls) over a random earlier load, a feed of every format and
mode, with and without virtual timestamps or an AWS region, on one or several topic
partitions; the staged rows of ``stage_rows`` equal those ``FeedStager`` makes from the same
writes' row events, one record at a time. Plus ``json_texts`` and ``attribute_texts``
against ``encode(to_json(...))`` and ``encode(to_attribute_value(...))`` value by value.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cqlcdc.cdc.bulk_feeds import md5_partitions, stage_rows
from cqlcdc.cdc.bulk_images import bulk_changes
from cqlcdc.cdc.feeds import STAGE_SCHEMA, FeedStager, stage_output, table_feeds
from cqlcdc.changefeed.json_columns import attribute_texts, json_texts, sparse_objects
from cqlcdc.changefeed.partitioner import MD5, MURMUR3, md5_partition, ydb_partition_key
from cqlcdc.changefeed.records import encode
from cqlcdc.changefeed.values import to_attribute_value, to_json
from cqlcdc.cql import ast, parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import base_schema
from cqlcdc.storage.bulk import (
    BulkStatement,
    bulk_base_rows,
    concat_chunks,
    decode_chunk,
    make_chunks,
    plan_bulk,
)
from cqlcdc.storage.bulk_state import StateRows
from cqlcdc.storage.token import deserialize_partition_key
from cqlcdc.types import CqlType, native_type
from tests.bulk_writes import chunk_writes, feed_events

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
NOW_US = 1_700_000_000_123_456
MODES = ["KEYS_ONLY", "UPDATES", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]
COLUMNS = {
    "a": "tinyint",
    "b": "bigint",
    "c": "boolean",
    "d": "double",
    "e": "float",
    "t": "text",
    "x": "blob",
    "m": "timestamp",
}
TEXTS = st.sampled_from(
    ["", "a", 'q"uote', "back\\slash", "tab\tnew\nline", "\x01", "é ✓", "\u2028"]
)
STATEMENTS = [
    "INSERT INTO ks.t (pk, ck, a, b, c, d) VALUES (?, ?, ?, ?, ?, ?)",
    "INSERT INTO ks.t (pk, ck, t, x, m) VALUES (?, ?, ?, ?, ?)",
    "UPDATE ks.t SET e = ?, t = ? WHERE pk = ? AND ck = ?",
    "UPDATE ks.t SET b = ? WHERE pk = ? AND ck = ?",
    "DELETE FROM ks.t WHERE pk = ? AND ck = ?",
    "DELETE t, a FROM ks.t WHERE pk = ? AND ck = ?",
]


def _values(cql: str) -> st.SearchStrategy[Any]:
    return {
        "tinyint": st.integers(-128, 127),
        "bigint": st.integers(-(2**63), 2**63 - 1),
        "boolean": st.booleans(),
        "double": st.floats(allow_nan=True, allow_infinity=True),
        "float": st.floats(width=32, allow_nan=True, allow_infinity=True),
        "text": TEXTS,
        "blob": st.binary(max_size=6),
        "timestamp": st.integers(-(2**40), 2**40),
        "int": st.integers(-(2**31), 2**31 - 1),
    }[cql]


def _table(
    mode: str, virtual: bool, partitions: int, fmt: str = "JSON", more: tuple[str, ...] = ()
) -> TableSchema:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    cols = ", ".join(f"{n} {t}" for n, t in COLUMNS.items())
    catalog.execute(
        parse_statement(
            f"CREATE TABLE ks.t (pk int, ck text, {cols}, PRIMARY KEY (pk, ck)) "
            "WITH cdc = {'enabled': true}"
        ),
        None,
    )
    options = f"MODE = '{mode}', FORMAT = '{fmt}', TOPIC_MIN_ACTIVE_PARTITIONS = {partitions}"
    if virtual and fmt == "JSON":
        options += ", VIRTUAL_TIMESTAMPS = TRUE"
    if virtual and fmt == "DYNAMODB_STREAMS_JSON":
        options += ", AWS_REGION = 'eu-\"west'"
    catalog.execute(parse_statement(f"ALTER TABLE ks.t ADD CHANGEFEED f WITH ({options})"), None)
    for feed in more:  # "<name> WITH (<options>)"
        catalog.execute(parse_statement(f"ALTER TABLE ks.t ADD CHANGEFEED {feed}"), None)
    schema = catalog.table("ks", "t")
    assert schema is not None
    return schema


def _plan(schema: TableSchema, text: str) -> BulkStatement:
    stmt = parse_statement(text)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
    plan = plan_bulk(schema, stmt, None, 0)
    assert plan is not None, text
    return plan


def _param(schema: TableSchema, name: str) -> st.SearchStrategy[Any]:
    if name == "pk":
        return st.integers(0, 3)
    if name == "ck":
        return st.sampled_from(["k", 'k"2', "k\n3"])
    col = schema.column(name)
    assert col is not None
    return st.one_of(st.none(), _values(col.type.cql_name))


@st.composite
def _writes(
    draw: st.DrawFn, schema: TableSchema, plans: tuple[BulkStatement, ...]
) -> tuple[list[int], list[tuple[Any, ...]]]:
    n = draw(st.integers(1, 25))
    which = draw(st.lists(st.integers(0, len(plans) - 1), min_size=n, max_size=n))
    params = [tuple(draw(_param(schema, m)) for m in plans[w].markers) for w in which]
    return which, params


def _bucket(
    schema: TableSchema,
    plans: tuple[BulkStatement, ...],
    which: list[int],
    params: list[Any],
    first_ts: int,
    first_seq: int,
) -> pa.Table:
    writes = chunk_writes(schema, plans, which, params, first_ts)
    made = make_chunks(schema, writes, first_seq, NOW_US, 1)
    assert made is not None and len(made) == 1
    table, statements = concat_chunks([decode_chunk(made[0][4])])
    assert statements == plans
    return table


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_records_of_bulk_writes_equal_the_per_record_path(data: st.DataObject) -> None:
    fmt = data.draw(st.sampled_from(["JSON", "DEBEZIUM_JSON", "DYNAMODB_STREAMS_JSON"]))
    mode = data.draw(st.sampled_from(MODES))
    schema = _table(mode, data.draw(st.booleans()), data.draw(st.sampled_from([1, 3])), fmt)
    plans = tuple(_plan(schema, t) for t in STATEMENTS)
    prior = StateRows(base_schema(schema).empty_table())
    if data.draw(st.booleans()):  # an earlier load: the rows exist before
        which, params = data.draw(_writes(schema, plans))
        load = _bucket(schema, plans, which, params, 1_000, 10)
        prior = StateRows(bulk_base_rows(schema, load, plans, 0))
    which, params = data.draw(_writes(schema, plans))
    table = _bucket(schema, plans, which, params, 10_000, 100)
    changes = bulk_changes(schema, table, plans, prior)
    assert changes is not None
    (feed,) = table_feeds(schema)
    assert feed.partitioner == MD5  # what a feed made now gets; older feeds keep Murmur3
    feed = replace(feed, partitioner=data.draw(st.sampled_from([MD5, MURMUR3])))
    region = data.draw(st.sampled_from(["", "eu-north-1"]))  # the server's default

    fast = stage_rows(feed, schema, table, plans, changes, aws_region=region)

    stager = FeedStager(schema, [feed], aws_region=region)
    pks = table.column("_pk").to_pylist()
    seqs = table.column("_seq").to_pylist()
    now_us = table.column("_now_us").to_pylist()
    for position, row_event in feed_events(schema, table, plans, changes):
        step = now_us[position] // 1000
        pk = deserialize_partition_key(schema, pks[position])
        seq = seqs[position]
        stager.add(feed, pk, [row_event], seq=seq, step=step, tx_id=seq, created_ms=step)
    slow = stager.tables().get(
        stage_output(schema.table_id, feed.topic), STAGE_SCHEMA.empty_table()
    )

    event(f"{fmt} " + ("records" if slow.num_rows else "no records"))
    order = [("_seq", "ascending"), ("_idx", "ascending")]
    assert fast.sort_by(order).to_pylist() == slow.sort_by(order).to_pylist()


@st.composite
def _column(draw: st.DrawFn) -> tuple[CqlType, list[Any], pa.Array]:
    """A CQL type, Python values of it as the row path holds them, and their Arrow column."""
    cql = draw(st.sampled_from([*COLUMNS.values(), "int"]))
    cql_type = native_type(cql)
    values = draw(st.lists(st.one_of(st.none(), _values(cql)), max_size=8))
    array = pa.array(
        [None if v is None else cql_type.to_arrow(v) for v in values]
        if not cql_type.arrow_as_is
        else values,
        cql_type.arrow_type(),
    )
    if cql == "float":  # the row path holds a float as Arrow gives it back (float32)
        values = array.to_pylist()
    return cql_type, values, array


@settings(max_examples=200, deadline=None)
@given(_column())
def test_json_texts_are_the_json_of_each_value(column: tuple[CqlType, list[Any], pa.Array]) -> None:
    cql_type, values, array = column
    expected = ["null" if v is None else encode(to_json(cql_type, v)) for v in values]
    assert json_texts(cql_type, array).to_pylist() == expected


@settings(max_examples=200, deadline=None)
@given(_column())
def test_attribute_texts_are_the_attribute_value_of_each_value(
    column: tuple[CqlType, list[Any], pa.Array],
) -> None:
    cql_type, values, array = column
    expected = [None if v is None else encode(to_attribute_value(cql_type, v)) for v in values]
    assert attribute_texts(cql_type, array).to_pylist() == expected


def test_sparse_objects_leave_out_null_members_and_keep_every_row() -> None:
    texts = [pa.array(['"x,"', None, None]), pa.array(["1", "2", None])]
    assert sparse_objects(["a", "b"], texts, 3).to_pylist() == [
        '{"a":"x,","b":1}',
        '{"b":2}',
        "{}",
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_feeds_of_one_table_sharing_rendered_texts_get_their_own_records(
    data: st.DataObject,
) -> None:
    schema = _table(
        "NEW_AND_OLD_IMAGES",
        False,
        1,
        "DYNAMODB_STREAMS_JSON",
        more=(
            "g WITH (MODE = 'NEW_IMAGE', FORMAT = 'JSON')",
            "h WITH (MODE = 'OLD_IMAGE', FORMAT = 'DEBEZIUM_JSON')",
            "i WITH (MODE = 'KEYS_ONLY', FORMAT = 'DYNAMODB_STREAMS_JSON')",
        ),
    )
    plans = tuple(_plan(schema, t) for t in STATEMENTS)
    which, params = data.draw(_writes(schema, plans))
    table = _bucket(schema, plans, which, params, 10_000, 100)
    changes = bulk_changes(schema, table, plans, StateRows(base_schema(schema).empty_table()))
    assert changes is not None
    feeds = table_feeds(schema)
    assert len(feeds) == 4
    rendered: dict[tuple[str, str], pa.Array] = {}
    for feed in feeds:
        shared = stage_rows(feed, schema, table, plans, changes, rendered)
        alone = stage_rows(feed, schema, table, plans, changes)
        assert shared.equals(alone), feed.topic
    assert rendered  # the texts were shared


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 1024])
def test_md5_partitions_column_wise_equal_ydbs_rule(partitions: int) -> None:
    texts = [f'[{i},"é{i}"]' for i in range(3000)]
    expected = [md5_partition(ydb_partition_key(t), partitions) for t in texts]
    assert md5_partitions(pa.array(texts), partitions).tolist() == expected


def test_md5_partitions_at_the_slice_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Digests whose high half equals a boundary's: the low half decides, as 128-bit
    arithmetic does (the digests are put on the boundaries by a stand-in MD5)."""
    from cqlcdc.cdc import bulk_feeds

    width = ((1 << 128) - 1) // 3
    cases = [width - 1, width, width + 1, 2 * width - 1, 2 * width, (1 << 128) - 1, 0]
    digests = [v.to_bytes(16, "big") for v in cases]

    class OnBoundaries:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def digest(self) -> bytes:
            return digests[int(self.data)]

    monkeypatch.setattr(bulk_feeds.hashlib, "md5", OnBoundaries)
    got = md5_partitions(pa.array([str(i) for i in range(len(cases))]), 3).tolist()
    assert got == [min(v // width, 2) for v in cases] == [0, 1, 1, 1, 2, 2, 0]
