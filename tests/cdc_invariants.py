"""The spec's own CDC invariants on random schemas and writes, for any session: the real
engine (tests/e2e/test_cdc_properties.py) and the pure core
(tests/unit/cdc/test_cdc_properties_core.py).

(a) replaying the delta rows into an empty copy rebuilds the table (timestamps included);
(b) every postimage = its group's preimage (or an empty row) + the group's delta rows;
(c) log rows are ordered by (cdc$time, cdc$batch_seq_no) in each stream, batch_seq_no counts
    0..n-1 per cdc$time group and cdc$end_of_batch marks exactly each group's last row.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, note
from hypothesis import strategies as st

from cqlcdc.cdc.replay import replay_statements
from cqlcdc.errors import CqlError
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.keys import Bound, ClusteringOrder
from cqlcdc.storage.uuids import timeuuid_sort_key
from cqlcdc.types import SetType, UdtValue, UserType
from cqlcdc.types.values import MapValue

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
UDT = "CREATE TYPE ks.u (a int, b text)"
CDC = "WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}"
TTLS = (100_000, 200_000, 300_000)  # seconds: nothing expires while a test runs

_table_ids = itertools.count()

# -- values ------------------------------------------------------------------------------------

Gen = st.SearchStrategy[str]
TEXTS = ("'a'", "'b'", "'it''s'", "''")

ATOMIC_VALUES: dict[str, Gen] = {
    "int": st.integers(-3, 3).map(str),
    "bigint": st.integers(-(2**40), 2**40).map(str),
    "text": st.sampled_from(TEXTS),
    "boolean": st.sampled_from(("true", "false")),
    "double": st.sampled_from(("0.5", "-1.25", "3.0", "1e300")),
    "blob": st.sampled_from(("0x", "0x00", "0xcafe")),
    "frozen<list<int>>": st.lists(st.integers(0, 3), max_size=3).map(
        lambda xs: "[" + ", ".join(map(str, xs)) + "]"
    ),
}
KEY_VALUES: dict[str, tuple[str, ...]] = {
    "int": ("0", "1", "2", "3"),
    "text": ("'a'", "'b'", "'c'"),
}
COLLECTIONS = {"m": "map<int, text>", "st": "set<int>", "l": "list<int>", "ud": "u"}

EMPTY = 0  # empty literals too (`m = m + {}`)
small_int = st.integers(0, 4).map(str)
text_value = st.sampled_from(TEXTS)


def _map_literal(draw: Any) -> str:
    keys = draw(st.lists(st.integers(0, 4), min_size=EMPTY, max_size=3, unique=True))
    return "{" + ", ".join(f"{k}: {draw(text_value)}" for k in keys) + "}"


def _set_literal(draw: Any) -> str:
    return "{" + ", ".join(draw(st.lists(small_int, min_size=EMPTY, max_size=3, unique=True))) + "}"


def _list_literal(draw: Any) -> str:
    return "[" + ", ".join(draw(st.lists(small_int, min_size=EMPTY, max_size=3))) + "]"


def _udt_literal(draw: Any) -> str:
    fields = []
    if draw(st.booleans()):
        fields.append(f"a: {draw(st.sampled_from(('null', '1', '2')))}")
    if draw(st.booleans()) or not fields:  # `{}` is not a UDT literal
        fields.append(f"b: {draw(st.sampled_from(('null', *TEXTS)))}")
    return "{" + ", ".join(fields) + "}"


WHOLE = {"m": _map_literal, "st": _set_literal, "l": _list_literal, "ud": _udt_literal}

# -- schemas -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A random table: key columns with types (and DESC), value columns by kind."""

    pk: tuple[tuple[str, str], ...]
    ck: tuple[tuple[str, str, bool], ...]
    statics: tuple[tuple[str, str], ...]
    atomics: tuple[tuple[str, str], ...]
    collections: tuple[str, ...]

    def ddl(self, name: str, cdc: bool) -> str:
        cols = [f"{n} {t}" for n, t in self.pk]
        cols += [f"{n} {t}" for n, t, _ in self.ck]
        cols += [f"{n} {t} STATIC" for n, t in self.statics]
        cols += [f"{n} {t}" for n, t in self.atomics]
        cols += [f"{n} {COLLECTIONS[n]}" for n in self.collections]
        pk = "(" + ", ".join(n for n, _ in self.pk) + ")"
        key = ", ".join([pk, *(n for n, _, _ in self.ck)])
        opts = []
        if self.ck:
            order = ", ".join(f"{n} {'DESC' if d else 'ASC'}" for n, _, d in self.ck)
            opts.append(f"CLUSTERING ORDER BY ({order})")
        if cdc:
            opts.append(CDC[len("WITH ") :])
        with_ = (" WITH " + " AND ".join(opts)) if opts else ""
        return f"CREATE TABLE ks.{name} ({', '.join(cols)}, PRIMARY KEY ({key})){with_}"

    @property
    def atomic_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.statics + self.atomics)


