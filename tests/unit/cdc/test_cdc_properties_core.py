"""The spec's CDC invariants (tests/cdc_invariants.py) on the pure core, at hundreds of
examples with shrinking on: the same planner, list resolution, conditions and log writer the
pipeline runs (tests/core_model.py), without Spark. A few examples also run through the real
engine (tests/e2e/test_cdc_properties.py)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlError
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.storage.uuids import timeuuid_sort_key
from tests.cdc_invariants import KS, UDT, Shape, run_example, shapes
from tests.core_model import CoreModel


class _Result:
    """What the invariants read of a result: its columns and rows."""

    def __init__(self, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> None:
        self.column_names = list(columns)
        self._rows = list(rows)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._rows)


class CoreSession:
    """The session surface ``run_example`` uses, over a ``CoreModel``: DDL, writes
    (``execute_many`` reports each error in its slot), base SELECTs, and the CDC log read
    back in the engine's order (stream, then ``cdc$time``, then ``cdc$batch_seq_no``)."""

    def __init__(self) -> None:
        self.model = CoreModel()

    @property
    def catalog(self) -> Catalog:
        return self.model.catalog

    def execute(self, cql: str) -> _Result:
        stmt = parse_statement(cql)
        if isinstance(stmt, ast.Select) and stmt.table.name.endswith("_scylla_cdc_log"):
            return self._log(stmt.table)
        result = self.model.run(cql)
        if isinstance(stmt, ast.Select):
            return _Result([], result)
        return _Result([], [])

    def execute_many(self, statements: Sequence[str]) -> list[Any]:
        results: list[Any] = []
        for cql in statements:
            try:
                self.model.run(cql)
            except CqlError as e:
                results.append(e)
            else:
                results.append(None)
        return results

    def _log(self, name: ast.QualifiedName) -> _Result:
        base = self.model.table(
            ast.QualifiedName(name.keyspace, name.name[: -len("_scylla_cdc_log")])
        )
        columns = [c.name for c in log_table_schema(base).columns]
        rows = sorted(
            self.model.logs.get(base.table_id, []),
            key=lambda r: (
                r["cdc$stream_id"],
                timeuuid_sort_key(r["cdc$time"]),
                r["cdc$batch_seq_no"],
            ),
        )
        return _Result(columns, [tuple(r.get(c) for c in columns) for r in rows])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(shape=shapes(), data=st.data())
def test_cdc_properties_on_the_core(shape: Shape, data: Any) -> None:
    session = CoreSession()
    session.execute(KS)
    session.execute(UDT)
    run_example(session, shape, data)


def test_a_batchs_second_partition_and_the_next_write_have_their_own_cdc_time() -> None:
    """A failure the property test found: the core model's consecutive seeds made a batch's
    second partition (seed s, record 1) and the next write (seed s + 1) share their
    ``cdc$time`` bits, so two writes' rows merged into one batch in one stream."""
    from tests.cdc_invariants import _log, check_order

    session = CoreSession()
    session.execute(KS)
    session.execute(UDT)
    session.execute(
        "CREATE TABLE ks.t (p0 int, p1 int, c0 int, l list<int>, PRIMARY KEY ((p0, p1), c0)) "
        "WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}"
    )
    statements = [
        "DELETE FROM ks.t USING TIMESTAMP 1000000 WHERE p0 = 0 AND p1 = 0",
        "BEGIN UNLOGGED BATCH "
        "DELETE FROM ks.t USING TIMESTAMP 1000001 WHERE p0 = 0 AND p1 = 0 AND c0 = 0; "
        "DELETE l FROM ks.t USING TIMESTAMP 1000001 WHERE p0 = 0 AND p1 = 1 AND c0 = 0; "
        "APPLY BATCH",
        "DELETE FROM ks.t USING TIMESTAMP 1000002 WHERE p0 = 0 AND p1 = 0 AND c0 = 0",
    ]
    assert session.execute_many(statements) == [None, None, None]
    log = _log(session, "t")
    check_order(log)
    assert len({(r["cdc$stream_id"], r["cdc$time"], r["cdc$batch_seq_no"]) for r in log}) == len(
        log
    )
