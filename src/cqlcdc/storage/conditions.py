"""Lightweight transactions: the conditions of ``INSERT ... IF NOT EXISTS``, ``UPDATE/DELETE
... IF EXISTS`` and ``IF col op value``, checked where writes are applied.

A conditional write is validated at the coordinator as ScyllaDB validates it (its messages),
its condition values are bound there (``build_condition``), and the condition travels with
the write's mutation in the ingest record (``codec.ConditionalWrite``). The pipeline applies
the records of a partition in seq order, so it decides each condition against exactly the
state the earlier writes left (``evaluate``): concurrent conditional writes to one row
serialize in commit order, and a write whose condition fails changes nothing and logs
nothing. The outcome goes back to the client as ScyllaDB's result set: ``[applied]`` plus
the row as it was before, whether or not the write applied (ScyllaDB, unlike Cassandra,
always returns the old row, so the metadata of a prepared conditional statement never
changes); one row per statement of a conditional batch, in statement order.

>>> ConditionCheck("v", "=", 1).holds({"v": 1}, None)
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder, compare
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.view import PartitionView, row_is_live
from cqlcdc.storage.where import analyse_where, references_duration
from cqlcdc.types import InValuesType, ListType, MapType, SetType, TupleType, UserType
from cqlcdc.types.base import CqlType
from cqlcdc.types.values import UdtValue

ConditionKind = Literal["exists", "not_exists", "columns", "none"]
_ORDERED = ("<", "<=", ">", ">=")


@dataclass(frozen=True, slots=True)
class ConditionCheck:
    """One ``IF`` term, its value bound: ``column [element] op value``.

    ``element`` is a map key or list index (``m[k]``), ``field`` a UDT field (``u.f``);
    ``value`` is the bound value (a tuple of values for IN; None for null); ``ctype`` is
    the type the compared value has (for ordering).
    """

    column: str
    operator: str
    value: Any
    ctype: CqlType | None = None
    element: Any = None
    has_element: bool = False
    field: str | None = None

    def holds(self, values: dict[str, Any] | None, schema: TableSchema | None) -> bool:
        """Whether the check holds for a row's live values (None: no row)."""
        current = None if values is None else values.get(self.column)
        if self.has_element:
            current = _element(current, self.element)
        elif self.field is not None:
            current = current.get(self.field) if isinstance(current, UdtValue) else None
        op = self.operator
        if op == "=":
            return bool(current == self.value)
        if op == "!=":
            return bool(current != self.value)
        if op == "IN":
            return any(current == v for v in self.value)
        if op == "NOT IN":  # null is a value like any other here (test_lwt.py)
            return all(current != v for v in self.value)
        if current is None:
            return False
        if op == "CONTAINS":
            elements = current.values() if isinstance(current, Mapping) else current
            return any(e == self.value for e in elements)
        if op == "CONTAINS KEY":
            return self.value in current
        assert self.ctype is not None
        a, b = self.ctype.sort_key(current), self.ctype.sort_key(self.value)
        return compare(a, op, b)


@dataclass(frozen=True, slots=True)
class StatementCondition:
    """What one statement of a write needs checked, against one row of its partition.

    ``ck`` is the clustering row the statement names (None: only static columns are
    written and checked); ``kind`` "none" marks a batch statement without a condition (it
    still gets its row in the result set).
    """

    kind: ConditionKind
    ck: ClusteringKey | None
    checks: tuple[ConditionCheck, ...] = ()
    static_only: bool = False


@dataclass(frozen=True, slots=True)
class Conditional:
    """The conditions of a conditional write (one statement, or a batch on one partition),
    and the columns its result rows carry after ``[applied]``."""

    statements: tuple[StatementCondition, ...]
    result_columns: tuple[str, ...]


def is_conditional(stmt: ast.Insert | ast.Update | ast.Delete) -> bool:
    if isinstance(stmt, ast.Insert):
        return stmt.if_not_exists
    return stmt.if_exists or bool(stmt.conditions)


