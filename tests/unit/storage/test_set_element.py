"""``SET c[k] = v`` on what is not a non-frozen map or list: ScyllaDB's messages from
operation.cc ``set_element::prepare``, naming the operation as written."""

from __future__ import annotations

import pytest

from cqlcdc.errors import InvalidRequest
from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture
def model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run(
        "CREATE TABLE ks.t (pk int PRIMARY KEY, e frozen<map<int, int>>, f frozen<list<int>>, "
        "s set<int>, m map<text, text>, v int)"
    )
    return m


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("e[1] = 6", "Invalid operation (e[1] = 6) for frozen collection column e"),
        ("f[0] = 6", "Invalid operation (f[0] = 6) for frozen collection column f"),
        ("s[1] = 6", "Invalid operation (s[1] = 6) for set column s"),
        ("v[1] = 6", "Invalid operation (v[1] = 6) for non collection column v"),
    ],
)
def test_refused_with_scyllas_message(model: CoreModel, assignment: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        model.run(f"UPDATE ks.t SET {assignment} WHERE pk = 1")
    assert info.value.message == message


def test_a_non_frozen_map_takes_it(model: CoreModel) -> None:
    model.run("UPDATE ks.t SET m['a'] = 'b' WHERE pk = 1")
    (row,) = model.run("SELECT m FROM ks.t WHERE pk = 1")
    assert row == ({"a": "b"},)
