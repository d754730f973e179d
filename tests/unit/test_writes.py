"""How bulk writes find their distinct prepared statements (``cqlcdc.writes``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cqlcdc.writes import BULK_MAX_STATEMENTS, _first_uses, _pick


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
