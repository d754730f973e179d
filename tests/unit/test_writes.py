"""How bulk writes find their distinct prepared statements (``cqlcdc.writes``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cqlcdc.cql import ast, parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.writes import BULK_MAX_STATEMENTS, _first_uses, _pick, literal_bulk


def _reference(ids: list[int]) -> tuple[list[int], list[int]] | None:
    index: dict[int, int] = {}
    firsts: list[int] = []
    for pos, i in enumerate(ids):
        if i not in index:
            index[i] = len(firsts)
            firsts.append(pos)
    if len(firsts) > BULK_MAX_STATEMENTS:
        return None
    return [index[i] for i in ids], firsts


@given(st.lists(st.integers(0, BULK_MAX_STATEMENTS + 3), max_size=200))
def test_first_uses_numbers_statements_in_order_of_first_use(ids: list[int]) -> None:
    found = _first_uses(np.array(ids, np.int64))
    expected = _reference(ids)
    if expected is None:
        assert found is None
    else:
        assert found is not None
        which, firsts = found
        assert which.tolist() == expected[0]
        assert firsts == expected[1]


def test_first_uses_of_no_writes() -> None:
    found = _first_uses(np.array([], np.int64))
    assert found is not None
    assert found[0].tolist() == [] and found[1] == []


@given(st.lists(st.integers(), min_size=1, max_size=30), st.data())
def test_pick_takes_the_rows_at_positions_in_order(rows: list[int], data: st.DataObject) -> None:
    positions = data.draw(st.lists(st.integers(0, len(rows) - 1), min_size=1, unique=True))
    picked = _pick([(r,) for r in rows], np.array(sorted(positions), np.intp))
    assert picked == [(rows[p],) for p in sorted(positions)]


# -- writes with literal values as prepared ones (literal_bulk) ---------------------------

_KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


class _Tables:
    """What literal_bulk asks of a coordinator: the table a statement names."""

    def __init__(self, *ddl: str) -> None:
        import tempfile
        from pathlib import Path

        from cqlcdc.schema.catalog import Catalog

        self.catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
        for text in (_KS, *ddl):
            self.catalog.execute(parse_statement(text), "ks")

    def table(self, name: ast.QualifiedName, keyspace: str | None) -> TableSchema:
        found = self.catalog.table(name.keyspace or keyspace or "", name.name)
        if found is None:
            raise InvalidRequest(f"unconfigured table {name.name}")
        return found


_TABLE = (
    "CREATE TABLE t (pk int, ck text, v bigint, w blob, ts timestamp, l list<int>, "
    "PRIMARY KEY (pk, ck))"
)


def _literal(*texts: str) -> Any:
    return literal_bulk(_Tables(_TABLE), [parse_statement(t) for t in texts], "ks")  # type: ignore[arg-type]


def test_literal_writes_become_templates_with_their_values() -> None:
    found = _literal(
        "INSERT INTO t (pk, ck, v, w, ts) VALUES (1, 'a', -5, 0x0aff, '2020-01-01 00:00:00+0000')",
        "INSERT INTO t (pk, ck, v, w, ts) VALUES (2, 'b', 7, 0x, 1000) USING TTL 5",
        "INSERT INTO t (pk, ck, v, w, ts) VALUES (3, 'c', null, null, null)",
        "UPDATE t SET v = 9 WHERE pk = 1 AND ck = 'a'",
        "DELETE FROM t WHERE pk = 1 AND ck = 'a'",
        "DELETE v, w FROM t WHERE pk = 2 AND ck = 'b'",
    )
    assert found is not None
    prepared, values = found
    assert prepared[0] is prepared[2]  # one template, one bulk plan
    assert len({id(p) for p in prepared}) == 5
    assert prepared[0].query_string == "INSERT INTO t (pk, ck, v, w, ts) VALUES (?, ?, ?, ?, ?)"
    assert prepared[3].query_string == "UPDATE t SET v = ? WHERE pk = ? AND ck = ?"
    assert values == [
        (1, "a", -5, b"\n\xff", 1_577_836_800_000),
        (2, "b", 7, b"", 1000),
        (3, "c", None, None, None),
        (9, 1, "a"),
        (1, "a"),
        (2, "b"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO t (pk, ck, v) VALUES (1, 'a', 1) IF NOT EXISTS",
        "INSERT INTO t (pk, ck, l) VALUES (1, 'a', [1])",  # a collection
        "INSERT INTO t (pk, ck, v) VALUES (1, 'a', blobAsBigint(0x0000000000000001))",
        'INSERT INTO t JSON \'{"pk": 1, "ck": "a"}\'',
        "UPDATE t SET v = 1 WHERE pk = 1 AND ck = 'a' IF v = 2",
        "UPDATE t SET l = l + [1] WHERE pk = 1 AND ck = 'a'",
        "UPDATE t SET v = 1 WHERE pk IN (1, 2) AND ck = 'a'",
        "UPDATE t SET v = ? WHERE pk = 1 AND ck = 'a'",  # a marker: prepared, not literal
        "DELETE l[0] FROM t WHERE pk = 1 AND ck = 'a'",
        "DELETE FROM t WHERE pk = 1 AND ck > 'a'",
        "INSERT INTO t (pk, ck, v) VALUES (1, 'a', 'text')",  # a value error: the row path says
        "INSERT INTO nope (pk) VALUES (1)",
    ],
)
def test_other_shapes_and_bad_values_go_the_row_path(text: str) -> None:
    assert _literal("INSERT INTO t (pk, ck, v) VALUES (0, 'z', 0)", text) is None
