"""The state of rows written by bulk writes, merged column-wise from their base fragments.

A bulk fragment (``FRAGMENT_TAG``, see ``cqlcdc.storage.bulk``) is one write to one row: a
kind, one timestamp, TTL and expiry, the key and the written values in the native encoding.
Many of them are parsed at once here (numpy over the fragments' bytes, one pass per field,
grouped by their shared header), and the rows they touch are merged with last-write-wins per
component, column by column: the newest row tombstone, the newest marker, and for each column
the newest cell. That is what ``Partition.apply`` does one fragment at a time, as long as no
two candidates for one component share the newest timestamp: there the merge compares values
(``Cell.reconcile``), so :func:`merge_rows` declines (returns None) and the caller merges in
Python. Only partitions whose every fragment is a bulk one can be merged here: they hold no
range or partition tombstones, no statics and no collections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import (
    FRAGMENT_TAG,
    KIND_INSERT,
    KIND_ROW_DELETE,
    FragmentHeader,
    parse_fragment_header,
)
from cqlcdc.storage.vectorized import FIXED_WIDTH, binary_parts

_OLDEST = np.iinfo(np.int64).min
_TAG_LEN = len(FRAGMENT_TAG)
_MAX_PLACES = 16  # regions at more places in their fragments are gathered byte by byte


@dataclass(frozen=True, slots=True)
class PartitionFragments:
    """The base fragments of some partitions as parallel columns, in no particular order
    (``seq`` gives it): what a bucket's writes read of the state, kept in Arrow so that
    partitions of bulk fragments are merged without a Python object per fragment (their
    merge is by timestamp, so their order is free; ``by_partition`` makes the rest, in seq
    order)."""

    pk: pa.Array  # binary: the serialized partition key
    seq: pa.Array  # int64: the write's seq, the order a Python merge applies them in
    fragment: pa.Array  # binary

    @classmethod
    def of_rows(cls, rows: pa.Table, truncated: int) -> PartitionFragments:
        """From base rows (``pk``, ``seq``, ``fragment``): those after seq ``truncated``
        (what a TRUNCATE left). Not sorted: a sort moves every fragment's bytes, and only
        the partitions merged in Python need the order (``by_partition`` sorts those)."""
        if rows.num_rows == 0:
            return cls.of_mapping({})
        seqs = rows.column("seq")
        if pc.min(seqs).as_py() <= truncated:
            rows = rows.filter(pc.greater(seqs, truncated))
        return cls(
            rows.column("pk").combine_chunks().cast(pa.binary()),
            rows.column("seq").combine_chunks().cast(pa.int64()),
            rows.column("fragment").combine_chunks().cast(pa.binary()),
        )

    @classmethod
    def of_mapping(cls, fragments: Mapping[bytes, Sequence[bytes]]) -> PartitionFragments:
        """From fragments by partition key, each partition's in seq order."""
        pks = [pk for pk, frags in fragments.items() for _ in frags]
        return cls(
            pa.array(pks, pa.binary()),
            pa.array(np.arange(len(pks), dtype=np.int64)),
            pa.array([f for frags in fragments.values() for f in frags], pa.binary()),
        )

    def __len__(self) -> int:
        return len(self.pk)

    def by_partition(self, pks: pa.Array | None = None) -> dict[bytes, list[bytes]]:
        """The fragments of each partition (only those in ``pks``, if given), in seq order."""
        pk, seq, fragment = self.pk, self.seq, self.fragment
        if pks is not None:
            wanted = pc.is_in(pk, value_set=pks.cast(pa.binary()))
            pk, seq, fragment = pk.filter(wanted), seq.filter(wanted), fragment.filter(wanted)
        order = pa.array(np.argsort(seq.to_numpy(zero_copy_only=False), kind="stable"))
        out: dict[bytes, list[bytes]] = {}
        for key, frag in zip(
            pk.take(order).to_pylist(), fragment.take(order).to_pylist(), strict=True
        ):
            out.setdefault(key, []).append(frag)
        return out

    def bulk(self) -> npt.NDArray[np.bool_]:
        """Per fragment: whether its partition is made only of bulk fragments."""
        if not len(self.pk):
            return np.zeros(0, np.bool_)
        tagged = pc.equal(pc.binary_slice(self.fragment, 0, _TAG_LEN), FRAGMENT_TAG)
        other = self.pk.filter(pc.invert(tagged))
        if not len(other):
            return np.ones(len(self.pk), np.bool_)
        mixed = pc.is_in(self.pk, value_set=pc.unique(other))
        only_bulk: npt.NDArray[np.bool_] = ~mixed.to_numpy(zero_copy_only=False)
        return only_bulk


