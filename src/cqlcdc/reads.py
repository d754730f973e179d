"""CQL reads: the committed partitions a SELECT needs, from base, log and system tables
(and ``system_cqlcdc``'s changefeed topics, ``cqlcdc.feed_tables``).

Reads see every output at the versions of the last fully committed micro-batch (the
engine's snapshot), so a write and its log rows appear together.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.outputs import base_output, log_output
from cqlcdc.cdc.readded import hide_readded
from cqlcdc.cdc.streams import stream_buckets
from cqlcdc.cql import ast
from cqlcdc.datadir.commit import open_table, statistics_free_dataset, table_dir
from cqlcdc.datadir.partition_reads import read_partitions
from cqlcdc.feed_tables import feed_partitions
from cqlcdc.partition_columns import partition_result
from cqlcdc.row_groups import read_in_range
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import column_name, python_values, value_type
from cqlcdc.storage.base_rows import partitions
from cqlcdc.storage.cells import Cell
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.select import (
    PartitionRows,
    ResultSet,
    base_partition_rows,
    evaluate,
    plain_selection,
    prepare,
    result_columns,
    select_limit,
)
from cqlcdc.storage.selection import CELLS
from cqlcdc.storage.token import (
    bucket_of,
    murmur3_token,
    serialize_partition_key,
)
from cqlcdc.storage.uuids import UUID_EPOCH_OFFSET
from cqlcdc.storage.vectorized import timeuuid_order, timeuuid_ticks
from cqlcdc.storage.view import PartitionView
from cqlcdc.system.tables import FEEDS_KEYSPACE, SYSTEM_KEYSPACES, SystemView, system_rows

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator


def select(
    coordinator: Coordinator,
    schema: TableSchema,
    stmt: ast.Select,
    parameters: Sequence[Any] | Mapping[str, Any] | None = None,
) -> ResultSet:
    """Evaluate ``stmt`` on ``schema`` at the last committed batch."""
    now_s = time.time_ns() // 1_000_000_000
    now_us = time.time_ns() // 1000
    ctx = WriteContext(now_us, now_us, 0, bindings=parameters)
    res = prepare(schema, stmt, ctx)
    snap = coordinator.engine.snapshot()
    catalog = coordinator.catalog
    if schema.keyspace == FEEDS_KEYSPACE:
        parts = feed_partitions(coordinator, schema, stmt, res)
    elif schema.keyspace in SYSTEM_KEYSPACES:
        view = SystemView(
            coordinator.generations, catalog, coordinator.node, coordinator.num_buckets
        )
        parts = system_rows(schema, view)
    elif schema.log_of is not None:
        base = catalog.table(schema.keyspace, schema.log_of)
        scan = _log_scan(schema, base, snap, res, now_s, coordinator.num_buckets)
        counting = _counts_rows(stmt)
        if scan.exact and counting:
            # COUNT(*) with every restriction applied column-wise: no row becomes Python
            ((name, ctype),) = result_columns(schema, stmt)
            return ResultSet([name], [ctype], [(scan.count(snap),)])
        table = scan.read(snap, res)
        if schema.dropped:
            table = hide_readded(
                table, {column_name(schema, n): t for n, t in schema.readded_at().items()}
            )
        by_stream = res.partition_keys is not None
        fast = _log_result(schema, stmt, table, scan.exact, by_stream, ctx)
        if fast is not None:
            return fast
        parts = _log_partitions(base, table, _reads_cells(stmt))
    else:
        truncated = coordinator.processor.truncations.upto(schema.table_id)
        table = _base_rows(schema, snap, res, truncated, coordinator.num_buckets)
        if table is not None and res.partition_keys is not None:
            fast = partition_result(schema, stmt, res, table, now_s, ctx)
            if fast is not None:
                return fast
        parts = [] if table is None else _base_partitions(schema, table, now_s)
    return evaluate(schema, stmt, res, parts, now_s, ctx)


def _base_rows(
    schema: TableSchema, snap: Any, res: Any, truncated: int, num_buckets: int
) -> pa.Table | None:
    """The base rows a SELECT reads (None: none, the table has no data or no key is
    named: ``p IN ()``, ``p = null``)."""
    output = base_output(schema)
    version = snap.version_of(output)
    if version is None or res.partition_keys == []:
        return None
    if res.partition_keys is not None:
        # the bucket picks the files, the token the rows (``partition_reads``)
        keys = [serialize_partition_key(schema, pk) for pk in res.partition_keys]
        wanted = sorted({murmur3_token(k) for k in keys})
        buckets = sorted({bucket_of(t, num_buckets) for t in wanted})
        table = read_partitions(snap.tables_dir, output, version, keys, wanted, buckets, truncated)
    else:
        filters = [("seq", ">", truncated)] if truncated else None
        table = snap.read(output, filters)
    return table


def _base_partitions(schema: TableSchema, table: pa.Table, now_s: int) -> list[PartitionRows]:
    """The CQL rows of the partitions in base rows ``table``."""
    if not table.num_rows:
        return []
    tokens = dict(zip(table["pk"].to_pylist(), table["token"].to_pylist(), strict=True))
    view = PartitionView(schema)
    out = []
    for pk_bytes, part in partitions(schema, table).items():
        out.append(base_partition_rows(schema, part, tokens[pk_bytes], now_s, view))
    return out


@dataclass(frozen=True, slots=True)
class _LogScan:
    """How to read the log rows a SELECT can return, column-wise: a stream-id restriction
    picks the files (by bucket) and the rows, filters on atomic columns apply in Arrow, a
    ``cdc$time`` slice narrows the rows. ``exact``: every restriction applies exactly, so
    ``evaluate`` would keep every row read."""

    output: str | None  # None: no log rows yet
    condition: pc.Expression
    prune: list[tuple[str, str, Any]] | None
    ranges: list[Any] | None
    time_only: bool
    exact: bool
    # the _ticks every row read lies in (or null), when the log has the column: the read
    # takes only the row groups that overlap it, through the decoded row-group cache
    ticks: tuple[int, int] | None = None

    def count(self, snap: Any) -> int:
        if self.output is None:
            return 0
        if self.ranges is None:
            return int(snap.count(self.output, self.condition, self.prune))
        rows: int = self.read(snap, None).num_rows
        return rows

    def read(self, snap: Any, res: Any) -> pa.Table:
        if self.output is None:
            return pa.table({})
        if self.ticks is not None:
            where = table_dir(snap.tables_dir, self.output)
            version = snap.version_of(self.output)
            files = statistics_free_dataset(open_table(where, version), self.prune)
            table = read_in_range(where.uri, files, "_ticks", *self.ticks, self.condition)
        else:
            table = snap.read(self.output, self.condition, None, self.prune)
        if self.ranges is None or not table.num_rows:
            return table
        if self.time_only:
            return table.filter(_in_time_ranges(table["cdc$time"], self.ranges))
        window = _time_window(res)  # a superset: evaluate decides the rest
        if window is None:
            return table
        ticks = timeuuid_ticks(table["cdc$time"])
        return table.filter(pa.array((ticks >= window[0]) & (ticks <= window[1])))


def _log_scan(
    log: TableSchema, base: TableSchema | None, snap: Any, res: Any, now_s: int, num_buckets: int
) -> _LogScan:
    condition = (pc.field("_expiry_s") == 0) | (pc.field("_expiry_s") > now_s)
    output = log_output(base) if base is not None else None
    if output is not None and (snap.version_of(output) is None or res.partition_keys == []):
        output = None  # no log yet, or no stream named (IN (), = null)
    prune: list[tuple[str, str, Any]] | None = None
    if res.partition_keys is not None:
        wanted = sorted({pk[0] for pk in res.partition_keys})
        condition &= pc.field("cdc$stream_id").isin(pa.array(wanted, type=pa.binary()))
        buckets = stream_buckets(wanted, num_buckets)
        if buckets is not None:
            prune = [("_bucket", "in", buckets)]
            condition &= pc.field("_bucket").isin(pa.array(buckets, type=pa.int32()))
    exact = res.token_lower is None and res.token_upper is None
    # a re-added column's old values are hidden after the read: not filtered on before it
    readded = log.readded_at()
    for column, op, value in res.filters:
        pushed = (
            None
            if column.name in readded
            else _arrow_filter(column_name(log, column.name), column.type, op, value)
        )
        if pushed is None:
            exact = False
        else:
            condition &= pushed
    ranges = res.clustering_ranges() if res.ck_restricted_columns else None
    time_only = ranges is not None and all(
        len(lo.prefix) <= 1 and len(hi.prefix) <= 1 for lo, hi in ranges
    )
    exact = exact and (ranges is None or time_only)
    window = _time_window(res) if ranges is not None else None
    by_ticks = window is not None and output is not None and _has_ticks(snap, output)
    if by_ticks:
        assert window is not None
        # row groups outside the window are skipped by their _ticks statistics; rows
        # written before logs had the column (null) go on to the exact test
        ticks = pc.field("_ticks")
        condition &= ((ticks >= window[0]) & (ticks <= window[1])) | ticks.is_null()
    return _LogScan(
        output, condition, prune, ranges, time_only, exact, window if by_ticks else None
    )


def _has_ticks(snap: Any, output: str) -> bool:
    return "_ticks" in snap.schema(output).names


def _in_time_ranges(times: pa.ChunkedArray, ranges: Sequence[Any]) -> pa.Array:
    """Which rows' ``cdc$time`` lies in one of the clustering ranges (each bounded by a
    timeuuid or open), in timeuuid order: the time, then the low 64 bits as signed bytes."""
    ticks, lsb = timeuuid_order(times)
    keep = np.zeros(len(ticks), bool)
    for lower, upper in ranges:
        inside = np.ones(len(ticks), bool)
        if lower.prefix:
            t, low = _order_of(lower.prefix[0])
            after = (ticks > t) | ((ticks == t) & ((lsb > low) | (lower.inclusive & (lsb == low))))
            inside &= after
        if upper.prefix:
            t, low = _order_of(upper.prefix[0])
            before = (ticks < t) | ((ticks == t) & ((lsb < low) | (upper.inclusive & (lsb == low))))
            inside &= before
        keep |= inside
    return pa.array(keep)


def _order_of(value: Any) -> tuple[int, np.uint64]:
    """A timeuuid's place in timeuuid order, as ``timeuuid_order`` gives it for a column."""
    return value.time, np.uint64((value.int & 0xFFFFFFFFFFFFFFFF) ^ 0x8080808080808080)


