"""Restrictions whose values are bound at execution: ``IN ?`` (one list) and
``minTimeuuid(?)`` / ``maxTimeuuid(?)``, the forms ScyllaDB's CDC readers prepare."""

from __future__ import annotations

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.where import analyse_where
from cqlcdc.types import temporal

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _where(cql: str, *values: object) -> object:
    catalog = Catalog(None)
    catalog.execute(parse_statement(KS), None)
    catalog.execute(
        parse_statement("CREATE TABLE ks.t (pk int, ck timeuuid, PRIMARY KEY (pk, ck))"), None
    )
    schema = catalog.table("ks", "t")
    assert schema is not None
    stmt = parse_statement(cql)
    return analyse_where(schema, stmt.where, WriteContext(1, 1, 0, bindings=list(values)))


def test_in_takes_one_bound_list() -> None:
    res = _where("SELECT * FROM ks.t WHERE pk IN ?", [3, 1, 2])
    assert sorted(res.partition_keys) == [(1,), (2,), (3,)]
    assert _where("SELECT * FROM ks.t WHERE pk IN ?", []).partition_keys == []
    with pytest.raises(InvalidRequest, match="Invalid null value"):
        _where("SELECT * FROM ks.t WHERE pk IN ?", None)
    with pytest.raises(InvalidRequest):
        _where("SELECT * FROM ks.t WHERE pk IN ?", ["x"])


def test_timeuuid_bounds_take_bound_timestamps() -> None:
    res = _where(
        "SELECT * FROM ks.t WHERE pk = 1 AND ck > minTimeuuid(?) AND ck < maxTimeuuid(?)",
        1_600_000_000_000,
        1_600_000_001_000,
    )
    ((start, end),) = res.clustering_ranges()
    assert start.prefix == (temporal.min_timeuuid(1_600_000_000_000),)
    assert end.prefix == (temporal.max_timeuuid(1_600_000_001_000),)