def _gather(data: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], dtype: str) -> npt.NDArray[Any]:
    """The big-endian ``dtype`` number at byte ``at[i]`` of ``data``, for every i."""
    width = np.dtype(dtype).itemsize
    if len(data) < width:
        raw = data[at[:, None] + np.arange(width, dtype=np.int64)]
    else:  # rows of a sliding view: no index per byte
        raw = np.lib.stride_tricks.sliding_window_view(data, width)[at]
    return np.ascontiguousarray(raw).view(dtype).ravel()


def _value_array(
    data: npt.NDArray[np.uint8],
    start: npt.NDArray[np.int64],
    size: npt.NDArray[np.int64],
    cql: str,
    arrow_type: pa.DataType,
) -> pa.Array:
    """The values at ``start`` of ``size`` bytes (negative: null) as ``arrow_type``."""
    valid = size >= 0
    mask = ~valid
    if cql in FIXED_WIDTH:
        numbers = _gather(data, np.where(valid, start, 0), FIXED_WIDTH[cql])
        numbers = numbers.astype(np.dtype(FIXED_WIDTH[cql]).newbyteorder("="))
        if cql == "timestamp":
            return pa.array(numbers, pa.int64(), mask=mask).cast(arrow_type)
        return pa.array(numbers, mask=mask).cast(arrow_type)
    if cql == "boolean":
        flags = data[np.where(valid, start, 0)] != 0
        return pa.array(flags, mask=mask).cast(arrow_type)
    lengths = np.where(valid, size, 0)
    offsets = np.zeros(len(size) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(start - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    body = data[index]
    kind = pa.large_string() if cql in ("text", "ascii") else pa.large_binary()
    array = pa.Array.from_buffers(
        kind,
        len(size),
        [pa.array(valid).buffers()[1], pa.py_buffer(offsets), pa.py_buffer(body.tobytes())],
    )
    return array.cast(arrow_type)


def _region(
    data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64], end: npt.NDArray[np.int64]
) -> pa.Array:
    """Bytes ``start[i]:end[i]`` of ``data`` for every i, as a binary array."""
    lengths = end - start
    offsets = np.zeros(len(start) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    index = np.repeat(start - offsets[:-1], lengths) + np.arange(offsets[-1], dtype=np.int64)
    body = data[index]
    return pa.Array.from_buffers(
        pa.large_binary(), len(start), [None, pa.py_buffer(offsets), pa.py_buffer(body.tobytes())]
    )


def _slices(
    fragments: pa.Array,
    data: npt.NDArray[np.uint8],
    offsets: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
) -> pa.Array:
    """``_region(data, start, end)`` of ``fragments`` (whose ``binary_parts`` are
    ``offsets``, ``data``), where the regions lie at a few places in the fragments (headers,
    keys of fixed width: one per statement shape): one ``binary_slice`` of every fragment per
    place, then each fragment's own place chosen, instead of an index per byte."""
    count = len(start)
    first = offsets[:-1]
    if count == 0:
        return _region(data, start, end)
    # (start, end) within the fragment as one number (fragments are far below 4 GB)
    encoded = pc.dictionary_encode(pa.array(((start - first) << 32) | (end - first)))
    if len(encoded.dictionary) > _MAX_PLACES:
        return _region(data, start, end)
    places = [(k >> 32, k & 0xFFFFFFFF) for k in encoded.dictionary.to_pylist()]
    # each place sliced out of every fragment (a few bytes each), then each fragment's own
    # chosen: cheaper than taking the fragments of each place (a copy of them all)
    pieces = [pc.binary_slice(fragments, lo, hi) for lo, hi in places]
    pieces = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in pieces]
    if len(pieces) == 1:
        return pieces[0].cast(pa.large_binary())
    return pc.choose(encoded.indices, *pieces).cast(pa.large_binary())


@dataclass(frozen=True, slots=True)
class Fragments:
    """Bulk fragments parsed: per fragment its kind, timestamp, expiry and clustering key
    (the native ``[value]``s of its clustering columns, joined: what ``length_prefixed`` makes
    of a write's), and per column the fragments that write it with their values."""

    kinds: npt.NDArray[np.int8]
    ts: npt.NDArray[np.int64]
    expiry: npt.NDArray[np.int64]
    ck: pa.Array
    sets: dict[str, npt.NDArray[np.bool_]]
    values: dict[str, pa.Array]  # by fragment index, null where unwritten


# per distinct header: the header, the fragments that have it, where their keys begin
_Groups = list[tuple[FragmentHeader, npt.NDArray[np.int64], npt.NDArray[np.int64]]]


def _by_header(
    fragments: pa.Array, data: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64]
) -> _Groups:
    """The fragments grouped by their header: per distinct header, the header, the fragments
    that have it and where their keys begin (after kind, timestamp, TTL and expiry).

    A state read holds the fragments of a few statements: each header is found by one
    vectorized prefix test over all fragments (the prefix holds the header's length, so
    equal prefixes are equal headers); past ``_MAX_PLACES`` of them, the rest by a
    dictionary of their header bytes."""
    groups: _Groups = []
    left = np.ones(len(fragments), np.bool_)
    first = offsets[:-1]
    while left.any():
        at = int(np.argmax(left))
        size = int(_gather(data, first[at : at + 1] + _TAG_LEN, ">u2")[0])
        prefix = data[first[at] : first[at] + _TAG_LEN + 2 + size].tobytes()
        if len(groups) == _MAX_PLACES:
            rest = np.flatnonzero(left)
            for header, index, fields in _by_header_bytes(data, first[rest]):
                groups.append((header, rest[index], fields))
            break
        same = pc.starts_with(fragments, pattern=prefix).to_numpy(zero_copy_only=False)
        index = np.flatnonzero(same)
        left[index] = False
        groups.append(
            (parse_fragment_header(prefix[_TAG_LEN + 2 :]), index, first[index] + len(prefix))
        )
    return groups