def result_columns(
    schema: TableSchema,
    statements: Sequence[ast.Insert | ast.Update | ast.Delete],
    batch: bool = False,
) -> tuple[str, ...]:
    """The columns after ``[applied]`` (``build_cas_result_set_metadata``): every column
    for IF EXISTS / IF NOT EXISTS, else those the conditions name, in select-star order;
    a batch's rows carry the primary key columns too (``batch_statement``'s), so each row
    tells which row it is about."""
    wanted: set[str] = {c.name for c in schema.primary_key} if batch else set()
    for stmt in statements:
        if isinstance(stmt, ast.Insert) or stmt.if_exists:
            if is_conditional(stmt):
                wanted.update(c.name for c in schema.columns)
        else:
            wanted.update(c.column for c in stmt.conditions)
    return tuple(c.name for c in schema.select_star_columns if c.name in wanted)


def check_conditional(
    schema: TableSchema, stmt: ast.Insert | ast.Update | ast.Delete, in_batch: bool = False
) -> None:
    """ScyllaDB's checks of a conditional statement that need no bound values
    (``prepare_conditions``, ``modification_statement::validate``).

    Raises:
        InvalidRequest: ScyllaDB's message.
    """
    if any(c.type.is_counter for c in schema.columns):
        raise InvalidRequest("Conditional updates are not supported on counter tables")
    if stmt.using.timestamp is not None:
        raise InvalidRequest("Cannot provide custom timestamp for conditional updates")
    if isinstance(stmt, ast.Insert):
        return
    for cond in stmt.conditions:
        col = schema.column(cond.column)
        if col is None:
            raise InvalidRequest(f"Unknown identifier {cond.column}")
        if col.is_key:
            raise InvalidRequest(f"PRIMARY KEY column '{cond.column}' cannot have IF conditions")


def build_condition(
    schema: TableSchema,
    stmt: ast.Insert | ast.Update | ast.Delete,
    ctx: WriteContext,
    ck_of_insert: ClusteringKey | None = None,
) -> StatementCondition:
    """The bound conditions of one statement (``kind`` "none" for an unconditional one).

    Args:
        schema: the table.
        stmt: the statement (validated by ``check_conditional`` and the mutation builder).
        ctx: the write's context (bound values, clock).
        ck_of_insert: an INSERT's clustering key (None: it writes only static columns).

    Raises:
        InvalidRequest: IN on a key, a DELETE not naming its row, a bad condition value.
    """
    if isinstance(stmt, ast.Insert):
        kind: ConditionKind = "not_exists" if stmt.if_not_exists else "none"
        static_only = ck_of_insert is None and bool(schema.clustering_key)
        return StatementCondition(kind, ck_of_insert, (), static_only)
    verb = "updates" if isinstance(stmt, ast.Update) else "deletions"
    res = analyse_where(schema, stmt.where, ctx)
    conditional = is_conditional(stmt)
    if conditional and res.partition_keys is not None and len(res.partition_keys) > 1:
        raise InvalidRequest(f"IN on the partition key is not supported with conditional {verb}")
    n_ck = len(schema.clustering_key)
    if conditional and (
        res.partition_keys == [] or (res.ck_restricted_columns and not res.ck_prefixes)
    ):  # c = 2 AND c = 3: no row for the condition to read (ScyllaDB refuses it too)
        raise InvalidRequest(
            f"The WHERE clause of a conditional {verb[:-1]} selects no row: its restrictions "
            "on a key column contradict each other"
        )
    if conditional and res.full_clustering_keys and len(res.ck_prefixes) > 1:
        raise InvalidRequest(
            f"IN on the clustering key columns is not supported with conditional {verb}"
        )
    condition_columns = [schema.column(c.column) for c in stmt.conditions]
    regular_conditions = any(c is not None and c.kind != "static" for c in condition_columns)
    full_row = res.full_clustering_keys and res.ck_restricted_columns == n_ck
    if isinstance(stmt, ast.Delete) and conditional and not full_row:
        targets = [schema.column(t.column) for t in stmt.targets]
        deletes_regular = not stmt.targets or any(c is None or c.kind != "static" for c in targets)
        if deletes_regular:
            raise InvalidRequest(
                "DELETE statements must restrict all PRIMARY KEY columns with equality "
                "relations in order to delete non static columns"
            )
        if regular_conditions:
            raise InvalidRequest(
                "DELETE statements must restrict all PRIMARY KEY columns with equality "
                "relations in order to use IF condition on non static columns"
            )
    ck = res.ck_prefixes[0] if full_row and res.ck_prefixes else None
    if not n_ck:
        ck = ()
    if stmt.if_exists:
        kind = "exists"
    elif stmt.conditions:
        kind = "columns"
    else:
        kind = "none"
    checks = tuple(
        _check(schema, col, cond, ctx)
        for col, cond in zip(condition_columns, stmt.conditions, strict=True)
        if col is not None
    )
    static_only = bool(schema.clustering_key) and (
        ck is None or (kind == "columns" and not regular_conditions)
    )
    return StatementCondition(kind, ck, checks, static_only)


