"""What a bucket of bulk writes changes, column-wise: CDC log images and feed row events.

The before/after state of every write of a bucket of bulk writes (``cqlcdc.storage.bulk``)
is a join of the writes with the prior state of the rows they touch, plus a sort-and-scan
for several writes to one row in the batch: after sorting the writes by (row, seq), the value
a column had before write k is the value written by the last earlier write of the row that
touched the column, or, when none did, the prior state's (a forward fill per column, done
with ``maximum.accumulate``) (:func:`bulk_changes`). From it come the log rows
(:func:`image_log_rows`: the delta rows are :func:`cqlcdc.cdc.bulk_log.bulk_log_rows`',
preimage and postimage rows project the same columns) and the changefeeds' records
(:mod:`cqlcdc.cdc.bulk_feeds`), so no write goes through the log writer or a merged
partition.

That equals what :class:`cqlcdc.cdc.log_writer.LogWriter` and
:func:`cqlcdc.changefeed.events.row_events` give for each write applied one by one
(``tests/unit/cdc/test_bulk_images.py`` checks it with hypothesis) when replaying the writes
in seq order over the prior state is plain overwriting, which :func:`bulk_changes` checks
before it answers; otherwise it answers None and the caller applies the writes one by one.
The conditions: no write carries a TTL; in every row the writes' timestamps grow with seq and
exceed every timestamp of the row's prior state (its cells, marker and the tombstones
covering it), so last-write-wins never keeps an older value; no cell or marker of a touched
row expires between the earliest and the latest write of the bucket; the touched rows hold
atomic cells only (a non-frozen collection or UDT takes the row path); clustering keys are
equal exactly when their bytes are (:func:`keys_by_bytes`). What the table's log and feeds
need (``delta: 'full'``, no initial scan, bulk-typed columns for feeds) is the caller's
check (``cdc.columnar.images_are_columnar``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.bulk_log import bulk_log_rows
from cqlcdc.cdc.log_writer import OP_POSTIMAGE, OP_PREIMAGE
from cqlcdc.cdc.streams import Generations
from cqlcdc.schema.log_table import (
    BATCH_SEQ_NO,
    END_OF_BATCH,
    OPERATION,
    STREAM_ID,
    TICKS,
    TIME,
    deleted_column,
)
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import column_name, conform
from cqlcdc.storage.base_rows import PK as PK_COLUMN
from cqlcdc.storage.bulk import (
    KIND_INSERT,
    KIND_ROW_DELETE,
    KIND_UPDATE,
    NOW,
    PK,
    SEQ,
    STMT,
    TS,
    BulkStatement,
    python_values,
)
from cqlcdc.storage.bulk import TTL as TTL_COLUMN
from cqlcdc.storage.bulk_state import (
    StateRows,
    clustering_keys,
    merge_rows,
    parse_rows,
)
from cqlcdc.storage.cells import Cell
from cqlcdc.storage.keys import ClusteringOrder
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.token import deserialize_partition_key
from cqlcdc.storage.vectorized import length_prefixed
from cqlcdc.storage.view import row_is_live, row_values
from cqlcdc.types.arrow import NullColumns

_OLDEST = np.iinfo(np.int64).min
_NOTHING = pa.scalar(b"", pa.large_binary())  # the separator of joined keys
# columns a preimage or postimage row shares with its write's delta row
_SHARED = ("_bucket", "_pk", "_seq", "_expiry_s", STREAM_ID, TIME, TICKS)


class _RowKeys:
    """The rows a bucket's writes touch: per row its partition key and row key (partition
    key + the clustering key's native ``[value]``s), and its clustering key in Python on
    demand (``ck``; only rows merged in Python need it)."""

    def __init__(
        self, schema: TableSchema, first_writes: pa.Table, pks: pa.Array, row_keys: pa.Array
    ) -> None:
        self.schema = schema
        self.first_writes = first_writes  # the first write of each row
        self.pks = pks.cast(pa.binary())
        self.row_keys = row_keys
        self._cks: list[list[Any]] | None = None

    def __len__(self) -> int:
        return len(self.pks)

    def pk(self, row: int) -> bytes:
        value: bytes = self.pks[row].as_py()
        return value

    def ck(self, row: int) -> tuple[Any, ...]:
        if self._cks is None:
            self._cks = [
                python_values(self.first_writes, c.name, self.schema)
                for c in self.schema.clustering_key
            ]
        return tuple(values[row] for values in self._cks)


class _Prior:
    """The prior state of the rows a bucket's writes touch, one entry per row."""

    def __init__(self, newest: npt.NDArray[np.int64], marker: npt.NDArray[np.bool_]) -> None:
        self.newest = newest  # the newest timestamp of anything in the row
        self.marker = marker  # a live row marker
        self.values: dict[str, pa.Array] = {}  # live values, in the columns' Arrow types


