"""The state of typed base rows, merged column-wise.

A typed base row (``cqlcdc.storage.base_rows``) is one write to one clustering row: its row
tombstone, row marker and cells, each with its own timestamp and expiry, in Arrow columns.
Many of them are merged here without a Python object per row: for each row, the newest row
tombstone, the newest marker and for each column the newest cell, last write wins per
component. That is what ``Partition.apply`` does one write at a time, as long as no two
candidates for one component share the newest timestamp: there the merge compares them
(``Cell.reconcile``), so :func:`merge_rows` declines (returns None) and the caller merges in
Python. Only partitions without a residual row (statics, collections, counters, range or
partition tombstones) are merged here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import (
    DELETION,
    FRAGMENT,
    MARKER,
    PK,
    SEQ,
    STATIC,
    VALUE_PREFIX,
    from_storage,
    layout,
    partitions,
)
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.vectorized import length_prefixed
from cqlcdc.types.base import CqlType

_OLDEST = np.iinfo(np.int64).min
_NOTHING = pa.scalar(b"", pa.large_binary())


@dataclass(frozen=True, slots=True)
class StateRows:
    """The base rows of some partitions, in no particular order (``seq`` gives it): what a
    bucket's writes read of the state, kept in Arrow so that partitions of typed rows are
    merged without a Python object per row (their merge is by timestamp, so their order is
    free; :meth:`partitions` merges the rest in seq order)."""

    rows: pa.Table

    @classmethod
    def of_rows(cls, rows: pa.Table, truncated: int) -> StateRows:
        """From base rows: those after seq ``truncated`` (what a TRUNCATE left)."""
        if rows.num_rows and pc.min(rows.column(SEQ)).as_py() <= truncated:
            rows = rows.filter(pc.greater(rows.column(SEQ), truncated))
        return cls(rows)

    @property
    def pk(self) -> pa.Array:
        if not self.rows.num_rows:
            return pa.array([], pa.binary())
        return self.rows.column(PK).combine_chunks().cast(pa.binary())

    def __len__(self) -> int:
        return int(self.rows.num_rows)

    def partitions(
        self, schema: TableSchema, pks: pa.Array | None = None
    ) -> dict[bytes, Partition]:
        """The merged state of each partition (only those in ``pks``, if given), as
        ``schema`` sees it."""
        rows = self.rows
        if pks is not None and rows.num_rows:
            rows = rows.filter(
                pc.is_in(rows.column(PK), value_set=pks.cast(rows.schema.field(PK).type))
            )
        return partitions(schema, rows)

    def columnar(self) -> npt.NDArray[np.bool_]:
        """Per row: whether its partition is made only of plain typed rows (no residual row,
        no static row, no collection cells): what :func:`merge_rows` merges."""
        rows = self.rows
        n = rows.num_rows
        if not n:
            return np.zeros(0, np.bool_)
        other = np.zeros(n, np.bool_)
        for name in rows.column_names:
            column = rows.column(name)
            if name == STATIC:
                other |= column.fill_null(False).to_numpy(zero_copy_only=False)
            elif name == FRAGMENT or (
                name.startswith(VALUE_PREFIX) and pa.types.is_list(_cells_type(column.type))
            ):
                other |= column.is_valid().to_numpy(zero_copy_only=False)
        if not other.any():
            return np.ones(n, np.bool_)
        pk = rows.column(PK)
        mixed = pc.is_in(pk, value_set=pc.unique(pk.filter(pa.array(other))))
        only_plain: npt.NDArray[np.bool_] = ~mixed.to_numpy(zero_copy_only=False)
        return only_plain


def _cells_type(t: pa.DataType) -> pa.DataType:
    """The type of a collection struct's ``cells`` (null for an atomic cell's struct)."""
    if pa.types.is_struct(t) and t.get_field_index("cells") >= 0:
        return t.field("cells").type
    return pa.null()


def clustering_keys(schema: TableSchema, rows: pa.Table) -> pa.Array:
    """The clustering key of every typed row as its columns' native ``[value]``s joined
    (what the bulk path makes of a write's key): how rows are matched to a batch's."""
    pieces = [
        length_prefixed(rows.column(name).combine_chunks(), col.type.cql_name).cast(
            pa.large_binary()
        )
        for col, name in layout(schema).keys
    ]
    if not pieces:
        return pa.array([b""] * rows.num_rows, pa.large_binary())
    if len(pieces) == 1:
        return pieces[0]
    return pc.binary_join_element_wise(*pieces, _NOTHING)


@dataclass(frozen=True, slots=True)
class Component:
    """One component of typed rows (the row tombstone, the marker, a column's cell): per
    row whether it holds one, its timestamp and expiry second, and a cell's value."""

    present: npt.NDArray[np.bool_]
    ts: npt.NDArray[np.int64]
    expiry: npt.NDArray[np.int64]
    value: pa.Array | None = None  # storage type; null: a tombstone (or not present)


@dataclass(frozen=True, slots=True)
class Parsed:
    """Typed rows as components."""

    deletion: Component
    marker: Component
    cells: dict[str, Component]  # by column name

    def components(self) -> list[Component]:
        return [self.deletion, self.marker, *self.cells.values()]

    def expiries(self) -> npt.NDArray[np.int64]:
        """Every expiry second of a present component."""
        return np.concatenate([c.expiry[c.present] for c in self.components()])


def _field(column: pa.ChunkedArray | pa.Array, name: str, fill: int) -> npt.NDArray[np.int64]:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    out: npt.NDArray[np.int64] = column.field(name).fill_null(fill).to_numpy().astype(np.int64)
    return out


def parse_rows(schema: TableSchema, rows: pa.Table, with_values: bool = True) -> Parsed | None:
    """The components of typed base ``rows`` of ``schema``'s table; None when one holds a
    cell of a column ``schema`` does not read as it is (dropped, or added again after a
    drop: Python hides what they wrote). ``with_values=False`` leaves the values out: what
    a compaction's survival test needs."""
    n = rows.num_rows
    names = set(rows.column_names)
    readded = schema.readded_at()
    current = layout(schema).by_name
    reads = set(current.values())
    for name in names:
        if name.startswith(VALUE_PREFIX) and name not in reads and rows.column(name).null_count < n:
            return None
    if any(current.get(c) in names and rows.column(current[c]).null_count < n for c in readded):
        return None
    zeros = np.zeros(n, np.int64)
    if DELETION in names:
        d = rows.column(DELETION)
        deletion = Component(
            d.is_valid().to_numpy(zero_copy_only=False), d.fill_null(_OLDEST).to_numpy(), zeros
        )
    else:
        deletion = Component(np.zeros(n, np.bool_), np.full(n, _OLDEST, np.int64), zeros)
    if MARKER in names:
        m = rows.column(MARKER)
        marker = Component(
            m.is_valid().to_numpy(zero_copy_only=False),
            _field(m, "ts", _OLDEST),
            _field(m, "expiry", 0),
        )
    else:
        marker = Component(np.zeros(n, np.bool_), np.full(n, _OLDEST, np.int64), zeros)
    cells: dict[str, Component] = {}
    for col, name in layout(schema).values:
        if name not in names:
            continue
        column = rows.column(name).combine_chunks()
        if column.null_count == n:
            continue
        present = column.is_valid().to_numpy(zero_copy_only=False)
        value = pc.if_else(column.is_valid(), column.field("value"), None) if with_values else None
        cells[col.name] = Component(
            present, _field(column, "ts", _OLDEST), _field(column, "expiry", 0), value
        )
    return Parsed(deletion, marker, cells)


@dataclass(frozen=True, slots=True)
class BulkRows:
    """The merged state of some rows, one entry per row (``row`` numbers of the caller).

    ``values[c]`` is the live value of column c at ``now_s`` (null: none) in its Arrow type,
    ``marker`` whether a live row marker exists, ``newest`` the newest timestamp of
    anything in the row.
    """

    newest: npt.NDArray[np.int64]
    marker: npt.NDArray[np.bool_]
    values: dict[str, pa.Array]


def merge_rows(
    schema: TableSchema,
    parsed: Parsed,
    rows: npt.NDArray[np.int64],
    count: int,
    now_s: int,
) -> BulkRows | None:
    """Merge parsed typed rows, row i belonging to merged row ``rows[i]`` of ``count`` (-1:
    none of them), into each row's live state at ``now_s``; their order is free (the merge
    is by timestamp). None when two candidates for one component tie on the newest
    timestamp (see the module docstring)."""
    keep = rows >= 0
    r = rows[keep]
    newest = np.full(count, _OLDEST, np.int64)
    for part in parsed.components():
        at = part.present[keep]
        np.maximum.at(newest, r[at], part.ts[keep][at])

    d = parsed.deletion
    deletion = np.full(count, _OLDEST, np.int64)
    at = d.present[keep]
    np.maximum.at(deletion, r[at], d.ts[keep][at])

    m = parsed.marker
    marker = np.zeros(count, np.bool_)
    setters = np.flatnonzero(m.present[keep])
    if len(setters):
        winner = _winners(r[setters], m.ts[keep][setters], count)
        if winner is None:
            return None
        has = winner >= 0
        pick = setters[np.where(has, winner, 0)]
        ts, expiry = m.ts[keep][pick], m.expiry[keep][pick]
        marker = has & (ts > deletion) & ((expiry == 0) | (expiry > now_s))

    values: dict[str, pa.Array] = {}
    kept = pa.array(np.flatnonzero(keep))
    for col, _ in layout(schema).values:
        arrow_type = col.type.arrow_type()
        comp = parsed.cells.get(col.name)
        setters = np.flatnonzero(comp.present[keep]) if comp is not None else np.zeros(0, np.int64)
        if comp is None or not len(setters):
            values[col.name] = pa.nulls(count, arrow_type)
            continue
        winner = _winners(r[setters], comp.ts[keep][setters], count)
        if winner is None:
            return None
        has = winner >= 0
        pick = setters[np.where(has, winner, 0)]
        assert comp.value is not None
        value = _arrow_values(col.type, comp.value.take(kept).take(pa.array(pick)))
        ts, expiry = comp.ts[keep][pick], comp.expiry[keep][pick]
        live = (
            has
            & value.is_valid().to_numpy(zero_copy_only=False)
            & (ts > deletion)
            & ((expiry == 0) | (expiry > now_s))
        )
        values[col.name] = pc.if_else(pa.array(live), value, pa.nulls(count, arrow_type))
    return BulkRows(newest, marker, values)


def _arrow_values(t: CqlType, stored: pa.Array) -> pa.Array:
    """Stored values in their column's Arrow type (values stored encoded are decoded)."""
    arrow_type = t.arrow_type()
    if stored.type == arrow_type:
        return stored
    if pa.types.is_binary(stored.type) and not pa.types.is_binary(arrow_type):
        decode = from_storage(t)
        return pa.array(
            [None if v is None else t.to_arrow(decode(v)) for v in stored.to_pylist()], arrow_type
        )
    return stored.cast(arrow_type)


def _winners(
    rows: npt.NDArray[np.int64], ts: npt.NDArray[np.int64], count: int
) -> npt.NDArray[np.int64] | None:
    """For each of ``count`` rows, the index (into ``rows``/``ts``) of its candidate with the
    newest timestamp, -1 for none; None when the newest two of a row tie."""
    out = np.full(count, -1, np.int64)
    if not len(rows):
        return out
    order = np.lexsort((ts, rows))
    r, t = rows[order], ts[order]
    last = np.ones(len(r), np.bool_)
    last[:-1] = r[1:] != r[:-1]
    tied = ~last[:-1] & (t[1:] == t[:-1]) & last[1:]
    if tied.any():
        return None
    out[r[last]] = order[last]
    return out


def surviving(parsed: Parsed, rows: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.bool_]:
    """Which typed rows a compaction keeps: those holding a newest candidate (ties
    included) of some component of their row (``rows[i]`` of ``count``): the row tombstone,
    the marker, a column's cell, unless the row tombstone shadows it (timestamp not above
    it). Merging the kept ones gives what merging all gives, since no other candidate can
    win a last-write-wins merge and a shadowed one stays shadowed whatever comes later (the
    tombstone is kept), so they stay typed rows."""
    d = parsed.deletion
    deletion = np.full(count, _OLDEST, np.int64)
    np.maximum.at(deletion, rows[d.present], d.ts[d.present])
    shadow = deletion
    keep = d.present & (d.ts == deletion[rows])
    for comp in parsed.components()[1:]:
        if not comp.present.any():
            continue
        newest = np.full(count, _OLDEST, np.int64)
        np.maximum.at(newest, rows[comp.present], comp.ts[comp.present])
        keep |= comp.present & (comp.ts == newest[rows]) & (comp.ts > shadow[rows])
    kept: npt.NDArray[np.bool_] = keep
    return kept
