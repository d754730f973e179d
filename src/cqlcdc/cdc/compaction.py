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
from cqlcdc.storage.base_rows import (
    BUCKET,
    PK,
    SEQ,
    TOKEN,
    VALUE_PREFIX,
    BaseRowsBuilder,
    layout,
    partitions,
)
from cqlcdc.storage.bulk_state import StateRows, parse_rows, surviving
from cqlcdc.storage.cells import CounterCell
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.partition import Partition, Row


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
        Rows of the same columns sorted by (bucket, pk, seq). A partition of plain typed
        rows (no static row, collection, residual) keeps those that can still win a merge,
        unchanged (``bulk_state.surviving``): its state stays readable column-wise, without
        a Python object per row. Any other partition is merged in Python (in seq order,
        compacted, every cell kept: visibility is the reader's) and written again as base
        rows at its highest seq; partitions left empty are dropped. A partition holding
        cells of a column the schema no longer has is kept as it is (they cannot be
        decoded without their type, and no read shows them).
    """
    if rows.num_rows == 0:
        return rows
    live = rows
    if truncated_upto_seq:
        live = live.filter(pc.greater(live.column(SEQ), truncated_upto_seq))
    if live.num_rows == 0:
        return live
    columnar = StateRows(live).columnar()
    kept = _compact_typed(schema, live.filter(pa.array(columnar)))
    merged = _merge_in_python(schema, live.filter(pa.array(~columnar)), now_s)
    return pa.concat_tables([kept, merged]).sort_by(_ORDER)


def _merge_in_python(schema: TableSchema, rows: pa.Table, now_s: int) -> pa.Table:
    if rows.num_rows == 0:
        return rows
    orphans = _orphan_rows(schema, rows)
    if orphans.any():  # their partitions stay as they are
        pks = rows.column(PK).filter(pa.array(orphans))
        untouched = pc.is_in(rows.column(PK), value_set=pc.unique(pks))
        kept = rows.filter(untouched)
        rows = rows.filter(pc.invert(untouched))
    else:
        kept = rows.slice(0, 0)
    if rows.num_rows == 0:
        return kept
    order = ClusteringOrder(schema)
    last = rows.group_by([BUCKET, PK]).aggregate([(SEQ, "max"), (TOKEN, "max")])
    where = {
        (b, pk): (seq, token)
        for b, pk, seq, token in zip(
            last.column(BUCKET).to_pylist(),
            last.column(PK).to_pylist(),
            last.column(f"{SEQ}_max").to_pylist(),
            last.column(f"{TOKEN}_max").to_pylist(),
            strict=True,
        )
    }
    buckets = dict(zip(rows.column(PK).to_pylist(), rows.column(BUCKET).to_pylist(), strict=False))
    builder = BaseRowsBuilder(schema)
    for pk_bytes, part in partitions(schema, rows, hide_dropped=False).items():
        compact_partition(part, order, now_s)
        if part.is_empty():
            continue
        bucket = buckets[pk_bytes]
        seq, token = where[(bucket, pk_bytes)]
        builder.add(bucket, pk_bytes, token, seq, part)
    built = _conform(builder.table(), rows.schema)
    return pa.concat_tables([kept, built])


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns of ``schema`` (nulls for those it lacks), in its types."""
    n = table.num_rows
    arrays = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def _orphan_rows(schema: TableSchema, rows: pa.Table) -> npt.NDArray[np.bool_]:
    """Rows holding a cell in a value column the schema does not read."""
    known = {f for _, f in (*layout(schema).values, *layout(schema).collections)}
    out = np.zeros(rows.num_rows, np.bool_)
    for name in rows.column_names:
        if name.startswith(VALUE_PREFIX) and name not in known:
            out |= rows.column(name).is_valid().to_numpy(zero_copy_only=False)
    return out


def _compact_typed(schema: TableSchema, rows: pa.Table) -> pa.Table:
    """The typed rows that can still win a merge (``bulk_state.surviving``); all of them
    when one holds a cell of a column the schema no longer reads as it is."""
    if rows.num_rows == 0:
        return rows
    parsed = parse_rows(schema, rows, with_values=False)
    if parsed is None:
        return rows
    row_ids, count = _row_ids(schema, rows)
    keep = surviving(parsed, row_ids, count)
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
