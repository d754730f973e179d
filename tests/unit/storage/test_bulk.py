"""The bulk path against the row path: same mutations, fragments, keys and log rows.

Every write of a chunk must mean exactly what the row path (``build_insert`` / ``build_update``
/ ``build_delete`` and the log writer) makes of the same statement and values; hypothesis
draws statements, values (nulls, TTLs, explicit timestamps) and table shapes.
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

from cqlcdc.cdc.bulk_log import bulk_log_rows, columnar_rows
from cqlcdc.cdc.data_dir import load_generations
from cqlcdc.cdc.log_writer import LogWriter, WriteInfo
from cqlcdc.cdc.outputs import log_arrow_schema, log_rows_to_arrow
from cqlcdc.cql import ast, parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import BaseRowsBuilder, row_partitions
from cqlcdc.storage.bulk import (
    BUCKET_OF,
    KIND_INSERT,
    MIXED_BUCKETS,
    SEQ,
    BulkStatement,
    ChunkWrites,
    arrow_columns,
    bound_columns,
    bulk_base_columns,
    bulk_base_rows,
    chunk_mutations,
    concat_chunks,
    decode_chunk,
    make_chunks,
    plan_bulk,
)
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.token import bucket_of, murmur3_token, serialize_partition_key
from cqlcdc.storage.vectorized import splitmix64
from tests.bulk_writes import chunk_writes, row_mutation

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
VALUE_TYPES = {
    "i": "int",
    "b": "bigint",
    "s": "smallint",
    "y": "tinyint",
    "t": "text",
    "a": "ascii",
    "d": "double",
    "f": "float",
    "o": "boolean",
    "x": "blob",
    "m": "timestamp",
}
NUM_BUCKETS = 16
NOW_US = 1_700_000_000_123_456


def _values(cql: str) -> st.SearchStrategy[Any]:
    ranges = {"int": 31, "bigint": 63, "smallint": 15, "tinyint": 7, "timestamp": 50}
    if cql in ranges:
        bits = ranges[cql]
        return st.integers(-(2**bits), 2**bits - 1)
    if cql == "text":
        return st.text(max_size=6)
    if cql == "ascii":
        return st.text(alphabet=st.characters(max_codepoint=127), max_size=6)
    if cql == "double":
        return st.floats(allow_nan=False)
    if cql == "float":
        return st.floats(width=32, allow_nan=False)
    if cql == "boolean":
        return st.booleans()
    return st.binary(max_size=6)


def _table(pk_types: list[str], ck_types: list[str], cdc: str) -> TableSchema:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    cols = [f"p{i} {t}" for i, t in enumerate(pk_types)]
    cols += [f"c{i} {t}" for i, t in enumerate(ck_types)]
    cols += [f"{name} {t}" for name, t in VALUE_TYPES.items()]
    pk = ", ".join(f"p{i}" for i in range(len(pk_types)))
    pk = f"({pk})" if len(pk_types) > 1 else pk
    key = ", ".join([pk, *(f"c{i}" for i in range(len(ck_types)))])
    catalog.execute(
        parse_statement(f"CREATE TABLE ks.t ({', '.join(cols)}, PRIMARY KEY ({key})) {cdc}"), None
    )
    schema = catalog.table("ks", "t")
    assert schema is not None
    return schema


@st.composite
def _statement(draw: st.DrawFn, schema: TableSchema) -> str:
    keys = [c.name for c in (*schema.partition_key, *schema.clustering_key)]
    where = " AND ".join(f"{k} = ?" for k in keys)
    cols = draw(st.lists(st.sampled_from(sorted(VALUE_TYPES)), min_size=1, max_size=4, unique=True))
    ts = draw(st.sampled_from(["", "TIMESTAMP 1234"]))
    ttl = draw(st.sampled_from(["", "TTL 30"]))
    using = " AND ".join(u for u in (ts, ttl) if u)
    using = f" USING {using}" if using else ""
    kind = draw(st.sampled_from(["insert", "update", "delete_row", "delete_cols"]))
    if kind == "insert":
        names = keys + cols
        marks = ", ".join("?" for _ in names)
        return f"INSERT INTO ks.t ({', '.join(names)}) VALUES ({marks}){using}"
    if kind == "update":
        sets = ", ".join(f"{c} = ?" for c in cols)
        return f"UPDATE ks.t{using} SET {sets} WHERE {where}"
    del_using = f" USING {ts}" if ts else ""
    if kind == "delete_row" and schema.clustering_key:
        return f"DELETE FROM ks.t{del_using} WHERE {where}"
    return f"DELETE {', '.join(cols)} FROM ks.t{del_using} WHERE {where}"


def _params(draw: st.DrawFn, schema: TableSchema, plan: BulkStatement) -> tuple[Any, ...]:
    out = []
    for name in plan.markers:
        col = schema.column(name)
        assert col is not None
        strategy = _values(col.type.cql_name)
        if col.kind == "regular":
            strategy = st.one_of(st.none(), strategy)
        out.append(draw(strategy))
    return tuple(out)


def _plan(schema: TableSchema, text: str) -> tuple[Any, BulkStatement]:
    stmt = parse_statement(text)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
    ts = 1234 if "TIMESTAMP" in text else None
    ttl = 30 if "TTL" in text and not isinstance(stmt, ast.Delete) else 0
    plan = plan_bulk(schema, stmt, ts, ttl)
    assert plan is not None, text
    return stmt, plan


def _row_path(schema: TableSchema, stmt: Any, ts: int, seed: int, params: tuple[Any, ...]) -> Any:
    return row_mutation(schema, stmt, WriteContext(ts, NOW_US, seed, bindings=params)).partition


@st.composite
def _case(
    draw: st.DrawFn,
) -> tuple[TableSchema, list[tuple[Any, BulkStatement]], list[int], list[tuple[Any, ...]]]:
    key_types = st.sampled_from(["int", "bigint", "text", "blob", "tinyint", "double", "boolean"])
    pk_types = draw(st.lists(key_types, min_size=1, max_size=2))
    ck_types = draw(st.lists(key_types, min_size=0, max_size=2))
    schema = _table(pk_types, ck_types, "WITH cdc = {'enabled': true}")
    texts = draw(st.lists(_statement(schema), min_size=1, max_size=3))
    plans = [_plan(schema, t) for t in texts]
    n = draw(st.integers(1, 40))
    which = draw(st.lists(st.integers(0, len(plans) - 1), min_size=n, max_size=n))
    params = [_params(draw, schema, plans[w][1]) for w in which]
    return schema, plans, which, params


def _nonempty_keys(schema: TableSchema, plan: BulkStatement, params: tuple[Any, ...]) -> bool:
    pk = [params[plan.markers.index(c.name)] for c in schema.partition_key]
    return len(serialize_partition_key(schema, pk)) > 0


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_case())
def test_bulk_writes_mean_what_the_row_path_makes(case: Any) -> None:
    schema, plans, which_list, params = case
    statements = tuple(p for _, p in plans)
    keep = [i for i, w in enumerate(which_list) if _nonempty_keys(schema, statements[w], params[i])]
    which_list = [which_list[i] for i in keep]
    params = [params[i] for i in keep]
    if not params:
        return
    n = len(params)
    writes = chunk_writes(schema, statements, which_list, params)
    timestamps, seeds = writes.timestamps, writes.seeds
    chunks = make_chunks(schema, writes, 100, NOW_US, NUM_BUCKETS)
    assert chunks is not None

    # the row path's keys, tokens, buckets, and seqs (bucket-major, stable)
    expected = []
    for j in range(n):
        stmt, _ = plans[which_list[j]]
        mutation = _row_path(schema, stmt, int(timestamps[j]), int(seeds[j]), params[j])
        pk_bytes = serialize_partition_key(schema, mutation.pk)
        token = murmur3_token(pk_bytes)
        expected.append((bucket_of(token, NUM_BUCKETS), j, pk_bytes, token, mutation))
    expected.sort(key=lambda e: (e[0], e[1]))
    # a group of this size is one chunk, its writes bucket by bucket, each with its bucket
    (chunk,) = chunks
    buckets = sorted({e[0] for e in expected})
    assert chunk[1] == (buckets[0] if len(buckets) == 1 else MIXED_BUCKETS)

    decoded = [decode_chunk(c[4]) for c in chunks]
    table, stmts = concat_chunks(decoded)
    assert table.column(BUCKET_OF).to_pylist() == [e[0] for e in expected]
    assert table.column(SEQ).to_pylist() == list(range(100, 100 + n))
    mutations = chunk_mutations(schema, table, stmts)
    columns = bulk_base_columns(schema, table, stmts)
    typed = pa.table({"pk": table.column("_pk"), **columns})
    fragments = [part for _, part in row_partitions(schema, typed)]
    # in another order (a base file's, by token): the same rows, moved
    order = np.argsort(-table.column("_token").to_numpy(), kind="stable")
    moved = bulk_base_columns(schema, table, stmts, order)
    assert pa.table(moved).equals(pa.table(columns).take(pa.array(order)))
    # the base rows the bulk path writes are, row for row, the row path's of its mutations
    written = bulk_base_rows(schema, table, stmts, 0)
    builder = BaseRowsBuilder(schema)
    by_token = np.argsort(table.column("_token").to_numpy(), kind="stable")
    seqs = table.column(SEQ).to_pylist()
    for i in by_token.tolist():
        _, _, pk_bytes, token, _ = expected[i]
        builder.add(0, pk_bytes, token, seqs[i], mutations[i])
    assert repr(written.to_pylist()) == repr(builder.table().to_pylist())
    for row, (_bucket, j, pk_bytes, token, mutation) in enumerate(expected):
        assert table.column("_pk")[row].as_py() == pk_bytes
        assert table.column("_token")[row].as_py() == token
        assert mutations[row] == mutation, (j, params[j])
        assert fragments[row] == mutation, (j, params[j])

    # the log: the column-wise rows equal the log writer's
    generations = load_generations(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    log = log_table_schema(schema)
    arrow_schema = log_arrow_schema(log)
    single = columnar_rows(table, stmts)
    fast = bulk_log_rows(schema, arrow_schema, table.filter(single), stmts, 7, generations)
    rows = []
    internal: list[tuple[int, bytes, int, int]] = []
    for row, (_, j, pk_bytes, token, mutation) in enumerate(expected):
        if not single[row]:
            continue
        writer = LogWriter(schema, mutation.pk, lambda t, tok=token: generations.stream_id(tok, t))
        seq = 100 + row
        info = WriteInfo(NOW_US // 1_000_000, int(seeds[j]), seq)
        written = writer.write(mutation, None, info)
        assert len(written) == 1
        expiry = NOW_US // 1_000_000 + schema.cdc.ttl_s
        internal += [(7, pk_bytes, seq, expiry)] * len(written)
        rows += written
    slow = log_rows_to_arrow(log, rows, internal)
    for name in fast.column_names:
        assert fast.column(name).equals(slow.column(name)), (
            name,
            fast.column(name),
            slow.column(name),
        )


def test_ttl_with_a_bound_null_is_left_to_the_log_writer() -> None:
    schema = _table(["int"], ["int"], "WITH cdc = {'enabled': true}")
    _, plan = _plan(schema, "INSERT INTO ks.t (p0, c0, i) VALUES (?, ?, ?) USING TTL 30")
    assert plan.kind == KIND_INSERT and plan.ttl == 30
    columns = bound_columns(schema, plan, [(1, 1, None), (2, 2, 5)])
    assert columns is not None
    table = pa.table(columns)
    writes = ChunkWrites(
        (plan,),
        np.zeros(2, np.int8),
        table,
        np.array([1, 2]),
        splitmix64(np.arange(2, dtype=np.uint64)),
    )
    chunks = make_chunks(schema, writes, 1, NOW_US, NUM_BUCKETS)
    assert chunks is not None
    merged, stmts = concat_chunks([decode_chunk(c[4]) for c in chunks])
    single = columnar_rows(merged, stmts)
    by_pk = dict(zip(merged.column("p0").to_pylist(), single.tolist(), strict=True))
    assert by_pk == {1: False, 2: True}


@pytest.mark.parametrize(
    "text",
    [
        "UPDATE ks.t SET i = ? WHERE p0 = ? AND c0 > ?",  # a range
        "UPDATE ks.t SET i = ? WHERE p0 = ?",  # no clustering key
        "UPDATE ks.t SET i = 5 WHERE p0 = ? AND c0 = ?",  # a literal value
        "UPDATE ks.t SET i = ? WHERE p0 = ? AND c0 = ? IF EXISTS",
        "INSERT INTO ks.t (p0, c0, i) VALUES (?, ?, ?) IF NOT EXISTS",
        "INSERT INTO ks.t (p0, i) VALUES (?, ?)",  # a key missing
        "DELETE FROM ks.t WHERE p0 = ?",  # a partition delete
        "DELETE FROM ks.t WHERE p0 = ? AND c0 IN ?",
    ],
)
def test_statements_outside_the_bulk_forms_take_the_row_path(text: str) -> None:
    schema = _table(["int"], ["int"], "WITH cdc = {'enabled': true}")
    assert plan_bulk(schema, parse_statement(text), None, 0) is None


def test_values_the_row_path_must_judge_fall_back() -> None:
    schema = _table(["int"], ["int"], "")
    _, plan = _plan(schema, "UPDATE ks.t SET i = ?, t = ? WHERE p0 = ? AND c0 = ?")
    assert bound_columns(schema, plan, [(1, "a", 1, 1)]) is not None
    assert bound_columns(schema, plan, [("1", "a", 1, 1)]) is None  # wrong Python type
    assert bound_columns(schema, plan, [(True, "a", 1, 1)]) is None  # bool is not an int
    assert bound_columns(schema, plan, [(2**31, "a", 1, 1)]) is None  # out of range
    assert bound_columns(schema, plan, [(1, "a", 1)]) is None  # too few values
    _, plan = _plan(schema, "UPDATE ks.t SET f = ? WHERE p0 = ? AND c0 = ?")
    assert bound_columns(schema, plan, [(float("inf"), 1, 1)]) is not None
    assert bound_columns(schema, plan, [(1e40, 1, 1)]) is None  # too large for a float
    assert arrow_columns(schema, plan, pa.table({"f": [1e40], "p": [1], "c": [1]})) is None


def test_a_batch_of_many_appends_keeps_each_write_with_its_statement() -> None:
    # a micro-batch may hold the chunks of many appends, with more statements than an int8
    schema = _table(["int"], ["int"], "WITH cdc = {'enabled': true}")
    stmt = parse_statement("UPDATE ks.t SET i = ? WHERE p0 = ? AND c0 = ?")
    decoded = []
    for k in range(200):
        plan = plan_bulk(schema, stmt, None, k)  # a distinct TTL: a distinct statement
        assert plan is not None
        columns = bound_columns(schema, plan, [(k, 1, 1)])
        assert columns is not None
        writes = ChunkWrites(
            (plan,), np.zeros(1, np.int8), pa.table(columns), np.array([k]), np.zeros(1, np.uint64)
        )
        chunks = make_chunks(schema, writes, 10 + k, NOW_US, NUM_BUCKETS)
        assert chunks is not None
        decoded.append(decode_chunk(chunks[0][4]))
    table, stmts = concat_chunks(decoded)
    mutations = chunk_mutations(schema, table, stmts)
    assert [m.rows[(1,)].cells["i"].ttl_s for m in mutations] == list(range(200))
