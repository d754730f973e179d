"""Statement -> mutation: INSERT, UPDATE, DELETE and BATCH as partition fragments.

The rules are ScyllaDB's (basic operations and advanced column types specs): an INSERT writes
a row marker; ``x = null`` writes a dead cell; assigning a whole non-frozen collection writes a
collection tombstone at T-1 plus elements at T; a column DELETE writes its tombstone at T;
list appends get timeuuid keys from the session. Positional list operations need the current
list, so they travel as ``ListOp``s resolved against state inside the pipeline.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from cqlcdc.cql import ast
from cqlcdc.cql.render import render_relation, render_term
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell, RowMarker, wrap_int64
from cqlcdc.storage.keys import Bound, ClusteringKey
from cqlcdc.storage.partition import Partition, RangeTombstone, Row
from cqlcdc.storage.token import check_clustering_key, serialize_partition_key
from cqlcdc.storage.uuids import (
    LIST_SEQ_LIMIT,
    PREPEND_REFERENCE_US,
    UUID_EPOCH_OFFSET,
    SeededBits,
    list_key,
    random_uuid,
    splitmix64,
    timeuuid_from_ticks,
)
from cqlcdc.storage.where import KeyRestrictions, analyse_where, require_partition_key
from cqlcdc.types import ListType, MapType, SetType, UserType
from cqlcdc.types.base import CqlType

MAX_TTL_S = 630720000  # 20 years, ScyllaDB's max_ttl


@dataclass(frozen=True, slots=True)
class ListOp:
    """An operation that needs the row's current value: resolved against state in the
    pipeline.

    ``set_index``: ``l[i] = v``; ``delete_index``: ``DELETE l[i]``; ``discard``: ``l = l - [..]``;
    ``add`` / ``sub``: ``r = r + v`` / ``r = r - v`` on a numeric column in a conditional
    UPDATE (ScyllaDB's extension, its issue 10568: the value written is computed from the
    row as the condition saw it), ``value`` the operand.
    """

    kind: Literal["set_index", "delete_index", "discard", "add", "sub"]
    ck: ClusteringKey | None  # None: static column
    column: str
    timestamp: int
    index: int = 0
    value: Any = None
    values: tuple[Any, ...] = ()
    ttl_s: int = 0
    expiry_s: int = 0


@dataclass(slots=True)
class Mutation:
    """All changes one write makes to one partition of one table."""

    table_id: str
    partition: Partition
    list_ops: list[ListOp] = field(default_factory=list)

    def apply(self, other: Mutation) -> None:
        self.partition.apply(other.partition)
        self.list_ops.extend(other.list_ops)


class WriteContext:
    """What a write takes from the session: its timestamp, clock and random seed.

    Implements ``cqlcdc.types.base.TermContext`` (``now()``, ``uuid()``, ...). All timeuuids
    come from ``seed``, so a record replayed from the ingest log gives the same mutation.
    """

    def __init__(
        self,
        timestamp_us: int,
        now_us: int,
        seed: int,
        node: int = 1,
        bindings: Sequence[Any] | Mapping[str, Any] | None = None,
    ) -> None:
        self.bindings = bindings
        self.timestamp_us = timestamp_us
        self._now_us = now_us
        self.seed = seed
        self._bits = SeededBits(seed, "ids")
        self._clock_seq = (seed >> 16) & 0x3FFF
        self._node = node
        self._last_ticks = 0
        self._list_seq = 0  # list keys' sub-microsecond sequence: one per write (a batch)
        # list keys' node: ScyllaDB's is random per shard; one per write keeps two writes
        # with the same timestamp (client timestamps) from sharing keys
        self._list_node = splitmix64(seed) & 0xFFFF_FFFF_FFFF

    @property
    def now_us(self) -> int:
        return self._now_us

    def bound_value(self, marker: ast.BindMarker) -> Any:
        """The value bound to ``?`` (by position) or ``:name`` (by name, or position)."""
        b = self.bindings
        if b is None:
            raise InvalidRequest("Bind markers need values: use a prepared statement")
        if isinstance(b, Mapping):
            if marker.name is None or marker.name not in b:
                raise InvalidRequest(f"No value bound for marker {marker.name or marker.index}")
            return b[marker.name]
        if marker.index >= len(b):
            raise InvalidRequest(
                f"Not enough values bound: marker {marker.index + 1} of a statement, "
                f"{len(b)} values given"
            )
        return b[marker.index]

    @property
    def now_s(self) -> int:
        return self._now_us // 1_000_000

    def _low_bits(self) -> int:
        return ((0x8000 | self._clock_seq) << 48) | self._node

    def new_timeuuid(self) -> uuid.UUID:
        ticks = max(self._now_us * 10 + UUID_EPOCH_OFFSET, self._last_ticks + 1)
        self._last_ticks = ticks
        return timeuuid_from_ticks(ticks, self._low_bits())

    def new_uuid(self) -> uuid.UUID:
        return random_uuid(self._bits)

    def append_keys(self, n: int, timestamp_us: int) -> list[uuid.UUID]:
        """Keys for ``l = l + [...]`` (and a whole-list write): the statement's timestamp and
        the next sub-microsecond sequence numbers of the write, shared by every statement of
        a batch (ScyllaDB's ``lists::do_append``, ``query_options::next_list_append_seq``).

        Raises:
            InvalidRequest: the write's sequence is exhausted (ScyllaDB's message).
        """
        first = self._list_seq
        self._list_seq += n
        return [list_key(timestamp_us, first + i, self._list_node) for i in range(n)]

    def prepend_keys(self, n: int, timestamp_us: int) -> list[uuid.UUID]:
        """Keys for ``l = [...] + l``: at the timestamp mirrored about 2010-01-01, so they
        sort before every appended key, and from the top of the sub-microsecond range down,
        so each prepend of a batch lands before the previous one (ScyllaDB's
        ``lists::prepender``, ``query_options::next_list_prepend_seq``).

        Raises:
            InvalidRequest: the timestamp is before 2010, or the write's sequence is
                exhausted (ScyllaDB's messages).
        """
        if timestamp_us <= PREPEND_REFERENCE_US:
            raise InvalidRequest(
                "List prepend custom timestamp must be greater than Jan 1 2010 00:00:00"
            )
        micros = 2 * PREPEND_REFERENCE_US - timestamp_us
        if self._list_seq + n < LIST_SEQ_LIMIT:
            self._list_seq += n
            first = LIST_SEQ_LIMIT - self._list_seq
        else:
            first = LIST_SEQ_LIMIT
        return [list_key(micros, first + i, self._list_node) for i in range(n)]


# ---------------------------------------------------------------------------------------------


# the write timestamps ScyllaDB accepts (api::min_timestamp: the smallest bigint means none)
MIN_TIMESTAMP, MAX_TIMESTAMP = -(2**63) + 1, 2**63 - 1


def timestamp_value(term: ast.Term, ctx: WriteContext) -> int:
    """A ``USING TIMESTAMP`` value (update_parameters' checks and messages)."""
    from cqlcdc.types import native_type

    t = native_type("bigint").parse_literal(term, "[timestamp]", ctx)
    if t is None:
        raise InvalidRequest("Invalid null value of timestamp")
    if not MIN_TIMESTAMP <= t <= MAX_TIMESTAMP:
        raise InvalidRequest(
            f"Out of bound timestamp, must be in [{MIN_TIMESTAMP}, {MAX_TIMESTAMP}]"
        )
    return int(t)


def using_values(
    using: ast.Using, ctx: WriteContext, default_ttl_s: int, allow_ttl: bool = True
) -> tuple[int, int]:
    from cqlcdc.types import native_type

    ts = ctx.timestamp_us if using.timestamp is None else timestamp_value(using.timestamp, ctx)
    ttl = default_ttl_s
    if using.ttl is not None:
        if not allow_ttl:
            raise InvalidRequest("Cannot provide custom TTL for a DELETE")
        v = native_type("int").parse_literal(using.ttl, "[ttl]", ctx)
        ttl = 0 if v is None else int(v)
        if ttl < 0:
            raise InvalidRequest(f"A TTL must be greater or equal to 0, but was {ttl}")
        if ttl > MAX_TTL_S:
            raise InvalidRequest(f"ttl is too large. requested ({ttl}) maximum ({MAX_TTL_S})")
    return ts, ttl


def _live(ts: int, value: Any, ttl: int, ctx: WriteContext) -> Cell:
    return Cell(ts, value, ttl, ctx.now_s + ttl if ttl else 0)


def _element_cells(
    ctype: CqlType, value: Any, ts: int, ttl: int, ctx: WriteContext, prepend: bool = False
) -> dict[Any, Cell]:
    """A frozen value of a non-frozen collection/UDT type exploded into element cells."""
    if value is None:
        return {}
    if isinstance(ctype, SetType):  # in CQL order: the same write encodes to the same bytes
        return {e: _live(ts, True, ttl, ctx) for e in ctype.ordered(value)}
    if isinstance(ctype, MapType):
        return {k: _live(ts, v, ttl, ctx) for k, v in value.items()}
    if isinstance(ctype, ListType):
        n = len(value)
        keys = ctx.prepend_keys(n, ts) if prepend else ctx.append_keys(n, ts)
        return {k: _live(ts, v, ttl, ctx) for k, v in zip(keys, value, strict=True)}
    if isinstance(ctype, UserType):
        out: dict[Any, Cell] = {}
        for i, name in enumerate(ctype.field_names):
            fv = value.get(name)
            if fv is not None:
                out[i] = _live(ts, fv, ttl, ctx)
        return out
    raise InvalidRequest(f"Invalid operation for non-collection column {ctype.cql_name}")


def _parse(col: Column, term: ast.Term, ctx: WriteContext) -> Any:
    frozen = col.type.frozen()
    try:
        return frozen.parse_literal(term, col.name, ctx)
    except InvalidRequest as e:
        if frozen.cql_name == col.type.cql_name:
            raise
        # the value is parsed as a whole (frozen), but the message names the column's
        # declared type, as ScyllaDB's does: a non-frozen UDT is not "frozen<...>"
        message = e.message
        for word in ("type", "Type"):
            message = message.replace(f"{word} {frozen.cql_name}", f"{word} {col.type.cql_name}")
        raise InvalidRequest(message) from None


# the cell of a key-only COMPACT STORAGE row (ScyllaDB's hidden ``value`` column of type
# ``empty``): no column has this name, so reads and the CDC log leave it out
COMPACT_VALUE = ""


class _Target:
    """Where a write's cells go: the static row or one clustering row of the mutation."""

    def __init__(self, row: Row, ck: ClusteringKey | None) -> None:
        self.row = row
        self.ck = ck

    def collection(self, name: str) -> CollectionCells:
        data = self.row.cells.get(name)
        if not isinstance(data, CollectionCells):
            data = self.row.cells[name] = CollectionCells()
        return data

    def put(self, name: str, cell: Cell) -> None:
        mine = self.row.cells.get(name)
        self.row.cells[name] = cell if not isinstance(mine, Cell) else mine.reconcile(cell)

    def overwrite(self, col: Column, value: Any, ts: int, ttl: int, ctx: WriteContext) -> None:
        """``x = v`` / INSERT: a whole new value (collections: tombstone at T-1)."""
        if not col.type.multicell:
            self.put(col.name, Cell(ts, None) if value is None else _live(ts, value, ttl, ctx))
            return
        coll = self.collection(col.name)
        coll.apply(CollectionCells(ts - 1, _element_cells(col.type, value, ts, ttl, ctx)))


def _check_not_key(col: Column, where: str) -> None:
    if col.is_key:
        raise InvalidRequest(f"PRIMARY KEY part {col.name} found in {where} part")


def _column(schema: TableSchema, name: str) -> Column:
    col = schema.column(name)
    if col is None:
        raise InvalidRequest(f"Unknown identifier {name}")
    return col


def build_insert(
    schema: TableSchema, stmt: ast.Insert, ctx: WriteContext, default_ttl_s: int = 0
) -> list[Mutation]:
    """INSERT: a row marker plus every listed column (static columns go to the static row)."""
    if any(c.type.is_counter for c in schema.columns):
        raise InvalidRequest(
            "INSERT statements are not allowed on counter tables, use UPDATE instead"
        )
    ts, ttl = using_values(stmt.using, ctx, default_ttl_s)
    if len(stmt.columns) != len(stmt.values):
        raise InvalidRequest("Unmatched column names/values")
    seen: set[str] = set()
    values: dict[str, Any] = {}
    for name, term in zip(stmt.columns, stmt.values, strict=True):
        col = _column(schema, name)
        if name in seen:
            raise InvalidRequest(f"Multiple definitions found for column {name}")
        seen.add(name)
        values[name] = _parse(col, term, ctx)
    missing_pk = [c.name for c in schema.partition_key if c.name not in values]
    if missing_pk:
        raise InvalidRequest(f"Some partition key parts are missing: {', '.join(missing_pk)}")
    for col in schema.partition_key:
        if values[col.name] is None:
            raise InvalidRequest(f"Invalid null value in condition for column {col.name}")
    # a write of static columns alone may leave out the clustering key; one of the partition
    # key alone may not (Cassandra's appliesOnlyToStaticColumns: no static column, no row)
    kinds = {(schema.column(n) or col).kind for n in values}
    only_static = "static" in kinds and kinds <= {"static", "partition_key"}
    ck_given = [c for c in schema.clustering_key if c.name in values]
    if len(ck_given) != len(schema.clustering_key) and not (only_static and not ck_given):
        missing = next(c for c in schema.clustering_key if c.name not in values)
        later = [c for c in ck_given if c.position > missing.position]
        if later:  # a gap: ScyllaDB's restrictions say which column cannot be restricted
            raise InvalidRequest(
                f'PRIMARY KEY column "{later[0].name}" cannot be restricted as preceding column '
                f'"{missing.name}" is not restricted'
            )
        if not schema.compact_storage:
            raise InvalidRequest(f"Missing mandatory PRIMARY KEY part {missing.name}")
        if not ck_given:  # a dense table writes under a clustering prefix, never an empty one
            raise InvalidRequest(f"Missing PRIMARY KEY part {missing.name}")
    for c in ck_given:
        if values[c.name] is None:
            raise InvalidRequest(f"Invalid null value in condition for column {c.name}")
    if (
        schema.compact_storage
        and schema.regular_columns
        and all((schema.column(n) or col).is_key for n in values)
    ):
        # no row marker: a row of keys only would be acknowledged and not exist (ScyllaDB's
        # update_statement; a static compact table's cells live in its hidden ``value``)
        name = schema.regular_columns[0].name if schema.clustering_key else "value"
        raise InvalidRequest(f"Column {name} is mandatory for this COMPACT STORAGE table")
    pk = tuple(values[c.name] for c in schema.partition_key)
    part = Partition(pk)
    target_row: _Target | None = None
    if ck_given or not schema.clustering_key:
        # a dense table's may be a prefix: the columns after it are null (as ScyllaDB's
        # clustering prefix has no component for them)
        ck = tuple(values.get(c.name) for c in schema.clustering_key)
        row = part.row(ck)
        if not schema.compact_storage:
            row.marker = RowMarker(ts, ttl, ctx.now_s + ttl if ttl else 0)
        elif not schema.regular_columns:
            # a key-only COMPACT STORAGE table has no row marker: its rows are its hidden
            # empty-typed value column's cells (never shown, never logged)
            row.cells[COMPACT_VALUE] = _live(ts, b"", ttl, ctx)
        target_row = _Target(row, ck)
    static = _Target(part.static, None)
    for name, value in values.items():
        col = _column(schema, name)
        if col.is_key:
            continue
        target = static if col.kind == "static" else target_row
        assert target is not None
        target.overwrite(col, value, ts, ttl, ctx)
    return [Mutation(schema.table_id, part)]


def _write_where(
    schema: TableSchema, where: tuple[ast.Relation, ...], ctx: WriteContext
) -> KeyRestrictions:
    """An UPDATE's or DELETE's WHERE clause: keys only, no token, no filtering (ScyllaDB's
    modification_statement checks and messages)."""
    tokens = [r for r in where if r.token]
    if tokens:
        raise InvalidRequest(
            "The token function cannot be used in WHERE clauses for UPDATE and DELETE "
            "statements: " + " AND ".join(render_relation(r) for r in tokens)
        )
    res = analyse_where(schema, where, ctx)
    for col, op, _ in res.filters:
        if col.is_key and op in ("CONTAINS", "CONTAINS KEY"):
            raise InvalidRequest(
                "Cannot restrict clustering columns by a CONTAINS relation without a secondary "
                "index or filtering"
            )
    names = ", ".join(dict.fromkeys(c.name for c, _, _ in res.filters if not c.is_key))
    if names:
        raise InvalidRequest(f"Invalid where clause contains non PRIMARY KEY columns: {names}")
    if res.filters:  # a part of the partition key: require_partition_key names what is missing
        res.partition_keys = None
    return res


def build_update(
    schema: TableSchema, stmt: ast.Update, ctx: WriteContext, default_ttl_s: int = 0
) -> list[Mutation]:
    ts, ttl = using_values(stmt.using, ctx, default_ttl_s)
    res = _write_where(schema, stmt.where, ctx)
    pks = require_partition_key(schema, res)
    cols = [_column(schema, a.column) for a in stmt.assignments]
    for col in cols:
        _check_not_key(col, "SET")
    only_static = _only_static(schema, cols, stmt.conditions, res, "UPDATE")
    if not res.full_clustering_keys:  # a slice (ScyllaDB prints the restriction)
        keys = {c.name for c in schema.clustering_key}
        text = " AND ".join(render_relation(r) for r in stmt.where if set(r.columns) & keys)
        raise InvalidRequest(f"Invalid operator in where clause {text}")
    if schema.clustering_key and only_static:
        cks: list[ClusteringKey | None] = [None]
    else:
        given = res.ck_restricted_columns
        if given < len(schema.clustering_key):
            missing = schema.clustering_key[given].name
            if not schema.compact_storage:
                raise InvalidRequest(f"Missing mandatory PRIMARY KEY part {missing}")
            if not given:  # a dense table writes under a prefix, never an empty one
                raise InvalidRequest(f"Missing PRIMARY KEY part {missing}")
        # a dense COMPACT STORAGE table's row may sit under a prefix (update_statement's
        # is_dense()): the clustering columns after it are null
        pad = (None,) * (len(schema.clustering_key) - given)
        cks = [prefix + pad for prefix in res.ck_prefixes]
    conditional = stmt.if_exists or bool(stmt.conditions)
    out = []
    for pk in pks:
        part = Partition(pk)
        list_ops: list[ListOp] = []
        for ck in cks:
            row_target = _Target(part.row(ck), ck) if ck is not None else None
            static = _Target(part.static, None)
            for assignment, col in zip(stmt.assignments, cols, strict=True):
                if col.kind == "static":
                    target = static
                elif row_target is None:
                    missing = schema.clustering_key[0].name
                    raise InvalidRequest(f"Missing mandatory PRIMARY KEY part {missing}")
                else:
                    target = row_target
                _assign(col, assignment, target, ts, ttl, ctx, list_ops, conditional)
        out.append(Mutation(schema.table_id, part, list_ops))
    return out


def _only_static(
    schema: TableSchema,
    cols: Sequence[Column],
    conditions: Sequence[ast.Condition],
    res: KeyRestrictions,
    kind: str,
) -> bool:
    """Whether a write applies only to static columns (ScyllaDB's
    ``applies_only_to_static_columns``: it sets a static column and no regular one, and no
    condition names a regular one); such an UPDATE or DELETE may not restrict the
    clustering key.

    Raises:
        InvalidRequest: a clustering restriction on such a write (ScyllaDB's message).
    """
    conditioned = {c.column for c in conditions}
    regular_condition = any(
        (col := schema.column(name)) is not None and col.kind == "regular" for name in conditioned
    )
    only = (
        any(c.kind == "static" for c in cols)
        and all(c.kind == "static" for c in cols)
        and not regular_condition
    )
    if only and schema.clustering_key and res.ck_restricted_columns > 0:
        raise InvalidRequest(
            f"Invalid restrictions on clustering columns since the {kind} statement modifies "
            "only static columns"
        )
    return only


# the types ``r = r + v`` computes in a conditional UPDATE (ScyllaDB's is_arithmetic)
ARITHMETIC_TYPES = frozenset(
    {"tinyint", "smallint", "int", "bigint", "varint", "float", "double", "decimal"}
)


def _assign(
    col: Column,
    a: ast.Assignment,
    target: _Target,
    ts: int,
    ttl: int,
    ctx: WriteContext,
    list_ops: list[ListOp],
    conditional: bool = False,
) -> None:
    ctype = col.type
    if ctype.is_counter:
        _counter(col, a, target, ts, ctx)
        return
    if isinstance(a, ast.SetColumn):
        target.overwrite(col, _parse(col, a.value, ctx), ts, ttl, ctx)
        return
    if (
        isinstance(a, ast.AddTo | ast.RemoveFrom)
        and conditional
        and ctype.cql_name in ARITHMETIC_TYPES
    ):  # r = r + v in a conditional UPDATE: computed when the condition is decided
        kind: Literal["add", "sub"] = "add" if isinstance(a, ast.AddTo) else "sub"
        expiry = ctx.now_s + ttl if ttl else 0
        operand = _parse(col, a.value, ctx)
        list_ops.append(
            ListOp(kind, target.ck, col.name, ts, value=operand, ttl_s=ttl, expiry_s=expiry)
        )
        return
    if isinstance(a, ast.AddTo | ast.Prepend):
        if not ctype.multicell:
            raise InvalidRequest(
                f"Invalid operation ({col.name} = {col.name} + ?) for non counter column {col.name}"
            )
        if isinstance(a, ast.Prepend) and not isinstance(ctype, ListType):
            raise InvalidRequest(
                f"Invalid operation ({col.name} = ? + {col.name}) for non list column {col.name}"
            )
        value = _parse(col, a.value, ctx)
        cells = _element_cells(ctype, value, ts, ttl, ctx, prepend=isinstance(a, ast.Prepend))
        target.collection(col.name).apply(CollectionCells(None, cells))
        return
    if isinstance(a, ast.RemoveFrom):
        if not ctype.multicell:
            raise InvalidRequest(
                f"Invalid operation ({col.name} = {col.name} - ?) for non counter column {col.name}"
            )
        if isinstance(ctype, MapType):
            key_set = SetType(ctype.key, frozen=True)
            keys = key_set.parse_literal(a.value, col.name, ctx)
            removed = {k: Cell(ts, None) for k in key_set.ordered(keys or ())}
            target.collection(col.name).apply(CollectionCells(None, removed))
        elif isinstance(ctype, SetType):
            elems = _parse(col, a.value, ctx)
            removed = {e: Cell(ts, None) for e in ctype.ordered(elems or ())}
            target.collection(col.name).apply(CollectionCells(None, removed))
        elif isinstance(ctype, ListType):
            vals = _parse(col, a.value, ctx)
            list_ops.append(ListOp("discard", target.ck, col.name, ts, values=tuple(vals or ())))
            target.collection(col.name)
        else:
            raise InvalidRequest(f"Invalid operation for column {col.name}")
        return
    if isinstance(a, ast.SetElement):
        _set_element(col, a, target, ts, ttl, ctx, list_ops)
        return
    if isinstance(a, ast.SetField):
        shown = f"{col.name}.{a.field} = {render_term(a.value)}"
        if not isinstance(ctype, UserType):
            raise InvalidRequest(f"Invalid operation ({shown}) for non-UDT column {col.name}")
        if not ctype.multicell:
            raise InvalidRequest(f"Invalid operation ({shown}) for frozen UDT column {col.name}")
        if a.field not in ctype.field_names:
            raise InvalidRequest(f"UDT column {col.name} does not have a field named {a.field}")
        idx = ctype.field_names.index(a.field)
        ftype = ctype.field_types[idx]
        v = ftype.frozen().parse_literal(a.value, f"{col.name}.{a.field}", ctx)
        cell = Cell(ts, None) if v is None else _live(ts, v, ttl, ctx)
        target.collection(col.name).apply(CollectionCells(None, {idx: cell}))
        return
    raise InvalidRequest(f"Unsupported assignment on {col.name}")


def _counter(col: Column, a: ast.Assignment, target: _Target, ts: int, ctx: WriteContext) -> None:
    """``c = c + n`` / ``c = c - n``: a counter delta (counters cannot be set)."""
    if not isinstance(a, ast.AddTo | ast.RemoveFrom):
        raise InvalidRequest(
            f"Cannot set the value of counter column {col.name} (counters can only be "
            "incremented/decremented, not set)"
        )
    delta = col.type.parse_literal(a.value, col.name, ctx)
    if delta is None:
        raise InvalidRequest("Invalid null value for counter increment/decrement")
    # ``c - -9223372036854775808`` negates the smallest bigint: it wraps as in Java
    delta = wrap_int64(int(delta) if isinstance(a, ast.AddTo) else -int(delta))
    mine = target.row.cells.get(col.name)
    cell = CounterCell(ts, delta)
    target.row.cells[col.name] = cell if not isinstance(mine, CounterCell) else mine.add(cell)


def _set_element(
    col: Column,
    a: ast.SetElement,
    target: _Target,
    ts: int,
    ttl: int,
    ctx: WriteContext,
    list_ops: list[ListOp],
) -> None:
    check_set_element(col, a)  # a non-frozen map or list from here on
    ctype = col.type
    if isinstance(ctype, MapType) and ctype.multicell:
        k = ctype.key.frozen().parse_literal(a.key, col.name, ctx)
        if k is None:
            raise InvalidRequest("Invalid null map key")
        v = ctype.value.frozen().parse_literal(a.value, col.name, ctx)
        cell = Cell(ts, None) if v is None else _live(ts, v, ttl, ctx)
        target.collection(col.name).apply(CollectionCells(None, {k: cell}))
        return
    if isinstance(ctype, ListType) and ctype.multicell:
        v = ctype.element.frozen().parse_literal(a.value, col.name, ctx)
        if isinstance(a.key, ast.FunctionCall) and a.key.name == "scylla_timeuuid_list_index":
            from cqlcdc.types import native_type

            if len(a.key.args) != 1:
                raise InvalidRequest("SCYLLA_TIMEUUID_LIST_INDEX takes one timeuuid argument")
            arg = a.key.args[0]
            if isinstance(arg, ast.ColumnArg):
                raise InvalidRequest("SCYLLA_TIMEUUID_LIST_INDEX takes a timeuuid literal")
            key = native_type("timeuuid").parse_literal(arg, col.name, ctx)
            cell = Cell(ts, None) if v is None else _live(ts, v, ttl, ctx)
            target.collection(col.name).apply(CollectionCells(None, {key: cell}))
            return
        from cqlcdc.types import native_type

        idx = native_type("int").parse_literal(a.key, col.name, ctx)
        if idx is None:
            raise InvalidRequest("Invalid null value for list index")
        list_ops.append(
            ListOp(
                "set_index",
                target.ck,
                col.name,
                ts,
                index=int(idx),
                value=v,
                ttl_s=ttl,
                expiry_s=ctx.now_s + ttl if ttl else 0,
            )
        )
        target.collection(col.name)
        return


def check_set_element(col: Column, a: ast.SetElement) -> None:
    """``c[k] = v`` needs a non-frozen map or list: otherwise ScyllaDB's message naming the
    operation as written (operation.cc ``set_element::prepare``; PREPARE checks it too)."""
    ctype = col.type
    if isinstance(ctype, MapType | ListType) and ctype.multicell:
        return
    shown = f"{col.name}[{render_term(a.key)}] = {render_term(a.value)}"
    if not isinstance(ctype, MapType | ListType | SetType):
        raise InvalidRequest(f"Invalid operation ({shown}) for non collection column {col.name}")
    if not ctype.multicell:
        raise InvalidRequest(f"Invalid operation ({shown}) for frozen collection column {col.name}")
    raise InvalidRequest(f"Invalid operation ({shown}) for set column {col.name}")


def build_delete(schema: TableSchema, stmt: ast.Delete, ctx: WriteContext) -> list[Mutation]:
    ts, _ = using_values(stmt.using, ctx, 0, allow_ttl=False)
    res = _write_where(schema, stmt.where, ctx)
    pks = require_partition_key(schema, res)
    n_ck = len(schema.clustering_key)
    out = []
    for pk in pks:
        part = Partition(pk)
        list_ops: list[ListOp] = []
        if not stmt.targets:
            if res.ck_restricted_columns == 0:
                part.deletion = ts
            elif res.full_clustering_keys and res.ck_restricted_columns == n_ck:
                for ck in res.ck_prefixes:
                    part.row(ck).deletion = ts
            else:
                for start, end in res.clustering_ranges():
                    if _empty_range(schema, start, end):
                        continue
                    part.range_tombstones.append(RangeTombstone(start, end, ts))
            out.append(Mutation(schema.table_id, part))
            continue
        cols = [_column(schema, t.column) for t in stmt.targets]
        for col in cols:
            if col.is_key:
                raise InvalidRequest(
                    f"Invalid identifier {col.name} for deletion (should not be a PRIMARY KEY part)"
                )
        _only_static(schema, cols, stmt.conditions, res, "DELETE")  # its restriction check
        # the row is not needed for static targets, whatever the conditions name (a regular
        # one then fails the conditional checks with their own message)
        only_static = all(c.kind == "static" for c in cols)
        if not res.full_clustering_keys:
            raise InvalidRequest("Range deletions are not supported for specific columns")
        if res.ck_restricted_columns == 0 and only_static:
            cks: list[ClusteringKey | None] = [None]
        elif res.ck_restricted_columns < n_ck:
            missing = schema.clustering_key[res.ck_restricted_columns].name
            raise InvalidRequest(f"Missing mandatory PRIMARY KEY part {missing}")
        else:
            cks = [*res.ck_prefixes]
        for row_ck in cks:
            for target, col in zip(stmt.targets, cols, strict=True):
                if col.kind == "static":
                    t = _Target(part.static, None)
                elif row_ck is None:
                    raise InvalidRequest(
                        f"Missing mandatory PRIMARY KEY part {schema.clustering_key[0].name}"
                    )
                else:
                    t = _Target(part.row(row_ck), row_ck)
                _delete_target(col, target, t, ts, ctx, list_ops)
        out.append(Mutation(schema.table_id, part, list_ops))
    return out


def _empty_range(schema: TableSchema, start: Bound, end: Bound) -> bool:
    """A degenerate range (start after end) deletes nothing and logs nothing (reference 4)."""
    from cqlcdc.storage.keys import ClusteringOrder

    order = ClusteringOrder(schema)
    n = min(len(start.prefix), len(end.prefix))
    c = order.compare_prefix(start.prefix[:n], end.prefix[:n]) if n else 0
    if c > 0:
        return True
    if c == 0 and len(start.prefix) == len(end.prefix) and n:
        return not (start.inclusive and end.inclusive)
    return False


def _delete_target(
    col: Column,
    target: ast.DeleteTarget,
    t: _Target,
    ts: int,
    ctx: WriteContext,
    list_ops: list[ListOp],
) -> None:
    ctype = col.type
    if target.key is None and target.field is None:
        if ctype.multicell:
            t.collection(col.name).apply(CollectionCells(ts))
        else:
            t.put(col.name, Cell(ts, None))
        return
    if target.field is not None:
        if not isinstance(ctype, UserType):  # operation.cc's messages
            raise InvalidRequest(f"Invalid deletion operation for non-UDT column {col.name}")
        if not ctype.multicell:
            raise InvalidRequest(f"Frozen UDT column {col.name} does not support field deletions")
        if target.field not in ctype.field_names:
            raise InvalidRequest(
                f"UDT column {col.name} does not have a field named {target.field}"
            )
        idx = ctype.field_names.index(target.field)
        t.collection(col.name).apply(CollectionCells(None, {idx: Cell(ts, None)}))
        return
    assert target.key is not None
    if isinstance(ctype, MapType) and ctype.multicell:
        k = ctype.key.frozen().parse_literal(target.key, col.name, ctx)
        t.collection(col.name).apply(CollectionCells(None, {k: Cell(ts, None)}))
    elif isinstance(ctype, SetType) and ctype.multicell:
        e = ctype.element.frozen().parse_literal(target.key, col.name, ctx)
        t.collection(col.name).apply(CollectionCells(None, {e: Cell(ts, None)}))
    elif isinstance(ctype, ListType) and ctype.multicell:
        from cqlcdc.types import native_type

        idx = native_type("int").parse_literal(target.key, col.name, ctx)
        list_ops.append(ListOp("delete_index", t.ck, col.name, ts, index=int(idx or 0)))
        t.collection(col.name)
    else:
        raise InvalidRequest(f"Invalid deletion operation for non collection column {col.name}")


def merge_by_partition(mutations: list[Mutation]) -> list[Mutation]:
    """A batch: statements on one partition merge into one mutation before CDC sees them."""
    merged: dict[tuple[str, tuple[Any, ...]], Mutation] = {}
    for m in mutations:
        key = (m.table_id, m.partition.pk)
        if key in merged:
            merged[key].apply(m)
        else:
            merged[key] = m
    return list(merged.values())


def write_key_bytes(schema: TableSchema, partition: Partition) -> bytes:
    """The serialized partition key of a write, after checking every key in it against
    ScyllaDB's limits (validation.cc): a single-component partition key may not be empty,
    and no partition key, clustering key or clustering bound may be longer than 65,535
    bytes. Checked before a write is appended, so the pipeline never meets such a key.

    Raises:
        InvalidRequest: ``Key may not be empty`` or ``Key length of N is longer than
            maximum of 65535``.
    """
    key = serialize_partition_key(schema, partition.pk)
    if not key and len(schema.partition_key) == 1:
        raise InvalidRequest("Key may not be empty")
    columns = schema.clustering_key
    if any(c.type.fixed_size is None for c in columns):
        for ck in partition.rows:
            check_clustering_key(columns, ck)
        for rt in partition.range_tombstones:
            check_clustering_key(columns, rt.start.prefix)
            check_clustering_key(columns, rt.end.prefix)
    return key
