"""Compaction through the real engine: many small writes, bounded files, unchanged reads."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import cqlcdc
from cqlcdc.store.compaction import CompactionPolicy
from tests.core_model import CoreModel, parse_qualified

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, s int static, v int, st set<int>, m map<int, int>, "
    "l list<int>, PRIMARY KEY (pk, ck)) "
    "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
)
SELECT = "SELECT pk, ck, s, v, st, m, l FROM ks.t"
LOG = 'SELECT "cdc$operation", pk, ck, s, v, st, m, l FROM ks.t_scylla_cdc_log'
LOG_COLUMNS = ("cdc$operation", "pk", "ck", "s", "v", "st", "m", "l")


def _statements(first: int, count: int) -> list[str]:
    out = []
    for i in range(first, first + count):
        p, c = i % 3, i % 4
        kind = i % 7
        if kind == 0:
            out.append(f"INSERT INTO ks.t (pk, ck, v, st) VALUES ({p}, {c}, {i}, {{{i}}})")
        elif kind == 1:
            out.append(
                f"UPDATE ks.t USING TTL 100000 SET v = {i}, m[{c}] = {i} "
                f"WHERE pk = {p} AND ck = {c}"
            )
        elif kind == 2:
            out.append(f"UPDATE ks.t SET s = {i} WHERE pk = {p}")
        elif kind == 3:
            out.append(
                f"UPDATE ks.t SET l = l + [{i}], st = st + {{{i}}} WHERE pk = {p} AND ck = {c}"
            )
        elif kind == 4:
            out.append(f"DELETE FROM ks.t WHERE pk = {p} AND ck > {c}")
        elif kind == 5:
            out.append(f"DELETE v FROM ks.t WHERE pk = {p} AND ck = {c}")
        else:
            out.append(f"INSERT INTO ks.t (pk, ck, v, l) VALUES ({p}, {c}, {i}, [{i}, {i}])")
    return out


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in result), key=repr)


def _log(result: Any) -> list[str]:
    """Log rows as text, list keys (timeuuids made from each write's random seed) masked."""
    return sorted(re.sub(r"UUID\('[0-9a-f-]+'\)", "<key>", repr(tuple(r))) for r in result)


def _files_per_bucket(data: Path, output: str) -> Counter[int]:
    actions = pa.table(DeltaTable(str(data / "tables" / output)).get_add_actions(flatten=True))
    column = "min.bucket" if "min.bucket" in actions.column_names else "min._bucket"
    return Counter(actions.column(column).to_pylist())


def test_compaction_bounds_files_and_keeps_reads(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    model = CoreModel()
    s = cqlcdc.connect(data_dir=data, master="local[2]", num_buckets=2)
    try:
        for ddl in (KS, TABLE):
            s.execute(ddl)
            model.run(ddl)
        table_id = s.catalog.table("ks", "t").table_id  # type: ignore[union-attr]
        outputs = [f"base/{table_id}", f"log/{table_id}"]
        # one statement per micro-batch: one small file per output and bucket each time
        for text in _statements(0, 24):
            s.execute(text)
            model.run(text)
        s.execute("TRUNCATE ks.t")
        model.states.pop(model.table(parse_qualified("ks.t")).table_id, None)
        for text in _statements(24, 24):
            s.execute(text)
            model.run(text)

        compactor = s.engine._compactor
        assert compactor is not None and compactor.compactions > 0
        limit = CompactionPolicy().max_small_files
        for output in outputs:
            assert max(_files_per_bucket(data, output).values()) <= limit, output
        # state read through compacted files feeds the preimages: the model agrees
        assert _rows(s.execute(SELECT)) == _rows(model.run(SELECT))
        log_before = _log(s.execute(LOG))
        assert log_before == _log(model.log("ks.t", *LOG_COLUMNS))
        before = _rows(s.execute(SELECT))

        # compact everything down to one file per bucket: reads do not change
        compactor.policy = CompactionPolicy(max_small_files=1)
        for output in outputs:
            compactor.forget(output)
            compactor.note_commit(output, [], DeltaTable(str(data / "tables" / output)))
        assert s.engine.maintain(force_vacuum=True) > 0
        for output in outputs:
            assert set(_files_per_bucket(data, output).values()) == {1}, output
        assert _rows(s.execute(SELECT)) == before
        assert _log(s.execute(LOG)) == log_before
    finally:
        s.close()

    s = cqlcdc.connect(data_dir=data, master="local[2]", num_buckets=2)
    try:
        assert _rows(s.execute(SELECT)) == before
        assert _log(s.execute(LOG)) == log_before
        # writes on top of the compacted state still see it (preimages, list appends)
        for text in _statements(48, 4):
            s.execute(text)
            model.run(text)
        assert _rows(s.execute(SELECT)) == _rows(model.run(SELECT))
        assert _log(s.execute(LOG)) == _log(model.log("ks.t", *LOG_COLUMNS))
    finally:
        s.close()
