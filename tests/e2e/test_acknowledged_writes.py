"""No silent loss, on random table shapes through the real engine: every write that is
acknowledged is visible in the base table and logged; every write that is rejected leaves
no trace; and which writes are rejected follows ScyllaDB's key rules (test_key_length.py,
validation.cc), modelled here independently of the product.

Shapes vary key types and counts, key-only tables, static columns, collections, COMPACT
STORAGE (rows without a marker: a table form is refused whole or its writes are kept) and
key sizes around the 65,535-byte limit.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

import cqlcdc
from cqlcdc.errors import CqlError, InvalidRequest

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
LIMIT = 65535
KEY_TYPES = ("int", "bigint", "text", "blob")
# byte lengths of text/blob key components: small, empty, and around the limit
SIZES = (3, 0, LIMIT - 200, LIMIT - 6, LIMIT - 4, LIMIT - 2, LIMIT, LIMIT + 1, 70_000)
REGULAR = {"v": "int", "t": "text", "m": "map<int, text>", "s": "set<int>"}
_names = itertools.count()


@dataclass(frozen=True)
class Shape:
    pk: tuple[str, ...]
    ck: tuple[str, ...]
    regular: tuple[str, ...]
    static: bool
    compact: bool
    preimage: bool

    @property
    def keys(self) -> list[str]:
        return [f"p{i}" for i in range(len(self.pk))] + [f"c{i}" for i in range(len(self.ck))]

    def ddl(self, name: str) -> str:
        cols = [f"p{i} {t}" for i, t in enumerate(self.pk)]
        cols += [f"c{i} {t}" for i, t in enumerate(self.ck)]
        cols += [f"{c} {REGULAR[c]}" for c in self.regular]
        if self.static:
            cols.append("st int static")
        pk = ", ".join(f"p{i}" for i in range(len(self.pk)))
        key = ", ".join([f"({pk})", *(f"c{i}" for i in range(len(self.ck)))])
        preimage = str(self.preimage).lower()
        options = f"cdc = {{'enabled': true, 'preimage': {preimage}}}"
        if self.compact:
            options = "COMPACT STORAGE AND " + options
        return f"CREATE TABLE ks.{name} ({', '.join(cols)}, PRIMARY KEY ({key})) WITH {options}"


@st.composite
def shapes(draw: Any) -> Shape:
    pk = tuple(draw(st.lists(st.sampled_from(KEY_TYPES), min_size=1, max_size=2)))
    ck = tuple(draw(st.lists(st.sampled_from(KEY_TYPES), min_size=0, max_size=2)))
    regular = tuple(draw(st.lists(st.sampled_from(sorted(REGULAR)), max_size=2, unique=True)))
    static = bool(ck) and draw(st.booleans())
    atomic = all(REGULAR[c] in ("int", "text") for c in regular)
    compact = not static and atomic and draw(st.booleans())
    return Shape(pk, ck, regular, static, compact, draw(st.booleans()))


def _component(kind: str, size: int, unique: int) -> Any:
    if kind == "int":
        return unique
    if kind == "bigint":
        return unique * 1_000_003
    text = f"{unique}:" if size else ""
    text = (text + "x" * size)[:size] if size >= len(text) else text
    return text if kind == "text" else text.encode()


def _length(kind: str, value: Any) -> int:
    if kind == "int":
        return 4
    if kind == "bigint":
        return 8
    return len(value.encode() if isinstance(value, str) else value)


def _key_error(kinds: tuple[str, ...], values: list[Any], partition: bool) -> str | None:
    """ScyllaDB's verdict on a key (None: fine)."""
    lengths = [_length(k, v) for k, v in zip(kinds, values, strict=True)]
    if partition and len(kinds) == 1 and lengths[0] == 0:
        return "Key may not be empty"
    total = lengths[0] if len(kinds) == 1 else sum(2 + n for n in lengths)
    if total > LIMIT:
        return f"Key length of {total} is longer than maximum of {LIMIT}"
    return None


class Write:
    """One write and ScyllaDB's verdict on its keys (None: accepted)."""

    def __init__(
        self, cql: str, params: tuple[Any, ...], key: tuple[Any, ...], error: str | None
    ) -> None:
        self.cql, self.params, self.key, self.error = cql, params, key, error

    def __repr__(self) -> str:  # keys of 70,000 bytes: lengths only
        return f"Write({self.cql!r}, {_short(self.params)}, error={self.error!r})"


