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
from cqlcdc.datadir.compaction import CompactionPolicy
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


def _statement(i: int, p: int, c: int) -> str:
    """The i-th write of the workload, on partition ``p``, clustering row ``c``."""
    kind = i % 7
    if kind == 0:
        return f"INSERT INTO ks.t (pk, ck, v, st) VALUES ({p}, {c}, {i}, {{{i}}})"
    if kind == 1:
        return f"UPDATE ks.t USING TTL 100000 SET v = {i}, m[{c}] = {i} WHERE pk = {p} AND ck = {c}"
    if kind == 2:
        return f"UPDATE ks.t SET s = {i} WHERE pk = {p}"
    if kind == 3:
        return f"UPDATE ks.t SET l = l + [{i}], st = st + {{{i}}} WHERE pk = {p} AND ck = {c}"
    if kind == 4:
        return f"DELETE FROM ks.t WHERE pk = {p} AND ck > {c}"
    if kind == 5:
        return f"DELETE v FROM ks.t WHERE pk = {p} AND ck = {c}"
    return f"INSERT INTO ks.t (pk, ck, v, l) VALUES ({p}, {c}, {i}, [{i}, {i}])"


def _statements(first: int, count: int) -> list[str]:
    return [_statement(i, i % 3, i % 4) for i in range(first, first + count)]


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in result), key=repr)


def _log(result: Any) -> list[str]:
    """Log rows as text, list keys (timeuuids made from each write's random seed) masked."""
    return sorted(re.sub(r"UUID\('[0-9a-f-]+'\)", "<key>", repr(tuple(r))) for r in result)


def _files_per_bucket(data: Path, output: str) -> Counter[int]:
    actions = pa.table(DeltaTable(str(data / "tables" / output)).get_add_actions(flatten=True))
    column = "min.bucket" if "min.bucket" in actions.column_names else "min._bucket"
    return Counter(actions.column(column).to_pylist())


def _table(data: Path, model: CoreModel, num_buckets: int) -> tuple[Any, list[str]]:
    """A session over ``data`` with the test table made (in the model too), and the table's
    base and log outputs."""
    s = cqlcdc.connect(data_dir=data, master="local[2]", num_buckets=num_buckets)
    for ddl in (KS, TABLE):
        s.execute(ddl)
        model.run(ddl)
    table_id = s.catalog.table("ks", "t").table_id  # type: ignore[union-attr]
    return s, [f"base/{table_id}", f"log/{table_id}"]


def test_compaction_bounds_files_and_keeps_reads(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    model = CoreModel()
    s, outputs = _table(data, model, num_buckets=2)
    try:
        # one statement per micro-batch: one small file per output and bucket each time
        for text in _statements(0, 24):
            s.execute(text)
            model.run(text)
        s.execute("TRUNCATE ks.t")
        model.states.pop(model.table(parse_qualified("ks.t")).table_id, None)
        for text in _statements(24, 24):
            s.execute(text)
            model.run(text)

        compactor = s.engine.maintenance.compactor
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


def _file_buckets(data: Path, output: str) -> list[tuple[int, int]]:
    """The (first, last) bucket of every file of ``output``, by its statistics."""
    actions = pa.table(DeltaTable(str(data / "tables" / output)).get_add_actions(flatten=True))
    column = "bucket" if "min.bucket" in actions.column_names else "_bucket"
    lows = actions.column(f"min.{column}").to_pylist()
    return list(zip(lows, actions.column(f"max.{column}").to_pylist(), strict=True))


def test_batches_of_several_buckets_write_a_file_each_and_compact_to_files_of_one(
    spark: Any, tmp_path: Path
) -> None:
    """A micro-batch touching every bucket writes one file per output; compaction rewrites
    those files (into a shared file while the buckets are small, files of one bucket once
    they fill ``alone_rows``; base state merged), and every read, and the preimages of
    later writes, see what the model does."""
    data = tmp_path / "data"
    model = CoreModel()
    s, outputs = _table(data, model, num_buckets=4)
    try:
        pks = range(8)  # partitions in every one of the 4 buckets
        for k in range(12):  # one BATCH per micro-batch: each writes one file per output
            batch = "; ".join(_statement(8 * k + p, p, (k + p) % 4) for p in pks)
            text = f"BEGIN UNLOGGED BATCH {batch}; APPLY BATCH"
            s.execute(text)
            model.run(text)
            if k == 0:
                assert [len(_file_buckets(data, o)) for o in outputs] == [1, 1]
                assert all(first < last for o in outputs for first, last in _file_buckets(data, o))

        compactor = s.engine.maintenance.compactor
        assert compactor is not None and compactor.compactions > 0
        limit = CompactionPolicy().max_small_files
        for output in outputs:
            files = _file_buckets(data, output)
            for bucket in range(4):
                assert sum(1 for a, b in files if a <= bucket <= b) <= limit, (output, bucket)
        assert _rows(s.execute(SELECT)) == _rows(model.run(SELECT))
        log_before = _log(s.execute(LOG))
        assert log_before == _log(model.log("ks.t", *LOG_COLUMNS))

        # everything down to files of one bucket each: reads do not change
        compactor.policy = CompactionPolicy(max_small_files=1, alone_rows=1)
        for output in outputs:
            compactor.forget(output)
            compactor.note_commit(output, [], DeltaTable(str(data / "tables" / output)))
        assert s.engine.maintain(force_vacuum=True) > 0
        for output in outputs:
            files = _file_buckets(data, output)
            assert all(first == last for first, last in files), output
            assert sorted(first for first, _ in files) == [0, 1, 2, 3], output
        assert _rows(s.execute(SELECT)) == _rows(model.run(SELECT))
        assert _log(s.execute(LOG)) == log_before
        for k in range(12, 14):  # preimages of later writes read the compacted state
            batch = "; ".join(_statement(8 * k + p, p, (k + p) % 4) for p in pks)
            text = f"BEGIN UNLOGGED BATCH {batch}; APPLY BATCH"
            s.execute(text)
            model.run(text)
        assert _rows(s.execute(SELECT)) == _rows(model.run(SELECT))
        assert _log(s.execute(LOG)) == _log(model.log("ks.t", *LOG_COLUMNS))
    finally:
        s.close()
