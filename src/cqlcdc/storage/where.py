"""WHERE clauses: which partitions, which clustering rows or ranges, which filters.

Shared by DML (which rows a write touches) and SELECT (which rows a read returns).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.aggregates import AGGREGATES
from cqlcdc.storage.keys import Bound, ClusteringKey, compare
from cqlcdc.storage.subscripts import subscript_types
from cqlcdc.storage.token import (
    MAX_KEY_BYTES,
    check_key_length,
    murmur3_token,
    serialize_partition_key,
)
from cqlcdc.storage.tuple_slices import tuple_slice_ranges
from cqlcdc.types import ListType, MapType, SetType, TupleType, UserType, native_type
from cqlcdc.types.base import CqlType, TermContext

ClusteringRange = tuple[Bound, Bound]


@dataclass(slots=True)
class KeyRestrictions:
    """The key part of a WHERE clause, resolved to values.

    ``partition_keys`` lists full partition keys (None: not restricted). ``ck_prefixes`` are
    the full or partial clustering prefixes fixed by ``=``/``IN``; ``ck_ranges`` (when a slice
    follows the prefix) replace them with ranges in clustering order. ``filters`` are the
    remaining relations (regular/static columns, or key columns used out of order).
    """

    partition_keys: list[tuple[Any, ...]] | None = None
    token_lower: tuple[int, bool] | None = None
    token_upper: tuple[int, bool] | None = None
    ck_prefixes: list[ClusteringKey] = field(default_factory=lambda: [()])
    ck_ranges: list[ClusteringRange] | None = None
    filters: list[tuple[Column, str, Any]] = field(default_factory=list)
    ck_restricted_columns: int = 0

    @property
    def full_clustering_keys(self) -> bool:
        return self.ck_ranges is None

    def clustering_ranges(self) -> list[ClusteringRange]:
        """The rows selected, as ranges in clustering order (a prefix is a closed range)."""
        if self.ck_ranges is not None:
            return self.ck_ranges
        return [(Bound(p, True), Bound(p, True)) for p in self.ck_prefixes]


def _term_values(
    col: Column, rel: ast.Relation, ctx: TermContext | None, reading: bool = False
) -> list[Any]:
    if rel.operator == "NOT IN":  # a filter: a null among the values makes it match nothing
        if isinstance(rel.value, ast.BindMarker):
            found = ListType(col.type.frozen(), frozen=True).parse_literal(rel.value, col.name, ctx)
            return [] if found is None else list(found)
        if not isinstance(rel.value, ast.TupleLiteral):
            raise InvalidRequest(f"Invalid NOT IN relation on {col.name}")
        return [_value(col.type, col.name, t, ctx, nullable=True) for t in rel.value.items]
    if rel.operator == "IN":
        if isinstance(rel.value, ast.BindMarker):  # IN ?: one bound list of values
            values = ListType(col.type.frozen(), frozen=True).parse_literal(
                rel.value, col.name, ctx
            )
            if values is None and reading:
                return []  # a read of IN null: nothing (ScyllaDB #8265)
            if values is None:
                raise InvalidRequest(f"Invalid null value for IN restriction on {col.name}")
            if any(v is None for v in values):
                raise InvalidRequest(f"Invalid null value in condition for column {col.name}")
            return list(values)
        if not isinstance(rel.value, ast.TupleLiteral):
            raise InvalidRequest(f"Invalid IN relation on {col.name}")
        return [_value(col.type, col.name, t, ctx) for t in rel.value.items]
    value = _value(col.type, col.name, rel.value, ctx, nullable=reading)
    return [] if value is None else [value]  # a read of key = null: nothing


def _value(
    ctype: CqlType, name: str, term: ast.Term, ctx: TermContext | None, nullable: bool = False
) -> Any:
    v = ctype.frozen().parse_literal(term, name, ctx)
    if v is None and not nullable:
        raise InvalidRequest(f"Invalid null value in condition for column {name}")
    return v


# a filter on one element of a map or list (``m[k] op v``): ELEMENT + op, (key, value)
ELEMENT = "[] "
_ELEMENT_OPERATORS = ("=", "!=", "<", "<=", ">", ">=")


def _element(col: Column, rel: ast.Relation, ctx: TermContext | None) -> tuple[Any, Any]:
    """The key and the value of ``m[k] op v`` (ALLOW FILTERING, as ScyllaDB filters on a
    map entry or a list element); a null key matches nothing.

    Raises:
        InvalidRequest: not a map or a list, a key or value of the wrong type, an operator
            other than a comparison (ScyllaDB's ``Column s is not a map/set/list, cannot be
            subscripted`` for the first).
    """
    assert rel.key is not None
    if isinstance(col.type, SetType):  # ScyllaDB filters on maps and lists only
        raise InvalidRequest(f"Column {col.name} is not a map/set/list, cannot be subscripted")
    key_type, elem_type = subscript_types(col.type, col.name)
    if rel.operator not in _ELEMENT_OPERATORS:
        raise InvalidRequest(f'Unsupported "{rel.operator}" relation on {col.name}[...]')
    key = key_type.frozen().parse_literal(rel.key, f"key({col.name})", ctx)
    return key, _value(elem_type, f"value({col.name})", rel.value, ctx)


def analyse_where(
    schema: TableSchema,
    where: tuple[ast.Relation, ...],
    ctx: TermContext | None = None,
    filtering: bool = False,
    reading: bool = False,
) -> KeyRestrictions:
    """Resolve WHERE relations against the table's keys. With ``filtering`` (a SELECT with
    ALLOW FILTERING) a clustering restriction that does not extend the restricted prefix
    becomes a filter, as ScyllaDB filters it, instead of an error. A read (``reading``)
    compares with null as SQL does, matching nothing: ``v = NULL``, ``i > NULL``,
    ``s CONTAINS NULL``, ``p IN ?`` bound to null (ScyllaDB's test_null.py); a write refuses
    a null key."""
    res = KeyRestrictions()
    pk_cols = schema.partition_key
    ck_cols = schema.clustering_key
    pk_values: dict[str, list[Any]] = {}
    ck_eq: dict[int, list[Any]] = {}
    ck_slices: dict[int, list[tuple[str, Any]]] = {}
    multi: list[ast.Relation] = []

    for rel in where:
        check_relation_operator(rel)
        if _aggregates(rel.value):
            raise InvalidRequest("Aggregation functions are not supported in the WHERE clause")
        if rel.token:
            _token_restriction(schema, rel, res, ctx)
            continue
        if rel.multi:
            _check_multi(schema, rel, multi)
            multi.append(rel)
            continue
        name = rel.columns[0]
        col = schema.column(name)
        if col is None:
            raise InvalidRequest(f"Undefined name {name} in where clause ('{_show(rel)}')")
        if rel.key is not None:
            res.filters.append((col, ELEMENT + rel.operator, _element(col, rel, ctx)))
            continue
        if (
            isinstance(col.type, ListType | SetType | MapType)
            and col.type.multicell
            and rel.operator not in ("CONTAINS", "CONTAINS KEY")
        ):
            raise InvalidRequest(
                f"Collection column '{name}' ({col.type.cql_name}) cannot be restricted by a "
                f"'{rel.operator}' relation"
            )
        if col.kind == "partition_key" and rel.operator in _SLICES and not filtering:
            raise InvalidRequest(
                "Only EQ and IN relation are supported on the partition key (unless you use the "
                "token() function or ALLOW FILTERING)"
            )
        if col.kind == "partition_key" and rel.operator in ("=", "IN"):
            if name in pk_values:
                raise InvalidRequest(
                    f"{name} cannot be restricted by more than one relation if it includes an Equal"
                )
            pk_values[name] = _term_values(col, rel, ctx, reading)
        elif col.kind == "clustering" and rel.operator in ("=", "IN"):
            values = _term_values(col, rel, ctx, reading)
            if col.position in ck_eq:  # c = 1 AND c IN (1, 2): what both allow (ScyllaDB)
                keys = {col.type.sort_key(v) for v in values}
                values = [v for v in ck_eq[col.position] if col.type.sort_key(v) in keys]
            ck_eq[col.position] = values
        elif rel.operator in _SLICES and references_duration(col.type):
            raise InvalidRequest(f"Duration type is unordered for {name}")
        elif col.kind == "clustering" and rel.operator in _SLICES:
            ck_slices.setdefault(col.position, []).append(
                (rel.operator, _value(col.type, name, rel.value, ctx))
            )
        else:
            nullable = reading and not col.is_key  # a filter on null matches nothing
            if rel.operator == "LIKE":
                if col.type.cql_name not in ("text", "ascii"):
                    raise InvalidRequest(
                        f"LIKE is allowed only on string types, which {name} is not"
                    )
                vals: Any = _value(col.type, name, rel.value, ctx, nullable)
            elif rel.operator in ("IN", "NOT IN"):
                vals = _term_values(col, rel, ctx, reading)
            elif rel.operator in ("CONTAINS", "CONTAINS KEY"):
                vals = _contains_value(col, rel, ctx, nullable)
            else:
                vals = _value(col.type, name, rel.value, ctx, nullable)
            res.filters.append((col, rel.operator, vals))

    if pk_values:
        missing = [c.name for c in pk_cols if c.name not in pk_values]
        if missing:
            res.filters.extend((c, "IN", pk_values[c.name]) for c in pk_cols if c.name in pk_values)
        else:
            res.partition_keys = [
                tuple(combo) for combo in itertools.product(*(pk_values[c.name] for c in pk_cols))
            ]
            if any(  # a key no write could store (over 64 KiB) is refused, as writes refuse it
                isinstance(v, str | bytes) and len(v) > MAX_KEY_BYTES // 4
                for values in pk_values.values()
                for v in values
            ):
                for key in res.partition_keys:
                    check_key_length(
                        [len(c.type.serialize(v)) for c, v in zip(pk_cols, key, strict=True)]
                    )

    for pos in [p for p in ck_slices if p in ck_eq]:  # c = 1 AND c > 0: the values in the slice
        ctype = ck_cols[pos].type
        ck_eq[pos] = [
            v
            for v in ck_eq[pos]
            if all(compare(ctype.sort_key(v), op, ctype.sort_key(b)) for op, b in ck_slices[pos])
        ]
        del ck_slices[pos]
    if multi and (ck_eq or ck_slices):
        raise InvalidRequest(
            "Mixing single column relations and multi column relations on clustering columns "
            "is not allowed"
        )
    _clustering(schema, ck_cols, ck_eq, ck_slices, multi, res, ctx, filtering)
    return res


_SLICES = ("<", "<=", ">", ">=")


def references_duration(ctype: CqlType) -> bool:
    """Whether a duration is in the type (durations have no order: no slice compares one)."""
    if ctype.cql_name == "duration":
        return True
    if isinstance(ctype, ListType | SetType):
        return references_duration(ctype.element)
    if isinstance(ctype, MapType):
        return references_duration(ctype.key) or references_duration(ctype.value)
    if isinstance(ctype, TupleType):
        return any(references_duration(t) for t in ctype.types)
    if isinstance(ctype, UserType):
        return any(references_duration(t) for t in ctype.field_types)
    return False


def _aggregates(term: ast.Term) -> bool:
    """Whether an aggregate function is called in the term."""
    if isinstance(term, ast.FunctionCall):
        return term.name.lower() in AGGREGATES or any(
            _aggregates(a) for a in term.args if not isinstance(a, ast.ColumnArg)
        )
    if isinstance(term, ast.TupleLiteral | ast.ListLiteral | ast.SetLiteral):
        return any(_aggregates(t) for t in term.items)
    return False


def _check_multi(schema: TableSchema, rel: ast.Relation, earlier: list[ast.Relation]) -> None:
    """ScyllaDB's checks of ``(c1, c2) op ...`` (``validate_multi_column_relation`` and the
    restrictions' merge): clustering columns, in key order from the first, one equality or
    one bound of each side."""
    previous = -1
    for name in rel.columns:
        col = schema.column(name)
        if col is None:
            raise InvalidRequest(f"Undefined name {name} in where clause ('{_show(rel)}')")
        if col.kind != "clustering":
            raise InvalidRequest(
                "Multi-column relations can only be applied to clustering columns but was "
                f"applied to: {name}"
            )
        if col.position != previous + 1:
            if previous == -1:
                raise InvalidRequest(
                    "Clustering columns may not be skipped in multi-column relations. They "
                    "should appear in the PRIMARY KEY order"
                )
            raise InvalidRequest(
                "Clustering columns must appear in the PRIMARY KEY order in multi-column relations"
            )
        previous = col.position
    for other in earlier:
        common = [c for c in rel.columns if c in other.columns]
        if not common:
            continue
        shown = ", ".join(common)
        if rel.operator == "=" or other.operator == "=":
            raise InvalidRequest(
                f"{shown} cannot be restricted by more than one relation if it includes an Equal"
            )
        if rel.operator == "IN" or other.operator == "IN":
            raise InvalidRequest(
                f"{shown} cannot be restricted by more than one relation if it includes a IN"
            )
        if rel.operator[0] == other.operator[0]:
            side = "start" if rel.operator[0] == ">" else "end"
            raise InvalidRequest(
                f"More than one restriction was found for the {side} bound on {shown}"
            )


def _contains_value(
    col: Column, rel: ast.Relation, ctx: TermContext | None, nullable: bool = False
) -> Any:
    from cqlcdc.types import ListType, SetType

    t = col.type
    if rel.operator == "CONTAINS KEY" and isinstance(t, MapType):
        return _value(t.key, col.name, rel.value, ctx, nullable)
    if isinstance(t, ListType | SetType):
        return _value(t.element, col.name, rel.value, ctx, nullable)
    if isinstance(t, MapType):
        return _value(t.value, col.name, rel.value, ctx, nullable)
    raise InvalidRequest(f"Cannot use {rel.operator} on non-collection column {col.name}")


def _token_restriction(
    schema: TableSchema, rel: ast.Relation, res: KeyRestrictions, ctx: TermContext | None
) -> None:

    expected = tuple(c.name for c in schema.partition_key)
    if rel.columns != expected:  # validate_token_relation's three messages
        unique = set(rel.columns)
        if len(unique) < len(rel.columns):
            raise InvalidRequest("The token() function contains duplicate partition key components")
        if len(unique) < len(expected):
            raise InvalidRequest(
                "The token() function must be applied to all partition key components or none "
                "of them"
            )
        raise InvalidRequest(
            "The token function arguments must be in the partition key order: "
            + ", ".join(expected)
        )
    value = _token_value(schema, rel.value, ctx)
    if rel.operator in (">", ">="):
        res.token_lower = (value, rel.operator == ">=")
    elif rel.operator in ("<", "<="):
        res.token_upper = (value, rel.operator == "<=")
    elif rel.operator == "=":
        res.token_lower = res.token_upper = (value, True)
    else:
        raise InvalidRequest(f"Unsupported operator {rel.operator} on token")


def _token_value(schema: TableSchema, term: ast.Term, ctx: TermContext | None) -> Any:
    """A token bound: a bigint, or ``token(...)`` of partition key values (their token)."""

    if isinstance(term, ast.FunctionCall) and term.name == "token":
        pk = schema.partition_key
        if len(term.args) != len(pk):
            raise InvalidRequest(
                f"Invalid number of arguments in call to function token: {len(pk)} required "
                f"but {len(term.args)} provided"
            )
        values = []
        for column, arg in zip(pk, term.args, strict=True):
            if isinstance(arg, ast.ColumnArg):
                raise InvalidRequest(
                    "The token function cannot be used in WHERE clauses for a column"
                )
            values.append(_value(column.type, column.name, arg, ctx))
        return murmur3_token(serialize_partition_key(schema, values))
    return native_type("bigint").parse_literal(term, "partition key token", ctx)


def _gap(
    ck_cols: tuple[Column, ...],
    ck_slices: dict[int, list[tuple[str, Any]]],
    prefix_len: int,
    col: Column,
) -> InvalidRequest:
    """The error for a clustering column restricted after one that is not restricted by an
    equality (ScyllaDB's two messages: after a slice, or after nothing)."""
    if prefix_len in ck_slices and col.position > prefix_len:
        return InvalidRequest(
            f'Clustering column "{col.name}" cannot be restricted (preceding column '
            f'"{ck_cols[prefix_len].name}" is restricted by a non-EQ relation)'
        )
    prev = ck_cols[prefix_len].name if prefix_len < len(ck_cols) else col.name
    return InvalidRequest(
        f'PRIMARY KEY column "{col.name}" cannot be restricted as preceding column '
        f'"{prev}" is not restricted'
    )


def _clustering(
    schema: TableSchema,
    ck_cols: tuple[Column, ...],
    ck_eq: dict[int, list[Any]],
    ck_slices: dict[int, list[tuple[str, Any]]],
    multi: list[ast.Relation],
    res: KeyRestrictions,
    ctx: TermContext | None,
    filtering: bool,
) -> None:
    prefix_len = 0
    while prefix_len in ck_eq:
        prefix_len += 1
    for pos in sorted(ck_eq):
        if pos >= prefix_len:
            col = ck_cols[pos]
            if filtering:
                values = ck_eq.pop(pos)
                res.filters.append(
                    (col, "=", values[0]) if len(values) == 1 else (col, "IN", values)
                )
                continue
            raise _gap(ck_cols, ck_slices, prefix_len, col)
    res.ck_prefixes = [tuple(c) for c in itertools.product(*(ck_eq[i] for i in range(prefix_len)))]
    res.ck_restricted_columns = prefix_len

    slices: list[tuple[Bound | None, Bound | None]] | None = None
    if multi:
        slices = _multi_column_slice(ck_cols, prefix_len, multi, res, ctx)
    for pos, ops in ck_slices.items():
        if pos != prefix_len or slices is not None:
            col = ck_cols[pos]
            if filtering:
                res.filters.extend((col, op, v) for op, v in ops)
                continue
            raise _gap(ck_cols, ck_slices, prefix_len, col)
        col = ck_cols[pos]
        lo: tuple[Any, bool] | None = None
        hi: tuple[Any, bool] | None = None
        key = col.type.sort_key
        for op, v in ops:  # several bounds on a side: the tightest (ScyllaDB intersects them)
            if op in (">", ">="):
                if lo is None or key(v) > key(lo[0]) or (key(v) == key(lo[0]) and op == ">"):
                    lo = (v, op == ">=")
            elif hi is None or key(v) < key(hi[0]) or (key(v) == key(hi[0]) and op == "<"):
                hi = (v, op == "<=")
        if col.descending:  # in clustering order a DESC column's upper value comes first
            lo, hi = hi, lo
        slices = [
            (
                None if lo is None else Bound((lo[0],), lo[1]),
                None if hi is None else Bound((hi[0],), hi[1]),
            )
        ]
        res.ck_restricted_columns = prefix_len + 1
    if slices is None:
        return
    ranges: list[ClusteringRange] = []
    for p in res.ck_prefixes:
        for start, end in slices:
            s = Bound(p + start.prefix, start.inclusive) if start else Bound(p, True)
            e = Bound(p + end.prefix, end.inclusive) if end else Bound(p, True)
            ranges.append((s, e))
    res.ck_ranges = ranges


def _multi_in_values(
    rel: ast.Relation, cols: list[Column], ctx: TermContext | None
) -> list[tuple[Any, ...]]:
    """The tuples of a multi-column IN, deduplicated (ScyllaDB sorts and dedups IN values;
    the rows come in clustering order either way)."""
    if isinstance(rel.value, ast.BindMarker):
        bound = ListType(TupleType(tuple(c.type.frozen() for c in cols)), frozen=True)
        found = bound.parse_literal(rel.value, "(" + ",".join(c.name for c in cols) + ")", ctx)
        tuples = [] if found is None else list(found)
    elif isinstance(rel.value, ast.TupleLiteral):
        tuples = []
        for item in rel.value.items:
            if isinstance(item, ast.BindMarker):  # IN (?, ?): each bound to a whole tuple
                name = "(" + ",".join(c.name for c in cols) + ")"
                one = TupleType(tuple(c.type.frozen() for c in cols))
                found = one.parse_literal(item, name, ctx)
                tuples.append(None if found is None else tuple(found))
                continue
            if not isinstance(item, ast.TupleLiteral) or len(item.items) != len(cols):
                from cqlcdc.cql import render_term

                got = len(item.items) if isinstance(item, ast.TupleLiteral) else 1
                raise InvalidRequest(
                    f"Expected {len(cols)} elements in value tuple, but got {got}: "
                    f"{render_term(item)}"
                )
            tuples.append(
                tuple(_value(c.type, c.name, t, ctx) for c, t in zip(cols, item.items, strict=True))
            )
    else:
        raise InvalidRequest("Invalid IN relation on multiple columns")
    for t in tuples:
        if t is None or any(v is None for v in t):
            raise InvalidRequest("Invalid null value in condition for a multi-column IN")
    return list(dict.fromkeys(tuples))


def _multi_values(
    rel: ast.Relation, cols: list[Column], ctx: TermContext | None
) -> tuple[Any, ...]:
    """The tuple of ``(c1, c2) op (v1, v2)`` or ``op ?`` (bound as a tuple of the columns'
    types)."""
    if isinstance(rel.value, ast.BindMarker):
        name = "(" + ",".join(c.name for c in cols) + ")"
        found = TupleType(tuple(c.type.frozen() for c in cols)).parse_literal(rel.value, name, ctx)
        if found is None:
            raise InvalidRequest(f"Invalid null value in condition for column {name}")
        for col, v in zip(cols, found, strict=True):
            if v is None:
                raise InvalidRequest(f"Invalid null value in condition for column {col.name}")
        return tuple(found)
    if isinstance(rel.value, ast.TupleLiteral) and len(rel.value.items) == len(cols):
        return tuple(
            _value(c.type, c.name, t, ctx) for c, t in zip(cols, rel.value.items, strict=True)
        )
    from cqlcdc.cql import render_term

    got = len(rel.value.items) if isinstance(rel.value, ast.TupleLiteral) else 1
    raise InvalidRequest(
        f"Expected {len(cols)} elements in value tuple, but got {got}: {render_term(rel.value)}"
    )


def _multi_column_slice(
    ck_cols: tuple[Column, ...],
    prefix_len: int,
    multi: list[ast.Relation],
    res: KeyRestrictions,
    ctx: TermContext | None,
) -> list[tuple[Bound | None, Bound | None]] | None:
    lo: tuple[tuple[Any, ...], bool] | None = None
    hi: tuple[tuple[Any, ...], bool] | None = None
    for rel in multi:
        rel_cols = [c for c in ck_cols if c.name in rel.columns]
        names = tuple(c.name for c in ck_cols[prefix_len : prefix_len + len(rel.columns)])
        if names != rel.columns or len(rel_cols) != len(rel.columns):
            raise InvalidRequest(
                "Clustering columns must appear in the PRIMARY KEY order in multi-column relations"
            )
        if rel.operator == "IN":  # (c1, c2) IN ((0, 1), (1, 0)) or IN ?: a prefix each
            tuples = _multi_in_values(rel, rel_cols, ctx)
            res.ck_prefixes = [p + t for p in res.ck_prefixes for t in tuples]
            res.ck_restricted_columns = prefix_len + len(rel_cols)
            continue
        values = _multi_values(rel, rel_cols, ctx)
        if rel.operator == "=":
            res.ck_prefixes = [p + values for p in res.ck_prefixes]
            res.ck_restricted_columns = prefix_len + len(values)
            continue
        if rel.operator in (">", ">="):
            lo = (values, rel.operator == ">=")
        elif rel.operator in ("<", "<="):
            hi = (values, rel.operator == "<=")
        else:
            raise InvalidRequest(f"Unsupported multi-column operator {rel.operator}")
    if lo is None and hi is None:
        return None
    width = max(len(x[0]) for x in (lo, hi) if x is not None)
    cols = ck_cols[res.ck_restricted_columns : res.ck_restricted_columns + width]
    res.ck_restricted_columns += width
    return tuple_slice_ranges([c.type for c in cols], [c.descending for c in cols], lo, hi)


def check_relation_operator(rel: ast.Relation) -> None:
    """The operators no WHERE clause takes, refused before anything else is looked at
    (ScyllaDB's ``preliminary_binop_vaidation_checks``, which PREPARE runs too).

    Raises:
        InvalidRequest: ``!=``, or ``IS NOT`` (a materialized view's filter; no views here).
    """
    if rel.operator == "!=":
        raise InvalidRequest(f'Unsupported "!=" relation: {_show(rel)}')
    if rel.operator == "IS NOT":
        if not (isinstance(rel.value, ast.Constant) and rel.value.kind == "null"):
            raise InvalidRequest(f'Unsupported "IS NOT" relation: {_show(rel)}')
        raise InvalidRequest(
            f"restriction '{_show(rel)}' is only supported in materialized view creation"
        )


def _show(rel: ast.Relation) -> str:
    from cqlcdc.cql.render import render_relation

    return render_relation(rel)


def require_partition_key(schema: TableSchema, res: KeyRestrictions) -> list[tuple[Any, ...]]:
    """DML needs every partition key column fixed."""
    if res.partition_keys is None:
        restricted = {c.name for c, _, _ in res.filters}
        missing = ", ".join(c.name for c in schema.partition_key if c.name not in restricted)
        raise InvalidRequest(f"Some partition key parts are missing: {missing}")
    return res.partition_keys