def _check(
    schema: TableSchema, col: Column, cond: ast.Condition, ctx: WriteContext
) -> ConditionCheck:
    ctype: CqlType = col.type.frozen()
    element: Any = None
    has_element = False
    if cond.key is not None:
        if isinstance(col.type, MapType):
            element = _bound(col.type.key.frozen(), cond.key, f"key({col.name})", ctx)
            ctype = col.type.value.frozen()
        elif isinstance(col.type, ListType):
            element = _bound(_INT, cond.key, f"idx({col.name})", ctx)
            ctype = col.type.elem.frozen()
        else:
            raise InvalidRequest(
                f"Invalid element access syntax for non-collection column {col.name}"
            )
        if element is None:
            raise InvalidRequest(f"Invalid null value for {col.name} element access")
        has_element = True
    elif cond.field is not None:
        if not isinstance(col.type, UserType):
            raise InvalidRequest(
                f"Invalid field selection: {col.name} of type {col.type.cql_name} is not a "
                "user type"
            )
        if cond.field not in col.type.field_names:
            raise InvalidRequest(f"{col.type.name} has no field {cond.field}")
        ctype = col.type.field_types[col.type.field_names.index(cond.field)].frozen()
    op = cond.operator
    name = col.name
    if op in _ORDERED:
        check_no_duration_slice(col.type)
    if op in ("IN", "NOT IN"):
        if isinstance(cond.value, ast.BindMarker):
            bound = InValuesType(ctype).parse_literal(cond.value, name, ctx)
            values: tuple[Any, ...] = () if bound is None else tuple(bound)
        elif isinstance(cond.value, ast.TupleLiteral):
            values = tuple(_bound(ctype, t, name, ctx) for t in cond.value.items)
        else:
            raise InvalidRequest(f"Invalid {op} condition on {name}")
        return ConditionCheck(name, op, values, ctype, element, has_element, cond.field)
    if op in ("CONTAINS", "CONTAINS KEY"):
        if not isinstance(ctype, SetType | ListType | MapType):
            raise InvalidRequest(f"Cannot use {op} on non-collection column {name}")
        if op == "CONTAINS KEY" and not isinstance(ctype, MapType):
            raise InvalidRequest(f"Cannot use CONTAINS KEY on non-map column {name}")
        inner = ctype.key if op == "CONTAINS KEY" and isinstance(ctype, MapType) else None
        if inner is None:
            inner = ctype.value if isinstance(ctype, MapType) else ctype.elem
        value = _bound(inner.frozen(), cond.value, name, ctx)
        if value is None:
            raise InvalidRequest(f'Invalid comparison with null for operator "{op}"')
        return ConditionCheck(name, op, value, inner.frozen(), element, has_element, cond.field)
    value = _bound(ctype, cond.value, name, ctx)
    if value is None and op in _ORDERED:
        raise InvalidRequest(f'Invalid comparison with null for operator "{op}"')
    return ConditionCheck(name, op, value, ctype, element, has_element, cond.field)


def check_no_duration_slice(ctype: CqlType) -> None:
    """Durations have no order: ScyllaDB refuses a slice condition on a column whose type
    holds one (column_condition.cc ``validate_operation_on_durations``, on the column's
    whole type even with an element access)."""
    if not references_duration(ctype):
        return
    if isinstance(ctype, ListType | SetType | MapType):
        raise InvalidRequest(
            "Slice conditions are not supported on collections containing durations"
        )
    # its UDT check is never reached: a user type is a tuple type there (is_tuple() is true)
    if isinstance(ctype, TupleType | UserType):
        raise InvalidRequest("Slice conditions are not supported on tuples containing durations")
    raise InvalidRequest("Slice conditions are not supported on durations")