def _prior_state(
    schema: TableSchema,
    keys: _RowKeys,
    fragments: StateRows,
    now_lo: int,
    now_hi: int,
) -> _Prior | None:
    """What a read at ``now_lo`` sees of each row (None: some row breaks a condition).

    Partitions made only of bulk fragments are merged column-wise
    (``cqlcdc.storage.bulk_state``), the rest in Python.
    """
    count = len(keys)
    bulk_mask = fragments.columnar()
    on_python = pc.is_in(keys.pks, value_set=fragments.pk.filter(pa.array(~bulk_mask)))
    on_python_np = on_python.to_numpy(zero_copy_only=False)
    python_rows = np.flatnonzero(on_python_np).tolist()
    bulk = fragments.rows.filter(pa.array(bulk_mask)) if len(fragments) else fragments.rows
    newest = np.full(count, _OLDEST, np.int64)
    marker = np.zeros(count, np.bool_)
    prior = _Prior(newest, marker)
    typed: dict[str, pa.Array] = {}
    rows = np.zeros(0, np.int64)
    if bulk.num_rows:
        # only the rows written: a partition's others are not parsed
        row_keys = pc.binary_join_element_wise(
            bulk.column(PK_COLUMN).combine_chunks().cast(pa.large_binary()),
            clustering_keys(schema, bulk),
            _NOTHING,
        )
        found = pc.index_in(row_keys, value_set=keys.row_keys)
        rows = found.fill_null(-1).to_numpy().astype(np.int64)
        if not (rows >= 0).all():
            bulk = bulk.filter(pa.array(rows >= 0))
            rows = rows[rows >= 0]
    if bulk.num_rows:
        parsed = parse_rows(schema, bulk)
        if parsed is None:
            return None
        late = parsed.expiries()
        if ((late > now_lo) & (late <= now_hi)).any():
            return None
        merged = merge_rows(schema, parsed, rows, count, now_lo)
        if merged is None:
            return None
        newest[:] = merged.newest
        marker[:] = merged.marker
        typed = merged.values
    values: dict[str, list[Any]] = {c.name: [None] * count for c in schema.regular_columns}
    if python_rows and not _python_rows(
        schema, keys, python_rows, fragments, prior, values, now_lo, now_hi
    ):
        return None
    for col in schema.regular_columns:
        arrow_type = col.type.arrow_type()
        convert = None if col.type.arrow_as_is else col.type.to_arrow
        old = values[col.name]
        from_python = pa.array(
            old if convert is None else [None if v is None else convert(v) for v in old],
            arrow_type,
        )
        if col.name in typed:
            from_bulk = typed[col.name].cast(arrow_type)
            prior.values[col.name] = pc.if_else(on_python, from_python, from_bulk)
        else:
            prior.values[col.name] = from_python
    return prior


