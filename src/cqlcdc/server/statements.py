"""From protocol requests to session calls and back: bind values, unset values, the
drivers' default timestamp, batches, result pages, DESCRIBE rows and schema changes.

Everything here runs in a worker thread on one connection's ``Session``; the connection
module only moves frames.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cqlcdc.cql import ast, parse_statement, with_keyspace
from cqlcdc.errors import CqlError, InvalidRequest, Unprepared
from cqlcdc.schema.describe import describe_elements, maybe_quote
from cqlcdc.schema.describe import listing as describe_listing
from cqlcdc.server.binds import Receiver, bind_receivers
from cqlcdc.server.column_cells import encode_rows, row_sizes, rows_body
from cqlcdc.server.notations import UNSET, Value
from cqlcdc.server.requests import Batch, BatchType, QueryParams
from cqlcdc.server.results import (
    ColumnSpec,
    EncodedRowsResult,
    RowsMetadata,
    RowsResult,
    SchemaChange,
    metadata_id,
)
from cqlcdc.session import PreparedStatement, Rows, Session
from cqlcdc.system.tables import SYSTEM_CATALOG, system_listing
from cqlcdc.types import ListType, native_type
from cqlcdc.types.base import CqlType
from cqlcdc.writes import conditional_write

TEXT = native_type("text")


class UnpreparedId(Unprepared):
    """EXECUTE of an id this server does not know (the driver re-prepares and retries)."""

    def __init__(self, query_id: bytes) -> None:
        super().__init__(f"Prepared query with ID {query_id.hex()} not found")
        self.query_id = query_id


@dataclass(frozen=True, slots=True)
class Prepared:
    """A prepared statement with what EXECUTE needs to decode its values."""

    statement: PreparedStatement
    receivers: tuple[Receiver, ...]
    result: tuple[ColumnSpec, ...]
    # the catalog the metadata was computed against (DDL swaps in a new one)
    catalog: object = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, statement: PreparedStatement, session: Session) -> Prepared:
        c = session.coordinator
        catalog = c.catalog
        receivers = tuple(
            bind_receivers(statement.statement, lambda name: c.table(name, statement.keyspace))
        )
        return cls(statement, receivers, _result_columns(statement, session), catalog)

    @property
    def receivers_spec(self) -> tuple[ColumnSpec, ...]:
        return tuple(
            ColumnSpec(r.table.keyspace, r.table.name, r.name, r.type) for r in self.receivers
        )


class PreparedCache:
    """Prepared statements by id, the least recently used evicted past ``limit``: a client
    preparing ever new statements cannot grow the server without bound (ScyllaDB's prepared
    cache is bounded too). An evicted id gets UNPREPARED, which drivers answer by
    preparing it again."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self._entries: OrderedDict[bytes, Prepared] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, query_id: bytes) -> Prepared | None:
        with self._lock:
            found = self._entries.get(query_id)
            if found is not None:
                self._entries.move_to_end(query_id)
            return found

    def __setitem__(self, query_id: bytes, prepared: Prepared) -> None:
        with self._lock:
            self._entries[query_id] = prepared
            self._entries.move_to_end(query_id)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)

    def pop(self, query_id: bytes) -> None:
        with self._lock:
            self._entries.pop(query_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def current_prepared(cache: PreparedCache, query_id: bytes, session: Session) -> Prepared | None:
    """The prepared statement ``query_id`` names, valid for the current schema (None: not
    prepared, or no longer). After a DDL its bind and result metadata are computed again;
    when they changed (its table dropped and made again, a column's type or a UDT altered)
    it is forgotten, as ScyllaDB invalidates it, so that the client prepares it again
    (UNPREPARED) and binds with the new types instead of writing with the old ones."""
    known = cache.get(query_id)
    if known is None or known.catalog is session.coordinator.catalog:
        return known
    try:
        fresh: Prepared | None = Prepared.of(known.statement, session)
    except CqlError:  # its table or type is gone
        fresh = None
    if (
        fresh is None
        or fresh.receivers_spec != known.receivers_spec
        or fresh.result != known.result
    ):
        cache.pop(query_id)
        return None
    cache[query_id] = fresh
    return fresh


def prepare_in(session: Session, query: str, keyspace: str | None) -> PreparedStatement:
    """``query`` prepared in ``keyspace`` (v5's per-request keyspace), else the session's."""
    if keyspace is None:
        return session.prepare(query)
    return PreparedStatement(query, with_keyspace(parse_statement(query), keyspace), keyspace)


def _result_columns(statement: PreparedStatement, session: Session) -> tuple[ColumnSpec, ...]:
    """The columns a prepared SELECT returns (empty for other statements)."""
    stmt = statement.statement
    if not isinstance(stmt, ast.Select):
        return ()
    from cqlcdc.storage.select import result_columns

    schema = session.coordinator.table(stmt.table, statement.keyspace)
    return tuple(
        ColumnSpec(schema.keyspace, schema.name, name, ctype)
        for name, ctype in result_columns(schema, stmt)
    )


def pk_indexes(receivers: Sequence[Receiver]) -> tuple[int, ...]:
    """The markers that bind the partition key, in key order (all or none): those whose
    receiver is a key column itself, whatever the marker's own name (``:a``); a marker in
    ``blobAsInt(?)`` or ``IN ?`` binds something else (``arg0(system.blobasint)``,
    ``IN(pk)``), so the driver cannot compute the token from it. The last marker of a column
    wins, as in ScyllaDB's ``get_partition_key_bind_indexes``."""
    if not receivers:
        return ()
    table = receivers[0].table
    by_name = {
        spec: i for i, r in enumerate(receivers) if r.table is table for spec in (r.spec, *r.also)
    }
    indexes = [by_name.get(c.name) for c in table.partition_key]
    return tuple(i for i in indexes if i is not None) if None not in indexes else ()


# -- bound values ------------------------------------------------------------------------


def bind_values(receivers: Sequence[Receiver], params: QueryParams) -> list[Any]:
    """Bound values as Python values, each decoded with its receiver's type; UNSET stays
    UNSET (``without_unset`` takes it out of the statement). Named values (v4's
    Names_for_values) are put in marker order by their receivers' names."""
    raw: Sequence[Value] = params.values
    if params.names is not None:
        raw = _by_name(receivers, params.names, params.values)
    if len(raw) != len(receivers):
        raise InvalidRequest(
            f"There were {len(receivers)} markers(?) in CQL but {len(raw)} bound variables"
        )
    return [_decode(r, v) for r, v in zip(receivers, raw, strict=True)]


def _by_name(
    receivers: Sequence[Receiver], names: Sequence[str], values: Sequence[Value]
) -> list[Value]:
    given = {n.lower(): v for n, v in zip(names, values, strict=True)}
    out: list[Value] = []
    for r in receivers:
        key = r.name.lower()
        if key not in given:
            raise InvalidRequest(f"No value for bind variable {r.name}")
        out.append(given[key])
    return out


def _decode(receiver: Receiver, raw: Value) -> Any:
    if raw is None or raw is UNSET:
        return raw
    assert isinstance(raw, bytes)
    try:
        return receiver.type.deserialize(raw)
    except CqlError:
        raise
    except Exception as e:
        raise InvalidRequest(
            f"Invalid value for {receiver.name} of type {receiver.type.cql_name}: {e}"
        ) from None


def without_unset(
    stmt: ast.Statement, values: list[Any] | None, receivers: Sequence[Receiver]
) -> tuple[ast.Statement | None, list[Any] | None]:
    """The statement without what its UNSET values leave alone, as Cassandra executes
    it: an INSERT column or an assignment whose value is unset is not written, an unset
    TTL or TIMESTAMP is as if absent, an unset LIMIT is no limit. An unset key, WHERE
    value, map key, list index or condition value is an error. Returns ``(None, None)``
    for an UPDATE left with nothing to write.

    Raises:
        InvalidRequest: an unset value where one is needed.
    """
    if values is None or not any(v is UNSET for v in values):
        return stmt, values
    unset = {i for i, v in enumerate(values) if v is UNSET}

    def is_unset(term: object) -> bool:
        return isinstance(term, ast.BindMarker) and term.index in unset

    def using(u: ast.Using) -> ast.Using:
        return dataclasses.replace(
            u,
            timestamp=None if is_unset(u.timestamp) else u.timestamp,
            ttl=None if is_unset(u.ttl) else u.ttl,
            timeout=None if is_unset(u.timeout) else u.timeout,
        )

    pruned: ast.Statement | None = stmt
    if isinstance(stmt, ast.Insert):
        keys = {c.name for r in receivers for c in r.table.primary_key}
        pairs = [
            (c, v)
            for c, v in zip(stmt.columns, stmt.values, strict=True)
            if c in keys or not is_unset(v)
        ]
        pruned = dataclasses.replace(
            stmt,
            columns=tuple(c for c, _ in pairs),
            values=tuple(v for _, v in pairs),
            using=using(stmt.using),
        )
    elif isinstance(stmt, ast.Update):
        kept = tuple(a for a in stmt.assignments if not is_unset(getattr(a, "value", None)))
        pruned = (
            dataclasses.replace(stmt, assignments=kept, using=using(stmt.using)) if kept else None
        )
    elif isinstance(stmt, ast.Delete):  # DELETE l[?] bound to unset deletes nothing (a map
        # key must be set: ScyllaDB refuses DELETE m[?] bound to unset)
        table = receivers[0].table if receivers else None
        columns = {c.name: c for c in table.columns} if table is not None else {}
        targets = tuple(
            t
            for t in stmt.targets
            if not (
                is_unset(t.key)
                and t.column in columns
                and isinstance(columns[t.column].type, ListType)
            )
        )
        pruned = (
            None
            if stmt.targets and not targets
            else dataclasses.replace(stmt, targets=targets, using=using(stmt.using))
        )
    elif isinstance(stmt, ast.Select):
        pruned = dataclasses.replace(
            stmt,
            using=using(stmt.using),
            limit=None if is_unset(stmt.limit) else stmt.limit,
            per_partition_limit=None
            if is_unset(stmt.per_partition_limit)
            else stmt.per_partition_limit,
        )
    if pruned is None:
        return None, None
    left = _markers(pruned) & unset
    if left:
        name = next(r.name for r in receivers if r.index == min(left))
        raise InvalidRequest(f"Invalid unset value for column {name}")
    kept_values = [v for i, v in enumerate(values) if i not in unset]
    shift = {i: i - sum(1 for u in unset if u < i) for i in range(len(values))}
    return _renumber(pruned, shift), kept_values


def _markers(node: Any) -> set[int]:
    if isinstance(node, ast.BindMarker):
        return {node.index}
    if isinstance(node, tuple):
        return set().union(*(_markers(n) for n in node)) if node else set()
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        found: set[int] = set()
        for f in dataclasses.fields(node):
            found |= _markers(getattr(node, f.name))
        return found
    return set()


def _renumber(node: Any, index_of: Mapping[int, int]) -> Any:
    """The statement with marker ``i`` numbered ``index_of[i]``."""
    if isinstance(node, ast.BindMarker):
        return dataclasses.replace(node, index=index_of[node.index])
    if isinstance(node, tuple):
        return tuple(_renumber(n, index_of) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {
            f.name: _renumber(getattr(node, f.name), index_of) for f in dataclasses.fields(node)
        }
        return dataclasses.replace(node, **changes)
    return node


# -- writes ------------------------------------------------------------------------------


def with_default_timestamp(session: Session, stmt: ast.Statement, timestamp_us: int) -> Any:
    """The write with the request's default timestamp (the drivers' client-side timestamp,
    flag 0x20) as ``USING TIMESTAMP`` of each statement that has none, as ScyllaDB applies
    it (``query_options::get_timestamp``); a batch's own ``USING TIMESTAMP`` wins. Without
    this a client's chosen timestamp would be replaced by the server's clock, changing
    which write wins. Writes to counter tables keep the server's clock (a counter takes no
    ``USING TIMESTAMP``), nor do lightweight transactions (ScyllaDB gives them the
    timestamp of their Paxos round, and refuses a ``USING TIMESTAMP`` on them)."""
    if conditional_write(stmt):
        return stmt
    if isinstance(stmt, ast.Batch):
        if stmt.using.timestamp is not None:
            return stmt
        children = tuple(_timestamped(session, s, timestamp_us) for s in stmt.statements)
        return dataclasses.replace(stmt, statements=children)
    if isinstance(stmt, ast.Insert | ast.Update | ast.Delete):
        return _timestamped(session, stmt, timestamp_us)
    return stmt


def _timestamped(
    session: Session, stmt: ast.ModificationStatement, ts: int
) -> ast.ModificationStatement:
    if stmt.using.timestamp is not None:
        return stmt
    try:
        schema = session.coordinator.table(stmt.table, session.keyspace)
    except CqlError:
        return stmt  # the write reports the unknown table itself
    if any(c.type.is_counter for c in schema.columns):
        return stmt
    using = dataclasses.replace(stmt.using, timestamp=ast.Constant("integer", str(ts)))
    return dataclasses.replace(stmt, using=using)


def batch_statement(
    prepared: PreparedCache, session: Session, request: Batch
) -> tuple[ast.Batch | None, list[Any]]:
    """One ``ast.Batch`` binding one list of values from a BATCH request's children
    (prepared or text), with its default timestamp; None when UNSET values left nothing.

    Raises:
        UnpreparedId: a child's prepared id is unknown.
        InvalidRequest: a child that is not INSERT, UPDATE or DELETE, bad values.
    """
    statements: list[ast.ModificationStatement] = []
    values: list[Any] = []
    ks = request.keyspace
    c = session.coordinator

    def table_of(name: ast.QualifiedName) -> Any:
        return c.table(name, ks or session.keyspace)

    for child in request.statements:
        if child.query_id is not None:
            known = current_prepared(prepared, child.query_id, session)
            if known is None:
                raise UnpreparedId(child.query_id)
            stmt: ast.Statement | None = known.statement.statement
            receivers: Sequence[Receiver] = known.receivers
        else:
            assert child.query is not None
            stmt = prepare_in(session, child.query, ks).statement
            receivers = bind_receivers(stmt, table_of)
        if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete):
            raise InvalidRequest("Only INSERT, UPDATE and DELETE can be in a BATCH")
        bound = bind_values(receivers, QueryParams(values=child.values))
        stmt, kept = without_unset(stmt, bound, receivers)
        if stmt is None or kept is None:
            continue
        assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
        statements.append(_renumber(stmt, {i: i + len(values) for i in range(len(kept))}))
        values += kept
    if not statements:
        return None, []
    kind = {BatchType.LOGGED: "LOGGED", BatchType.UNLOGGED: "UNLOGGED"}.get(request.type, "COUNTER")
    batch = ast.Batch(kind, tuple(statements))  # type: ignore[arg-type]
    if request.timestamp_us is not None:
        batch = with_default_timestamp(session, batch, request.timestamp_us)
    return batch, values


# -- results -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cursor:
    """The rows of a paged result, the table they are named under, and where the next
    page starts. ``open_ended``: the result could go on past its last row as ScyllaDB's
    pager sees it (``open_ended``), so a page that ends it exactly full still carries a
    paging state."""

    rows: Rows
    offset: int
    table: tuple[str, str]
    open_ended: bool = False


def open_ended(stmt: ast.Statement, rows: Rows, values: Sequence[Any] | None) -> bool:
    """Whether ScyllaDB would not know a result to be over at its last row: a plain SELECT
    (no aggregate, no GROUP BY: those are computed whole) whose LIMIT, if any, the rows do
    not reach. Its pager calls a page the last only when the page is short or the limit is
    met (``service/pager/query_pagers.cc``: ``_exhausted``), so an exactly full last page
    comes with a paging state and the page after it is empty, without one; clients written
    against ScyllaDB rely on that shape."""
    if not isinstance(stmt, ast.Select) or stmt.group_by:
        return False
    if any(_aggregating(s.expr) for s in stmt.selectors):
        return False
    limit: Any = None
    if isinstance(stmt.limit, ast.Constant) and stmt.limit.kind == "integer":
        limit = int(stmt.limit.text)
    elif isinstance(stmt.limit, ast.BindMarker) and stmt.limit.index < len(values or ()):
        assert values is not None
        limit = values[stmt.limit.index]
    return not (isinstance(limit, int) and len(rows) >= limit)


def _aggregating(expr: object) -> bool:
    from cqlcdc.storage.aggregates import AGGREGATES

    if isinstance(expr, ast.FunctionCall):
        return expr.name.lower() in AGGREGATES or any(_aggregating(a) for a in expr.args)
    return False


# the size at which a page stops short of its page size (ScyllaDB's 1 MB page limit)
PAGE_BYTES = 1 << 20


class Cursors:
    """Open cursors by paging state, oldest evicted first past ``limit`` (a client that
    pages too late gets an InvalidRequest and runs its query again)."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._open: OrderedDict[bytes, Cursor] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, cursor: Cursor) -> bytes:
        state = os.urandom(16)
        with self._lock:
            self._open[state] = cursor
            while len(self._open) > self.limit:
                self._open.popitem(last=False)
        return state

    def take(self, state: bytes) -> Cursor:
        with self._lock:
            cursor = self._open.pop(state, None)
        if cursor is None:
            raise InvalidRequest("Invalid or expired paging state: run the query again")
        return cursor


def page(
    cursors: Cursors, cursor: Cursor, params: QueryParams, metadata_id_seen: bytes | None
) -> RowsResult | EncodedRowsResult:
    """The next page of a result (all of it without a page size); the rest waits in a
    cursor whose id is the paging state, so every page comes from the one snapshot the
    first page read, and no page reads again. The column specs are left out when the
    client asked (Skip_metadata) and, in v5, knows them: its result metadata id is still
    the columns' digest. A result read as Arrow columns is encoded from them, a page's
    rows at a time (``column_cells``)."""
    rows = cursor.rows
    keyspace, table = cursor.table
    types: list[CqlType] = [t if t is not None else TEXT for t in rows.column_types]
    columns = tuple(
        ColumnSpec(keyspace, table, name, ctype)
        for name, ctype in zip(rows.column_names, types, strict=True)
    )
    total = len(rows)
    end = total
    paged = params.page_size is not None and params.page_size > 0
    if params.page_size is not None and params.page_size > 0:
        end = min(end, cursor.offset + params.page_size)
    if rows.table is not None:
        encoded_rows = encode_rows(rows.table.slice(cursor.offset, end - cursor.offset), types)
        if paged:  # a page stops at 1 MB, as ScyllaDB's: its cells' bytes, not their lengths
            sizes = np.cumsum(row_sizes(encoded_rows) - 4 * len(types))
            over = int(np.searchsorted(sizes, PAGE_BYTES, side="left"))
            if over + 1 < len(sizes):
                end = cursor.offset + over + 1
                encoded_rows = encoded_rows.slice(0, over + 1)
        count = len(encoded_rows)
        body = rows_body(encoded_rows)
        cells: tuple[tuple[bytes | None, ...], ...] = ()
    else:
        everything = rows.current_rows
        encoded: list[tuple[bytes | None, ...]] = []
        size = 0
        for at in range(cursor.offset, end):
            row = tuple(
                None if v is None else t.serialize(v)
                for v, t in zip(everything[at], types, strict=True)
            )
            encoded.append(row)
            size += sum(len(c) for c in row if c is not None)
            if paged and size >= PAGE_BYTES and at + 1 < end:  # a page stops at 1 MB
                end = at + 1
                break
        cells, count = tuple(encoded), len(encoded)
    # a page cut at the page size goes on, unless the result is known to end there
    full = paged and count == params.page_size and cursor.open_ended
    more = end < total or full
    state = cursors.put(dataclasses.replace(cursor, offset=end)) if more else None
    digest = metadata_id(columns) if metadata_id_seen is not None else None
    changed = digest is not None and digest != metadata_id_seen
    meta = RowsMetadata(
        columns,
        paging_state=state,
        no_metadata=params.skip_metadata and not changed,
        new_metadata_id=digest if changed else None,
    )
    if rows.table is not None:
        return EncodedRowsResult(meta, count, body)
    return RowsResult(meta, cells)


def describe_rows(session: Session, stmt: ast.Describe, rows: Rows) -> RowsResult:
    """Server-side DESCRIBE as Cassandra 4 answers it (what cqlsh 6 prints): rows of
    ``keyspace_name, type, name, create_statement``."""
    catalog, current = session.catalog, session.keyspace
    listing: list[tuple[str, str, str, str]] = []
    if stmt.kind in ("KEYSPACES", "TABLES", "TYPES"):  # system keyspaces and tables too
        kind = {"KEYSPACES": "keyspace", "TABLES": "table", "TYPES": "type"}[stmt.kind]
        listing = [
            (ks, kind, name, "")
            for ks, names in describe_listing(catalog, current, stmt.kind, system_listing())
            for name in names
        ]
    elif stmt.kind in ("SCHEMA", "KEYSPACE", "TABLE", "TYPE", "INDEX"):  # a row per element
        listing = [
            (e.keyspace, e.type, e.name, e.statement)
            for e in describe_elements(catalog, stmt, current, SYSTEM_CATALOG)
        ]
    else:
        name = stmt.name
        owner = (name.keyspace if stmt.kind != "KEYSPACE" else name.name) if name else None
        text = rows.describe or ""
        listing = [(owner or current or "", stmt.kind.lower(), name.name if name else "", text)]
    columns = tuple(
        ColumnSpec("system", "describe", n, TEXT)
        for n in ("keyspace_name", "type", "name", "create_statement")
    )
    # names as ScyllaDB's description::serialize sends them: quoted where needed (cqlsh
    # prints them as they come)
    cells = tuple(
        (maybe_quote(ks).encode(), kind.encode(), maybe_quote(name).encode(), text.encode())
        for ks, kind, name, text in listing
    )
    return RowsResult(RowsMetadata(columns), cells)


def schema_change(stmt: ast.Statement, keyspace: str | None) -> SchemaChange | None:
    """The SCHEMA_CHANGE result (and event) of a DDL statement."""
    if isinstance(stmt, ast.CreateKeyspace):
        return SchemaChange("CREATED", "KEYSPACE", stmt.name)
    if isinstance(stmt, ast.AlterKeyspace):
        return SchemaChange("UPDATED", "KEYSPACE", stmt.name)
    if isinstance(stmt, ast.DropKeyspace):
        return SchemaChange("DROPPED", "KEYSPACE", stmt.name)
    named: list[tuple[type, str, str]] = [
        (ast.CreateTable, "CREATED", "TABLE"),
        (ast.AlterTable, "UPDATED", "TABLE"),
        (ast.DropTable, "DROPPED", "TABLE"),
        (ast.CreateType, "CREATED", "TYPE"),
        (ast.AlterType, "UPDATED", "TYPE"),
        (ast.DropType, "DROPPED", "TYPE"),
    ]
    for kind, change, target in named:
        if isinstance(stmt, kind):
            name: ast.QualifiedName = getattr(stmt, "name")  # noqa: B009 - narrowed by kind
            return SchemaChange(change, target, name.keyspace or keyspace or "", name.name)
    return None


__all__ = [
    "Cursor",
    "Cursors",
    "Prepared",
    "UnpreparedId",
    "batch_statement",
    "bind_values",
    "describe_rows",
    "open_ended",
    "page",
    "pk_indexes",
    "prepare_in",
    "schema_change",
    "with_default_timestamp",
    "without_unset",
]
