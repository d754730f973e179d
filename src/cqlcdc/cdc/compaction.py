"""Compaction of base-table rows: many fragments per partition -> one merged fragment.

Pure (no Spark, no I/O): the engine hands it the rows of some of a base output's files and
writes what it returns as one file in their place.

>>> compact_base_rows(schema, rows, truncated_upto_seq=0, now_s=0)  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.bulk_images import keys_by_bytes
from cqlcdc.cdc.processor import BASE_SCHEMA
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import FRAGMENT_TAG
from cqlcdc.storage.bulk_state import parse_fragments, surviving
from cqlcdc.storage.cells import CounterCell
from cqlcdc.storage.codec import encode_fragment, merge_fragments
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.token import deserialize_partition_key


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
    """Merge the rows of a base output into one row per partition key.

    Args:
        schema: the table's schema (partition key and clustering order).
        rows: rows of :data:`~cqlcdc.cdc.processor.BASE_SCHEMA`, any buckets, any order.
        truncated_upto_seq: fragments with ``seq <=`` this are dead (TRUNCATE) and dropped.
        now_s: the current second (expired cells are kept: they still shadow older data).

    Returns:
        Rows of ``BASE_SCHEMA`` sorted by (bucket, pk, seq): per partition key the merge of
        its live fragments in seq order, compacted, with ``seq`` the highest seq merged.
        Partitions left empty are dropped. A partition with a single live fragment keeps it
        unchanged (merging one fragment is that fragment; this saves a decode per cold
        partition). A partition made only of bulk fragments keeps those that can still win
        a merge, unchanged (``bulk_state.surviving``): its state stays readable column-wise.
    """
    if rows.num_rows == 0:
        return BASE_SCHEMA.empty_table()
    live = rows.select(BASE_SCHEMA.names).cast(BASE_SCHEMA)
    if truncated_upto_seq:
        live = live.filter(pc.greater(live.column("seq"), truncated_upto_seq))
    # the bulk partitions' survival test needs no order; only the partitions merged in
    # Python are sorted here, the output once at the end
    kept_bulk, live = _compact_bulk(schema, live)
    live = live.sort_by(_ORDER)
    order = ClusteringOrder(schema)
    out: dict[str, list[Any]] = {name: [] for name in BASE_SCHEMA.names}
    data = live.to_pydict()
    n = live.num_rows
    start = 0
    while start < n:
        pk_bytes = data["pk"][start]
        end = start + 1
        while (
            end < n and data["pk"][end] == pk_bytes and data["bucket"][end] == data["bucket"][start]
        ):
            end += 1
        last = end - 1
        if end - start == 1:
            fragment = data["fragment"][start]
        else:
            pk = deserialize_partition_key(schema, pk_bytes)
            part = merge_fragments(pk, data["fragment"][start:end], None)
            compact_partition(part, order, now_s)
            fragment = None if part.is_empty() else encode_fragment(part)
        if fragment is not None:
            out["bucket"].append(data["bucket"][start])
            out["pk"].append(pk_bytes)
            out["token"].append(data["token"][last])
            out["seq"].append(data["seq"][last])
            out["fragment"].append(fragment)
        start = end
    merged = pa.Table.from_pydict(out, schema=BASE_SCHEMA)
    if kept_bulk.num_rows == 0:
        return merged
    return pa.concat_tables([merged, kept_bulk]).sort_by(_ORDER)


def _compact_bulk(schema: TableSchema, live: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Split off the partitions made only of bulk fragments and compact them column-wise
    (``bulk_state.surviving``): their fragments that can still win a merge stay as they are,
    so the state stays readable column-wise. Returns (kept rows, the other partitions)."""
    if not keys_by_bytes(schema):
        return BASE_SCHEMA.empty_table(), live
    fragments = live.column("fragment").combine_chunks()
    bulk = pc.starts_with(fragments, pattern=FRAGMENT_TAG.decode()).to_numpy(zero_copy_only=False)
    if not bulk.any():
        return BASE_SCHEMA.empty_table(), live
    partition = pc.dictionary_encode(live.column("pk").combine_chunks()).indices.to_numpy()
    other = np.bincount(partition, weights=~bulk, minlength=partition.max() + 1) > 0
    in_bulk = ~other[partition]
    if not in_bulk.any():
        return BASE_SCHEMA.empty_table(), live
    rows = live.filter(pa.array(in_bulk))
    parsed = parse_fragments(schema, rows.column("fragment").combine_chunks(), with_values=False)
    if parsed is None:  # a column dropped since: merged the row path's way
        return BASE_SCHEMA.empty_table(), live
    row_keys = pc.binary_join_element_wise(
        rows.column("pk").combine_chunks().cast(pa.large_binary()),
        parsed.ck,
        pa.scalar(b"", pa.large_binary()),
    )
    row_ids = pc.dictionary_encode(row_keys).indices.to_numpy().astype(np.int64)
    keep = surviving(parsed, row_ids, int(row_ids.max()) + 1)
    return rows.filter(pa.array(keep)), live.filter(pa.array(~in_bulk))
