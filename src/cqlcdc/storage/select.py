"""SELECT evaluation over rows already read: restrictions, filtering, order, limit, selectors.

The same code serves base tables (rows computed from partition state, static row mixed in as
CQL shows it) and CDC log tables (rows read back from the log output).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.cells import Cell
from cqlcdc.storage.keys import ClusteringOrder
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.view import PartitionView
from cqlcdc.storage.where import KeyRestrictions, analyse_where
from cqlcdc.types.base import CqlType, TermContext

CELLS = "__cells__"

FILTERING_MESSAGE = (
    "Cannot execute this query as it might involve data filtering and thus may have "
    "unpredictable performance. If you want to execute this query despite the performance "
    "unpredictability, use ALLOW FILTERING"
)


@dataclass(slots=True)
class ResultSet:
    """Rows of a SELECT: column names, their CQL types (for printing), value tuples."""

    columns: list[str]
    types: list[CqlType | None]
    rows: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass(slots=True)
class PartitionRows:
    """One partition's CQL rows in clustering order (dicts column -> value)."""

    token: int
    pk: tuple[Any, ...]
    rows: list[dict[str, Any]]


def base_partition_rows(
    schema: TableSchema, part: Partition, token: int, now_s: int, view: PartitionView
) -> PartitionRows:
    """CQL rows of a base partition: clustering rows with the static row mixed in."""
    pk_values = {c.name: v for c, v in zip(schema.partition_key, part.pk, strict=True)}
    static = view.static_row(part, now_s)
    rows: list[dict[str, Any]] = []
    for live in view.clustering_rows(part, now_s):
        row = dict(pk_values)
        assert live.ck is not None
        row.update({c.name: v for c, v in zip(schema.clustering_key, live.ck, strict=True)})
        cells: dict[str, Cell] = dict(live.cells)
        if static is not None:
            row.update(static.values)
            cells.update(static.cells)
        row.update(live.values)
        row[CELLS] = cells
        rows.append(row)
    if not rows and static is not None:
        row = dict(pk_values)
        row.update(static.values)
        row[CELLS] = dict(static.cells)
        row["__static_only__"] = True
        rows.append(row)
    return PartitionRows(token, part.pk, rows)


def prepare(
    schema: TableSchema, stmt: ast.Select, ctx: TermContext | None = None
) -> KeyRestrictions:
    """Check the WHERE clause and say which partitions the read needs."""
    if stmt.group_by:
        raise InvalidRequest("GROUP BY is not supported yet")
    res = analyse_where(schema, stmt.where, ctx)
    needs_filtering = bool(res.filters) or (
        res.partition_keys is None
        and res.ck_restricted_columns > 0
        and res.token_lower is None
        and res.token_upper is None
    )
    if needs_filtering and not stmt.allow_filtering:
        raise InvalidRequest(FILTERING_MESSAGE)
    return res


def _matches(value: Any, op: str, target: Any, ctype: CqlType) -> bool:
    if value is None:
        return False
    if op == "=":
        return bool(value == target)
    if op == "!=":
        return bool(value != target)
    if op == "IN":
        return value in target
    if op == "CONTAINS":
        vals = value.values() if hasattr(value, "values") and callable(value.values) else value
        return target in vals
    if op == "CONTAINS KEY":
        return target in value
    a, b = ctype.sort_key(value), ctype.sort_key(target)
    return bool(
        {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]  # type: ignore[operator]
    )


def _selected(
    schema: TableSchema, stmt: ast.Select
) -> list[tuple[str, str, CqlType | None, ast.Selector | None]]:
    from cqlcdc.types import native_type

    if not stmt.selectors:
        return [(c.name, c.name, c.type, None) for c in schema.select_star_columns]
    out: list[tuple[str, str, CqlType | None, ast.Selector | None]] = []
    for sel in stmt.selectors:
        expr = sel.expr
        if isinstance(expr, ast.ColumnRef):
            col = schema.column(expr.name)
            if col is None:
                raise InvalidRequest(f"Undefined name {expr.name} in selection clause")
            out.append((sel.alias or col.name, col.name, col.type, sel))
            continue
        fname = expr.name
        args = [a.name for a in expr.args if isinstance(a, ast.ColumnRef)]
        if fname in ("writetime", "ttl"):
            if len(args) != 1 or schema.column(args[0]) is None:
                raise InvalidRequest(f"Invalid arguments for {fname}")
            col = schema.column(args[0])
            assert col is not None
            if col.is_key:
                raise InvalidRequest(
                    f"Cannot use selection function {fname} on PRIMARY KEY part {col.name}"
                )
            t = native_type("bigint" if fname == "writetime" else "int")
            out.append((sel.alias or f"{fname}({args[0]})", args[0], t, sel))
        elif fname == "count":
            out.append((sel.alias or "count", "*", native_type("bigint"), sel))
        elif fname == "token":
            out.append(
                (sel.alias or f"system.token({', '.join(args)})", "", native_type("bigint"), sel)
            )
        else:
            raise InvalidRequest(f"Unknown function '{fname}'")
    return out


