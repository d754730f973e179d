"""One-partition SELECTs answered from the base rows' columns (``partition_columns``) return
what the row path returns, for the rows it takes (inserted, updated without a row marker,
TTLs running and run out, deleted cells, descending clustering, LIMIT, aliases) and the
ones it leaves to the row path (deletions of rows, ranges and partitions; static
columns); and it does answer the plain reads."""

from __future__ import annotations

import time
from typing import Any

import pytest

import cqlcdc.reads
from cqlcdc.session import Session

pytestmark = pytest.mark.spark

QUERIES = [
    ("SELECT * FROM ks.t WHERE pk = ?", ()),
    ("SELECT v, ck FROM ks.t WHERE pk = ?", ()),
    ("SELECT w AS x, pk FROM ks.t WHERE pk = ?", ()),
    ("SELECT * FROM ks.t WHERE pk = ? LIMIT 2", ()),
    ("SELECT * FROM ks.t WHERE pk = ? LIMIT ?", (3,)),
    ("SELECT * FROM ks.d WHERE pk = ?", ()),
    ("SELECT b, a, v FROM ks.d WHERE pk = ? LIMIT 3", ()),
    ("SELECT * FROM ks.s WHERE pk = ?", ()),
    ("SELECT * FROM ks.k WHERE pk = ?", ()),
]
KEYS = range(10)


def _load(session: Session) -> None:
    run = session.execute
    run("CREATE TABLE ks.t (pk int, ck int, v text, w bigint, PRIMARY KEY (pk, ck))")
    run(
        "CREATE TABLE ks.d (pk int, a int, b text, v int, PRIMARY KEY (pk, a, b)) "
        "WITH CLUSTERING ORDER BY (a DESC, b ASC)"
    )
    run("CREATE TABLE ks.s (pk int, ck int, st text STATIC, v int, PRIMARY KEY (pk, ck))")
    run("CREATE TABLE ks.k (pk int PRIMARY KEY, v text)")
    for pk in KEYS:
        for ck in range(5):
            run(f"INSERT INTO ks.t (pk, ck, v, w) VALUES ({pk}, {ck}, 'v{pk}.{ck}', {pk * ck})")
            run(f"INSERT INTO ks.d (pk, a, b, v) VALUES ({pk}, {ck % 2}, 'b{ck}', {ck})")
            run(f"INSERT INTO ks.s (pk, ck, st, v) VALUES ({pk}, {ck}, 's{pk}', {ck})")
        run(f"INSERT INTO ks.k (pk, v) VALUES ({pk}, 'k{pk}')")
    # no row marker: live while a cell is
    run("UPDATE ks.t SET v = 'u' WHERE pk = 20 AND ck = 1")
    run("UPDATE ks.t SET v = 'u', w = 3 WHERE pk = 21 AND ck = 1")
    run("UPDATE ks.t SET w = null WHERE pk = 21 AND ck = 1")
    # TTLs running, and run out
    run("INSERT INTO ks.t (pk, ck, v, w) VALUES (22, 1, 'long', 1) USING TTL 100000")
    run("INSERT INTO ks.t (pk, ck, v, w) VALUES (22, 2, 'short', 2) USING TTL 1")
    run("UPDATE ks.t USING TTL 1 SET v = 'gone' WHERE pk = 22 AND ck = 3")
    run("INSERT INTO ks.t (pk, ck, v) VALUES (22, 4, 'cell ttl')")
    run("UPDATE ks.t USING TTL 1 SET w = 9 WHERE pk = 22 AND ck = 4")
    # deletions: a cell, a row, a range, a partition
    run("DELETE v FROM ks.t WHERE pk = 1 AND ck = 2")
    run("DELETE FROM ks.t WHERE pk = 2 AND ck = 3")
    run("DELETE FROM ks.t WHERE pk = 3 AND ck > 2")
    run("DELETE FROM ks.t WHERE pk = 4")
    run("DELETE FROM ks.k WHERE pk = 5")
    run("INSERT INTO ks.t (pk, ck, v) VALUES (4, 7, 'after')")
    time.sleep(2.5)  # the TTLs of 1 s run out


def _answers(session: Session) -> list[Any]:
    out = []
    for query, extra in QUERIES:
        prepared = session.prepare(query)
        for pk in [*KEYS, 20, 21, 22, 99]:
            rows = session.execute(prepared, (pk, *extra))
            out.append((query, pk, rows.column_names, [tuple(r) for r in rows]))
    return out


def test_partition_reads_from_columns_answer_as_the_row_path(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    _load(session)
    answered: list[bool] = []
    original = cqlcdc.reads.partition_result

    def counting(*args: Any) -> Any:
        result = original(*args)
        answered.append(result is not None)
        return result

    monkeypatch.setattr(cqlcdc.reads, "partition_result", counting)
    from_columns = _answers(session)
    monkeypatch.setattr(cqlcdc.reads, "partition_result", lambda *args: None)
    by_rows = _answers(session)
    for got, expected in zip(from_columns, by_rows, strict=True):
        assert got == expected
    # the plain reads are answered from the columns, the others by the row path
    assert answered.count(True) >= len(KEYS) * 5
    assert answered.count(False) >= len(KEYS)
    # and the answers are what was written
    t = {(q, pk): rows for q, pk, _, rows in by_rows}
    star = QUERIES[0][0]
    assert t[(star, 1)][2] == (1, 2, None, 2)
    assert [r[1] for r in t[(star, 2)]] == [0, 1, 2, 4]
    assert [r[1] for r in t[(star, 3)]] == [0, 1, 2]
    assert t[(star, 4)] == [(4, 7, "after", None)]
    assert t[(star, 20)] == [(20, 1, "u", None)]
    assert t[(star, 21)] == [(21, 1, "u", None)]
    assert t[(star, 22)] == [(22, 1, "long", 1), (22, 4, "cell ttl", None)]
    assert t[(star, 99)] == []
    assert [r[1:3] for r in t[(QUERIES[5][0], 0)]] == [
        (1, "b1"), (1, "b3"), (0, "b0"), (0, "b2"), (0, "b4")
    ]  # fmt: skip