@st.composite
def shapes(draw: Any) -> Shape:
    n_pk = draw(st.integers(1, 2))
    pk = tuple((f"p{i}", draw(st.sampled_from(("int", "text")))) for i in range(n_pk))
    n_ck = draw(st.integers(0, 2))
    ck = tuple(
        (f"c{i}", draw(st.sampled_from(("int", "text"))), draw(st.booleans())) for i in range(n_ck)
    )
    statics = (
        (("s", draw(st.sampled_from(("int", "text")))),) if n_ck and draw(st.booleans()) else ()
    )
    types = draw(st.lists(st.sampled_from(sorted(ATOMIC_VALUES)), min_size=1, max_size=3))
    atomics = tuple((f"a{i}", t) for i, t in enumerate(types))
    collections = tuple(draw(st.lists(st.sampled_from(sorted(COLLECTIONS)), unique=True)))
    return Shape(pk, ck, statics, atomics, tuple(sorted(collections)))


# -- statements --------------------------------------------------------------------------------


class Writer:
    """Draws statements on ``shape``, each with its own timestamp (never reused across
    statements, so two live cells never tie across writes)."""

    def __init__(self, draw: Any, shape: Shape, name: str) -> None:
        self.draw = draw
        self.shape = shape
        self.name = f"ks.{name}"
        self.pks = [
            tuple(draw(st.sampled_from(KEY_VALUES[t])) for _, t in shape.pk) for _ in range(2)
        ]
        self.last_ts = 1_000_000
        self.used: set[int] = set()

    def ts(self) -> int:
        ts = self.last_ts + self.draw(st.integers(-5_000, 10_000))
        while ts in self.used:
            ts += 1
        self.used.add(ts)
        self.last_ts = ts
        return ts

    def using(self, ts: int, ttl_ok: bool = True) -> str:
        ttl = self.draw(st.sampled_from((None, *TTLS))) if ttl_ok else None
        return f"USING TIMESTAMP {ts}" + (f" AND TTL {ttl}" if ttl else "")

    def pk_where(self) -> list[str]:
        values = self.draw(st.sampled_from(self.pks))
        return [f"{n} = {v}" for (n, _), v in zip(self.shape.pk, values, strict=True)]

    def ck_values(self) -> list[str]:
        return [self.draw(st.sampled_from(KEY_VALUES[t])) for _, t, _ in self.shape.ck]

    def full_where(self) -> str:
        where = self.pk_where()
        where += [f"{n} = {v}" for (n, _, _), v in zip(self.shape.ck, self.ck_values())]
        return " AND ".join(where)

    def value(self, name: str, type_: str) -> str:
        if name in COLLECTIONS:
            return WHOLE[name](self.draw)
        if self.draw(st.integers(0, 5)) == 0:
            return "null"
        gen = ATOMIC_VALUES[type_] if type_ in ATOMIC_VALUES else st.sampled_from(KEY_VALUES[type_])
        return str(self.draw(gen))

    # -- forms -----------------------------------------------------------------------------

    def insert(self, ts: int) -> str:
        s = self.shape
        static_only = bool(s.statics) and self.draw(st.integers(0, 4)) == 0
        names = [n for n, _ in s.pk]
        values = list(self.draw(st.sampled_from(self.pks)))
        cols: list[tuple[str, str]] = list(s.statics)
        if not static_only:
            names += [n for n, _, _ in s.ck]
            values += self.ck_values()
            cols += list(s.atomics) + [(n, COLLECTIONS[n]) for n in s.collections]
        # a static-only INSERT names a static column (the partition key alone is refused)
        least = 1 if static_only else 0
        for n, t in (
            self.draw(st.lists(st.sampled_from(cols), min_size=least, unique=True)) if cols else []
        ):
            names.append(n)
            values.append(self.value(n, t))
        return (
            f"INSERT INTO {self.name} ({', '.join(names)}) VALUES ({', '.join(values)}) "
            + self.using(ts)
        )

    def assignment(self, name: str, type_: str) -> str:
        d = self.draw
        if name == "m":
            return d(
                st.sampled_from(
                    (
                        f"m = {_map_literal(d)}",
                        f"m = m + {_map_literal(d)}",
                        f"m = m - {_set_literal(d)}",
                        f"m[{d(small_int)}] = {d(text_value)}",
                        "m = null",
                    )
                )
            )
        if name == "st":
            return d(
                st.sampled_from(
                    (
                        f"st = {_set_literal(d)}",
                        f"st = st + {_set_literal(d)}",
                        f"st = st - {_set_literal(d)}",
                    )
                )
            )
        if name == "l":
            return d(
                st.sampled_from(
                    (
                        f"l = {_list_literal(d)}",
                        f"l = l + {_list_literal(d)}",
                        f"l = {_list_literal(d)} + l",
                        f"l = l - {_list_literal(d)}",
                        f"l[{d(st.integers(0, 2))}] = {d(small_int)}",
                    )
                )
            )
        if name == "ud":
            return d(
                st.sampled_from(
                    (
                        f"ud = {_udt_literal(d)}",
                        f"ud.a = {d(st.sampled_from(('1', '2', 'null')))}",
                        f"ud.b = {d(text_value)}",
                        "ud = null",
                    )
                )
            )
        return f"{name} = {self.value(name, type_)}"

    def update(self, ts: int) -> str:
        s = self.shape
        regular = list(s.atomics) + [(n, COLLECTIONS[n]) for n in s.collections]
        if s.statics and (not regular or self.draw(st.integers(0, 4)) == 0):
            cols, where = list(s.statics), " AND ".join(self.pk_where())
            chosen = self.draw(st.lists(st.sampled_from(cols), min_size=1, max_size=3, unique=True))
        else:
            # a row's key names a row: at least one regular column is set (an UPDATE of
            # static columns alone may not restrict the clustering key)
            where = self.full_where()
            first = self.draw(st.sampled_from(regular))
            others = [c for c in list(s.statics) + regular if c != first]
            more = (
                self.draw(st.lists(st.sampled_from(others), max_size=2, unique=True))
                if others
                else []
            )
            chosen = [first, *more]
        sets = ", ".join(self.assignment(n, t) for n, t in chosen)
        return f"UPDATE {self.name} {self.using(ts)} SET {sets} WHERE {where}"

    def delete_columns(self, ts: int) -> str:
        s = self.shape
        if s.statics and self.draw(st.integers(0, 4)) == 0:
            return f"DELETE s FROM {self.name} USING TIMESTAMP {ts} WHERE " + " AND ".join(
                self.pk_where()
            )
        targets = [n for n, _ in s.statics + s.atomics]
        for n in s.collections:
            targets.append(n)
            targets.append(
                {
                    "m": f"m[{self.draw(small_int)}]",
                    "st": f"st[{self.draw(small_int)}]",
                    "l": f"l[{self.draw(st.integers(0, 2))}]",
                    "ud": f"ud.{self.draw(st.sampled_from('ab'))}",
                }[n]
            )
        chosen = self.draw(st.lists(st.sampled_from(targets), min_size=1, max_size=2, unique=True))
        if chosen == ["s"]:  # a row's key with static columns alone is refused
            regular = [t for t in targets if t != "s"]
            if not regular:
                return f"DELETE s FROM {self.name} USING TIMESTAMP {ts} WHERE " + " AND ".join(
                    self.pk_where()
                )
            chosen.append(self.draw(st.sampled_from(regular)))
        return (
            f"DELETE {', '.join(chosen)} FROM {self.name} USING TIMESTAMP {ts} "
            f"WHERE {self.full_where()}"
        )

    def delete_rows(self, ts: int) -> str:
        s = self.shape
        head = f"DELETE FROM {self.name} USING TIMESTAMP {ts} WHERE "
        where = self.pk_where()
        kind = self.draw(st.sampled_from(("row", "range", "partition"))) if s.ck else "partition"
        if kind == "row":
            return head + self.full_where()
        if kind == "range":
            cks = self.ck_values()
            k = self.draw(st.integers(0, len(s.ck) - 1))
            where += [f"{n} = {v}" for (n, _, _), v in zip(s.ck[:k], cks)]
            name = s.ck[k][0]
            values = KEY_VALUES[s.ck[k][1]]
            if k == 0 and len(s.ck) == 2 and self.draw(st.booleans()):
                op = self.draw(st.sampled_from((">", ">=", "<", "<=")))
                tup = f"({cks[0]}, {self.draw(st.sampled_from(KEY_VALUES[s.ck[1][1]]))})"
                where.append(f"(c0, c1) {op} {tup}")
            elif k == len(s.ck) - 1 or self.draw(st.booleans()):
                lo = self.draw(st.sampled_from((None, ">", ">=")))
                hi = self.draw(st.sampled_from((None, "<", "<=") if lo else ("<", "<=")))
                if lo:
                    where.append(f"{name} {lo} {self.draw(st.sampled_from(values))}")
                if hi:
                    where.append(f"{name} {hi} {self.draw(st.sampled_from(values))}")
            else:  # a prefix: the rows of c0 = x
                where.append(f"{name} = {self.draw(st.sampled_from(values))}")
        return head + " AND ".join(where)

    def single(self, ts: int) -> str:
        form = self.draw(st.sampled_from((self.insert, self.update, self.delete_columns)))
        if self.draw(st.integers(0, 5)) == 0:
            form = self.delete_rows
        return form(ts)

    def statement(self) -> str:
        if self.draw(st.integers(0, 4)) > 0:
            return self.single(self.ts())
        # a batch, its statements at one or several timestamps
        stmts = []
        ts = self.ts()
        for _ in range(self.draw(st.integers(2, 3))):
            if self.draw(st.booleans()):
                ts = self.ts()
            stmts.append(self.single(ts))
        return "BEGIN UNLOGGED BATCH " + "; ".join(stmts) + "; APPLY BATCH"