def result_columns(schema: TableSchema, stmt: ast.Select) -> list[tuple[str, CqlType]]:
    """The names and types of the columns a SELECT returns (a prepared statement's result
    metadata), known before any value is bound."""
    from cqlcdc.types import native_type

    text = native_type("text")
    return [(name, ctype or text) for name, _, ctype, _ in _selected(schema, stmt)]


def evaluate(
    schema: TableSchema,
    stmt: ast.Select,
    res: KeyRestrictions,
    partitions: Iterable[PartitionRows],
    now_s: int,
    ctx: TermContext | None = None,
) -> ResultSet:
    """Apply the restrictions, ORDER BY, LIMIT and selectors to already-read partitions."""
    from cqlcdc.types import native_type

    order = ClusteringOrder(schema)
    selected = _selected(schema, stmt)
    if stmt.json:
        raise InvalidRequest("SELECT JSON is not supported yet")
    if stmt.distinct:
        for _, name, _, _ in selected:
            col = schema.column(name)
            if col is None or col.kind not in ("partition_key", "static"):
                raise InvalidRequest(
                    "SELECT DISTINCT queries must only request partition key columns and/or "
                    f"static columns (not {name})"
                )
    reverse = _reverse(schema, stmt.order_by)
    ranges = res.clustering_ranges() if res.ck_restricted_columns else None
    limit = _int_term(stmt.limit, "LIMIT", ctx)
    ppl = _int_term(stmt.per_partition_limit, "PER PARTITION LIMIT", ctx)
    ck_names = [c.name for c in schema.clustering_key]
    out_rows: list[dict[str, Any]] = []
    wanted = None if res.partition_keys is None else set(res.partition_keys)
    for p in sorted(partitions, key=lambda p: p.token):
        if not _token_ok(p.token, res) or (wanted is not None and p.pk not in wanted):
            continue
        prow: list[dict[str, Any]] = []
        for row in p.rows:
            if ranges is not None:
                if row.get("__static_only__"):
                    continue
                ck = tuple(row[n] for n in ck_names)
                if not any(order.in_range(ck, s, e) for s, e in ranges):
                    continue
            if not all(_matches(row.get(c.name), op, v, c.type) for c, op, v in res.filters):
                continue
            prow.append(row)
        if reverse:
            prow.reverse()
        if stmt.distinct:
            prow = prow[:1]
        if ppl is not None:
            prow = prow[:ppl]
        out_rows.extend(prow)
    if any(name == "*" for _, name, _, _ in selected):  # count(*)
        count = len(out_rows)
        return ResultSet([selected[0][0]], [native_type("bigint")], [(count,)])
    if limit is not None:
        out_rows = out_rows[:limit]
    result = ResultSet([s[0] for s in selected], [s[2] for s in selected])
    for row in out_rows:
        values = []
        for _, name, _, sel in selected:
            values.append(_select_value(schema, row, name, sel, now_s))
        result.rows.append(tuple(values))
    return result


def _select_value(
    schema: TableSchema, row: dict[str, Any], name: str, sel: ast.Selector | None, now_s: int
) -> Any:
    from cqlcdc.storage.token import murmur3_token, serialize_partition_key

    if sel is None or isinstance(sel.expr, ast.ColumnRef):
        return row.get(name)
    fname = sel.expr.name
    if fname == "token":
        pk = tuple(row[c.name] for c in schema.partition_key)
        return murmur3_token(serialize_partition_key(schema, pk))
    cell = row.get(CELLS, {}).get(name)
    if cell is None:
        return None
    if fname == "writetime":
        return cell.timestamp
    return cell.remaining_ttl(now_s)


def _reverse(schema: TableSchema, order_by: tuple[ast.Ordering, ...]) -> bool:
    if not order_by:
        return False
    ck = schema.clustering_key
    if not ck:
        raise InvalidRequest(
            "Order by is currently only supported on the clustered columns of the PRIMARY KEY, got "
            + order_by[0].column
        )
    reversed_flags = []
    for i, o in enumerate(order_by):
        if i >= len(ck) or ck[i].name != o.column:
            col: Column | None = schema.column(o.column)
            if col is None:
                raise InvalidRequest(f"Order by on unknown column {o.column}")
            raise InvalidRequest(
                "Order by currently only supports the ordering of columns following their "
                "declared order in the PRIMARY KEY"
            )
        reversed_flags.append(o.descending != ck[i].descending)
    if len(set(reversed_flags)) > 1:
        raise InvalidRequest("Unsupported order by relation")
    return reversed_flags[0]


def _token_ok(token: int, res: KeyRestrictions) -> bool:
    if res.token_lower is not None:
        v, incl = res.token_lower
        if token < v or (token == v and not incl):
            return False
    if res.token_upper is not None:
        v, incl = res.token_upper
        if token > v or (token == v and not incl):
            return False
    return True


def _int_term(term: ast.Term | None, what: str, ctx: TermContext | None) -> int | None:
    from cqlcdc.types import native_type

    if term is None:
        return None
    v = native_type("int").parse_literal(term, what, ctx)
    if v is None or v <= 0:
        raise InvalidRequest(f"{what} must be strictly positive")
    return int(v)