def _bound(ctype: CqlType, term: ast.Term, name: str, ctx: WriteContext) -> Any:
    return ctype.frozen().parse_literal(term, name, ctx)


def _element(current: Any, key: Any) -> Any:
    if current is None:
        return None
    if isinstance(current, tuple):  # a list, by index
        return current[key] if isinstance(key, int) and 0 <= key < len(current) else None
    try:
        return current.get(key)
    except (AttributeError, TypeError):
        return None


def _int_type() -> CqlType:
    from cqlcdc.types import native_type

    return native_type("int")


_INT = _int_type()


# -- deciding, where the writes are applied ----------------------------------------------------


def old_row(
    schema: TableSchema, cond: StatementCondition, part: Partition | None, now_s: int
) -> dict[str, Any] | None:
    """The row a statement's result shows, as ScyllaDB finds it (``cas_request::find_old_row``):
    the named clustering row with the partition's static values; else, unless the statement
    checks existence, the partition's static row, which ScyllaDB's read holds whenever the
    partition has live content and the table has static columns; None when there is none."""
    if part is None:
        return None
    view = PartitionView(schema, ClusteringOrder(schema))
    static = view.static_row(part, now_s)
    static_values = dict(static.values) if static is not None else {}
    keys = {c.name: v for c, v in zip(schema.partition_key, part.pk, strict=True)}
    if cond.ck is not None and (cond.ck or not schema.clustering_key):
        live = view.clustering_row(part, cond.ck, now_s)
        if live is not None:
            ck_values = dict(zip((c.name for c in schema.clustering_key), cond.ck, strict=True))
            return {**keys, **ck_values, **static_values, **live.values}
        if cond.kind in ("exists", "not_exists") or not cond.ck:
            return None
    if not any(c.kind == "static" for c in schema.columns):
        return None
    if static is not None or (cond.ck is None and _any_live_row(schema, part, now_s)):
        return {**keys, **static_values}
    return None


def _decisive_row(
    schema: TableSchema, cond: StatementCondition, part: Partition | None, now_s: int
) -> dict[str, Any] | None:
    """The row a statement's condition is decided on (``modification_statement::applies_to``):
    its ``old_row``, except that a statement that checks only static columns sees no row
    when the partition has no live static content, so a static-only ``INSERT ... IF NOT
    EXISTS`` applies beside existing clustering rows."""
    row = old_row(schema, cond, part, now_s)
    if row is None or not cond.static_only or part is None:
        return row
    static = PartitionView(schema, ClusteringOrder(schema)).static_row(part, now_s)
    return row if static is not None else None


def _any_live_row(schema: TableSchema, part: Partition, now_s: int) -> bool:
    order = ClusteringOrder(schema)
    return any(row_is_live(row, part.row_shadow(ck, order), now_s) for ck, row in part.rows.items())


def evaluate(
    schema: TableSchema, conditional: Conditional, part: Partition | None, now_s: int
) -> tuple[bool, list[tuple[Any, ...]]]:
    """Whether a conditional write applies to ``part`` (the partition as the earlier writes
    left it), and its result rows: the old row's ``result_columns`` per statement."""
    applies = True
    rows: list[tuple[Any, ...]] = []
    for cond in conditional.statements:
        row = old_row(schema, cond, part, now_s)
        decisive = _decisive_row(schema, cond, part, now_s)
        if cond.kind == "exists":
            applies = applies and decisive is not None
        elif cond.kind == "not_exists":
            applies = applies and decisive is None
        elif cond.kind == "columns":
            applies = applies and all(check.holds(decisive, schema) for check in cond.checks)
        rows.append(tuple(None if row is None else row.get(c) for c in conditional.result_columns))
    return applies, rows


__all__ = [
    "ConditionCheck",
    "Conditional",
    "StatementCondition",
    "build_condition",
    "check_conditional",
    "evaluate",
    "is_conditional",
    "old_row",
    "result_columns",
]