def _log_result(
    log: TableSchema,
    stmt: ast.Select,
    table: pa.Table,
    exact: bool,
    by_stream: bool,
    ctx: WriteContext,
) -> ResultSet | None:
    """A SELECT of plain columns from a log table whose restrictions all applied exactly,
    answered from the columns: rows ordered by stream token (by stream id when the query
    names its streams, as ``evaluate`` orders named partitions), then clustering order. The
    result keeps the selected columns as Arrow columns: they become Python values only if
    the caller asks (the server encodes them to the wire without). None: the row path
    answers (functions, DISTINCT, ORDER BY, PER PARTITION LIMIT...)."""
    names = plain_selection(log, stmt) if exact else None
    if names is None:
        return None
    if any(log.column(n) is None for n in names):
        return None  # evaluate names the unknown column
    limit = select_limit(stmt.limit, ctx)  # a constant or a bound LIMIT, checked as evaluate does
    out = result_columns(log, stmt)
    if table.num_rows:
        ticks, lsb = timeuuid_order(table["cdc$time"])
        if by_stream:
            ids = table["cdc$stream_id"]
            tokens = pc.rank(ids, sort_keys="ascending", tiebreaker="dense").to_numpy()
        else:
            streams = table["cdc$stream_id"].to_pylist()
            tokens = np.array([int.from_bytes(s[:8], "big", signed=True) for s in streams])
        seq_no = table["cdc$batch_seq_no"].to_numpy()
        order = np.lexsort((seq_no, lsb, ticks, tokens))
        if limit is not None:
            order = order[:limit]
        table = table.take(pa.array(order))
    stored = [column_name(log, name) for name in names]
    present = set(table.column_names)
    columns = []
    for name, at in zip(names, stored, strict=True):
        col = log.column(name)
        assert col is not None
        if at in present:
            columns.append(table[at])
        else:  # no log rows read: the column is empty, of its stored type
            columns.append(pa.chunked_array([], value_type(col.type)))
    result = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    return ResultSet([n for n, _ in out], [t for _, t in out], table=result)