def _by_header_bytes(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64]) -> _Groups:
    """``_by_header`` of the fragments at ``start`` of ``data``, by a dictionary of their
    headers."""
    lengths = _gather(data, start + _TAG_LEN, ">u2").astype(np.int64)
    heads = pc.dictionary_encode(
        _region(data, start + _TAG_LEN + 2, start + _TAG_LEN + 2 + lengths)
    )
    head_of = heads.indices.to_numpy().astype(np.int64)
    by_head = np.argsort(head_of, kind="stable")
    bounds = np.searchsorted(head_of[by_head], np.arange(len(heads.dictionary) + 1))
    groups: _Groups = []
    for h, header_bytes in enumerate(heads.dictionary.to_pylist()):
        index = by_head[bounds[h] : bounds[h + 1]]
        fields = start[index] + _TAG_LEN + 2 + len(header_bytes)
        groups.append((parse_fragment_header(header_bytes), index, fields))
    return groups


def _after_key(
    data: npt.NDArray[np.uint8], keys: npt.NDArray[np.int64], header: FragmentHeader
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Where the clustering key begins and ends (the written values begin there) in
    fragments of ``header`` whose keys begin at ``keys``."""
    pos = ck_start = keys
    for slot in range(header.n_pk + header.n_ck):
        if slot == header.n_pk:
            ck_start = pos
        size = _gather(data, pos, ">i4").astype(np.int64)
        pos = pos + 4 + np.maximum(size, 0)
    return (ck_start if header.n_ck else pos), pos


def clustering_keys(fragments: pa.Array) -> pa.Array:
    """The clustering key of every bulk fragment (as ``Fragments.ck``) without parsing the
    rest: a partition's fragments mostly write rows a batch does not touch, so a reader picks
    the fragments of its rows by key first and parses only those."""
    offsets, data = binary_parts(fragments)
    ck_start = np.zeros(len(fragments), np.int64)
    ck_end = np.zeros(len(fragments), np.int64)
    for header, index, keys in _by_header(fragments, data, offsets):
        ck_start[index], ck_end[index] = _after_key(data, keys + 20, header)
    return _slices(fragments, data, offsets, ck_start, ck_end)


def parse_fragments(
    schema: TableSchema, fragments: pa.Array, with_values: bool = True
) -> Fragments | None:
    """Parse bulk ``fragments`` of ``schema``'s table (every one must be one); None when one
    writes a column the table no longer has. ``with_values=False`` leaves ``values`` empty:
    what a compaction's survival test needs (kinds, timestamps, which columns each fragment
    writes) without building every value."""
    n = len(fragments)
    kinds = np.zeros(n, np.int8)
    ts = np.zeros(n, np.int64)
    expiry = np.zeros(n, np.int64)
    ck_start = np.zeros(n, np.int64)
    ck_end = np.zeros(n, np.int64)
    offsets, data = binary_parts(fragments)
    columns = {c.name: c for c in schema.regular_columns}
    readded = schema.readded_at()
    sets: dict[str, npt.NDArray[np.bool_]] = {}
    pieces: dict[str, list[tuple[npt.NDArray[np.int64], pa.Array]]] = {}
    for header, index, fields in _by_header(fragments, data, offsets):
        kinds[index] = header.kind
        ts[index] = _gather(data, fields, ">i8")
        expiry[index] = _gather(data, fields + 12, ">i8")
        ck_start[index], pos = _after_key(data, fields + 20, header)
        ck_end[index] = pos
        keys = header.n_pk + header.n_ck
        for name, cql in zip(header.names[keys:], header.types[keys:], strict=True):
            size = _gather(data, pos, ">i4").astype(np.int64)
            start = pos + 4
            pos = start + np.maximum(size, 0)
            col = columns.get(name)
            if col is None or name in readded:  # dropped (and maybe added again): Python
                return None
            sets.setdefault(name, np.zeros(n, np.bool_))[index] = True
            if with_values:
                array = _value_array(data, start, size, cql, col.type.arrow_type())
                pieces.setdefault(name, []).append((index, array))
    values: dict[str, pa.Array] = {}
    for name, parts in pieces.items():
        by_fragment = np.full(n, -1, np.int64)
        base = 0
        for index, _ in parts:
            by_fragment[index] = np.arange(base, base + len(index), dtype=np.int64)
            base += len(index)
        joined = pa.concat_arrays([array for _, array in parts])
        values[name] = joined.take(pa.array(by_fragment, mask=by_fragment < 0))
    return Fragments(
        kinds, ts, expiry, _slices(fragments, data, offsets, ck_start, ck_end), sets, values
    )


@dataclass(frozen=True, slots=True)
class BulkRows:
    """The merged state of some rows, one entry per row (``row`` numbers of the caller).

    ``values[c]`` is the live value of column c at ``now_s`` (null: none), ``marker`` whether
    a live row marker exists, ``newest`` the newest timestamp of anything in the row.
    """

    newest: npt.NDArray[np.int64]
    marker: npt.NDArray[np.bool_]
    values: dict[str, pa.Array]


def merge_rows(
    schema: TableSchema,
    parsed: Fragments,
    rows: npt.NDArray[np.int64],
    count: int,
    now_s: int,
) -> BulkRows | None:
    """Merge parsed fragments, fragment i belonging to row ``rows[i]`` of ``count`` (-1:
    none of them), into each row's live state at ``now_s``; their order is free (the merge
    is by timestamp). None when two candidates for one component tie on the newest
    timestamp (see the module docstring)."""
    keep = rows >= 0
    r = rows[keep]
    kinds, ts, expiry = parsed.kinds[keep], parsed.ts[keep], parsed.expiry[keep]
    deletion = np.full(count, _OLDEST, np.int64)
    deletes = kinds == KIND_ROW_DELETE
    np.maximum.at(deletion, r[deletes], ts[deletes])
    newest = np.full(count, _OLDEST, np.int64)
    np.maximum.at(newest, r, ts)

    inserts = np.flatnonzero(kinds == KIND_INSERT)
    marker = np.zeros(count, np.bool_)
    if len(inserts):
        winner = _winners(r[inserts], ts[inserts], count)
        if winner is None:
            return None
        has = winner >= 0
        at = inserts[np.where(has, winner, 0)]
        marker = has & (ts[at] > deletion) & ((expiry[at] == 0) | (expiry[at] > now_s))

    values: dict[str, pa.Array] = {}
    kept = pa.array(np.flatnonzero(keep))
    for col in schema.regular_columns:
        arrow_type = col.type.arrow_type()
        if col.name not in parsed.sets:
            values[col.name] = pa.nulls(count, arrow_type)
            continue
        setters = np.flatnonzero(parsed.sets[col.name][keep])
        if not len(setters):
            values[col.name] = pa.nulls(count, arrow_type)
            continue
        winner = _winners(r[setters], ts[setters], count)
        if winner is None:
            return None
        has = winner >= 0
        at = setters[np.where(has, winner, 0)]
        value = parsed.values[col.name].take(kept).take(pa.array(at))
        live = (
            has
            & value.is_valid().to_numpy(zero_copy_only=False)
            & (ts[at] > deletion)
            & ((expiry[at] == 0) | (expiry[at] > now_s))
        )
        values[col.name] = pc.if_else(pa.array(live), value, pa.nulls(count, arrow_type))
    return BulkRows(newest, marker, values)


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


def surviving(parsed: Fragments, rows: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.bool_]:
    """Which fragments a compaction keeps: those holding a newest candidate (ties included)
    of some component of their row (``rows[i]`` of ``count``): the row tombstone, the
    marker, a column's cell, unless the row tombstone shadows them (timestamp not above
    it). Merging the kept ones gives what merging all gives, since no other candidate can
    win a last-write-wins merge and a shadowed one stays shadowed whatever comes later (the
    tombstone is kept), so they stay bulk fragments."""
    keep = np.zeros(len(rows), np.bool_)
    deletes = parsed.kinds == KIND_ROW_DELETE
    candidates = [deletes, parsed.kinds == KIND_INSERT, *parsed.sets.values()]
    deletion = np.full(count, _OLDEST, np.int64)
    for mask in candidates:
        if not mask.any():
            continue
        newest = np.full(count, _OLDEST, np.int64)
        np.maximum.at(newest, rows[mask], parsed.ts[mask])
        keep |= mask & (parsed.ts == newest[rows])
        if mask is deletes:
            deletion = newest
    # what the row tombstone shadows can never be seen or win again: dropped
    kept: npt.NDArray[np.bool_] = keep & (deletes | (parsed.ts > deletion[rows]))
    return kept