def _python_rows(
    schema: TableSchema,
    keys: _RowKeys,
    rows: Sequence[int],
    fragments: StateRows,
    prior: _Prior,
    values: dict[str, list[Any]],
    now_lo: int,
    now_hi: int,
) -> bool:
    """Fill ``rows`` of ``prior``/``values`` from their partitions merged in Python; False
    when a row breaks a condition."""
    regulars = schema.regular_columns
    order = ClusteringOrder(schema)
    wanted = keys.pks.take(pa.array(rows, pa.int64()))
    merged = fragments.partitions(schema, wanted)
    for r in rows:
        pk, ck = keys.pk(r), keys.ck(r)
        part = merged.get(pk)
        if part is None:
            part = merged[pk] = Partition(deserialize_partition_key(schema, pk))
        shadow = part.row_shadow(ck, order)
        newest = _OLDEST if shadow is None else shadow
        row = part.rows.get(ck)
        if row is not None:
            marker = row.marker
            if marker is not None:
                newest = max(newest, marker.timestamp)
                if now_lo < marker.expiry_s <= now_hi:
                    return False
            for data in row.cells.values():
                if not isinstance(data, Cell):
                    return False
                newest = max(newest, data.timestamp)
                if now_lo < data.expiry_s <= now_hi:
                    return False
            if row_is_live(row, shadow, now_lo):
                prior.marker[r] = (
                    marker is not None
                    and marker.is_live(now_lo)
                    and (shadow is None or marker.timestamp > shadow)
                )
                live, _ = row_values(row, regulars, shadow, now_lo)
                for name, value in live.items():
                    values[name][r] = value
        prior.newest[r] = newest
    return True