# types whose Arrow values compare as CQL compares them (floats are left out: CQL orders
# NaN, Arrow does not), by the operators that keep that true
_ORDERED_ARROW = frozenset({"tinyint", "smallint", "int", "bigint", "counter", "text", "ascii"})
_EQUAL_ARROW = _ORDERED_ARROW | {"boolean", "blob", "uuid", "timeuuid", "varchar"}


def _arrow_filter(name: str, ctype: Any, op: str, value: Any) -> pc.Expression | None:
    """``name op value`` as an Arrow expression that keeps exactly the rows CQL keeps, or
    None when it cannot be said column-wise (the row path decides those)."""
    cql = getattr(ctype, "cql_name", "")
    field = pc.field(name)
    try:
        if op == "=" and cql in _EQUAL_ARROW:
            return field == pa.scalar(ctype.to_arrow(value), ctype.arrow_type())
        if op == "IN" and cql in _EQUAL_ARROW:
            items = [ctype.to_arrow(v) for v in value]
            return field.isin(pa.array(items, ctype.arrow_type()))
        if op in ("<", "<=", ">", ">=") and cql in _ORDERED_ARROW:
            target = pa.scalar(ctype.to_arrow(value), ctype.arrow_type())
            return {"<": field < target, "<=": field <= target, ">": field > target}.get(
                op, field >= target
            )
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return None
    return None