@st.composite
def writes(draw: Any, shape: Shape, name: str) -> list[Write]:
    out: list[Write] = []
    seen: set[tuple[Any, ...]] = set()
    for n in range(draw(st.integers(2, 6))):
        unique = len(seen) * 7 + n + 1
        pk = [_component(k, draw(st.sampled_from(SIZES)), unique) for k in shape.pk]
        ck = [_component(k, draw(st.sampled_from(SIZES)), unique) for k in shape.ck]
        key = tuple(pk + ck)
        if key in seen:
            continue
        seen.add(key)
        error = _key_error(shape.pk, pk, True) or (
            _key_error(shape.ck, ck, False) if shape.ck else None
        )
        columns = list(shape.keys)
        values: list[Any] = list(key)
        settable = [c for c in shape.regular if not (shape.compact and c in ("m", "s"))]
        chosen = draw(st.lists(st.sampled_from(settable), unique=True)) if settable else []
        if shape.compact and settable and not chosen:  # keys alone: refused (no row marker)
            chosen = [settable[0]]
        if shape.static and draw(st.booleans()):
            chosen.append("st")
        given = {"v": unique, "t": f"t{unique}", "m": {unique: "m"}, "s": {unique}, "st": unique}
        if chosen and draw(st.booleans()) and any(c != "st" for c in chosen):
            # an UPDATE of at least one regular column: the row becomes visible
            sets = ", ".join(f"{c} = ?" for c in chosen)
            where = " AND ".join(f"{c} = ?" for c in columns)
            cql = f"UPDATE ks.{name} SET {sets} WHERE {where}"
            params = tuple(given[c] for c in chosen) + tuple(values)
        else:
            columns += chosen
            values += [given[c] for c in chosen]
            marks = ", ".join("?" * len(columns))
            cql = f"INSERT INTO ks.{name} ({', '.join(columns)}) VALUES ({marks})"
            params = tuple(values)
        out.append(Write(cql, params, key, error))
    return out


@pytest.fixture(scope="module")
def engine(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("acked"), master="local[2]")
    session.execute(KS)
    yield session
    session.close()


def _short(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v if not isinstance(v, str | bytes) or len(v) < 20 else len(v) for v in key)


def run_example(session: Any, shape: Shape, data: Any) -> None:
    name = f"t{next(_names)}"
    try:
        session.execute(shape.ddl(name))
    except CqlError as e:  # a refused form: refused whole, nothing created
        note(f"refused: {shape.ddl(name)}: {e}")
        assert shape.compact, e
        assert session.catalog.table("ks", name) is None
        return
    todo = data.draw(writes(shape, name))
    prepared = [session.prepare(w.cql) for w in todo]
    results = session.execute_many(prepared, [w.params for w in todo])
    keys = ", ".join(shape.keys)
    base = {tuple(r) for r in session.execute(f"SELECT {keys} FROM ks.{name}")}
    logged = {
        tuple(r)[1:]
        for r in session.execute(f'SELECT "cdc$operation", {keys} FROM ks.{name}_scylla_cdc_log')
        if r[0] in (1, 2)  # update and insert deltas
    }
    for write, result in zip(todo, results, strict=True):
        note(f"{write.cql} {_short(write.key)} -> {result!r}")
        if write.error is None:
            assert not isinstance(result, CqlError), result
            assert write.key in base, "acknowledged but not in the base table"
            assert write.key in logged, "acknowledged but not logged"
        else:
            assert isinstance(result, InvalidRequest), result
            assert result.message == write.error
            assert write.key not in base and write.key not in logged


SETTINGS = {
    "deadline": None,
    "phases": [Phase.explicit, Phase.reuse, Phase.generate],
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}


@settings(max_examples=30, **SETTINGS)  # type: ignore[arg-type]
@given(shape=shapes(), data=st.data())
def test_acknowledged_writes_are_stored_and_logged(engine: Any, shape: Shape, data: Any) -> None:
    run_example(engine, shape, data)


@pytest.mark.slow
@settings(max_examples=80, **SETTINGS)  # type: ignore[arg-type]
@given(shape=shapes(), data=st.data())
def test_acknowledged_writes_are_stored_and_logged_many(
    engine: Any, shape: Shape, data: Any
) -> None:
    run_example(engine, shape, data)
