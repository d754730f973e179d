"""The CDC log writer: one mutation + the partition's prior state -> log rows.

A port of ScyllaDB's ``cdc/log.cc`` transformer (see scylla-cdc-reference.md sections 2, 4
and 5): per timestamp group one ``cdc$time``, rows numbered by ``cdc$batch_seq_no`` from 0,
preimages first, then deltas, then postimages, ``cdc$end_of_batch`` on the last row. Unlike
ScyllaDB the prior state comes from the pipeline's own state, which has applied every earlier
write to the partition, so preimages are never stale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cqlcdc.cdc.changes import ChangeGroup, RowChange, extract_changes, find_timestamp, needs_split
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.cells import Cell, CollectionCells
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.mutations import COMPACT_VALUE
from cqlcdc.storage.partition import ColumnData, Partition, RangeTombstone
from cqlcdc.storage.uuids import CdcTimeBits, random_time_uuid
from cqlcdc.storage.view import PartitionView, collection_value, list_map_type
from cqlcdc.types import ListType, MapType, SetType, UserType
from cqlcdc.types.values import MapValue, UdtValue

OP_PREIMAGE = 0
OP_UPDATE = 1
OP_INSERT = 2
OP_ROW_DELETE = 3
OP_PARTITION_DELETE = 4
OP_RANGE_START_INCL = 5
OP_RANGE_START_EXCL = 6
OP_RANGE_END_INCL = 7
OP_RANGE_END_EXCL = 8
OP_POSTIMAGE = 9

LogRow = dict[str, Any]
RowState = dict[str, Any]  # column -> value (None: known null)


@dataclass(frozen=True, slots=True)
class WriteInfo:
    """Per-write inputs fixed at the session: the read time and the random seed."""

    now_s: int
    seed: int
    # distinguishes the partitions of one multi-partition write (they share the seed)
    record: int = 0
    # the deletion of rows past their per-row TTL: logged as -3 / -4 (ScyllaDB's
    # service_row_delete / service_partition_delete), not as a user's 3 / 4
    expiration: bool = False


class _Builder:
    """Allocates the rows of one timestamp group (``log_mutation_builder``)."""

    def __init__(self, writer: LogWriter, ts: int, stream_id: bytes, bits: CdcTimeBits) -> None:
        self.writer = writer
        self.ts = ts
        self.time = random_time_uuid(ts, bits)
        self.stream_id = stream_id
        self.rows: list[LogRow] = []

    def new_row(self, op: int, ck: ClusteringKey | None = None) -> LogRow:
        w = self.writer
        row: LogRow = {
            "cdc$stream_id": self.stream_id,
            "cdc$time": self.time,
            "cdc$batch_seq_no": len(self.rows),
            "cdc$operation": op,
        }
        for col, v in zip(w.schema.partition_key, w.pk, strict=True):
            row[col.name] = v
        if ck is not None:
            for col, v in zip(w.schema.clustering_key, ck, strict=False):
                row[col.name] = v
        self.rows.append(row)
        return row

    def finish(self) -> list[LogRow]:
        if self.rows:
            self.rows[-1]["cdc$end_of_batch"] = True
        return self.rows


class LogWriter:
    """Writes the log rows of one base partition's mutations, in order.

    Args:
        schema: the base table (with its CDC options).
        pk: the partition key values.
        stream_of: maps a write timestamp (microseconds) to the ``cdc$stream_id``.
    """

    def __init__(
        self,
        schema: TableSchema,
        pk: tuple[Any, ...],
        stream_of: Callable[[int], bytes],
        order: ClusteringOrder | None = None,
    ) -> None:
        self.schema = schema
        self.pk = pk
        self.stream_of = stream_of
        self.order = order or ClusteringOrder(schema)
        self.view = PartitionView(schema, self.order, expire_rows=False)
        self._expiration = False
        self.opts = schema.cdc
        self.delta_values = self.opts.delta == "full"
        self.statics = tuple(sorted(schema.static_columns, key=lambda c: c.name))
        self.regulars = tuple(sorted(schema.regular_columns, key=lambda c: c.name))

    # -- state --------------------------------------------------------------------------

    def _load_state(
        self, mutation: Partition, prior: Partition | None, now_s: int
    ) -> tuple[RowState, dict[ClusteringKey, RowState]]:
        static_state: RowState = {}
        rows: dict[ClusteringKey, RowState] = {}
        if prior is None:
            return static_state, rows
        if mutation.static.cells:
            live = self.view.static_row(prior, now_s, lists_as_maps=True)
            if live is not None:
                static_state.update(live.values)
        no_ck = not self.schema.clustering_key
        if mutation.rows or (no_ck and mutation.deletion is not None):
            keys = list(mutation.rows) if not no_ck else [()]
            for ck in keys:
                live = self.view.clustering_row(prior, ck, now_s, lists_as_maps=True)
                if live is not None:
                    rows[ck] = dict(live.values)
        return static_state, rows

    # -- entry point --------------------------------------------------------------------

    def write(self, mutation: Partition, prior: Partition | None, info: WriteInfo) -> list[LogRow]:
        """Log rows for ``mutation`` applied on top of ``prior`` (None: empty partition)."""
        if mutation.is_empty():
            return []
        bits = CdcTimeBits(info.seed, info.record)
        self._expiration = info.expiration
        self._static_state, self._row_states = self._load_state(mutation, prior, info.now_s)
        self._touched_static = False
        preimage = self.opts.preimage != "false"
        postimage = self.opts.postimage
        out: list[LogRow] = []
        if needs_split(mutation, self.order):
            groups = extract_changes(mutation, self.order)
            if not groups:  # e.g. ``m = m + {}``: nothing was written
                return []
            last = max(groups)
            for ts, group in groups.items():
                out.extend(self._split_group(ts, group, ts == last, preimage, postimage, bits))
        else:
            out.extend(self._unsplit(mutation, preimage, postimage, bits))
        return out

    # -- the two paths --------------------------------------------------------------------

    def _unsplit(
        self, m: Partition, preimage: bool, postimage: bool, bits: CdcTimeBits
    ) -> list[LogRow]:
        ts = find_timestamp(m)
        b = _Builder(self, ts, self.stream_of(ts), bits)
        self._updating = postimage
        cks = self.order.sorted(list(m.rows))
        if preimage:
            if m.static.cells:
                self._image(b, OP_PREIMAGE, None, set(m.static.cells))
            for ck in cks:
                row = m.rows[ck]
                cols = (
                    {c.name for c in self.regulars} if row.deletion is not None else set(row.cells)
                )
                self._image(b, OP_PREIMAGE, ck, cols)
        if m.static.cells:
            change = RowChange(None)
            self._fill_change(change, m.static.cells)
            self._delta(b, change, OP_UPDATE)
        for ck in cks:
            row = m.rows[ck]
            if row.marker is not None or row.cells:
                change = RowChange(ck, marker=row.marker)
                self._fill_change(change, row.cells)
                self._delta(b, change, OP_INSERT if row.marker is not None else OP_UPDATE)
            if row.deletion is not None:
                self._row_delete(b, ck)
        for rt in m.range_tombstones:
            self._range_delete(b, rt)
        if m.deletion is not None:
            self._partition_delete(b)
        if postimage:
            if m.static.cells:
                self._image(b, OP_POSTIMAGE, None, None)
            for ck in cks:
                self._image(b, OP_POSTIMAGE, ck, None)
        return b.finish()

    @staticmethod
    def _fill_change(change: RowChange, cells: dict[str, ColumnData]) -> None:
        for name, data in cells.items():
            if isinstance(data, Cell):
                change.atomic[name] = data
            elif isinstance(data, CollectionCells):
                change.collections[name] = data

    def _split_group(
        self,
        ts: int,
        g: ChangeGroup,
        is_last: bool,
        preimage: bool,
        postimage: bool,
        bits: CdcTimeBits,
    ) -> list[LogRow]:
        b = _Builder(self, ts, self.stream_of(ts), bits)
        self._updating = postimage or (not is_last and preimage)
        static_cols: set[str] = set()
        for ch in g.static_updates:
            static_cols |= ch.columns
        affected: dict[ClusteringKey, set[str]] = {}
        if preimage or postimage:
            all_regular = {c.name for c in self.regulars}
            for ck in g.row_deletions:
                affected[ck] = set(all_regular)
            if g.partition_deletion and not self.schema.clustering_key:
                affected[()] = set(all_regular)
            for ch in g.inserts + g.updates:
                assert ch.ck is not None
                affected.setdefault(ch.ck, set()).update(ch.columns)
        affected_cks = self.order.sorted(list(affected))
        if preimage:
            if static_cols:
                self._image(b, OP_PREIMAGE, None, static_cols)
            for ck in affected_cks:
                self._image(b, OP_PREIMAGE, ck, affected[ck])
        for ch in g.static_updates:
            self._delta(b, ch, OP_UPDATE)
        for ch in g.inserts:
            self._delta(b, ch, OP_INSERT)
        for ch in g.updates:
            self._delta(b, ch, OP_UPDATE)
        for ck in g.row_deletions:
            self._row_delete(b, ck)
        for rt in g.range_deletions:
            self._range_delete(b, rt)
        if g.partition_deletion:
            self._partition_delete(b)
        if postimage:
            if static_cols:
                self._image(b, OP_POSTIMAGE, None, None)
            for ck in affected_cks:
                self._image(b, OP_POSTIMAGE, ck, None)
        return b.finish()

    # -- rows -----------------------------------------------------------------------------

    def _image(
        self, b: _Builder, op: int, ck: ClusteringKey | None, columns: set[str] | None
    ) -> None:
        """A preimage (``columns``: the affected ones, None for 'full') or a postimage."""
        if ck is not None:
            state = self._row_states.get(ck)
            if state is None:
                return
            cols = self.regulars
        else:
            state = self._static_state
            if not state and not self._touched_static:
                return
            cols = self.statics
        if op == OP_PREIMAGE and self.opts.preimage == "full":
            columns = None
        row = b.new_row(op, ck)
        for col in cols:
            if columns is not None and col.name not in columns:
                continue
            value = state.get(col.name)
            if value is not None:
                row[col.name] = value
            elif op == OP_PREIMAGE:
                row[f"cdc$deleted_{col.name}"] = True

    def _delta(self, b: _Builder, ch: RowChange, op: int) -> None:
        row = b.new_row(op, ch.ck)
        ttl: int | None = None
        if ch.marker is not None and ch.marker.ttl_s:
            ttl = ch.marker.ttl_s
        state: RowState | None
        if ch.ck is None:
            self._touched_static = True
            state = self._static_state
        else:
            state = self._row_states.get(ch.ck)
            if state is None and self._updating:
                state = self._row_states[ch.ck] = {}
        for name in sorted(ch.columns):
            col = self.schema.column(name)
            if col is None:
                hidden = ch.atomic.get(name) if name == COMPACT_VALUE else None
                if hidden is not None and hidden.ttl_s:
                    # a key-only COMPACT STORAGE row is its hidden cell: its TTL is the
                    # write's (cdc_compact_storage_test: cdc$ttl 2222, op 1)
                    ttl = hidden.ttl_s
                continue
            if name in ch.atomic:
                cell = ch.atomic[name]
                if cell.value is not None:
                    if cell.ttl_s:
                        ttl = cell.ttl_s
                    if self.delta_values:
                        row[name] = cell.value
                    if self._updating and state is not None:
                        state[name] = cell.value
                else:
                    if self.delta_values:
                        row[f"cdc$deleted_{name}"] = True
                    if self._updating and state is not None:
                        state[name] = None
            else:
                ttl = self._collection_delta(row, col, ch.collections[name], state, ttl)
        if ttl is not None:
            row["cdc$ttl"] = ttl

    def _collection_delta(
        self,
        row: LogRow,
        col: Column,
        coll: CollectionCells,
        state: RowState | None,
        ttl: int | None,
    ) -> int | None:
        ctype = col.type
        live = {k: c for k, c in coll.elements.items() if c.value is not None}
        deleted = frozenset(k for k, c in coll.elements.items() if c.value is None)
        for c in live.values():
            if c.ttl_s:
                ttl = c.ttl_s
        is_delete = coll.tombstone is not None
        added: Any = None
        if isinstance(ctype, UserType):
            added = UdtValue(
                ctype.field_names, {ctype.field_names[i]: c.value for i, c in live.items()}
            )
        elif live:
            added = collection_value(ctype, live, lists_as_maps=True)
        if self.delta_values:
            if is_delete:
                row[f"cdc$deleted_{col.name}"] = True
            if deleted:
                row[f"cdc$deleted_elements_{col.name}"] = deleted
            if added is not None:
                row[col.name] = added
        if self._updating and state is not None:
            prev = None if is_delete else state.get(col.name)
            nxt = None
            if live or (deleted and prev is not None):
                nxt = _merge(ctype, prev, live, deleted)
            state[col.name] = nxt
        return ttl

    def _row_delete(self, b: _Builder, ck: ClusteringKey) -> None:
        b.new_row(-OP_ROW_DELETE if self._expiration else OP_ROW_DELETE, ck)
        if self._updating:
            self._row_states.pop(ck, None)

    def _range_delete(self, b: _Builder, rt: RangeTombstone) -> None:
        b.new_row(
            OP_RANGE_START_INCL if rt.start.inclusive else OP_RANGE_START_EXCL, rt.start.prefix
        )
        b.new_row(OP_RANGE_END_INCL if rt.end.inclusive else OP_RANGE_END_EXCL, rt.end.prefix)
        if self._updating:
            for ck in [k for k in self._row_states if self.order.in_range(k, rt.start, rt.end)]:
                del self._row_states[ck]

    def _partition_delete(self, b: _Builder) -> None:
        b.new_row(-OP_PARTITION_DELETE if self._expiration else OP_PARTITION_DELETE)
        if self._updating:
            # ScyllaDB clears only the clustering rows here, so a static postimage of the
            # same group can show data the partition tombstone deleted; we clear both
            self._row_states.clear()
            self._static_state.clear()


def _merge(ctype: Any, prev: Any, live: dict[Any, Cell], deleted: frozenset[Any]) -> Any:
    """Postimage merge of a frozen collection with added and deleted elements (log.cc merge)."""
    if isinstance(ctype, UserType):
        fields = dict(prev.items()) if prev is not None else {}
        for i in deleted:
            fields[ctype.field_names[i]] = None
        for i, c in live.items():
            fields[ctype.field_names[i]] = c.value
        if all(v is None for v in fields.values()):
            return None
        return UdtValue(ctype.field_names, fields)
    if isinstance(ctype, SetType):
        elems = (set(prev) if prev is not None else set()) - set(deleted)
        elems |= set(live)
        return frozenset(elems) if elems else None
    items: dict[Any, Any] = dict(prev.items()) if prev is not None else {}
    for k in deleted:
        items.pop(k, None)
    for k, c in live.items():
        items[k] = c.value
    if not items:
        return None
    mtype = list_map_type(ctype) if isinstance(ctype, ListType) else ctype
    assert isinstance(mtype, MapType)
    return MapValue(items, sort_key=mtype.key.sort_key)
