"""A SELECT's selectors, resolved against a table: what each output column is, its name and
type as ScyllaDB's result metadata gives them, and how it is computed from a row or from the
aggregates of a group of rows.

Names follow ``{:result_set_metadata}`` (cql3/expr/expression.cc): a column by its name,
``writetime(v)``, ``system.token(pk)``, ``count`` for ``count(*)``, ``system.max(v)``,
``system.tojson(v)``. In an aggregating SELECT (an aggregate, or GROUP BY) every plain
selector takes the value of the group's first row, as ScyllaDB's hidden ``first`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.cql import ast
from cqlcdc.errors import CqlSyntaxError, InvalidRequest
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.aggregates import AGGREGATES, Accumulator, Aggregate, aggregate
from cqlcdc.storage.subscripts import element_of, subscript_types
from cqlcdc.types import MapType, SetType, UserType, native_type
from cqlcdc.types.base import CqlType
from cqlcdc.types.functions import (
    TIME_FUNCTION_ARGUMENTS,
    conversion,
    evaluate_function,
    time_function,
)
from cqlcdc.types.json_codec import json_name, to_json
from cqlcdc.types.terms import FUNCTIONS, term_text
from cqlcdc.types.values import EMPTY

CELLS = "__cells__"
ELEMENTS = "__elements__"  # a row's live element cells, by column then key
JSON_COLUMN = "[json]"


@dataclass(frozen=True, slots=True)
class Node:
    """One selector expression: a column, ``writetime``/``ttl`` of a column, ``token``,
    ``toJson`` of a node, an aggregate of a node (or of rows), or a constant argument."""

    # column | field | element | writetime | ttl | token | tojson | call | aggregate | constant
    kind: str
    name: str  # the result-metadata name
    type: CqlType
    column: str = ""
    columns: tuple[str, ...] = ()
    arg: Node | None = None
    function: Aggregate | None = None
    slot: int = -1  # an aggregate's accumulator index
    value: Any = None

    @property
    def aggregates(self) -> bool:
        """Whether an aggregate is this node or below it."""
        return self.kind == "aggregate" or (self.arg is not None and self.arg.aggregates)


@dataclass(frozen=True, slots=True)
class Output:
    """One column of the result: its name (the alias if any), type and node."""

    name: str
    type: CqlType
    node: Node


@dataclass(slots=True)
class Selection:
    """The resolved selectors of a SELECT.

    Attributes:
        outputs: the result columns before any JSON wrapping.
        aggregates: the aggregate nodes, by accumulator slot (plain selectors of an
            aggregating SELECT included, as ``first``).
        aggregating: an aggregate is selected, or there is a GROUP BY.
        json: SELECT JSON: one ``[json]`` column holds each row as an object.
        columns: every table column a selector reads.
    """

    outputs: list[Output]
    aggregates: list[Node] = field(default_factory=list)
    aggregating: bool = False
    json: bool = False
    columns: list[str] = field(default_factory=list)

    def result_columns(self) -> list[tuple[str, CqlType]]:
        """The names and types of the columns the SELECT returns."""
        if self.json:
            return [(JSON_COLUMN, native_type("text"))]
        return [(o.name, o.type) for o in self.outputs]

    def row_values(self, schema: TableSchema, row: dict[str, Any], now_s: int) -> tuple[Any, ...]:
        """The output row of one input row (a non-aggregating SELECT)."""
        return self._shape(tuple(_row_value(o.node, schema, row, now_s) for o in self.outputs))

    def start_group(self) -> list[Accumulator]:
        """Fresh accumulators for a group of rows."""
        return [node.function.start() for node in self.aggregates if node.function is not None]

    def add_row(
        self, state: list[Accumulator], schema: TableSchema, row: dict[str, Any], now_s: int
    ) -> None:
        """Feed one input row to a group's accumulators."""
        for acc, node in zip(state, self.aggregates, strict=True):
            acc.add(_ROWS if node.arg is None else _row_value(node.arg, schema, row, now_s))

    def group_values(self, state: list[Accumulator]) -> tuple[Any, ...]:
        """The output row of a group."""
        results = [acc.result() for acc in state]
        return self._shape(tuple(_final_value(o.node, results) for o in self.outputs))

    def _shape(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        if not self.json:
            return values
        members = (
            f"{json_name(o.name)}: {to_json(o.type, v)}"
            for o, v in zip(self.outputs, values, strict=True)
        )
        return ("{" + ", ".join(members) + "}",)


_ROWS = object()  # what count(*) counts: every row


def plan_selection(schema: TableSchema, stmt: ast.Select) -> Selection:
    """Resolve the selectors of ``stmt`` on ``schema``.

    Raises:
        InvalidRequest: an unknown column or function, a function on the wrong arguments,
            an aggregate of an aggregate (ScyllaDB's messages).
    """
    planner = _Planner(schema)
    outputs: list[Output] = []
    if not stmt.selectors:
        outputs = [Output(c.name, c.type, _column(c)) for c in schema.select_star_columns]
        planner.columns = [c.name for c in schema.select_star_columns]
    for sel in stmt.selectors:
        node = planner.node(sel.expr, top=True)
        outputs.append(Output(sel.alias or node.name, node.type, node))
    if any(_nested(o.node) for o in outputs):
        raise InvalidRequest("SELECT clause contains aggeregation of an aggregation")
    aggregating = bool(stmt.group_by) or any(o.node.aggregates for o in outputs)
    if aggregating:
        # a plain selector of an aggregating SELECT is first(selector)
        outputs = [
            o if o.node.aggregates else Output(o.name, o.type, planner.first(o.node))
            for o in outputs
        ]
    return Selection(outputs, planner.aggregates, aggregating, stmt.json, planner.columns)


def _nested(node: Node) -> bool:
    """An aggregate with an aggregate below it."""
    if node.arg is None:
        return False
    return (node.kind == "aggregate" and node.arg.aggregates) or _nested(node.arg)


def _column(col: Column) -> Node:
    return Node("column", col.name, col.type, column=col.name)


class _Planner:
    """Builds nodes, collecting the aggregates (with their slots) and the columns read."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.aggregates: list[Node] = []
        self.columns: list[str] = []

    def first(self, node: Node) -> Node:
        agg = Node(
            "aggregate",
            node.name,
            node.type,
            arg=node,
            slot=len(self.aggregates),
            function=aggregate("first", node.type),
        )
        self.aggregates.append(agg)
        return agg

    def _use(self, name: str) -> Column:
        col = self.schema.column(name)
        if col is None:
            raise InvalidRequest(f"Undefined name {name} in selection clause")
        if name not in self.columns:
            self.columns.append(name)
        return col

    def node(
        self,
        expr: ast.Term | ast.ColumnRef | ast.FieldSelection | ast.ElementSelection,
        top: bool = False,
    ) -> Node:
        if isinstance(expr, ast.ColumnRef):
            if expr.name == "*":
                raise CqlSyntaxError("no viable alternative at input '*'")
            return _column(self._use(expr.name))
        if isinstance(expr, ast.FieldSelection):
            return self._field(expr)
        if isinstance(expr, ast.ElementSelection):
            return self._element(expr)
        if isinstance(expr, ast.FunctionCall):
            return self._call(expr)
        if isinstance(expr, ast.Constant) and expr.kind != "null" and not top:
            return Node("constant", term_text(expr), native_type("int"), value=expr.text)
        raise InvalidRequest(f"Cannot use {term_text(expr)} as a selector")

    def _call(self, call: ast.FunctionCall) -> Node:
        name = call.name.lower()
        if name in ("writetime", "ttl"):
            return self._attribute(name, call)
        if name == "token":
            pk = self.schema.partition_key
            if len(call.args) != len(pk):
                raise InvalidRequest(
                    "Invalid number of arguments in call to function system.token: "
                    f"{len(pk)} required but {len(call.args)} provided"
                )
            columns = tuple(a.name for a in call.args if isinstance(a, ast.ColumnRef))
            if len(columns) != len(pk):
                raise InvalidRequest("The token function takes the partition key columns")
            for i, (column, key) in enumerate(zip(columns, pk, strict=True)):
                used = self._use(column)
                if used.type.frozen() != key.type.frozen():
                    raise InvalidRequest(
                        f"Type error: {column} cannot be passed as argument {i} of function "
                        f"system.token of type {key.type.cql_name}"
                    )
            return Node(
                "token",
                f"system.token({', '.join(columns)})",
                native_type("bigint"),
                columns=columns,
            )
        if name == "tojson":
            if len(call.args) != 1:
                raise InvalidRequest("toJson() accepts 1 argument only")
            arg = self.node(call.args[0])
            return Node("tojson", f"system.tojson({arg.name})", native_type("text"), arg=arg)
        if name == "fromjson":
            raise InvalidRequest("fromJson() can only be called if receiver type is known")
        if name in AGGREGATES:
            return self._aggregate(name, call)
        if conversion(name) is not None or name in TIME_FUNCTION_ARGUMENTS:
            return self._scalar(name, call)
        raise InvalidRequest(f"Unknown function '{call.name}'")

    def _scalar(self, name: str, call: ast.FunctionCall) -> Node:
        """``intAsBlob(v)``, ``blobAsInt(b)``, ``toTimestamp(t)``, ``dateOf(t)``...: a
        one-argument function of a selector, or of a literal (evaluated once, here)."""
        if len(call.args) != 1:
            raise InvalidRequest(
                f"Invalid number of arguments in call to function system.{name}: 1 required "
                f"but {len(call.args)} provided"
            )
        (expr,) = call.args
        if not _reads_columns(expr):
            assert not isinstance(expr, ast.ColumnArg)
            type_name, value = evaluate_function(call, None)
            return Node(
                "constant", f"system.{name}({term_text(expr)})", native_type(type_name), value=value
            )
        arg = self.node(expr)
        convert = conversion(name)
        if convert is not None:
            accepted: tuple[str, ...] = (convert.source.cql_name,)
            result = convert.result
        else:
            accepted = TIME_FUNCTION_ARGUMENTS[name]
            result = native_type(FUNCTIONS[name][0])
        if arg.type.cql_name not in accepted:
            raise InvalidRequest(
                f"Type error: {arg.name} of type {arg.type.cql_name} cannot be passed as "
                f"argument 0 of function system.{name} of type {' or '.join(accepted)}"
            )
        function = convert.apply if convert is not None else _time_function(name, arg.type)
        return Node("call", f"system.{name}({arg.name})", result, arg=arg, value=function)

    def _field(self, expr: ast.FieldSelection) -> Node:
        """``u.f``: a field of a UDT column, ``b.x.a`` one of a nested UDT (null where the
        value or a field on the way is)."""
        col = self._use(expr.column)
        ctype: CqlType = col.type
        name = col.name
        for field_name in expr.path:
            if not isinstance(ctype, UserType):
                raise InvalidRequest(
                    f"Invalid field selection: {name} of type {ctype.cql_name} is not a user type"
                )
            if field_name not in ctype.field_names:
                raise InvalidRequest(f"{ctype.name} has no field {field_name}")
            ctype = ctype.field_types[ctype.field_names.index(field_name)]
            name = f"{name}.{field_name}"
        return Node("field", name, ctype, column=col.name, value=expr.path)

    def _element(self, expr: ast.ElementSelection) -> Node:
        """``m[k]``, ``l[i]``, ``s[e]``: an element of a collection column (the set's own
        element when present), null where there is none."""
        col = self._use(expr.column)
        key_type, elem_type = subscript_types(col.type, col.name)
        if isinstance(expr.key, ast.BindMarker):
            raise InvalidRequest(f"A bind marker cannot select an element of {col.name} here")
        key = key_type.frozen().parse_literal(expr.key, f"key({col.name})")
        return Node(
            "element",
            f"{col.name}[{term_text(expr.key)}]",
            elem_type,
            column=col.name,
            value=key,
        )

    def _attribute(self, name: str, call: ast.FunctionCall) -> Node:
        if len(call.args) == 1 and isinstance(
            call.args[0], ast.FieldSelection | ast.ElementSelection
        ):
            return self._member_attribute(name, call.args[0])
        args = [a.name for a in call.args if isinstance(a, ast.ColumnRef)]
        if len(args) != 1 or len(call.args) != 1 or self.schema.column(args[0]) is None:
            raise InvalidRequest(f"Invalid arguments for {name}")
        col = self._use(args[0])
        if col.is_key:
            raise InvalidRequest(
                f"Cannot use selection function {name} on PRIMARY KEY part {col.name}"
            )
        if col.type.multicell:  # its cells have a time each: ScyllaDB refuses
            raise InvalidRequest(
                f"{name.upper()} expects an atomic column, but {col.name} is a non-frozen "
                "collection"
            )
        ctype = native_type("bigint" if name == "writetime" else "int")
        return Node(name, f"{name}({col.name})", ctype, column=col.name)

    def _member_attribute(self, name: str, arg: ast.FieldSelection | ast.ElementSelection) -> Node:
        """``WRITETIME(m[k])``, ``TTL(s[e])``, ``WRITETIME(u.f)``: the time or TTL of one
        element cell of a non-frozen map or set, or one field cell of a non-frozen UDT
        (ScyllaDB's ``prepare_column_mutation_attribute``, its checks in its order)."""
        member = self._field(arg) if isinstance(arg, ast.FieldSelection) else self._element(arg)
        col = self.schema.column(arg.column)
        assert col is not None
        kind = name.upper()
        if col.is_key:
            raise InvalidRequest(f"{kind} is not legal on primary key component {col.name}")
        if isinstance(arg, ast.ElementSelection):
            context, allowed = "subscript", "non-frozen map or set columns"
            ok = isinstance(col.type, MapType | SetType) and col.type.multicell
            key = member.value
        else:
            if arg.more:  # ScyllaDB takes a column's field, not a field's field
                inner = ".".join((arg.column, *arg.path[:-1]))
                raise InvalidRequest(f"{kind} on a field selection expects a column, got {inner}")
            context, allowed = "field selection", "non-frozen UDT columns"
            ok = isinstance(col.type, UserType) and col.type.multicell
            key = col.type.field_names.index(arg.field) if isinstance(col.type, UserType) else None
        if not ok:
            raise InvalidRequest(f"{kind} on a {context} is only valid for {allowed}")
        ctype = native_type("bigint" if name == "writetime" else "int")
        return Node(name, f"{name}({member.name})", ctype, column=col.name, value=(key,))

    def _aggregate(self, name: str, call: ast.FunctionCall) -> Node:
        args = call.args
        if (
            name == "count"
            and len(args) == 1
            and isinstance(args[0], ast.ColumnRef)
            and args[0].name == "*"
        ):
            function = aggregate("count", None)
            return self._slot(Node("aggregate", "count", function.result_type, function=function))
        if name in ("count", "min", "max") and len(args) != 1:
            raise InvalidRequest(f"{name}() function requires only 1 argument")
        if len(args) != 1:
            aggregate(name, native_type("text"), call.name)  # no overload takes these
        arg = self.node(args[0])
        if arg.kind == "constant":
            if name != "count":
                raise InvalidRequest(
                    f"{name}() function is only valid when argument types are known"
                )
            function = aggregate("count", None)  # count(<constant>) counts rows
            node = Node(
                "aggregate", f"system.count({arg.name})", function.result_type, function=function
            )
            return self._slot(node)
        function = aggregate(name, arg.type, call.name)
        node = Node(
            "aggregate",
            f"system.{name}({arg.name})",
            function.result_type,
            arg=arg,
            function=function,
        )
        return self._slot(node)

    def _slot(self, node: Node) -> Node:
        node = Node(
            node.kind,
            node.name,
            node.type,
            arg=node.arg,
            function=node.function,
            slot=len(self.aggregates),
        )
        self.aggregates.append(node)
        return node


def _reads_columns(expr: ast.Term | ast.ColumnArg) -> bool:
    """Whether a selector argument reads the row (a column, or a call of one)."""
    if isinstance(expr, ast.ColumnRef | ast.FieldSelection | ast.ElementSelection):
        return True
    if isinstance(expr, ast.FunctionCall):
        return any(_reads_columns(a) for a in expr.args)
    return False


def _time_function(name: str, arg_type: CqlType) -> Callable[[Any], Any]:
    type_name = arg_type.cql_name
    # an empty value has no time: null, as ScyllaDB's functions give for an empty argument
    return lambda value: None if value is EMPTY else time_function(name, type_name, value)


def _row_value(node: Node, schema: TableSchema, row: dict[str, Any], now_s: int) -> Any:
    """A node's value for one row (no aggregate below it)."""
    from cqlcdc.storage.token import murmur3_token, serialize_partition_key

    kind = node.kind
    if kind == "column":
        return row.get(node.column)
    if kind == "field":  # a UDT value is a mapping of its fields, down the path
        value = row.get(node.column)
        for field_name in node.value:
            if value is None:
                return None
            value = value.get(field_name)
        return value
    if kind == "element":
        return element_of(row.get(node.column), node.value)
    if kind == "constant":
        return node.value
    if kind == "token":  # of the named columns (of the partition key's types)
        pk = tuple(row[c] for c in node.columns)
        return murmur3_token(serialize_partition_key(schema, pk))
    if kind == "tojson":
        assert node.arg is not None
        return to_json(node.arg.type, _row_value(node.arg, schema, row, now_s))
    if kind == "call":
        assert node.arg is not None
        return node.value(_row_value(node.arg, schema, row, now_s))
    if node.value is not None:  # of one element or field: (its key,)
        (key,) = node.value
        cell = row.get(ELEMENTS, {}).get(node.column, {}).get(key) if key is not None else None
    else:
        cell = row.get(CELLS, {}).get(node.column)
    if cell is None:
        return None
    if kind == "writetime":
        return cell.timestamp
    return cell.remaining_ttl(now_s)


def _final_value(node: Node, results: Sequence[Any]) -> Any:
    """A node's value from its group's aggregate results."""
    if node.kind == "aggregate":
        return results[node.slot]
    assert node.arg is not None
    if node.kind == "call":
        return node.value(_final_value(node.arg, results))
    assert node.kind == "tojson"
    return to_json(node.arg.type, _final_value(node.arg, results))


__all__ = ["CELLS", "ELEMENTS", "JSON_COLUMN", "Node", "Output", "Selection", "plan_selection"]