def _before_index(
    touch: npt.NDArray[np.bool_],
    first: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """For each write (sorted by row, then seq): the index of the last earlier write of its
    row that touched the column, or ``n + row`` (the prior state's entry) when none did."""
    n = len(touch)
    positions = np.arange(n, dtype=np.int64)
    last = np.maximum.accumulate(np.where(touch, positions, -1))
    previous = np.empty(n, np.int64)
    previous[:1] = -1
    previous[1:] = last[:-1]
    return np.where(previous >= first, previous, n + rows)


def keys_by_bytes(schema: TableSchema) -> bool:
    """Whether two clustering keys of ``schema`` are one row exactly when their native
    encodings are equal: not for a float or double, where -0.0 and 0.0 are one key to the
    row path and two byte strings here (such tables take the row path)."""
    return not any(c.type.cql_name in ("float", "double") for c in schema.clustering_key)


@dataclass(frozen=True, slots=True)
class BulkChanges:
    """What a bucket of bulk writes does to the rows it touches, column-wise.

    The writes sorted by (row, seq) are the *sorted* writes; ``order[k]`` is the position of
    sorted write k in the bucket. Per regular column, ``columns[c]`` holds its ``source``
    values (the writes' bound values in bucket order, the prior values, a null) and, per
    sorted write, the index into them of the column's value before and after the write.
    """

    order: npt.NDArray[np.int64]
    kind: npt.NDArray[np.int8]
    stmt: npt.NDArray[np.int64]
    columns: dict[str, tuple[pa.Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]]
    written_by: dict[str, npt.NDArray[np.bool_]]
    live_before: npt.NDArray[np.bool_]
    live_after: npt.NDArray[np.bool_]

    @property
    def row_delete(self) -> npt.NDArray[np.bool_]:
        deletes: npt.NDArray[np.bool_] = self.kind == KIND_ROW_DELETE
        return deletes


def bulk_changes(
    schema: TableSchema,
    writes: pa.Table,
    statements: Sequence[BulkStatement],
    fragments: StateRows,
) -> BulkChanges | None:
    """The changes of a bucket's bulk writes, given the base fragments of the partitions
    they write (without what a TRUNCATE removed; a partition without any is empty). None
    when the writes must be applied one by one (see the module docstring)."""
    n = writes.num_rows
    if n == 0 or writes.column(TTL_COLUMN).to_numpy().any():
        return None
    which = writes.column(STMT).to_numpy().astype(np.int64)
    kinds = np.array([s.kind for s in statements], np.int8)[which]
    ts = writes.column(TS).to_numpy().astype(np.int64)
    seq = writes.column(SEQ).to_numpy().astype(np.int64)
    now_s = writes.column(NOW).to_numpy() // 1_000_000

    # the rows written, numbered by partition key + the clustering key's native [value]s
    if not keys_by_bytes(schema):
        return None
    pk_column = writes.column(PK).combine_chunks().cast(pa.large_binary())
    pieces = [
        length_prefixed(writes.column(c.name), c.type.cql_name).cast(pa.large_binary())
        for c in schema.clustering_key
    ]
    encoded = pc.dictionary_encode(pc.binary_join_element_wise(pk_column, *pieces, _NOTHING))
    row_of = encoded.indices.to_numpy().astype(np.int64)  # rows numbered in order of writes
    firsts = np.unique(row_of, return_index=True)[1]
    first_writes = writes.take(pa.array(firsts))
    keys = _RowKeys(schema, first_writes, pk_column.take(pa.array(firsts)), encoded.dictionary)
    prior = _prior_state(schema, keys, fragments, int(now_s.min()), int(now_s.max()))
    if prior is None:
        return None

    # sorted by (row, seq): each write after the earlier ones of its row
    order = np.lexsort((seq, row_of))
    rows = row_of[order]
    kind = kinds[order]
    stmt = which[order]
    start = np.ones(n, np.bool_)
    start[1:] = rows[1:] != rows[:-1]
    earlier = np.empty(n, np.int64)
    earlier[1:] = ts[order][:-1]
    earlier[start] = prior.newest[rows[start]]
    if not (ts[order] > earlier).all():
        return None  # last-write-wins would keep an older value somewhere
    first = np.maximum.accumulate(np.where(start, np.arange(n, dtype=np.int64), 0))

    row_delete = kind == KIND_ROW_DELETE
    inserts = kind == KIND_INSERT
    marker_at = _before_index(inserts | row_delete, first, rows)
    marker_before = np.concatenate([inserts, prior.marker])[marker_at]
    live_before = marker_before.copy()
    live_after = inserts | (marker_before & ~row_delete)
    m = len(prior.newest)
    nothing = n + m  # the null at the end of each column's sources
    columns: dict[str, tuple[pa.Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
    written_by: dict[str, npt.NDArray[np.bool_]] = {}
    for col in schema.regular_columns:
        name = col.name
        arrow_type = col.type.arrow_type()
        by = np.array([name in s.columns for s in statements], np.bool_)[stmt]
        touch = by | row_delete
        sets = by & ((kind == KIND_UPDATE) | inserts)
        if name in writes.column_names:
            bound = writes.column(name).combine_chunks().cast(arrow_type)
        else:
            bound = pa.nulls(n, arrow_type)
        source = pa.concat_arrays([bound, prior.values[name], pa.nulls(1, arrow_type)])
        wrote = np.where(sets, order, nothing)  # what each write put in the column
        earlier_write = _before_index(touch, first, rows)  # < n: that write; else n + row
        before = np.where(earlier_write < n, wrote[np.minimum(earlier_write, n - 1)], earlier_write)
        after = np.where(touch, wrote, before)
        columns[name] = (source, before, after)
        written_by[name] = by
        valid = source.is_valid().to_numpy(zero_copy_only=False)
        live_before |= valid[before]
        live_after |= valid[after]
    return BulkChanges(order, kind, stmt, columns, written_by, live_before, live_after)


def image_log_rows(
    schema: TableSchema,
    log_schema: pa.Schema,
    writes: pa.Table,
    statements: Sequence[BulkStatement],
    bucket: int,
    generations: Generations,
    changes: BulkChanges,
) -> pa.Table:
    """The log rows (``log_schema``) of a bucket's bulk writes with the images the table's
    CDC options ask for (``delta: 'full'``): the deltas in bucket order, then the images."""
    n = writes.num_rows
    order = changes.order
    nothing = len(next(iter(changes.columns.values()))[0]) - 1 if changes.columns else n
    cdc = schema.cdc
    full = cdc.preimage == "full"
    delta = bulk_log_rows(schema, log_schema, writes, statements, bucket, generations)
    pre = changes.live_before if cdc.preimage != "false" else np.zeros(n, np.bool_)
    post = ~changes.row_delete if cdc.postimage else np.zeros(n, np.bool_)
    in_write_order = np.empty(n, np.int64)
    in_write_order[order] = np.arange(n, dtype=np.int64)
    parts = [_retimed(delta, pre[in_write_order], post[in_write_order])]
    if pre.any():
        values: dict[str, pa.Array] = {}
        for name, (source, before, _) in changes.columns.items():
            shown = full | changes.written_by[name] | changes.row_delete
            picked = np.where(shown, before, nothing)[pre]
            values[name] = source.take(pa.array(picked))
            valid = source.is_valid().to_numpy(zero_copy_only=False)
            gone = shown[pre] & ~valid[picked]
            values[deleted_column(name)] = pa.array(gone, mask=~gone)
        parts.append(_image_rows(schema, log_schema, delta, order[pre], OP_PREIMAGE, 0, values))
    if post.any():
        values = {
            name: source.take(pa.array(after[post]))
            for name, (source, _, after) in changes.columns.items()
        }
        seq_no = (pre.astype(np.int32) + 1)[post]
        parts.append(
            _image_rows(schema, log_schema, delta, order[post], OP_POSTIMAGE, seq_no, values)
        )
    return pa.concat_tables(parts)


def _retimed(delta: pa.Table, pre: npt.NDArray[np.bool_], post: npt.NDArray[np.bool_]) -> pa.Table:
    """The delta rows numbered after their preimage, the batch's end only without a
    postimage after them."""
    seq_no = pa.array(pre.astype(np.int32))
    end = pa.array(np.ones(len(pre), np.bool_), mask=post)
    delta = delta.set_column(delta.schema.get_field_index(BATCH_SEQ_NO), BATCH_SEQ_NO, seq_no)
    return delta.set_column(delta.schema.get_field_index(END_OF_BATCH), END_OF_BATCH, end)


def _image_rows(
    schema: TableSchema,
    log_schema: pa.Schema,
    delta: pa.Table,
    writes: npt.NDArray[np.int64],
    operation: int,
    seq_no: int | npt.NDArray[np.int32],
    values: Mapping[str, pa.Array],
) -> pa.Table:
    """Image rows for ``writes`` (positions in ``delta``): their delta rows' stream, time
    and keys, the operation, ``values`` (one per write) and every other column null."""
    count = len(writes)
    take = pa.array(writes)
    end = operation == OP_POSTIMAGE
    columns: dict[str, pa.Array] = {
        OPERATION: pa.array(np.full(count, operation, np.int8)),
        BATCH_SEQ_NO: pa.array(np.broadcast_to(np.asarray(seq_no, np.int32), (count,))),
        END_OF_BATCH: pa.array(np.ones(count, np.bool_), mask=np.full(count, not end)),
    }
    keys = (column_name(schema, c.name) for c in (*schema.partition_key, *schema.clustering_key))
    for name in (*_SHARED, *keys):
        columns[name] = delta.column(name).take(take).combine_chunks()
    columns.update((column_name(schema, name), array) for name, array in values.items())
    nulls = NullColumns(count)  # the columns no statement writes: shared per type
    arrays = [
        _as_log_type(columns[f.name], f.type) if f.name in columns else nulls(f.type)
        for f in log_schema
    ]
    return pa.Table.from_arrays(arrays, schema=log_schema)


def _as_log_type(values: pa.Array, log_type: pa.DataType) -> pa.Array:
    """``values`` as the log column's type. A non-frozen collection's values are all null
    here (a row holding one is merged by the row path), and a non-frozen list's log type is
    the map of its timeuuids, which Arrow does not cast a list to: nulls of that type."""
    if values.type != log_type and values.null_count == len(values):
        return pa.nulls(len(values), log_type)
    return conform(values, log_type)