def _counts_rows(stmt: ast.Select) -> bool:
    """A plain ``SELECT COUNT(*)`` (or ``COUNT(1)``): one count of the matching rows."""
    if stmt.distinct or stmt.json or stmt.per_partition_limit is not None:
        return False
    if getattr(stmt, "group_by", None) or len(stmt.selectors) != 1:
        return False
    expr = stmt.selectors[0].expr
    if not isinstance(expr, ast.FunctionCall) or expr.name != "count" or len(expr.args) != 1:
        return False
    arg = expr.args[0]
    star = isinstance(arg, ast.ColumnRef) and arg.name == "*"
    one = isinstance(arg, ast.Constant) and arg.text == "1"
    return star or one


def _reads_cells(stmt: ast.Select) -> bool:
    """Whether a selector asks for a cell's write time or TTL (``writetime(v)``,
    ``ttl(v)``, also inside a function call): then log rows carry their cells."""

    def asks(expr: object) -> bool:
        if isinstance(expr, ast.FunctionCall):
            return expr.name.lower() in ("writetime", "ttl") or any(asks(a) for a in expr.args)
        if isinstance(expr, ast.TypeCast):
            return asks(expr.term)
        return False

    return any(asks(s.expr) for s in stmt.selectors)


def _log_cells(
    row: dict[str, Any], regulars: Sequence[str], ttl_s: int, expiry_s: int
) -> dict[str, Cell]:
    """A log row's cells, as ScyllaDB writes them: every non-null regular column's cell has
    the base write's timestamp (the microseconds of ``cdc$time``) and the log's TTL, which
    expires it at the row's ``_expiry_s`` (0: the table's CDC ``ttl`` was 0, no TTL)."""
    ts = (row["cdc$time"].time - UUID_EPOCH_OFFSET) // 10
    ttl = ttl_s if expiry_s else 0
    return {
        name: Cell(ts, value, ttl, expiry_s)
        for name in regulars
        if (value := row.get(name)) is not None
    }


def _log_partitions(
    base: TableSchema | None, table: pa.Table, with_cells: bool = False
) -> list[PartitionRows]:
    """The log rows by stream, as Python values, in clustering order; ``with_cells``: each
    with its cells (``CELLS``), for ``writetime()`` and ``ttl()``."""
    if base is None or not table.num_rows:
        return []
    current = log_table_schema(base)
    by_stream: dict[bytes, list[dict[str, Any]]] = {}
    names = set(table.column_names)
    values = {
        c.name: python_values(c.type, table[stored])
        for c in current.columns
        if (stored := column_name(current, c.name)) in names
    }
    regulars = [c.name for c in current.columns if not c.is_key and c.name in values]
    streams = table["cdc$stream_id"].to_pylist()
    with_expiry = with_cells and "_expiry_s" in names
    expiries = table["_expiry_s"].to_pylist() if with_expiry else [0] * len(streams)
    for i, stream in enumerate(streams):
        row = {n: v[i] for n, v in values.items()}
        if with_cells:
            row[CELLS] = _log_cells(row, regulars, base.cdc.ttl_s, expiries[i])
        by_stream.setdefault(stream, []).append(row)
    time_type = current.column("cdc$time")
    assert time_type is not None
    out = []
    for stream, rows in by_stream.items():
        rows.sort(key=lambda r: (time_type.type.sort_key(r["cdc$time"]), r["cdc$batch_seq_no"]))
        token = int.from_bytes(stream[:8], "big", signed=True)
        out.append(PartitionRows(token, (stream,), rows))
    return out


def _time_window(res: Any) -> tuple[int, int] | None:
    """The ``cdc$time`` ticks (100 ns since 1582) every selected row lies within, from the
    clustering ranges; None when some range is open on both sides or has no time."""
    low: int | None = None
    high: int | None = None
    lows, highs = [], []
    for lower, upper in res.clustering_ranges():
        lows.append(lower.prefix[0].time if lower.prefix else None)
        highs.append(upper.prefix[0].time if upper.prefix else None)
    if lows and None not in lows:
        low = min(t for t in lows if t is not None)
    if highs and None not in highs:
        high = max(t for t in highs if t is not None)
    if low is None and high is None:
        return None
    return (low if low is not None else -(1 << 62), high if high is not None else 1 << 62)
