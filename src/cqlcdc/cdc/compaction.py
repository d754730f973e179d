"""Compaction of base-table rows: residual rows merged, typed rows that lost dropped.

Pure (no Spark, no I/O): the engine hands it the rows of some of a base output's files and
writes what it returns as one file in their place.

>>> compact_base_rows(schema, rows, truncated_upto_seq=0, now_s=0)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import BUCKET, FRAGMENT, PK, SEQ, TOKEN, from_storage, layout
from cqlcdc.storage.bulk_state import parse_rows, surviving
from cqlcdc.storage.cells import CounterCell
from cqlcdc.storage.codec import decode_fragment, encode_fragment
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.token import deserialize_partition_key
from cqlcdc.types.arrow import to_pylist


def compact_partition(part: Partition, order: ClusteringOrder, now_s: int) -> None:
    """Drop data shadowed by tombstones, in place, keeping everything a later merge needs.

    Safe on a prefix of a partition's history: tombstones are kept and only ever grow under
    the last-write-wins merge, so data they shadow now stays shadowed whatever fragments are
    merged later, and a later cell with a lower timestamp is shadowed too. Counter cells are
    the exception: they merge by addition, and a shadowed delta still counts once a later
    increment lifts the cell's timestamp above the tombstone, so they are kept as they are.
    """
    counters: dict[ClusteringKey | None, dict[str, CounterCell]] = {}
    rows: list[tuple[ClusteringKey | None, Row]] = [(None, part.static), *part.rows.items()]
    for ck, row in rows:
        kept = {n: c for n, c in row.cells.items() if isinstance(c, CounterCell)}
        if kept:
            counters[ck] = kept
    part.compact(order, now_s)
    for ck, cells in counters.items():
        target = part.static if ck is None else part.row(ck)
        target.cells.update(cells)


# the order of compacted base rows
_ORDER = [("bucket", "ascending"), ("pk", "ascending"), ("seq", "ascending")]


def compact_base_rows(
    schema: TableSchema, rows: pa.Table, truncated_upto_seq: int, now_s: int
) -> pa.Table:
    """Merge the rows of a base output (``cqlcdc.storage.base_rows``) into fewer rows.

    Args:
        schema: the table's schema (partition key and clustering order).
        rows: base rows, any buckets, any order, any columns the table's files have had.
        truncated_upto_seq: rows with ``seq <=`` this are dead (TRUNCATE) and dropped.
        now_s: the current second (expired cells are kept: they still shadow older data).

    Returns:
        Rows of the same columns sorted by (bucket, pk, seq). Per partition, its residual
        rows merged into one (in seq order, compacted, ``seq`` the highest merged; a single
        one kept unchanged), and of its typed rows those that can still win a merge,
        unchanged (``bulk_state.surviving``, which also drops what the merged partition
        tombstone shadows): the state stays readable column-wise. Partitions left empty
        are dropped.
    """
    if rows.num_rows == 0:
        return rows
    live = rows
    if truncated_upto_seq:
        live = live.filter(pc.greater(live.column(SEQ), truncated_upto_seq))
    if live.num_rows == 0:
        return live
    residual_mask = (
        live.column(FRAGMENT).is_valid()
        if FRAGMENT in live.column_names
        else pa.array(np.zeros(live.num_rows, np.bool_))
    )
    residual, deletions = _merge_residuals(schema, live.filter(residual_mask), now_s)
    typed = _compact_typed(schema, live.filter(pc.invert(residual_mask)), deletions)
    return pa.concat_tables([residual, typed]).sort_by(_ORDER)


def _merge_residuals(
    schema: TableSchema, rows: pa.Table, now_s: int
) -> tuple[pa.Table, dict[bytes, Partition]]:
    """Each partition's residual rows merged into one; and by partition key the merged
    residual partitions that hold a partition or range tombstone."""
    rows = rows.sort_by(_ORDER)
    order = ClusteringOrder(schema)
    data = rows.select([BUCKET, PK, TOKEN, SEQ, FRAGMENT]).to_pydict()
    keep: list[int] = []
    merged: dict[int, bytes | None] = {}
    deletions: dict[bytes, Partition] = {}
    n = rows.num_rows
    start = 0
    while start < n:
        pk_bytes = data[PK][start]
        end = start + 1
        while end < n and data[PK][end] == pk_bytes and data[BUCKET][end] == data[BUCKET][start]:
            end += 1
        last = end - 1
        if end - start == 1:
            part = decode_fragment(data[FRAGMENT][start])
            keep.append(start)
        else:
            pk = deserialize_partition_key(schema, pk_bytes)
            part = Partition(pk)
            for fragment in data[FRAGMENT][start:end]:
                part.apply(decode_fragment(fragment))
            compact_partition(part, order, now_s)
            if not part.is_empty():
                keep.append(last)
                merged[last] = encode_fragment(part)
        if part.deletion is not None or part.range_tombstones:
            deletions[pk_bytes] = part
        start = end
    out = rows.take(pa.array(keep, pa.int64()))
    if merged:
        fragments = [
            merged.get(i, f) for i, f in zip(keep, out.column(FRAGMENT).to_pylist(), strict=True)
        ]
        out = out.set_column(
            out.schema.get_field_index(FRAGMENT),
            out.schema.field(FRAGMENT),
            pa.array(fragments, pa.binary()),
        )
    return out, deletions


def _compact_typed(
    schema: TableSchema, rows: pa.Table, tombstones: dict[bytes, Partition]
) -> pa.Table:
    """The typed rows that can still win a merge (``bulk_state.surviving``) and that the
    partition and range ``tombstones`` of their partitions do not shadow; all of them when
    one holds a cell of a column the schema no longer reads as it is."""
    if rows.num_rows == 0:
        return rows
    parsed = parse_rows(schema, rows, with_values=False)
    if parsed is None:
        return rows
    row_ids, count = _row_ids(schema, rows)
    outer = None
    if tombstones:
        outer = np.full(count, np.iinfo(np.int64).min, np.int64)
        pks = rows.column(PK).combine_chunks().cast(pa.binary())
        shadowed = pc.is_in(pks, value_set=pa.array(list(tombstones), pa.binary()))
        at = np.flatnonzero(shadowed.to_numpy(zero_copy_only=False))
        if len(at):
            picked = rows.take(pa.array(at))
            keys = [
                [from_storage(c.type)(v) for v in to_pylist(picked.column(f))]
                for c, f in layout(schema).keys
            ]
            order = ClusteringOrder(schema)
            for k, (i, pk) in enumerate(zip(at, picked.column(PK).to_pylist(), strict=True)):
                ck = tuple(values[k] for values in keys)
                shadow = tombstones[pk].row_shadow(ck, order, include_row=False)
                if shadow is not None and shadow > outer[row_ids[i]]:
                    outer[row_ids[i]] = shadow
    keep = surviving(parsed, row_ids, count, outer)
    return rows.filter(pa.array(keep))


def _row_ids(schema: TableSchema, rows: pa.Table) -> tuple[npt.NDArray[np.int64], int]:
    """A number per distinct (partition key, clustering key) of typed rows, and how many
    there are (distinct key values are distinct rows; a float key's ``-0.0`` and ``0.0``
    count as two, which only keeps more rows)."""
    codes = [
        pc.dictionary_encode(rows.column(name).combine_chunks()).indices.to_numpy()
        for name in (PK, *(f for _, f in layout(schema).keys))
    ]
    if len(codes) == 1:
        ids = codes[0].astype(np.int64)
        return ids, int(ids.max()) + 1
    _, inverse = np.unique(np.stack(codes, axis=1).astype(np.int64), axis=0, return_inverse=True)
    ids = inverse.reshape(-1).astype(np.int64)
    return ids, int(ids.max()) + 1
