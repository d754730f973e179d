"""Images of bulk writes computed column-wise equal the log writer's, write by write.

The differential property: a random prior state (row-path writes of every kind: TTLs, range
and partition tombstones, statics, frozen and non-frozen collections, client timestamps)
and a random bucket of bulk writes; ``image_log_rows`` either declines (and the pipeline
applies the writes one by one) or gives exactly the rows ``LogWriter`` gives when the writes
are applied one by one in seq order, for every preimage/postimage option.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from cqlcdc.cdc.bulk_images import bulk_changes, image_log_rows
from cqlcdc.cdc.compaction import compact_base_rows
from cqlcdc.cdc.data_dir import load_generations
from cqlcdc.cdc.feeds import table_feeds
from cqlcdc.cdc.log_writer import LogWriter, WriteInfo
from cqlcdc.cdc.outputs import log_arrow_schema, log_rows_to_arrow
from cqlcdc.cdc.streams import Generations
from cqlcdc.changefeed.events import RowEvent, row_events
from cqlcdc.cql import ast, parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.log_table import BATCH_SEQ_NO, log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import BaseRowsBuilder, partitions
from cqlcdc.storage.bulk import (
    BulkStatement,
    ChunkWrites,
    bulk_base_rows,
    chunk_mutations,
    concat_chunks,
    decode_chunk,
    make_chunks,
    plan_bulk,
)
from cqlcdc.storage.bulk_state import StateRows, clustering_keys, parse_rows
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.token import (
    murmur3_token,
    serialize_partition_key,
)
from cqlcdc.storage.view import PartitionView
from tests.bulk_writes import chunk_writes, feed_events, row_mutation

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
NOW_US = 1_700_000_000_123_456
NOW_S = NOW_US // 1_000_000
FIRST_TS = 10_000  # the batch's session timestamps: FIRST_TS, FIRST_TS + 1, ...
GENERATIONS: Generations = load_generations(DocumentDirectory.of(Path(tempfile.mkdtemp())))
IMAGES = [
    ("'true'", "false"),
    ("'full'", "false"),
    ("'false'", "true"),
    ("'true'", "true"),
    ("'full'", "true"),
]


def _table(preimage: str, postimage: str, with_set: bool, feed: bool = False) -> TableSchema:
    """The table; with ``feed``, f is a blob (a changefeed's columns must be of the bulk
    types for the column-wise path) and the table has a NEW_AND_OLD_IMAGES feed."""
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    # a non-frozen list no bulk write touches (its log column is a map of its timeuuids)
    extra = ", z set<int>, l list<int>" if with_set else ""
    f_type = "blob" if feed else "frozen<list<int>>"
    catalog.execute(
        parse_statement(
            "CREATE TABLE ks.t (pk int, ck int, v int, w text, m timestamp, "
            f"f {f_type}, s int static{extra}, PRIMARY KEY (pk, ck)) WITH cdc = "
            f"{{'enabled': true, 'preimage': {preimage}, 'postimage': {postimage}}}"
        ),
        None,
    )
    if feed:
        catalog.execute(
            parse_statement(
                "ALTER TABLE ks.t ADD CHANGEFEED u WITH (MODE = 'NEW_AND_OLD_IMAGES', "
                "FORMAT = 'JSON')"
            ),
            None,
        )
    schema = catalog.table("ks", "t")
    assert schema is not None
    return schema


@st.composite
def _prior_write(draw: st.DrawFn, with_set: bool, feed: bool = False) -> tuple[str, int]:
    """A row-path write with literals and its own timestamp (and the now it ran at)."""
    pk, ck = draw(st.integers(0, 2)), draw(st.integers(0, 3))
    ts = draw(st.one_of(st.integers(1, 9_000), st.integers(9_000, 10_030)))
    ttl = draw(st.sampled_from(["", "", " AND TTL 5", " AND TTL 100"]))
    ran = draw(st.sampled_from([0, 3, 5, 10]))  # seconds before the batch
    v = draw(st.sampled_from(["1", "2", "null"]))
    kinds = ["insert", "update", "static", "row", "range", "partition", "cells"]
    kind = draw(st.sampled_from([*kinds, "set"] if with_set else kinds))
    where = f"WHERE pk = {pk} AND ck = {ck}"
    text = {
        "insert": f"INSERT INTO ks.t (pk, ck, v, w, f) VALUES ({pk}, {ck}, {v}, 'x{ts}', "
        f"{'0x0' + str(ck) if feed else f'[1, {ck}]'}) USING TIMESTAMP {ts}{ttl}",
        "update": f"UPDATE ks.t USING TIMESTAMP {ts}{ttl} SET v = {v}, m = 7 {where}",
        "static": f"UPDATE ks.t USING TIMESTAMP {ts}{ttl} SET s = {v} WHERE pk = {pk}",
        "row": f"DELETE FROM ks.t USING TIMESTAMP {ts} {where}",
        "range": f"DELETE FROM ks.t USING TIMESTAMP {ts} WHERE pk = {pk} AND ck > {ck}",
        "partition": f"DELETE FROM ks.t USING TIMESTAMP {ts} WHERE pk = {pk}",
        "cells": f"DELETE w, f FROM ks.t USING TIMESTAMP {ts} {where}",
        "set": f"UPDATE ks.t USING TIMESTAMP {ts}{ttl} SET z = z + {{{ck}}} {where}",
    }[kind]
    return text, ran


def _row_path(schema: TableSchema, text: str, now_us: int) -> Partition:
    return row_mutation(schema, parse_statement(text), WriteContext(1, now_us, 7)).partition


BULK_TEXTS = [
    "INSERT INTO ks.t (pk, ck, v, w) VALUES (?, ?, ?, ?)",
    "INSERT INTO ks.t (pk, ck, m) VALUES (?, ?, ?)",
    "UPDATE ks.t SET v = ?, w = ? WHERE pk = ? AND ck = ?",
    "UPDATE ks.t SET m = ? WHERE pk = ? AND ck = ?",
    "DELETE FROM ks.t WHERE pk = ? AND ck = ?",
    "DELETE v FROM ks.t WHERE pk = ? AND ck = ?",
    "UPDATE ks.t USING TIMESTAMP 10005 SET v = ? WHERE pk = ? AND ck = ?",
    "UPDATE ks.t USING TTL 30 SET w = ? WHERE pk = ? AND ck = ?",
    "DELETE FROM ks.t USING TIMESTAMP 10005 WHERE pk = ? AND ck = ?",
    "INSERT INTO ks.t (pk, ck, v) VALUES (?, ?, ?) USING TIMESTAMP 10005",
]


def _plan(schema: TableSchema, text: str) -> BulkStatement:
    stmt = parse_statement(text)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
    ts = 10_005 if "TIMESTAMP" in text else None
    plan = plan_bulk(schema, stmt, ts, 30 if "TTL" in text else 0)
    assert plan is not None, text
    return plan


def _param(name: str) -> st.SearchStrategy[Any]:
    if name in ("pk",):
        return st.integers(0, 2)
    if name == "ck":
        return st.integers(0, 3)
    if name == "w":
        return st.one_of(st.none(), st.sampled_from(["a", "b"]))
    return st.one_of(st.none(), st.integers(0, 3))


@st.composite
def _case(draw: st.DrawFn) -> dict[str, Any]:
    preimage, postimage = draw(st.sampled_from(IMAGES))
    feed = draw(st.booleans())
    with_set = not feed and draw(st.booleans())
    schema = _table(preimage, postimage, with_set, feed)
    prior = draw(st.lists(_prior_write(with_set, feed), max_size=12) | st.just([]))
    texts = draw(
        st.lists(st.sampled_from(BULK_TEXTS[:6]), min_size=1, max_size=4)
        | st.lists(st.sampled_from(BULK_TEXTS), min_size=1, max_size=4)
    )
    plans = tuple(_plan(schema, t) for t in dict.fromkeys(texts))
    bulk = None
    if draw(st.booleans()):  # an earlier load: bulk fragments in the prior state
        bulk_texts = draw(st.lists(st.sampled_from(BULK_TEXTS), min_size=1, max_size=3))
        bulk_plans = tuple(_plan(schema, t) for t in dict.fromkeys(bulk_texts))
        k = draw(st.integers(1, 20))
        bulk_which = draw(st.lists(st.integers(0, len(bulk_plans) - 1), min_size=k, max_size=k))
        bulk = {
            "plans": bulk_plans,
            "which": bulk_which,
            "params": [tuple(draw(_param(m)) for m in bulk_plans[w].markers) for w in bulk_which],
            "first_ts": draw(st.sampled_from([1, 500, 9_990, 10_004])),
            "ran": draw(st.sampled_from([0, 10, 29, 40])),
        }
    n = draw(st.integers(1, 30))
    which = draw(st.lists(st.integers(0, len(plans) - 1), min_size=n, max_size=n))
    params = [tuple(draw(_param(m)) for m in plans[w].markers) for w in which]
    return {
        "schema": schema,
        "prior": prior,
        "bulk": bulk,
        "plans": plans,
        "which": which,
        "params": params,
        "split": draw(st.integers(0, n)),
        "gap_s": draw(st.sampled_from([0, 2, 5, 100])),
    }


def _bucket(
    schema: TableSchema,
    plans: tuple[BulkStatement, ...],
    which: list[int],
    params: list[Any],
    split: int,
    gap_s: int,
    first_ts: int = FIRST_TS,
    first_seq: int = 100,
    now_us: int = NOW_US,
) -> pa.Table:
    """The bulk writes as the pipeline reads them: one bucket, seqs from 100, in two appends
    (the writes before ``split`` at NOW_US, the rest ``gap_s`` seconds later)."""
    n = len(which)
    writes = chunk_writes(schema, plans, which, params, first_ts)
    chunks = []
    for lo, hi, now in ((0, split, now_us), (split, n, now_us + gap_s * 1_000_000)):
        if lo == hi:
            continue
        part = ChunkWrites(
            writes.statements,
            writes.stmt[lo:hi],
            writes.columns.slice(lo, hi - lo),
            writes.timestamps[lo:hi],
            writes.seeds[lo:hi],
        )
        made = make_chunks(schema, part, first_seq + lo, now, 1)
        assert made is not None and len(made) == 1
        chunks.append(decode_chunk(made[0][4]))
    table, statements = concat_chunks(chunks)
    assert statements == plans
    return table


def _prior_fragments(
    schema: TableSchema, prior: list[tuple[str, int]], bulk: dict[str, Any] | None = None
) -> pa.Table:
    """The base rows of the prior writes: the row path's, then a load's."""
    builder = BaseRowsBuilder(schema)
    seq = 0
    for text, ran in prior:
        mutation = _row_path(schema, text, NOW_US - ran * 1_000_000)
        pk = serialize_partition_key(schema, mutation.pk)
        seq += 1
        builder.add(0, pk, murmur3_token(pk), seq, mutation)
    parts = [builder.table()]
    if bulk:
        table = _bucket(
            schema,
            bulk["plans"],
            bulk["which"],
            bulk["params"],
            0,
            0,
            bulk["first_ts"],
            1,
            NOW_US - bulk["ran"] * 1_000_000,
        )
        loaded = bulk_base_rows(schema, table, bulk["plans"], 0)
        at = loaded.schema.get_field_index("seq")  # after the row path's writes
        later = pc.add(loaded.column("seq"), seq + 1 - pc.min(loaded.column("seq")).as_py())
        parts.append(loaded.set_column(at, loaded.schema.field("seq"), later))
    return pa.concat_tables(parts)


def _partitions(schema: TableSchema, rows: pa.Table) -> dict[bytes, Partition]:
    return partitions(schema, rows)


def _one_by_one(
    schema: TableSchema, table: pa.Table, statements: Any, parts: dict[bytes, Partition]
) -> pa.Table:
    """What the pipeline's row path logs: the log writer per write, in seq order."""
    rows: list[dict[str, Any]] = []
    internal: list[tuple[int, bytes, int, int]] = []
    mutations = chunk_mutations(schema, table, statements)
    seqs = table.column("_seq").to_pylist()
    seeds = table.column("_seed").to_pylist()
    now_s = [now // 1_000_000 for now in table.column("_now_us").to_pylist()]
    for i in np.argsort(seqs, kind="stable"):
        mutation = mutations[i]
        key = serialize_partition_key(schema, mutation.pk)
        token = murmur3_token(key)
        writer = LogWriter(schema, mutation.pk, lambda t, tok=token: GENERATIONS.stream_id(tok, t))
        current = parts.get(key)
        info = WriteInfo(now_s[i], seeds[i] & 0xFFFFFFFFFFFFFFFF, seqs[i])
        for row in writer.write(mutation, current, info):
            internal.append((0, key, seqs[i], now_s[i] + 86_400))
            rows.append(row)
        if current is None:
            current = parts[key] = Partition(mutation.pk)
        current.apply(mutation)
    return log_rows_to_arrow(log_table_schema(schema), rows, internal)


def _columnar(
    schema: TableSchema, table: pa.Table, statements: Any, fragments: pa.Table
) -> pa.Table | None:
    changes = bulk_changes(schema, table, statements, StateRows(fragments))
    if changes is None:
        return None
    log_schema = log_arrow_schema(log_table_schema(schema))
    return image_log_rows(schema, log_schema, table, statements, 0, GENERATIONS, changes)


def _events_one_by_one(
    schema: TableSchema, table: pa.Table, statements: Any, parts: dict[bytes, Partition]
) -> list[tuple[int, RowEvent]]:
    """The row path's feed events: ``row_events`` per write, in seq order."""
    out: list[tuple[int, RowEvent]] = []
    mutations = chunk_mutations(schema, table, statements)
    seqs = table.column("_seq").to_pylist()
    now_s = [now // 1_000_000 for now in table.column("_now_us").to_pylist()]
    for i in np.argsort(seqs, kind="stable"):
        mutation = mutations[i]
        key = serialize_partition_key(schema, mutation.pk)
        before = parts.get(key)
        after = before.copy() if before is not None else Partition(mutation.pk)
        after.apply(mutation)
        out += [(seqs[i], e) for e in row_events(schema, before, mutation, after, now_s[i])]
        parts[key] = after
    return out


def _assert_same(fast: pa.Table, slow: pa.Table) -> None:
    """The same rows (in another order: the log's readers order them)."""
    assert fast.num_rows == slow.num_rows, (fast.to_pylist(), slow.to_pylist())
    order = [("_seq", "ascending"), (BATCH_SEQ_NO, "ascending")]
    fast = fast.take(pc.sort_indices(fast, order))
    for name in slow.column_names:
        assert fast.column(name).combine_chunks().equals(slow.column(name).combine_chunks()), (
            name,
            fast.column(name).to_pylist(),
            slow.column(name).to_pylist(),
        )


def _plans(schema: TableSchema, texts: list[int]) -> tuple[tuple[BulkStatement, ...], list[int]]:
    plans = tuple(_plan(schema, BULK_TEXTS[t]) for t in dict.fromkeys(texts))
    return plans, [list(dict.fromkeys(texts)).index(t) for t in texts]


def _pinned(prior: list[tuple[str, int]], texts: list[int], params: list[Any], **kw: Any) -> Any:
    """A case by hand; ``load=(texts, params, first_ts)`` adds an earlier load."""
    schema = _table(kw.pop("preimage", "'full'"), kw.pop("postimage", "true"), False)
    plans, which = _plans(schema, texts)
    bulk = None
    if "load" in kw:
        load_texts, load_params, first_ts = kw.pop("load")
        load_plans, load_which = _plans(schema, load_texts)
        bulk = {"plans": load_plans, "which": load_which, "params": load_params}
        bulk.update({"first_ts": first_ts, "ran": 0})
    case = {"schema": schema, "prior": prior, "bulk": bulk, "plans": plans, "which": which}
    case["params"] = params
    return {**case, "split": kw.pop("split", 0), "gap_s": kw.pop("gap_s", 0)}


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_case())
# a prior cell expires between two appends of the bucket: the second one's preimage lacks it
@example(
    _pinned(
        [("UPDATE ks.t USING TIMESTAMP 5 AND TTL 5 SET v = 1 WHERE pk = 0 AND ck = 0", 3)],
        [3, 3],
        [(1, 0, 0), (2, 0, 0)],
        split=1,
        gap_s=5,
    )
)
# a prior value newer than the batch's writes survives them (last write wins)
@example(
    _pinned(
        [("INSERT INTO ks.t (pk, ck, v) VALUES (0, 0, 1) USING TIMESTAMP 10020", 0)],
        [2, 2],
        [(2, "a", 0, 0), (3, "b", 0, 0)],
    )
)
# loaded rows: inserted then deleted (no marker left); a cell and the row tombstone on one
# timestamp (the tombstone wins); two values on one timestamp (the merge compares them).
# The batch's first seven writes go to another row: their timestamps are not above 10005.
@example(_pinned([], [2], [(5, "c", 1, 0)], load=([0, 4], [(1, 0, 1, "a"), (1, 0)], 100)))
@example(
    _pinned(
        [],
        [2] * 8,
        [(5, "c", 1, 1)] * 7 + [(6, "d", 0, 0)],
        load=([6, 8], [(1, 0, 0), (0, 0)], 1),
    )
)
@example(
    _pinned(
        [],
        [2] * 8,
        [(5, "c", 0, 0)] * 7 + [(6, "d", 1, 1)],
        load=([6, 6], [(2, 1, 1), (1, 1, 1)], 1),
    )
)
def test_columnar_images_equal_the_log_writer_one_write_at_a_time(case: dict[str, Any]) -> None:
    schema = case["schema"]
    table = _bucket(
        schema, case["plans"], case["which"], case["params"], case["split"], case["gap_s"]
    )
    fragments = _prior_fragments(schema, case["prior"], case["bulk"])
    fast = _columnar(schema, table, case["plans"], fragments)
    bulk_only = fragments.num_rows > 0 and bool(StateRows(fragments).columnar().any())
    event(("columnar" if fast is not None else "declined") + (", bulk state" if bulk_only else ""))
    if fast is None:
        return
    slow = _one_by_one(schema, table, case["plans"], _partitions(schema, fragments))
    _assert_same(fast, slow)
    if table_feeds(schema):  # the feed's row events too (its records are made from them)
        changes = bulk_changes(schema, table, case["plans"], StateRows(fragments))
        assert changes is not None
        seqs = table.column("_seq").to_pylist()
        events = feed_events(schema, table, case["plans"], changes)
        got = sorted(((seqs[p], e) for p, e in events), key=lambda pe: pe[0])
        parts = _partitions(schema, fragments)
        assert got == _events_one_by_one(schema, table, case["plans"], parts)


def test_a_load_over_earlier_writes_is_columnar_and_declines_what_it_must() -> None:
    schema = _table("'full'", "true", True)
    prior = [
        ("INSERT INTO ks.t (pk, ck, v, w) VALUES (0, 0, 1, 'a') USING TIMESTAMP 5", 0),
        ("UPDATE ks.t USING TIMESTAMP 6 SET v = 2 WHERE pk = 1 AND ck = 1", 0),
        ("DELETE FROM ks.t USING TIMESTAMP 7 WHERE pk = 2", 0),
    ]
    plans = tuple(_plan(schema, BULK_TEXTS[t]) for t in (2, 4))
    params = [(7, "x", 0, 0), (8, None, 1, 1), (9, "y", 2, 3), (0, 0), (10, "z", 0, 0)]
    table = _bucket(schema, plans, [0, 0, 0, 1, 0], params, 5, 0)
    fast = _columnar(schema, table, plans, _prior_fragments(schema, prior))
    assert fast is not None
    slow = _one_by_one(schema, table, plans, _partitions(schema, _prior_fragments(schema, prior)))
    _assert_same(fast, slow)
    # declined: a TTL in the batch; a non-frozen collection in a touched row
    ttl = (_plan(schema, BULK_TEXTS[7]),)
    with_ttl = _bucket(schema, ttl, [0], [("w", 0, 0)], 1, 0)
    assert _columnar(schema, with_ttl, ttl, _prior_fragments(schema, [])) is None
    with_set = [
        *prior,
        ("UPDATE ks.t USING TIMESTAMP 8 SET z = z + {1} WHERE pk = 0 AND ck = 0", 0),
    ]
    assert _columnar(schema, table, plans, _prior_fragments(schema, with_set)) is None


def _live(schema: TableSchema, fragments: pa.Table) -> dict[bytes, Any]:
    """What reads see of each partition, at several moments."""
    view = PartitionView(schema)
    out = {}
    for pk, part in _partitions(schema, fragments).items():
        rows = view.order.sorted(list(part.rows))
        out[pk] = [
            [live for ck in rows if (live := view.clustering_row(part, ck, now)) is not None]
            for now in (NOW_S - 20, NOW_S, NOW_S + 25, NOW_S + 10**6)
        ]
    return out


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_case())
# a row alive only by its marker: the INSERT's fragment must stay, though its cells lost
@example(_pinned([], [2], [(1, "a", 0, 0)], load=([0, 2], [(0, 0, 1, "a"), (None, None, 0, 0)], 1)))
def test_compaction_keeps_bulk_state_in_bulk_fragments_and_equal(case: dict[str, Any]) -> None:
    schema = case["schema"]
    base = _prior_fragments(schema, case["prior"], case["bulk"])
    compacted = compact_base_rows(schema, base, 0, NOW_S)
    order = ("bucket", "pk", "seq")
    keys = list(zip(*(compacted.column(c).to_pylist() for c in order), strict=True))
    assert keys == sorted(keys)  # the promised order, typed and residual rows alike
    assert _live(schema, compacted) == _live(schema, base)
    # a partition of plain typed rows keeps a subset of them, unchanged
    plain = base.filter(pa.array(StateRows(base).columnar()))
    kept = compacted.filter(pc.is_in(compacted.column("pk"), value_set=plain.column("pk")))
    before = plain.to_pylist()
    assert all(row in before for row in kept.to_pylist())


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_case())
def test_partial_parses_are_parts_of_the_whole_parse(case: dict[str, Any]) -> None:
    schema = case["schema"]
    base = _prior_fragments(schema, case["prior"], case["bulk"])
    typed = base.filter(base.column("fragment").is_null())
    parsed = parse_rows(schema, typed)
    if parsed is None:
        return
    # without values (what compaction parses): the same but for them
    bare = parse_rows(schema, typed, with_values=False)
    assert bare is not None
    for whole, part in zip(parsed.components(), bare.components(), strict=True):
        assert part.value is None
        assert whole.present.tolist() == part.present.tolist()
        assert whole.ts.tolist() == part.ts.tolist()
        assert whole.expiry.tolist() == part.expiry.tolist()
    # a row's clustering key as the bulk path makes it from a write's values
    assert len(clustering_keys(schema, typed)) == typed.num_rows
