"""Base-table compaction: the state read after compaction is the state read before it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqlcdc.cdc.compaction import compact_base_rows
from cqlcdc.errors import CqlError
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import (
    FRAGMENT,
    BaseRowsBuilder,
    base_schema,
    partitions,
    write_rows,
)
from cqlcdc.storage.keys import Bound
from cqlcdc.storage.mutations import Mutation
from cqlcdc.storage.partition import Partition, RangeTombstone
from cqlcdc.storage.token import bucket_of, murmur3_token, serialize_partition_key
from cqlcdc.storage.view import PartitionView
from tests.core_model import NOW_US, CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, s int static, v int, st set<int>, m map<int, int>, "
    "l list<int>, PRIMARY KEY (pk, ck))"
)
COUNTERS = "CREATE TABLE ks.c (pk int, ck int, n counter, PRIMARY KEY (pk, ck))"
NOW_S = NOW_US // 1_000_000


@dataclass
class RecordingModel(CoreModel):
    """CoreModel that also keeps every write, as the pipeline stores it."""

    fragments: list[tuple[str, bytes, int, Partition]] = field(default_factory=list)

    def apply(
        self, schema: TableSchema, m: Mutation, now_s: int, seed: int, record: int = 0
    ) -> list[dict[str, Any]]:
        rows = super().apply(schema, m, now_s, seed, record)
        if not m.partition.is_empty():  # the processor skips empty mutations too
            pk = serialize_partition_key(schema, m.partition.pk)
            self.fragments.append((schema.table_id, pk, murmur3_token(pk), m.partition.copy()))
        return rows


def _model(*ddl: str) -> RecordingModel:
    model = RecordingModel()
    model.run(KS)
    for statement in ddl:
        model.run(statement)
    return model


def _rows(model: RecordingModel, table_id: str, first_seq: int = 1) -> pa.Table:
    picked = [f for f in model.fragments if f[0] == table_id]
    schema = model.catalog.table_by_id(table_id)
    assert schema is not None
    builder = BaseRowsBuilder(schema)
    for seq, (_, pk, token, part) in enumerate(picked, start=first_seq):
        builder.add(bucket_of(token, 4), pk, token, seq, part)
    return builder.table()


def _states(schema: TableSchema, rows: pa.Table, truncated: int = 0) -> dict[bytes, Partition]:
    """What readers do: per pk, merge the live rows in seq order."""
    return partitions(schema, rows.filter(pa.compute.greater(rows.column("seq"), truncated)))


def _view(schema: TableSchema, parts: dict[Any, Partition]) -> dict[Any, Any]:
    """Everything a read or the log writer can see of each partition, at several moments."""
    view = PartitionView(schema)
    seen: dict[Any, Any] = {}
    for key, part in parts.items():
        per_time = []
        for now_s in (NOW_S, NOW_S + 3, NOW_S + 10**6):
            static = view.static_row(part, now_s, lists_as_maps=True)
            rows = [
                view.clustering_row(part, ck, now_s, lists_as_maps=True)
                for ck in view.order.sorted(list(part.rows))
            ]
            per_time.append((static, [r for r in rows if r is not None]))
        if any(s is not None or r for s, r in per_time):
            seen[key] = per_time
    return seen


# -- random histories -----------------------------------------------------------------------

_pk = st.integers(0, 2)
_ck = st.integers(0, 3)
_val = st.integers(0, 9)


@st.composite
def _using(draw: st.DrawFn) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append(f"TTL {draw(st.sampled_from([1, 2, 100]))}")
    if draw(st.integers(0, 3)) == 0:  # out-of-order writes: older and tying timestamps
        parts.append(f"TIMESTAMP {NOW_US + draw(st.integers(-50, 400))}")
    return f" USING {' AND '.join(parts)}" if parts else ""


@st.composite
def _statement(draw: st.DrawFn) -> str:
    p, c, x, y = draw(_pk), draw(_ck), draw(_val), draw(_val)
    where = f"WHERE pk = {p} AND ck = {c}"
    u = draw(_using())
    # DELETE takes only USING TIMESTAMP
    ts = draw(st.sampled_from(["", f" USING TIMESTAMP {NOW_US + draw(st.integers(-50, 400))}"]))
    return draw(
        st.sampled_from(
            [
                f"INSERT INTO ks.t (pk, ck, v) VALUES ({p}, {c}, {x}){u}",
                f"INSERT INTO ks.t (pk, ck, st, m, l) VALUES ({p}, {c}, {{{x}}}, {{{x}: {y}}}, "
                f"[{x}, {y}]){u}",
                f"UPDATE ks.t{u} SET v = {x} {where}",
                f"UPDATE ks.t{u} SET s = {x} WHERE pk = {p}",
                f"UPDATE ks.t{u} SET st = st + {{{x}}}, m[{x}] = {y} {where}",
                f"UPDATE ks.t{u} SET st = st - {{{x}}}, l = l + [{y}] {where}",
                f"UPDATE ks.t{u} SET l = [{x}], m = {{{y}: {x}}} {where}",
                f"UPDATE ks.t SET l[0] = {x} {where}",
                f"UPDATE ks.t SET l = l - [{x}] {where}",
                f"DELETE FROM ks.t{ts} WHERE pk = {p}",
                f"DELETE FROM ks.t{ts} {where}",
                f"DELETE FROM ks.t{ts} WHERE pk = {p} AND ck > {c}",
                f"DELETE FROM ks.t{ts} WHERE pk = {p} AND ck >= {c} AND ck < {c + 2}",
                f"DELETE v, m[{x}] FROM ks.t{ts} {where}",
                f"DELETE s FROM ks.t{ts} WHERE pk = {p}",
                f"DELETE st FROM ks.t{ts} {where}",
            ]
        )
    )


def _run_all(model: RecordingModel, statements: list[str]) -> None:
    for text in statements:
        # e.g. a list index out of bounds: the write does not happen
        with contextlib.suppress(CqlError):
            model.run(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_statement(), min_size=1, max_size=20), st.booleans())
def test_every_write_round_trips_through_base_rows(statements: list[str], drop: bool) -> None:
    """Each write, as base rows and back, is the very partition it was (statics,
    collections, range and partition tombstones, TTLs alike), also for a table whose
    columns were dropped since, when read without hiding them (what compaction does)."""
    model = _model(TABLE)
    _run_all(model, statements)
    if drop:  # a dropped column's cells go to the residual row, exactly
        model.run("ALTER TABLE ks.t DROP v")
    schema = model.table(_qualified("ks.t"))
    for _, pk, _, part in model.fragments:
        rows = write_rows(schema, pk, part, seq=1)
        assert partitions(schema, rows, hide_dropped=False) == {pk: part}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(_statement(), min_size=1, max_size=40),
    st.integers(0, 40),
    st.integers(0, 40),
)
def test_compacting_a_prefix_keeps_every_state(
    statements: list[str], split: int, truncated: int
) -> None:
    model = _model(TABLE)
    _run_all(model, statements)
    schema = model.table(_qualified("ks.t"))
    rows = _rows(model, schema.table_id)
    split = min(split, rows.num_rows)
    truncated = min(truncated, split)  # a truncation covers only what was already written

    # the whole history compacted: at most one residual row per partition, at the highest
    # seq of its partition (merged in Python), model state unchanged
    whole = compact_base_rows(schema, rows, 0, NOW_S)
    residual = whole.filter(whole.column(FRAGMENT).is_valid())
    assert len(set(residual.column("pk").to_pylist())) == residual.num_rows
    expected = _states(schema, rows)
    seqs = list(zip(rows["seq"].to_pylist(), rows["pk"].to_pylist(), strict=True))
    for row in residual.to_pylist():
        assert row["seq"] == max(s for s, pk in seqs if pk == row["pk"])
    model_states = {
        serialize_partition_key(schema, pk): p for pk, p in model.states[schema.table_id].items()
    }
    assert _view(schema, _states(schema, whole)) == _view(schema, expected)
    assert _view(schema, expected) == _view(schema, model_states)

    # a prefix compacted, the rest merged on top later (what the engine's files look like)
    prefix = compact_base_rows(schema, rows.slice(0, split), truncated, NOW_S)
    assert min(prefix.column("seq").to_pylist(), default=truncated + 1) > truncated
    after = pa.concat_tables([prefix, rows.slice(split)])
    assert _view(schema, _states(schema, after, truncated)) == _view(
        schema, _states(schema, rows, truncated)
    )
    # compacting again (e.g. a bigger merge later) changes nothing either
    again = compact_base_rows(schema, after, truncated, NOW_S)
    assert _view(schema, _states(schema, again)) == _view(schema, _states(schema, rows, truncated))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), _pk, _ck, st.integers(-5, 5)),
        min_size=1,
        max_size=30,
    ),
    st.integers(0, 30),
)
def test_counters_keep_their_sum(ops: list[tuple[bool, int, int, int]], split: int) -> None:
    model = _model(COUNTERS)
    for delete, p, c, x in ops:
        if delete:  # a counter write takes no USING TIMESTAMP (ScyllaDB refuses it)
            model.run(f"DELETE FROM ks.c WHERE pk = {p}")
        else:
            model.run(f"UPDATE ks.c SET n = n + {x} WHERE pk = {p} AND ck = {c}")
    schema = model.table(_qualified("ks.c"))
    rows = _rows(model, schema.table_id)
    split = min(split, rows.num_rows)
    after = pa.concat_tables(
        [compact_base_rows(schema, rows.slice(0, split), 0, NOW_S), rows.slice(split)]
    )
    assert _view(schema, _states(schema, after)) == _view(schema, _states(schema, rows))


def test_counter_deleted_then_incremented_counts_the_old_delta() -> None:
    # LWW view of counters: an increment after a deletion lifts the cell above the tombstone,
    # and the merged sum still holds the older delta; compaction must not drop it
    model = _model(COUNTERS)
    model.run("UPDATE ks.c SET n = n + 3 WHERE pk = 0 AND ck = 0")
    model.run("DELETE FROM ks.c WHERE pk = 0")
    schema = model.table(_qualified("ks.c"))
    prefix = compact_base_rows(schema, _rows(model, schema.table_id), 0, NOW_S)
    model.fragments.clear()
    model.run("UPDATE ks.c SET n = n + 1 WHERE pk = 0 AND ck = 0")
    later = _rows(model, schema.table_id, first_seq=3)
    merged = _states(schema, pa.concat_tables([prefix, later]))
    model_states = {
        serialize_partition_key(schema, pk): p for pk, p in model.states[schema.table_id].items()
    }
    assert _view(schema, merged) == _view(schema, model_states)


def test_shadowed_data_is_dropped_and_tombstones_kept() -> None:
    model = _model(TABLE)
    for ck in range(3):
        model.run(f"INSERT INTO ks.t (pk, ck, v, st) VALUES (0, {ck}, {ck}, {{1, 2}})")
    model.run("DELETE FROM ks.t WHERE pk = 0 AND ck >= 1")
    schema = model.table(_qualified("ks.t"))
    rows = _rows(model, schema.table_id)
    compacted = compact_base_rows(schema, rows, 0, NOW_S)
    assert compacted.num_rows < rows.num_rows
    assert max(compacted.column("seq").to_pylist()) == 4
    (part,) = partitions(schema, compacted, hide_dropped=False).values()
    assert sorted(part.rows) == [(0,)]  # rows 1 and 2 are gone, the range tombstone stays
    assert part.range_tombstones == [
        RangeTombstone(Bound((1,), True), Bound((), True), NOW_US + 40)
    ]
    # a later write below the tombstone's timestamp stays invisible, as it would have
    model.run(f"INSERT INTO ks.t (pk, ck, v) VALUES (0, 2, 9) USING TIMESTAMP {NOW_US}")
    late = _rows(model, schema.table_id).slice(4)
    merged = _states(schema, pa.concat_tables([compact_base_rows(schema, rows, 0, NOW_S), late]))
    assert _view(schema, merged) == _view(schema, _states(schema, _rows(model, schema.table_id)))


def test_truncated_and_emptied_partitions_are_dropped() -> None:
    model = _model(TABLE)
    model.run("INSERT INTO ks.t (pk, ck, v) VALUES (0, 0, 1)")
    model.run("INSERT INTO ks.t (pk, ck, v) VALUES (1, 0, 1)")
    model.run("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1)")
    schema = model.table(_qualified("ks.t"))
    rows = _rows(model, schema.table_id)
    out = compact_base_rows(schema, rows, 2, NOW_S)
    assert out.column("seq").to_pylist() == [3]
    assert compact_base_rows(schema, rows, 3, NOW_S).num_rows == 0
    assert compact_base_rows(schema, rows.slice(0, 0), 0, NOW_S).schema == base_schema(schema)


def _qualified(name: str) -> Any:
    from tests.core_model import parse_qualified

    return parse_qualified(name)
