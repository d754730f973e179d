"""Replay a CDC log: delta rows back into CQL writes that rebuild the base table exactly.

Every statement carries ``USING TIMESTAMP`` = the microseconds inside ``cdc$time`` and the
row's ``cdc$ttl``, so cell timestamps (``writetime()``) come out identical; list elements keep
their timeuuid keys through ``SCYLLA_TIMEUUID_LIST_INDEX``.

>>> replay_statements(schema, rows, target="ks.copy")  # doctest: +SKIP
['INSERT INTO ks.copy (pk, ck, v) VALUES (0, 0, 1) USING TIMESTAMP 1606390225588947']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cqlcdc.cdc.log_writer import (
    OP_INSERT,
    OP_PARTITION_DELETE,
    OP_POSTIMAGE,
    OP_PREIMAGE,
    OP_RANGE_END_EXCL,
    OP_RANGE_END_INCL,
    OP_RANGE_START_EXCL,
    OP_RANGE_START_INCL,
    OP_ROW_DELETE,
    OP_UPDATE,
)
from cqlcdc.errors import CqlError, InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.tuple_slices import clustering_order, decompose
from cqlcdc.storage.uuids import micros_of
from cqlcdc.types import ListType, MapType, SetType, UserType
from cqlcdc.types.text import maybe_quote

REPLAY_GROUP_SIZE = 500

LogRow = dict[str, Any]


@dataclass(slots=True)
class _Assignments:
    """The SET clauses of one log row, split by kind so no column is assigned twice.

    ``dead``: atomic nulls and collection tombstones; ``removed``: element deletions;
    ``live``: values and added elements (the only ones that take the row's TTL).
    """

    dead: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)


class _Replayer:
    """Turns the delta rows of one base table's log into statements, in log order."""

    def __init__(self, base: TableSchema, target: str) -> None:
        self.base = base
        self.target = target
        self.pk = base.partition_key
        self.ck = base.clustering_key
        self.columns = base.value_columns
        self.out: list[str] = []
        self._range_start: LogRow | None = None

    # -- dispatch -------------------------------------------------------------------------

    def row(self, row: LogRow) -> None:
        op = row.get("cdc$operation")
        if op in (OP_PREIMAGE, OP_POSTIMAGE):
            return
        ts = micros_of(row["cdc$time"])
        if op in (OP_RANGE_START_INCL, OP_RANGE_START_EXCL):
            self._range_start = row
        elif op in (OP_RANGE_END_INCL, OP_RANGE_END_EXCL):
            start = self._range_start
            self._range_start = None
            if start is None:
                raise InvalidRequest(f"CDC log: range end at {row['cdc$time']} has no start")
            self._range_delete(start, row, ts)
        elif op == OP_INSERT:
            self._insert(row, ts)
        elif op == OP_UPDATE:
            self._update(row, ts)
        elif op == OP_ROW_DELETE:
            where = self._where(row, with_ck=True)
            self.out.append(f"DELETE FROM {self.target} USING TIMESTAMP {ts} WHERE {where}")
        elif op == OP_PARTITION_DELETE:
            where = self._where(row, with_ck=False)
            self.out.append(f"DELETE FROM {self.target} USING TIMESTAMP {ts} WHERE {where}")
        else:
            raise InvalidRequest(f"CDC log: unknown cdc$operation {op!r}")

    # -- keys -----------------------------------------------------------------------------

    def _is_static_row(self, row: LogRow) -> bool:
        # basic operations: static-row changes have every clustering column null
        return bool(self.ck) and all(row.get(c.name) is None for c in self.ck)

    def _where(self, row: LogRow, with_ck: bool) -> str:
        keys = self.pk + (self.ck if with_ck else ())
        parts = []
        for col in keys:
            value = row.get(col.name)
            if value is None:
                raise InvalidRequest(f"CDC log: key column {col.name} is null in a delta row")
            parts.append(f"{maybe_quote(col.name)} = {col.type.to_literal(value)}")
        return " AND ".join(parts)

    # -- writes ---------------------------------------------------------------------------

    @staticmethod
    def _using(ts: int, ttl: Any) -> str:
        return f"USING TIMESTAMP {ts}" + (f" AND TTL {int(ttl)}" if ttl else "")

    def _insert(self, row: LogRow, ts: int) -> None:
        """Op 2: the row marker plus atomic values and whole-collection overwrites."""
        names = [maybe_quote(c.name) for c in self.pk + self.ck]
        values = [c.type.to_literal(row.get(c.name)) for c in self.pk + self.ck]
        rest = _Assignments()
        for col in self.columns:
            deleted = row.get(f"cdc$deleted_{col.name}") is True
            value = row.get(col.name)
            ctype = col.type
            if not ctype.multicell:
                if value is not None or deleted:
                    names.append(maybe_quote(col.name))
                    values.append(ctype.to_literal(value))
                continue
            if deleted and not isinstance(ctype, ListType):
                # INSERT of a collection = tombstone at T-1 + cells at T, as logged
                names.append(maybe_quote(col.name))
                values.append(ctype.to_literal(_whole_value(ctype, value)))
                self._removed(col, row, rest)
                continue
            if deleted:  # list keys must be kept: tombstone here, elements by key below
                names.append(maybe_quote(col.name))
                values.append("null")
            self._removed(col, row, rest)
            self._added(col, row, rest)
        self.out.append(
            f"INSERT INTO {self.target} ({', '.join(names)}) VALUES ({', '.join(values)}) "
            + self._using(ts, row.get("cdc$ttl"))
        )
        self._emit_updates(row, ts, rest, with_ck=True)

    def _update(self, row: LogRow, ts: int) -> None:
        sets = _Assignments()
        for col in self.columns:
            deleted = row.get(f"cdc$deleted_{col.name}") is True
            value = row.get(col.name)
            name = maybe_quote(col.name)
            if not col.type.multicell:
                if value is not None:
                    sets.live.append(f"{name} = {col.type.to_literal(value)}")
                elif deleted:
                    sets.dead.append(f"{name} = null")
                continue
            if deleted:
                # advanced column types: a tombstone logged at T lies at T-1, which is
                # exactly what `X = null USING TIMESTAMP T` writes
                sets.dead.append(f"{name} = null")
            self._removed(col, row, sets)
            self._added(col, row, sets)
        self._emit_updates(row, ts, sets, with_ck=not self._is_static_row(row))

    def _emit_updates(self, row: LogRow, ts: int, sets: _Assignments, with_ck: bool) -> None:
        where = self._where(row, with_ck=with_ck)
        for clauses, ttl in (
            (sets.dead, None),
            (sets.removed, None),
            (sets.live, row.get("cdc$ttl")),
        ):
            if clauses:
                self.out.append(
                    f"UPDATE {self.target} {self._using(ts, ttl)} SET {', '.join(clauses)} "
                    f"WHERE {where}"
                )

    @staticmethod
    def _removed(col: Column, row: LogRow, sets: _Assignments) -> None:
        gone = row.get(f"cdc$deleted_elements_{col.name}")
        if not gone:
            return
        ctype = col.type
        name = maybe_quote(col.name)
        if isinstance(ctype, MapType):
            keys = SetType(ctype.key, frozen=True)
            sets.removed.append(f"{name} = {name} - {keys.to_literal(frozenset(gone))}")
        elif isinstance(ctype, SetType):
            elems = SetType(ctype.element, frozen=True)
            sets.removed.append(f"{name} = {name} - {elems.to_literal(frozenset(gone))}")
        elif isinstance(ctype, ListType):
            for key in sorted(gone, key=lambda u: (micros_of(u), u.bytes)):
                sets.removed.append(f"{name}[SCYLLA_TIMEUUID_LIST_INDEX({key})] = null")
        elif isinstance(ctype, UserType):
            for index in sorted(gone):
                sets.removed.append(f"{name}.{maybe_quote(ctype.field_names[index])} = null")
        else:
            raise InvalidRequest(f"CDC log: deleted elements on non-collection {col.name}")

    @staticmethod
    def _added(col: Column, row: LogRow, sets: _Assignments) -> None:
        value = row.get(col.name)
        if value is None:
            return
        ctype = col.type
        name = maybe_quote(col.name)
        if isinstance(ctype, MapType | SetType):
            if len(value):
                frozen = ctype.frozen()
                sets.live.append(f"{name} = {name} + {frozen.to_literal(value)}")
        elif isinstance(ctype, ListType):
            # the log shows a non-frozen list as map<timeuuid, T>: the keys are revealed
            for key, v in value.items():
                lit = ctype.element.to_literal(v)
                sets.live.append(f"{name}[SCYLLA_TIMEUUID_LIST_INDEX({key})] = {lit}")
        elif isinstance(ctype, UserType):
            for fname, ftype in zip(ctype.field_names, ctype.field_types, strict=True):
                v = value.get(fname)
                if v is not None:
                    sets.live.append(f"{name}.{maybe_quote(fname)} = {ftype.to_literal(v)}")
        else:
            raise InvalidRequest(f"CDC log: unsupported non-frozen column {col.name}")

    # -- range deletes --------------------------------------------------------------------

    def _prefix(self, row: LogRow) -> tuple[Any, ...]:
        """A bound row's clustering prefix: the columns up to the first null."""
        out = []
        for col in self.ck:
            value = row.get(col.name)
            if value is None:
                break
            out.append(value)
        return tuple(out)

    def _range_delete(self, start_row: LogRow, end_row: LogRow, ts: int) -> None:
        start = self._prefix(start_row)
        end = self._prefix(end_row)
        start_incl = start_row["cdc$operation"] == OP_RANGE_START_INCL
        end_incl = end_row["cdc$operation"] == OP_RANGE_END_INCL
        clauses = [self._where(start_row, with_ck=False)]
        k = 0
        while k < min(len(start), len(end)) and start[k] == end[k]:
            k += 1
        for col, value in zip(self.ck[:k], start[:k], strict=True):
            clauses.append(f"{maybe_quote(col.name)} = {col.type.to_literal(value)}")
        lo, hi = start[k:], end[k:]
        if (not lo and not start_incl) or (not hi and not end_incl):
            raise InvalidRequest(
                f"CDC log: range ({start}, {end}) at {ts} cannot be written as a DELETE"
            )
        if len(lo) <= 1 and len(hi) <= 1:
            clauses += self._single_slice(
                self.ck[k] if k < len(self.ck) else None, lo, hi, start_incl, end_incl
            )
        else:
            # bounds of several columns are in clustering order: write the range as disjoint
            # pieces (a prefix equality plus a one-column slice), each a plain range DELETE
            cols = self.ck[k:]
            cmps = [clustering_order(c.type, c.descending) for c in cols]
            pieces = decompose(
                cmps, (lo, start_incl) if lo else None, (hi, end_incl) if hi else None
            )
            for piece in pieces:
                where = list(clauses)
                for col, value in zip(cols, piece.prefix, strict=False):
                    where.append(f"{maybe_quote(col.name)} = {col.type.to_literal(value)}")
                i = len(piece.prefix)
                where += self._single_slice(
                    cols[i],
                    (piece.lower[0],) if piece.lower else (),
                    (piece.upper[0],) if piece.upper else (),
                    bool(piece.lower and piece.lower[1]),
                    bool(piece.upper and piece.upper[1]),
                )
                self.out.append(
                    f"DELETE FROM {self.target} USING TIMESTAMP {ts} WHERE {' AND '.join(where)}"
                )
            return
        self.out.append(
            f"DELETE FROM {self.target} USING TIMESTAMP {ts} WHERE {' AND '.join(clauses)}"
        )

    @staticmethod
    def _single_slice(
        col: Column | None,
        lo: tuple[Any, ...],
        hi: tuple[Any, ...],
        start_incl: bool,
        end_incl: bool,
    ) -> list[str]:
        if col is None:
            return []
        name = maybe_quote(col.name)
        out = []
        # start/end are in clustering order: on a DESC column the start is the upper value
        first_ops, last_ops = ((">=", ">"), ("<=", "<"))
        if col.descending:
            first_ops, last_ops = last_ops, first_ops
        if lo:
            out.append(
                f"{name} {first_ops[0] if start_incl else first_ops[1]} "
                f"{col.type.to_literal(lo[0])}"
            )
        if hi:
            out.append(
                f"{name} {last_ops[0] if end_incl else last_ops[1]} {col.type.to_literal(hi[0])}"
            )
        return out


def _whole_value(ctype: Any, value: Any) -> Any:
    """A logged collection/UDT value as a whole-value literal (an all-null UDT is null)."""
    if value is None:
        return None
    if isinstance(ctype, UserType):
        return value if any(v is not None for v in value.values()) else None
    return value if len(value) else None


def replay_statements(
    base: TableSchema, log_rows: Iterable[dict[str, Any]], target: str | None = None
) -> list[str]:
    """The CQL writes that rebuild ``base`` from its CDC log's delta rows.

    Args:
        base: the base table the log belongs to.
        log_rows: log rows as dicts (column name -> Python value), in log order (by stream,
            ``cdc$time``, ``cdc$batch_seq_no``); pre- and postimage rows are skipped.
        target: the table to write (``ks.t``, default: the base table itself); it must have
            the base table's columns.

    Returns:
        One statement per write, each with ``USING TIMESTAMP`` (and ``TTL`` from
        ``cdc$ttl``); statements can run in any order, as every one carries its timestamp.

    Raises:
        InvalidRequest: a row cannot be inverted (e.g. a range end without its start).

    Example:
        >>> replay_statements(schema, rows)  # doctest: +SKIP
        ['UPDATE ks.t USING TIMESTAMP 10 SET v = 1 WHERE pk = 0 AND ck = 0']
    """
    name = target or f"{maybe_quote(base.keyspace)}.{maybe_quote(base.name)}"
    replayer = _Replayer(base, name)
    for row in log_rows:
        replayer.row(row)
    return replayer.out


class _ReplaySession(Protocol):
    """What ``replay`` needs of a ``cqlcdc.Session``."""

    keyspace: str | None

    @property
    def catalog(self) -> Catalog: ...

    def execute(self, query: str) -> Any: ...

    def execute_many(self, statements: Sequence[str]) -> list[Any]: ...


def _split_name(name: str, default_ks: str | None) -> tuple[str, str]:
    ks, _, table = name.rpartition(".")
    ks = ks.strip('"') if ks else (default_ks or "")
    if not ks:
        raise InvalidRequest(
            "No keyspace has been specified. USE a keyspace, or explicitly specify "
            "keyspace.tablename"
        )
    return ks, table.strip('"')


def read_log(session: _ReplaySession, log_table: str) -> tuple[TableSchema, list[LogRow]]:
    """The base table of ``log_table`` and the log's rows (dicts), in log order.

    Raises:
        InvalidRequest: ``log_table`` is not a CDC log table, or its delta rows carry keys
            only (``delta: 'keys'``), which cannot be replayed.
    """
    ks, log_name = _split_name(log_table, session.keyspace)
    log_schema = session.catalog.table(ks, log_name)
    if log_schema is None:
        raise InvalidRequest(f"unconfigured table {log_name}")
    base = session.catalog.table(ks, log_schema.log_of) if log_schema.log_of else None
    if base is None:
        raise InvalidRequest(f"{ks}.{log_name} is not a CDC log table")
    if base.cdc.delta != "full":
        raise InvalidRequest(f"Cannot replay {ks}.{log_name}: its delta rows carry keys only")
    result = session.execute(f"SELECT * FROM {maybe_quote(ks)}.{maybe_quote(log_name)}")
    names = list(result.column_names)
    return base, [dict(zip(names, r, strict=True)) for r in result]


def replay(session: _ReplaySession, log_table: str, target_table: str) -> int:
    """Rebuild ``target_table`` from the CDC log ``log_table`` (``ks.t_scylla_cdc_log``).

    Creates nothing: the target must exist with the base table's columns (it need not be
    empty; the log's writes merge into it by timestamp).

    Args:
        session: an open session (``cqlcdc.connect(...)``).
        log_table: the log table, ``ks.<base>_scylla_cdc_log``.
        target_table: the table to write, ``ks.name``.

    Returns:
        The number of statements executed.

    Raises:
        InvalidRequest: unknown tables, a target whose columns differ, a ``delta: 'keys'``
            log; or the first error the engine reported for a statement.

    Example:
        >>> replay(session, "ks.t_scylla_cdc_log", "ks.t_copy")  # doctest: +SKIP
        12
    """
    base, rows = read_log(session, log_table)
    tks, tname = _split_name(target_table, session.keyspace)
    target = session.catalog.table(tks, tname)
    if target is None:
        raise InvalidRequest(f"unconfigured table {tname}")
    if _shape(target) != _shape(base):
        raise InvalidRequest(
            f"Cannot replay into {tks}.{tname}: its columns differ from {base.qualified_name}"
        )
    statements = replay_statements(base, rows, f"{maybe_quote(tks)}.{maybe_quote(tname)}")
    for i in range(0, len(statements), REPLAY_GROUP_SIZE):
        for res in session.execute_many(statements[i : i + REPLAY_GROUP_SIZE]):
            if isinstance(res, CqlError):
                raise res
    return len(statements)


def _shape(schema: TableSchema) -> list[tuple[str, str, str, int, bool]]:
    return sorted(
        (c.name, c.type.cql_name, c.kind, c.position, c.descending) for c in schema.columns
    )
