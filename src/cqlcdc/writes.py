"""Writes into ingest records: validated, timestamped, with every random bit fixed.

The row path turns a statement into one mutation per partition (``storage.mutations``) and
one record each; the bulk path keeps many executions of simple prepared writes column-wise,
one Arrow chunk per token bucket (``storage.bulk``), with the same meaning. Both run under
the coordinator's lock, which orders clocks, seeds and seqs, and end in
``Coordinator.append``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.operation_parts import note_bulk, note_write
from cqlcdc.cql import ast
from cqlcdc.cql.render import render
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.errors import CqlError, InvalidRequest
from cqlcdc.observe import instruments
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.attributes import timeout_ms
from cqlcdc.storage.bulk import (
    BOUND_TYPES,
    KIND_INSERT,
    KIND_ROW_DELETE,
    KIND_UPDATE,
    BulkStatement,
    ChunkWrites,
    arrow_columns,
    bound_columns,
    keys_usable,
    make_chunks,
    plan_bulk,
)
from cqlcdc.storage.codec import ConditionalWrite, WritePayload, encode_payload
from cqlcdc.storage.conditions import (
    Conditional,
    StatementCondition,
    build_condition,
    check_conditional,
    is_conditional,
    result_columns,
)
from cqlcdc.storage.empty_values import check_empty_values
from cqlcdc.storage.insert_json import json_insert_values
from cqlcdc.storage.mutations import (
    Mutation,
    WriteContext,
    build_delete,
    build_insert,
    build_update,
    merge_by_partition,
    timestamp_value,
    using_values,
    write_key_bytes,
)
from cqlcdc.storage.token import murmur3_token
from cqlcdc.storage.vectorized import splitmix64
from cqlcdc.system.tables import SYSTEM_KEYSPACES

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator

WriteStatement = ast.Insert | ast.Update | ast.Delete | ast.Batch
Parameters = Sequence[Any] | Mapping[str, Any] | None
# many executions of at most this many prepared writes of one table may go in bulk
BULK_MAX_STATEMENTS = 16


class Prepared(Protocol):
    """What the bulk path needs of a prepared statement."""

    @property
    def query_string(self) -> str: ...

    @property
    def statement(self) -> ast.Statement: ...


@dataclass(frozen=True, slots=True)
class PlannedWrite:
    """A validated write: its mutations merged one per partition, the tables they go to,
    its conditions (a lightweight transaction), and whether its outcome depends on the
    state (a list index or a condition: its writer must wait to learn it)."""

    mutations: list[Mutation]
    schemas: dict[str, TableSchema]
    condition: Conditional | None
    stateful: bool


def plan_write(
    table_of: Callable[[ast.QualifiedName], TableSchema], stmt: WriteStatement, ctx: WriteContext
) -> PlannedWrite:
    """Validate a write as ScyllaDB does and build its mutations: the one planner of every
    write (the session's row path, and the in-memory core model the tests compare with).

    Args:
        table_of: the table a statement names (raises for an unknown one).
        stmt: the statement or batch.
        ctx: its timestamp, clock, seed and bound values (a batch's ``USING TIMESTAMP`` is
            applied here).

    Raises:
        CqlError: the write is invalid (ScyllaDB's class and message).
    """
    statements: Sequence[ast.Insert | ast.Update | ast.Delete]
    if isinstance(stmt, ast.Batch):
        statements = stmt.statements
        if stmt.using.ttl is not None:
            raise InvalidRequest("Global TTL on the BATCH statement is not supported.")
    else:
        statements = (stmt,)
    if isinstance(stmt, ast.Batch) and stmt.using.timestamp is not None:
        ctx.timestamp_us = timestamp_value(stmt.using.timestamp, ctx)
    mutations: list[Mutation] = []
    schemas: dict[str, TableSchema] = {}
    targets: list[TableSchema] = []
    timeout_ms(stmt.using.timeout, ctx)
    for s in statements:
        schema = table_of(s.table)
        check_table_writable(schema)
        targets.append(schema)
        if s is not stmt:  # ScyllaDB prepares it, and keeps the batch's
            timeout_ms(s.using.timeout, ctx, checked=False)
    if isinstance(stmt, ast.Batch):
        check_batch(stmt, targets)
    statements = [
        json_insert_values(schema, s, ctx)
        if isinstance(s, ast.Insert) and s.json is not None
        else s
        for s, schema in zip(statements, targets, strict=True)
    ]
    conditional = any(is_conditional(s) for s in statements)
    checked: list[StatementCondition] = []
    if conditional:
        check_conditional_write(stmt, statements, targets)
    for s, schema in zip(statements, targets, strict=True):
        check_counter_attributes(s, schema)
        schemas[schema.table_id] = schema
        default_ttl = default_ttl_s(schema)
        if isinstance(s, ast.Insert):
            built = build_insert(schema, s, ctx, default_ttl)
        elif isinstance(s, ast.Update):
            built = build_update(schema, s, ctx, default_ttl)
        else:
            built = build_delete(schema, s, ctx)
        if conditional:  # before the partitions are counted: IN has its own message
            ck = next(iter(built[0].partition.rows), None) if isinstance(s, ast.Insert) else None
            checked.append(build_condition(schema, s, ctx, ck))
        mutations += built
    merged = merge_by_partition(mutations)
    if isinstance(stmt, ast.Batch):
        check_batch_size(merged)
    condition: Conditional | None = None
    if conditional:
        if len(merged) > 1:
            raise InvalidRequest("Batch with conditions cannot span multiple partitions")
        condition = Conditional(
            tuple(checked),
            result_columns(targets[0], statements, isinstance(stmt, ast.Batch)),
        )
    stateful = conditional or any(m.list_ops for m in mutations)
    return PlannedWrite(merged, schemas, condition, stateful)


def row_records(
    coordinator: Coordinator,
    stmt: WriteStatement,
    parameters: Parameters,
    keyspace: str | None,
    first_seq: int | None = None,
) -> tuple[list[IngestRecord], bool]:
    """Validate a write and make its ingest records, one per partition, seqs from
    ``first_seq`` (default ``coordinator.next_seq``; call with ``coordinator.lock`` held).

    Returns:
        The records, and whether the write's outcome depends on the state (a list index,
        a condition), so its caller must wait for it to learn its error or result.
    """
    seed = coordinator.clocks.next_seed()
    now_us = coordinator.clocks.now_us()
    ctx = WriteContext(coordinator.clocks.timestamp_us(), now_us, seed, bindings=parameters)
    plan = plan_write(lambda name: coordinator.table(name, keyspace), stmt, ctx)
    records = []
    seq = coordinator.next_seq if first_seq is None else first_seq
    for m in plan.mutations:
        schema = plan.schemas[m.table_id]
        pk_bytes = write_key_bytes(schema, m.partition)
        check_empty_values(schema, m)
        write = WritePayload(m.partition, tuple(m.list_ops), now_us, seed)
        condition = plan.condition
        payload = encode_payload(write if condition is None else ConditionalWrite(write, condition))
        records.append(coordinator.record(schema, murmur3_token(pk_bytes), pk_bytes, payload, seq))
        seq += 1
    for table_id in plan.schemas:
        coordinator.last_write_ms[table_id] = now_us // 1000
    if records and instruments.enabled:  # counted only while a metrics endpoint serves them
        note_write(coordinator, records[-1].seq, plan.mutations, plan.schemas)
    return records, plan.stateful


def conditional_write(stmt: ast.Statement) -> bool:
    """Whether a write is a lightweight transaction (a statement with IF, or a batch with
    one): its result is ``[applied]`` and the old row, known once it is applied."""
    if isinstance(stmt, ast.Batch):
        return any(is_conditional(s) for s in stmt.statements)
    return isinstance(stmt, ast.Insert | ast.Update | ast.Delete) and is_conditional(stmt)


def check_conditional_write(
    stmt: WriteStatement,
    statements: Sequence[ast.Insert | ast.Update | ast.Delete],
    targets: Sequence[TableSchema],
) -> None:
    """ScyllaDB's checks of a conditional statement or batch (``prepare_conditions``,
    ``batch_statement::validate``), before its mutations are built.

    Raises:
        InvalidRequest: ScyllaDB's message.
    """
    if isinstance(stmt, ast.Batch):
        if stmt.using.timestamp is not None:
            raise InvalidRequest("Cannot provide custom timestamp for conditional BATCH")
        if len({t.table_id for t in targets}) > 1:
            raise InvalidRequest("Batch with conditions cannot span multiple tables")
    for s, schema in zip(statements, targets, strict=True):
        if is_conditional(s) or isinstance(stmt, ast.Batch):
            check_conditional(schema, s)


def bulk_records(
    coordinator: Coordinator,
    statements: Sequence[Prepared],
    parameters: Sequence[Parameters],
    keyspace: str | None,
    timestamps_us: Sequence[int | None] | None = None,
) -> list[IngestRecord] | None:
    """Ingest records for many executions of a few prepared writes of one table, as bulk
    chunks (call with ``coordinator.lock`` held); None when any of them needs the row path
    (which then runs them one by one and reports each error in its slot).

    ``timestamps_us`` gives a write's timestamp where the client chose one (a driver's
    default timestamp); a ``USING TIMESTAMP`` of the statement still wins, as in ScyllaDB."""
    found = _first_uses(np.fromiter(map(id, statements), np.int64, len(statements)))
    if found is None:
        return None
    which, firsts = found
    prepared = [statements[i] for i in firsts]
    plans = bulk_plans(coordinator, prepared, keyspace)
    if plans is None:
        return None
    schema, bulk_statements = plans
    if schema.ttl_column is not None:  # its rows' expirations are scheduled row by row
        return None
    tables = []
    for i, plan in enumerate(bulk_statements):
        positions = np.flatnonzero(which == i)
        rows = parameters if len(prepared) == 1 else _pick(parameters, positions)
        columns = bound_columns(schema, plan, rows)
        if columns is None:
            return None
        columns["_pos"] = pa.array(positions)
        tables.append(pa.table(columns))
    merged = pa.concat_tables(tables, promote_options="default")
    merged = merged.take(pc.sort_indices(merged.column("_pos"))).drop_columns(["_pos"])
    return chunk_records(coordinator, schema, bulk_statements, which, merged, timestamps_us)


def _first_uses(
    ids: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int8], list[int]] | None:
    """Which distinct statement each write runs (numbered in order of first use) and the
    position of each one's first use; None past ``BULK_MAX_STATEMENTS`` of them.

    One vectorized pass per distinct statement (a load runs millions of writes of a few)."""
    which = np.empty(len(ids), np.int8)
    left = np.ones(len(ids), np.bool_)
    firsts: list[int] = []
    while len(firsts) <= BULK_MAX_STATEMENTS:
        first = int(np.argmax(left)) if len(ids) else 0
        if not len(ids) or not left[first]:
            return which, firsts
        same = ids == ids[first]
        which[same] = len(firsts)
        left &= ~same
        firsts.append(first)
    return None


def _pick(parameters: Sequence[Parameters], positions: npt.NDArray[np.intp]) -> list[Parameters]:
    if len(positions) == 1:
        return [parameters[int(positions[0])]]
    return list(itemgetter(*positions.tolist())(parameters))


def arrow_records(
    coordinator: Coordinator, prepared: Prepared, values: pa.Table, keyspace: str | None
) -> list[IngestRecord] | None:
    """Bulk chunk records for one prepared write per row of ``values`` (call with
    ``coordinator.lock`` held); None when the write or the values need the row path."""
    plans = bulk_plans(coordinator, [prepared], keyspace)
    if plans is None:
        return None
    schema, (plan,) = plans
    columns = arrow_columns(schema, plan, values)
    if columns is None:
        return None
    which = np.zeros(values.num_rows, np.int8)
    return chunk_records(coordinator, schema, (plan,), which, pa.table(columns))


def chunk_records(
    coordinator: Coordinator,
    schema: TableSchema,
    bulk_statements: tuple[BulkStatement, ...],
    which: npt.NDArray[np.int8],
    merged: pa.Table,
    timestamps_us: Sequence[int | None] | None = None,
) -> list[IngestRecord] | None:
    """Timestamps, seeds and seqs for bulk writes, and their chunk records; None when a key
    needs the row path's error. ``timestamps_us``: the clients' own, where given."""
    if not keys_usable(schema, merged):
        return None
    n = len(which)
    now_us = coordinator.clocks.now_us()
    first_ts = coordinator.clocks.timestamps_us(n)
    timestamps = np.arange(first_ts, first_ts + n, dtype=np.int64)
    if timestamps_us is not None and not _is_counter(schema):
        given = np.array([t is not None for t in timestamps_us], np.bool_)
        timestamps[given] = [t for t in timestamps_us if t is not None]
    for i, plan in enumerate(bulk_statements):
        if plan.timestamp is not None:
            timestamps[which == i] = plan.timestamp
    base_seed = np.uint64(coordinator.clocks.next_seed())
    with np.errstate(over="ignore"):
        seeds = splitmix64(base_seed + np.arange(n, dtype=np.uint64))
    writes = ChunkWrites(bulk_statements, which, merged, timestamps, seeds)
    chunks = make_chunks(schema, writes, coordinator.next_seq, now_us, coordinator.num_buckets)
    if chunks is None:
        return None
    coordinator.last_write_ms[schema.table_id] = now_us // 1000
    if schema.cdc.enabled and chunks and instruments.enabled:
        _note_bulk_operations(
            coordinator, max(c[0] for c in chunks), schema, bulk_statements, which, merged
        )
    return [
        coordinator.record(schema, token, pk, payload, seq, bucket)
        for seq, bucket, token, pk, payload in chunks
    ]


def _note_bulk_operations(
    coordinator: Coordinator,
    last_seq: int,
    schema: TableSchema,
    bulk_statements: tuple[BulkStatement, ...],
    which: npt.NDArray[np.int8],
    merged: pa.Table,
) -> None:
    """Hold bulk writes of a CDC table for ScyllaDB's CDC counters (one operation
    per execution): a TTL with a bound null is the one split case (``cqlcdc.cdc.bulk_log``)."""
    deletes = upserts = split = 0
    for i, plan in enumerate(bulk_statements):
        mine = which == i
        n = int(np.count_nonzero(mine))
        if plan.kind == KIND_ROW_DELETE:
            deletes += n
            continue
        upserts += n
        if plan.ttl and plan.kind in (KIND_INSERT, KIND_UPDATE) and plan.columns:
            nulls = np.zeros(len(which), np.bool_)
            for name in plan.columns:
                nulls |= merged.column(name).is_null().to_numpy(zero_copy_only=False)
            split += int(np.count_nonzero(nulls & mine))
    note_bulk(coordinator, last_seq, schema, deletes, upserts, split)


@dataclass(frozen=True, slots=True)
class LiteralTemplate:
    """A write given with literal values, seen as the prepared write it means: each value
    a marker (``query_string`` is the template's text, so equal templates share a bulk
    plan)."""

    query_string: str
    statement: ast.Statement


def literal_bulk(
    coordinator: Coordinator, statements: Sequence[ast.Statement], keyspace: str | None
) -> tuple[list[LiteralTemplate], list[tuple[Any, ...]]] | None:
    """Writes with literal values (a script's INSERTs, ``execute_many`` of CQL text) as
    executions of the prepared writes they are with their values as bound values, so that
    they can take the bulk path as prepared ones do. None when one does not have that shape
    (see :func:`literal_template`): the row path then runs them one by one and reports each
    error."""
    templates: dict[ast.Statement, LiteralTemplate] = {}
    prepared: list[LiteralTemplate] = []
    values: list[tuple[Any, ...]] = []
    for stmt in statements:
        found = literal_template(coordinator, stmt, keyspace)
        if found is None:
            return None
        template, row = found
        known = templates.get(template)
        if known is None:
            known = templates[template] = LiteralTemplate(render(template), template)
        prepared.append(known)
        values.append(row)
    return prepared, values


def literal_template(
    coordinator: Coordinator, stmt: ast.Statement, keyspace: str | None
) -> tuple[ast.Statement, tuple[Any, ...]] | None:
    """A write with literal values as the prepared write it means (each plain constant it
    writes or names a key with a marker) and the values it binds; None for another shape
    (a function call, a collection, a condition, a range...) or a value that does not
    parse (the row path reports it)."""
    found = _template(stmt)
    if found is None:
        return None
    template, bound = found
    assert isinstance(template, ast.Insert | ast.Update | ast.Delete)
    try:
        schema = coordinator.table(template.table, keyspace)
        row = []
        for name, constant in bound:
            column = schema.column(name)
            if column is None or column.type.cql_name not in BOUND_TYPES:
                return None
            row.append(column.type.parse_literal(constant, name))
    except CqlError:
        return None
    return template, tuple(row)


def _template(stmt: ast.Statement) -> tuple[ast.Statement, list[tuple[str, ast.Constant]]] | None:
    """``stmt`` with each plain constant it writes or selects by key replaced by a marker,
    and those constants by column; None when it has another shape."""
    bound: list[tuple[str, ast.Constant]] = []

    def marker(column: str, term: ast.Term) -> ast.BindMarker | None:
        if not isinstance(term, ast.Constant):
            return None
        bound.append((column, term))
        return ast.BindMarker(None, len(bound) - 1)

    def where(relations: tuple[ast.Relation, ...]) -> tuple[ast.Relation, ...] | None:
        out = []
        for rel in relations:
            if rel.multi or rel.operator != "=" or rel.token or rel.key is not None:
                return None
            m = marker(rel.columns[0], rel.value)
            if m is None:
                return None
            out.append(replace(rel, value=m))
        return tuple(out)

    if isinstance(stmt, ast.Insert):
        if stmt.json is not None or stmt.if_not_exists:
            return None
        terms = [marker(c, t) for c, t in zip(stmt.columns, stmt.values, strict=True)]
        if any(t is None for t in terms):
            return None
        return replace(stmt, values=tuple(t for t in terms if t is not None)), bound
    if isinstance(stmt, ast.Update):
        if stmt.if_exists or stmt.conditions:
            return None
        assignments: list[ast.Assignment] = []
        for a in stmt.assignments:
            if not isinstance(a, ast.SetColumn):
                return None
            m = marker(a.column, a.value)
            if m is None:
                return None
            assignments.append(replace(a, value=m))
        keys = where(stmt.where)
        if keys is None:
            return None
        return replace(stmt, assignments=tuple(assignments), where=keys), bound
    if isinstance(stmt, ast.Delete):
        if stmt.if_exists or stmt.conditions:
            return None
        if any(t.key is not None or t.field is not None for t in stmt.targets):
            return None
        keys = where(stmt.where)
        if keys is None:
            return None
        return replace(stmt, where=keys), bound
    return None


def bulk_plans(
    coordinator: Coordinator, prepared: Sequence[Prepared], keyspace: str | None
) -> tuple[TableSchema, tuple[BulkStatement, ...]] | None:
    """The bulk forms of prepared writes to one table (None: not all have one)."""
    schema: TableSchema | None = None
    plans = []
    for q in prepared:
        stmt = q.statement
        if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete):
            return None
        try:
            table = coordinator.table(stmt.table, keyspace)
        except CqlError:
            return None
        if schema is not None and table.table_id != schema.table_id:
            return None
        schema = table
        key = (q.query_string, keyspace, table.table_id, table.schema_version)
        if key not in coordinator.bulk_plans:
            coordinator.bulk_plans[key] = _bulk_plan(table, stmt)
        plan = coordinator.bulk_plans[key]
        if plan is None:
            return None
        plans.append(plan)
    assert schema is not None
    return schema, tuple(plans)


def _bulk_plan(
    schema: TableSchema, stmt: ast.Insert | ast.Update | ast.Delete
) -> BulkStatement | None:
    if schema.log_of is not None or schema.keyspace in SYSTEM_KEYSPACES:
        return None  # the row path says why
    if schema.compact_storage:
        return None  # rows without a marker (and a key-only table's hidden value): row path
    unset = -(1 << 62)
    if isinstance(stmt, ast.Insert) and stmt.json is not None:
        return None  # the row path reads the JSON
    if stmt.using.timeout is not None and not isinstance(stmt.using.timeout, ast.Constant):
        return None  # a bound timeout is checked per execution, by the row path
    try:
        timeout_ms(stmt.using.timeout, None)
        ctx = WriteContext(unset, 0, 0)
        ts, ttl = using_values(
            stmt.using, ctx, default_ttl_s(schema), allow_ttl=not isinstance(stmt, ast.Delete)
        )
    except CqlError:
        return None
    return plan_bulk(schema, stmt, None if ts == unset else ts, ttl)


def check_table_writable(schema: TableSchema) -> None:
    """Log tables and system tables take no writes.

    Raises:
        InvalidRequest: naming the table.
    """
    if schema.log_of is not None or schema.keyspace in SYSTEM_KEYSPACES:
        raise InvalidRequest(f"Cannot modify table {schema.qualified_name} directly")


def check_batch(batch: ast.Batch, schemas: Sequence[TableSchema]) -> None:
    """ScyllaDB's checks of a batch as a whole (``batch_statement::validate``), in its order:
    a timestamp on the batch and on a statement, or counter and non-counter writes mixed,
    would otherwise be applied as something the client did not ask for.

    Args:
        batch: the batch.
        schemas: the table each of its statements writes, in order.

    Raises:
        InvalidRequest: ScyllaDB's message.
    """
    timestamp_set = batch.using.timestamp is not None
    if timestamp_set and batch.kind == "COUNTER":
        raise InvalidRequest("Cannot provide custom timestamp for counter BATCH")
    counters = [_is_counter(schema) for schema in schemas]
    has_counters, has_non_counters = any(counters), not all(counters)
    if timestamp_set and has_counters:
        raise InvalidRequest("Cannot provide custom timestamp for a BATCH containing counters")
    if timestamp_set and any(s.using.timestamp is not None for s in batch.statements):
        raise InvalidRequest("Timestamp must be set either on BATCH or individual statements")
    if batch.kind == "COUNTER" and has_non_counters:
        raise InvalidRequest("Cannot include non-counter statement in a counter batch")
    if batch.kind == "LOGGED" and has_counters:
        raise InvalidRequest("Cannot include a counter statement in a logged batch")
    if has_counters and has_non_counters:
        raise InvalidRequest("Counter and non-counter mutations cannot exist in the same batch")


def check_counter_attributes(
    stmt: ast.Insert | ast.Update | ast.Delete, schema: TableSchema
) -> None:
    """A write to a counter table takes no ``USING TIMESTAMP`` or ``TTL``
    (``modification_statement::validate``): counters cannot expire, so a TTL would be
    acknowledged and ignored.

    Raises:
        InvalidRequest: ScyllaDB's message.
    """
    if not _is_counter(schema):
        return
    if stmt.using.timestamp is not None:
        raise InvalidRequest("Cannot provide custom timestamp for counter updates")
    if stmt.using.ttl is not None:
        raise InvalidRequest("Cannot provide custom TTL for counter updates")


# ScyllaDB's batch_size_fail_threshold_in_kb (its default): a bigger batch is refused
BATCH_FAIL_BYTES = 1024 * 1024


def check_batch_size(mutations: Sequence[Mutation]) -> None:
    """``batch_statement::verify_batch_size``: a batch of several partitions whose data
    passes the threshold is refused whole (measured as the partitions' binary encoding,
    ``storage.codec``)."""
    if len(mutations) <= 1:
        return
    from cqlcdc.storage.codec import encode_fragment

    size = 0
    for m in mutations:
        size += len(encode_fragment(m.partition))
        if size > BATCH_FAIL_BYTES:
            raise InvalidRequest("Batch too large")


def default_ttl_s(schema: TableSchema) -> int:
    """The table's ``default_time_to_live`` in seconds (0: none).

    Raises:
        InvalidRequest: a negative one (DDL refuses it now; a table made before could still
            hold one): every write would expire as it is acknowledged.
    """
    for name, value in schema.options:
        if name == "default_time_to_live":
            try:
                ttl_s = int(value)
            except ValueError:
                return 0
            if ttl_s < 0:
                raise InvalidRequest(
                    f"Cannot modify table {schema.qualified_name}: its default_time_to_live is "
                    f"{ttl_s}; set it to 0 or more with ALTER TABLE ... WITH default_time_to_live"
                )
            return ttl_s
    return 0


def _is_counter(schema: TableSchema) -> bool:
    return any(c.type.cql_name == "counter" for c in schema.columns)
