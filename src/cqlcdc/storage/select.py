"""SELECT evaluation over rows already read: restrictions, filtering, order, grouping and
aggregates, limits, selectors and SELECT JSON.

The same code serves base tables (rows computed from partition state, static row mixed in as
CQL shows it) and CDC log tables (rows read back from the log output).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.indexes import usable_index
from cqlcdc.schema.model import Column, SecondaryIndex, TableSchema
from cqlcdc.schema.physical import python_values
from cqlcdc.storage.aggregates import Accumulator
from cqlcdc.storage.attributes import timeout_ms
from cqlcdc.storage.cells import Cell
from cqlcdc.storage.keys import ClusteringOrder, compare
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.selection import CELLS, ELEMENTS, Selection, plan_selection
from cqlcdc.storage.subscripts import element_of, subscript_types
from cqlcdc.storage.view import PartitionView
from cqlcdc.storage.where import ELEMENT, KeyRestrictions, analyse_where
from cqlcdc.types.base import CqlType, TermContext

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
    # the rows as Arrow columns instead (one per result column, in order, as stored: see
    # ``schema.physical.python_values``) when a columnar read answered; they become Python
    # values only when asked (``value_rows``), so the server encodes pages from the columns
    table: pa.Table | None = None

    def value_rows(self) -> list[tuple[Any, ...]]:
        """The rows as tuples of Python values."""
        if self.table is None:
            return self.rows
        columns = [
            python_values(ctype, self.table.column(i))
            for i, ctype in enumerate(self.types)
            if ctype is not None
        ]
        if len(columns) != len(self.types):
            raise ValueError("a columnar result has a type for every column")
        return list(zip(*columns, strict=True)) if columns else []


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
        elements = live.elements
        if static is not None:
            row.update(static.values)
            cells.update(static.cells)
            elements = {**static.elements, **live.elements}
        row.update(live.values)
        row[CELLS] = cells
        row[ELEMENTS] = elements
        rows.append(row)
    if not rows and static is not None:
        row = dict(pk_values)
        row.update(static.values)
        row[CELLS] = dict(static.cells)
        row[ELEMENTS] = static.elements
        row["__static_only__"] = True
        rows.append(row)
    return PartitionRows(token, part.pk, rows)


def prepare(
    schema: TableSchema, stmt: ast.Select, ctx: TermContext | None = None
) -> KeyRestrictions:
    """Check the statement, in ScyllaDB's order (selectors, then the WHERE clause, DISTINCT,
    ORDER BY, GROUP BY, the limits and the timeout), and say which partitions the read needs.

    Raises:
        InvalidRequest: ScyllaDB's message for the first thing it would refuse.
    """
    selection = plan_selection(schema, stmt)
    if selection.aggregating and stmt.per_partition_limit is not None and not stmt.group_by:
        raise InvalidRequest("PER PARTITION LIMIT is not allowed with aggregate queries.")
    # a restriction an index may serve is analysed as a filter where it breaks the key's
    # order (an index on a clustering column); indexed_query then says whether it may
    served = bool(_served(schema, stmt))
    res = analyse_where(
        schema, stmt.where, ctx, filtering=stmt.allow_filtering or served, reading=True
    )
    # clustering restrictions over many partitions (even a token range) filter, as ScyllaDB
    needs_filtering = bool(res.filters) or (
        res.partition_keys is None and res.ck_restricted_columns > 0
    )
    if needs_filtering and not stmt.allow_filtering and not indexed_query(schema, stmt, res):
        raise InvalidRequest(FILTERING_MESSAGE)
    if stmt.distinct:
        _check_distinct(schema, stmt, selection, res)
    if stmt.order_by:  # select_statement::verify_ordering_is_allowed
        if res.filters and indexed_query(schema, stmt, res):
            raise InvalidRequest("ORDER BY with 2ndary indexes is not supported.")
        if res.partition_keys is None:
            raise InvalidRequest(
                "ORDER BY is only supported when the partition key is restricted by an EQ or an IN."
            )
    _reverse(schema, stmt.order_by, stmt.where)
    grouping = group_by_columns(schema, stmt)
    if stmt.distinct and any(c.kind == "clustering" for c in grouping):
        raise InvalidRequest(
            "Grouping on clustering columns is not allowed for SELECT DISTINCT queries"
        )
    _int_term(stmt.per_partition_limit, "PER PARTITION LIMIT", ctx)
    _int_term(stmt.limit, "LIMIT", ctx)
    timeout_ms(stmt.using.timeout, ctx)
    return res


def _served(schema: TableSchema, stmt: ast.Select) -> list[tuple[ast.Relation, SecondaryIndex]]:
    """The relations of ``stmt`` an index of ``schema`` can answer."""
    if not schema.indexes:
        return []
    return [
        (rel, index)
        for rel in stmt.where
        if not rel.token
        and not rel.multi
        and (index := usable_index(schema, rel.columns[0], rel.operator, rel.key is not None))
        is not None
    ]


def indexed_query(schema: TableSchema, stmt: ast.Select, res: KeyRestrictions) -> bool:
    """Whether a secondary index answers the query without ALLOW FILTERING, as ScyllaDB's
    ``statement_restrictions::need_filtering`` decides it: one restricted regular column,
    served by an index, beside the whole partition key and a clustering prefix (or nothing
    else); or a served clustering column restricted alone beside the partition key. The
    rows come from the base table at the read's snapshot either way
    (``cqlcdc.schema.indexes``)."""
    served = _served(schema, stmt)
    if not served:
        return False
    kinds = {c.name: c.kind for c in schema.columns}
    whole_key = res.partition_keys is not None
    if any(index.local_key for _, index in served) and not whole_key:
        return False
    single = [r for r in stmt.where if not r.token and not r.multi]
    multi = any(r.multi for r in stmt.where)
    pk_restricted = {r.columns[0] for r in single if kinds.get(r.columns[0]) == "partition_key"}
    ck_restricted = {r.columns[0] for r in single if kinds.get(r.columns[0]) == "clustering"}
    nonkey_relations = [r for r in single if kinds.get(r.columns[0]) in ("regular", "static")]
    nonkey = {r.columns[0] for r in nonkey_relations}
    served_columns = {rel.columns[0] for rel, _ in served}
    if any(r.token for r in stmt.where):  # one restriction goes to the index, no other
        return len(ck_restricted) + len(nonkey) <= 1
    if pk_restricted and not whole_key:  # a part of the partition key: its token is unknown,
        # unless an index of that one part answers it alone
        return (
            len(pk_restricted) == 1
            and pk_restricted <= served_columns
            and not ck_restricted
            and not nonkey_relations
        )
    # two restrictions of regular columns (even two CONTAINS of one) filter
    if len(nonkey_relations) > 1 or (nonkey and not nonkey <= served_columns):
        return False
    ck_filtered = any(c.kind == "clustering" for c, _, _ in res.filters)
    if nonkey:  # the index of a regular column: the rest must be a key prefix
        if not pk_restricted and not ck_restricted:
            return True
        return whole_key and not ck_filtered and not multi
    if multi:
        return True
    return len(ck_restricted) <= 1  # an index of a clustering column, restricted alone


def _check_distinct(
    schema: TableSchema, stmt: ast.Select, selection: Selection, res: KeyRestrictions
) -> None:
    """select_statement.cc ``validate_distinct_selection``. A filter on a static column is
    allowed (Cassandra allows it; ScyllaDB means to, its issue #10354)."""
    if stmt.per_partition_limit is not None:
        raise InvalidRequest("PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries")
    if res.ck_restricted_columns or any(
        c.kind not in ("partition_key", "static") for c, _, _ in res.filters
    ):
        raise InvalidRequest(
            "SELECT DISTINCT with WHERE clause only supports restriction by partition key."
        )
    for name in selection.columns:
        col = schema.column(name)
        if col is None or col.kind not in ("partition_key", "static"):
            raise InvalidRequest(
                "SELECT DISTINCT queries must only request partition key columns and/or "
                f"static columns (not {name})"
            )
    if res.partition_keys is None:  # a key range: the whole partition key is selected
        for col in schema.partition_key:
            if col.name not in selection.columns:
                raise InvalidRequest(
                    "SELECT DISTINCT queries must request all the partition key columns "
                    f"(missing {col.name})"
                )


def group_by_columns(schema: TableSchema, stmt: ast.Select) -> list[Column]:
    """The GROUP BY columns: a prefix of the primary key, where a key column restricted by
    ``=`` may be left out (select_statement.cc ``prepare_group_by``).

    Raises:
        InvalidRequest: ScyllaDB's message for an unknown, non-key or out-of-order column,
            or a GROUP BY short of the partition key.
    """
    if not stmt.group_by:
        return []
    keys = [*schema.partition_key, *schema.clustering_key]
    fixed = {
        rel.columns[0]
        for rel in stmt.where
        if rel.operator == "=" and not rel.token and rel.key is None and not rel.multi
    }
    expected = 0
    out: list[Column] = []
    for name in stmt.group_by:
        col = schema.column(name)
        if col is None:
            raise InvalidRequest(f"Group by unknown column {name}")
        if not col.is_key:
            raise InvalidRequest(f"Group by non-primary-key column {name}")
        out_of_order = InvalidRequest(f"Group by column {name} is out of order")
        if expected >= len(keys):
            raise out_of_order
        while keys[expected].name != name and keys[expected].name in fixed:
            expected += 1
            if expected >= len(keys):
                raise out_of_order
        if keys[expected].name != name:
            raise out_of_order
        expected += 1
        out.append(col)
    if expected < len(schema.partition_key):
        raise InvalidRequest("GROUP BY must include the entire partition key")
    return out


@functools.lru_cache(maxsize=256)
def like_pattern(pattern: str) -> re.Pattern[str]:
    """A LIKE pattern as a regex (utils/like_matcher.cc): ``%`` any text, ``_`` one
    character, a backslash escapes the next one; the empty pattern matches empty text."""
    out: list[str] = []
    escaping = False
    for c in pattern:
        if c == "\\" and not escaping:
            escaping = True
            continue
        if c in "%_" and not escaping:
            out.append(".*" if c == "%" else ".")
        else:
            out.append(re.escape(c))
        escaping = False
    return re.compile("".join(out), re.DOTALL)


def _matches(value: Any, op: str, target: Any, ctype: CqlType) -> bool:
    if value is None or target is None:  # nothing equals null, not even null
        return False
    if op.startswith(ELEMENT):  # m[k] op v, l[i] op v
        key, wanted = target
        _, elem_type = subscript_types(ctype, "")
        return _matches(element_of(value, key), op[len(ELEMENT) :], wanted, elem_type)
    if op == "=":
        return bool(value == target)
    if op == "!=":
        return bool(value != target)
    if op == "IN":
        return value in target
    if op == "NOT IN":  # unknown (no match) when a listed value is null
        return None not in target and value not in target
    if op == "LIKE":
        return like_pattern(target).fullmatch(value) is not None
    if op == "CONTAINS":
        vals = value.values() if hasattr(value, "values") and callable(value.values) else value
        return target in vals
    if op == "CONTAINS KEY":
        return target in value
    a, b = ctype.sort_key(value), ctype.sort_key(target)
    return compare(a, op, b)


def plain_selection(schema: TableSchema, stmt: ast.Select) -> list[str] | None:
    """The columns a SELECT of plain columns returns, in order (``*``: the table's), when
    nothing but their values shapes the result: no function or other selector, DISTINCT,
    JSON, ORDER BY, GROUP BY or PER PARTITION LIMIT. None otherwise. What the column-wise
    answers (a partition's rows, a log window) take; the row path answers the rest."""
    if stmt.distinct or stmt.json or stmt.order_by or stmt.group_by:
        return None
    if stmt.per_partition_limit is not None:
        return None
    refs = [s.expr for s in stmt.selectors]
    if not all(isinstance(expr, ast.ColumnRef) for expr in refs):
        return None
    if not refs:
        return [c.name for c in schema.select_star_columns]
    return [expr.name for expr in refs if isinstance(expr, ast.ColumnRef)]


def result_columns(schema: TableSchema, stmt: ast.Select) -> list[tuple[str, CqlType]]:
    """The names and types of the columns a SELECT returns (a prepared statement's result
    metadata), known before any value is bound."""
    return plan_selection(schema, stmt).result_columns()


def evaluate(
    schema: TableSchema,
    stmt: ast.Select,
    res: KeyRestrictions,
    partitions: Iterable[PartitionRows],
    now_s: int,
    ctx: TermContext | None = None,
) -> ResultSet:
    """Apply the restrictions, ORDER BY, GROUP BY, aggregates, limits and selectors (and
    SELECT JSON) to already-read partitions."""
    selection = plan_selection(schema, stmt)
    order = ClusteringOrder(schema)
    reverse = _reverse(schema, stmt.order_by, stmt.where)
    ranges = res.clustering_ranges() if res.ck_restricted_columns else None
    limit = _int_term(stmt.limit, "LIMIT", ctx)
    ppl = _int_term(stmt.per_partition_limit, "PER PARTITION LIMIT", ctx)
    ck_names = [c.name for c in schema.clustering_key]
    matching: list[list[dict[str, Any]]] = []
    wanted = None if res.partition_keys is None else set(res.partition_keys)
    for p in _in_read_order(schema, partitions, wanted is not None):
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
        if ppl is not None and not selection.aggregating:
            prow = prow[:ppl]
        matching.append(prow)
    columns = selection.result_columns()
    result = ResultSet([name for name, _ in columns], [ctype for _, ctype in columns])
    if selection.aggregating:
        grouping = group_by_columns(schema, stmt)
        result.rows = _aggregate(schema, selection, grouping, matching, now_s, limit, ppl)
        return result
    rows = [row for prow in matching for row in prow]
    if stmt.order_by and len(matching) > 1:
        # ORDER BY over several partitions (an IN on the partition key): one clustering
        # order across them, as ScyllaDB orders the rows after the query
        # (a partition with only its static row has no clustering key: it comes first)
        rows.sort(
            key=lambda row: (
                (0,)
                if row.get("__static_only__")
                else (1, order.key(tuple(row[n] for n in ck_names)))
            ),
            reverse=reverse,
        )
    if limit is not None:
        rows = rows[:limit]
    result.rows = [selection.row_values(schema, row, now_s) for row in rows]
    return result


def _aggregate(
    schema: TableSchema,
    selection: Selection,
    grouping: list[Column],
    partitions: list[list[dict[str, Any]]],
    now_s: int,
    limit: int | None,
    ppl: int | None,
) -> list[tuple[Any, ...]]:
    """The groups' output rows (``result_set_builder`` in cql3/selection/selection.cc):
    consecutive rows with equal GROUP BY columns form a group; without GROUP BY all rows are
    one group, which gives a row even when there are none. LIMIT counts groups, PER
    PARTITION LIMIT the groups of each partition."""
    if not grouping:
        state = selection.start_group()
        for prow in partitions:
            for row in prow:
                selection.add_row(state, schema, row, now_s)
        return [selection.group_values(state)]
    out: list[tuple[Any, ...]] = []
    for prow in partitions:
        emitted = 0
        last: tuple[Any, ...] | None = None
        state = []
        for row in prow:
            key = tuple(_group_key(c, row.get(c.name)) for c in grouping)
            if key != last:
                if last is not None:
                    emitted += _emit(out, selection, state, limit, ppl, emitted)
                state, last = selection.start_group(), key
            selection.add_row(state, schema, row, now_s)
        if last is not None:
            _emit(out, selection, state, limit, ppl, emitted)
    return out


def _group_key(col: Column, value: Any) -> Any:
    # compared as the type compares (NaN equals NaN, as their bytes do)
    return None if value is None else col.type.sort_key(value)


def _emit(
    out: list[tuple[Any, ...]],
    selection: Selection,
    state: list[Accumulator],
    limit: int | None,
    ppl: int | None,
    emitted: int,
) -> int:
    """Add a finished group's row if the limits leave room; 1 if it was added."""
    if (limit is not None and len(out) >= limit) or (ppl is not None and emitted >= ppl):
        return 0
    out.append(selection.group_values(state))
    return 1


def _in_read_order(
    schema: TableSchema, partitions: Iterable[PartitionRows], by_key: bool
) -> list[PartitionRows]:
    """Partitions in the order a read returns them: by token, or, for partitions named by
    the partition key (``=``/``IN``), in the order of their key values (ScyllaDB reads the
    IN values sorted and one after the other: ``p IN (4, 0, 3)`` returns 0, 3, 4)."""
    if not by_key:
        return sorted(partitions, key=lambda p: p.token)
    types = [c.type for c in schema.partition_key]
    return sorted(
        partitions, key=lambda p: tuple(t.sort_key(v) for t, v in zip(types, p.pk, strict=True))
    )


def _reverse(
    schema: TableSchema,
    order_by: tuple[ast.Ordering, ...],
    where: tuple[ast.Relation, ...] = (),
) -> bool:
    """Whether ORDER BY reverses the clustering order (select_statement.cc
    ``verify_ordering_is_valid``): clustering columns in key order, each column before the
    last ordered one either ordered (all reversed or none) or fixed by an equality."""
    if not order_by:
        return False
    ck = schema.clustering_key
    positions: list[int] = []
    for o in order_by:
        col: Column | None = schema.column(o.column)
        if col is None:
            raise InvalidRequest(f"Order by on unknown column {o.column}")
        if col.kind != "clustering":
            raise InvalidRequest(
                "Order by is currently only supported on the clustered columns of the PRIMARY "
                f"KEY, got {o.column}"
            )
        positions.append(col.position)
    if any(a >= b for a, b in itertools.pairwise(positions)):
        raise InvalidRequest(
            "Order by currently only supports the ordering of columns following their "
            "declared order in the PRIMARY KEY"
        )
    reverse = order_by[0].descending != ck[positions[0]].descending
    ordered = dict(zip(positions, order_by, strict=True))
    fixed = _equality_restricted(where)
    for i in range(positions[-1] + 1):
        ordering = ordered.get(i)
        if ordering is None:
            if ck[i].name not in fixed:
                raise InvalidRequest(
                    f"Unsupported order by relation - column {ck[i].name} doesn't have an "
                    "ordering or EQ relation."
                )
        elif (ordering.descending != ck[i].descending) != reverse:
            raise InvalidRequest(
                "Unsupported order by relation - only reversing all columns is supported, but "
                f"column {ordering.column} has opposite ordering"
            )
    return reverse


def _equality_restricted(where: tuple[ast.Relation, ...]) -> set[str]:
    """Columns a relation fixes to one value: ``c = v``, ``(b, c) = (..)``, ``c IN (v)``."""
    out: set[str] = set()
    for rel in where:
        if rel.token or rel.key is not None:
            continue
        single_in = (
            rel.operator == "IN"
            and isinstance(rel.value, ast.TupleLiteral)
            and len(rel.value.items) == 1
        )
        if rel.operator == "=" or single_in:
            out.update(rel.columns)
    return out


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


def select_limit(term: ast.Term | None, ctx: TermContext | None) -> int | None:
    """A SELECT's LIMIT (a constant or a bound value), None without one.

    Raises:
        InvalidRequest: it is not strictly positive.
    """
    return _int_term(term, "LIMIT", ctx)


def _int_term(term: ast.Term | None, what: str, ctx: TermContext | None) -> int | None:
    from cqlcdc.types import native_type

    if term is None:
        return None
    v = native_type("int").parse_literal(term, what, ctx)
    if v is None or v <= 0:
        raise InvalidRequest(f"{what} must be strictly positive")
    return int(v)