# -- the properties ----------------------------------------------------------------------------

LogRow = dict[str, Any]


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in result]


def _log(session: Any, name: str) -> list[LogRow]:
    result = session.execute(f"SELECT * FROM ks.{name}_scylla_cdc_log")
    return [dict(zip(result.column_names, r, strict=True)) for r in result]


def check_order(log: list[LogRow]) -> None:
    """(c): per stream, (cdc$time, batch_seq_no) order, seq 0..n-1, end_of_batch on the last."""
    streams: dict[bytes, list[LogRow]] = {}
    for r in log:
        streams.setdefault(r["cdc$stream_id"], []).append(r)
    for rows in streams.values():
        keys = [(timeuuid_sort_key(r["cdc$time"]), r["cdc$batch_seq_no"]) for r in rows]
        assert keys == sorted(keys)
        for _, group in itertools.groupby(rows, key=lambda r: r["cdc$time"]):
            g = list(group)
            assert [r["cdc$batch_seq_no"] for r in g] == list(range(len(g)))
            assert [r["cdc$end_of_batch"] for r in g] == [None] * (len(g) - 1) + [True]


def _apply_collection(ctype: Any, current: Any, row: LogRow, name: str) -> Any:
    """The spec's merge: the tombstone clears, deleted elements go, added cells come."""
    if row.get(f"cdc$deleted_{name}") is True:
        current = None
    gone = row.get(f"cdc$deleted_elements_{name}") or frozenset()
    added = row.get(name)
    if isinstance(ctype, UserType):
        fields = dict(current.items()) if current is not None else {}
        for i in gone:
            fields[ctype.field_names[i]] = None
        for f, v in (added or {}).items():
            if v is not None:
                fields[f] = v
        if all(v is None for v in fields.values()):
            return None
        return UdtValue(ctype.field_names, fields)
    if isinstance(ctype, SetType):
        elems = (set(current or ()) - set(gone)) | set(added or ())
        return frozenset(elems) or None
    items = dict(current.items()) if current is not None else {}
    for k in gone:
        items.pop(k, None)
    items.update(dict((added or {}).items()))
    return MapValue(items) if items else None


def check_postimages(schema: TableSchema, log: list[LogRow]) -> None:
    """(b): each postimage = the group's preimage (or an empty row) + its delta rows."""
    order = ClusteringOrder(schema)
    pk_names = [c.name for c in schema.partition_key]
    ck_names = [c.name for c in schema.clustering_key]

    def key_of(r: LogRow) -> tuple[Any, ...]:
        ck = tuple(r.get(n) for n in ck_names)
        is_static = bool(ck_names) and all(v is None for v in ck)
        return (tuple(r[n] for n in pk_names), None if is_static else ck)

    def columns_of(key: tuple[Any, ...]) -> tuple[Any, ...]:
        if key[1] is None:
            return schema.static_columns
        return schema.regular_columns

    def prefix(r: LogRow) -> tuple[Any, ...]:
        return tuple(itertools.takewhile(lambda v: v is not None, (r.get(n) for n in ck_names)))

    for _, group in itertools.groupby(log, key=lambda r: (r["cdc$stream_id"], r["cdc$time"])):
        states: dict[tuple[Any, ...], dict[str, Any] | None] = {}
        touched: set[tuple[Any, ...]] = set()
        posts: dict[tuple[Any, ...], LogRow] = {}
        start: LogRow | None = None
        for r in group:
            op, key = r["cdc$operation"], key_of(r)
            if op == 0:
                states[key] = {c.name: r.get(c.name) for c in columns_of(key)}
            elif op in (1, 2):
                touched.add(key)
                state = states.get(key)
                if state is None:
                    state = states[key] = {c.name: None for c in columns_of(key)}
                for col in columns_of(key):
                    if col.type.multicell:
                        state[col.name] = _apply_collection(col.type, state[col.name], r, col.name)
                    elif r.get(col.name) is not None:
                        state[col.name] = r[col.name]
                    elif r.get(f"cdc$deleted_{col.name}") is True:
                        state[col.name] = None
            elif op == 3:
                states[key] = None
            elif op in (5, 6):
                start = r
            elif op in (7, 8):
                assert start is not None
                lo = Bound(prefix(start), start["cdc$operation"] == 5)
                hi = Bound(prefix(r), op == 7)
                for k in list(states):
                    if k[0] == key[0] and k[1] is not None and order.in_range(k[1], lo, hi):
                        states[k] = None
            elif op == 4:
                # clustering rows are gone; a touched static row stays, emptied
                for k in list(states):
                    if k[0] == key[0]:
                        states[k] = None if k[1] is not None else dict.fromkeys(states[k] or ())
            elif op == 9:
                posts[key] = r
        for key, post in posts.items():
            state = states.get(key)
            assert state is not None, f"postimage of a deleted row {key}: {post}"
            got = {c.name: post.get(c.name) for c in columns_of(key)}
            assert got == state, (key, post)
            assert not any(n.startswith("cdc$deleted") and v for n, v in post.items())
        for key in touched:
            if states.get(key) is not None:
                assert key in posts, f"no postimage for {key}"


def run_example(session: Any, shape: Shape, data: Any) -> None:
    name = f"t{next(_table_ids)}"
    session.execute(shape.ddl(name, cdc=True))
    session.execute(shape.ddl(f"{name}_r", cdc=False))
    writer = Writer(data.draw, shape, name)
    statements = [writer.statement() for _ in range(data.draw(st.integers(1, 8)))]
    note(f"table: {shape.ddl(name, cdc=True)}")
    note("statements:\n" + ";\n".join(statements))
    for stmt, res in zip(statements, session.execute_many(statements), strict=True):
        # positional list writes are checked against the list: the only expected failure
        if isinstance(res, CqlError):
            assert "List index" in res.message or "list" in res.message.lower(), (stmt, res)
    schema = session.catalog.table("ks", name)
    log = _log(session, name)
    check_order(log)
    check_postimages(schema, log)
    replayed = replay_statements(schema, log, f"ks.{name}_r")
    for stmt, res in zip(replayed, session.execute_many(replayed), strict=True):
        assert not isinstance(res, CqlError), (stmt, res)
    keys = ", ".join(c.name for c in schema.primary_key)
    assert _rows(session.execute(f"SELECT * FROM ks.{name}_r")) == _rows(
        session.execute(f"SELECT * FROM ks.{name}")
    ), statements
    for col in shape.atomic_names:
        q = f"SELECT {keys}, writetime({col}) FROM ks.%s"
        assert _rows(session.execute(q % f"{name}_r")) == _rows(session.execute(q % name)), col


SETTINGS = {
    "deadline": None,
    # shrinking through Spark takes minutes; the note()s show the failing statements
    "phases": [Phase.explicit, Phase.reuse, Phase.generate],
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
}
