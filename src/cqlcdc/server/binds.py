"""What each bind marker of a statement receives: the name and CQL type a driver needs to
serialize the value (PREPARE's bind metadata), found by walking the statement.

>>> from cqlcdc.cql import parse_statement
>>> [(b.name, b.type.cql_name) for b in bind_receivers(schema, parse_statement(
...     "UPDATE ks.t USING TTL ? SET v = ? WHERE pk = ?"), lambda n: schema)]  # doctest: +SKIP
[('[ttl]', 'int'), ('v', 'int'), ('pk', 'int')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from cqlcdc.cql import ast
from cqlcdc.cql.render import render_term
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.conditions import check_no_duration_slice
from cqlcdc.storage.mutations import ARITHMETIC_TYPES, check_set_element
from cqlcdc.storage.where import check_relation_operator
from cqlcdc.types import (
    InValuesType,
    ListType,
    MapType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
)
from cqlcdc.types.base import CqlType
from cqlcdc.types.functions import conversion


@dataclass(frozen=True, slots=True)
class Receiver:
    """The receiver of bind marker number ``index``.

    ``spec`` is the name ScyllaDB gives the receiver (``cql3/expr/prepare_expr.cc``,
    ``functions::make_arg_spec``, ``lists::index_spec_of``...): a column's name for a marker
    bound to the column itself, else ``value(l)``, ``IN(c)``, ``arg0(system.mintimeuuid)``,
    ``[limit]``... ``name`` is what PREPARE reports: the marker's own name (``:a``) when it has
    one, else ``spec``. Routing follows ``spec`` (``prepare_context::
    get_partition_key_bind_indexes``): only a marker whose receiver is a partition key
    column routes, whatever the marker is called.
    """

    index: int
    name: str
    type: CqlType
    table: TableSchema
    spec: str = ""
    also: tuple[str, ...] = ()  # the other receivers of a variable used twice (:x)


def bind_receivers(
    stmt: ast.Statement, table_of: Callable[[ast.QualifiedName], TableSchema]
) -> list[Receiver]:
    """Every bind marker of ``stmt`` with its receiver, in marker order.

    Raises:
        InvalidRequest: a marker where the statement cannot take one, or an unknown column.
    """
    out: list[Receiver] = []
    statements = stmt.statements if isinstance(stmt, ast.Batch) else (stmt,)
    if isinstance(stmt, ast.Batch):
        _using(out, stmt.using, table_of(stmt.statements[0].table) if stmt.statements else None)
    for s in statements:
        if isinstance(s, ast.Insert | ast.Update | ast.Delete | ast.Select):
            _statement(out, s, table_of(s.table))
    return _variables(out)


def _variables(found: list[Receiver]) -> list[Receiver]:
    """One receiver per variable, in marker order: a name used twice (``p = :x AND c =
    :x``) is one variable, as ScyllaDB prepares it (``prepare_context::
    add_variable_specification``), and routes by every receiver it has (``also``).

    Raises:
        InvalidRequest: the variable's receivers have different types (ScyllaDB's message).
    """
    by_index: dict[int, Receiver] = {}
    for r in found:
        first = by_index.get(r.index)
        if first is None:
            by_index[r.index] = r
            continue
        if r.type.frozen() != first.type.frozen():
            raise InvalidRequest(
                f"variable :{r.name} has type {first.type.cql_name} which doesn't match {r.spec}"
            )
        by_index[r.index] = dataclasses.replace(first, also=(*first.also, r.spec))
    return [by_index[i] for i in sorted(by_index)]


def _statement(
    out: list[Receiver], s: ast.Insert | ast.Update | ast.Delete | ast.Select, table: TableSchema
) -> None:
    def column(name: str) -> CqlType:
        col = table.column(name)
        if col is None:
            raise InvalidRequest(f"Undefined column name {name}")
        return col.type

    def term(t: ast.Term | None, name: str, ctype: CqlType) -> None:
        _term(out, t, name, ctype, table)

    if isinstance(s, ast.Insert):
        if s.json is not None:
            term(s.json, "[json]", native_type("text"))
        for name, value in zip(s.columns, s.values, strict=True):
            term(value, name, column(name))
        _using(out, s.using, table)
    elif isinstance(s, ast.Update):
        _using(out, s.using, table)
        for a in s.assignments:
            ctype = column(a.column)
            if isinstance(a, ast.SetColumn):
                term(a.value, a.column, ctype)
            elif isinstance(a, ast.AddTo | ast.Prepend | ast.RemoveFrom):
                if not ctype.multicell and not ctype.is_counter:  # checked here, at PREPARE
                    arithmetic = (s.if_exists or bool(s.conditions)) and (
                        ctype.cql_name in ARITHMETIC_TYPES and not isinstance(a, ast.Prepend)
                    )
                    if not arithmetic:
                        sign = "-" if isinstance(a, ast.RemoveFrom) else "+"
                        raise InvalidRequest(
                            f"Invalid operation ({a.column} = {a.column} {sign} ?) for non "
                            f"counter column {a.column}"
                        )
                    if not isinstance(a.value, ast.BindMarker):  # r = r + 3.5 on an int
                        ctype.parse_literal(a.value, a.column, None)
                if isinstance(ctype, MapType) and isinstance(a, ast.RemoveFrom):
                    ctype = SetType(ctype.key, frozen=True)
                term(a.value, a.column, ctype)
            elif isinstance(a, ast.SetElement):
                assigned = table.column(a.column)
                assert assigned is not None  # column() found it
                check_set_element(assigned, a)
                if isinstance(ctype, MapType):
                    term(a.key, f"key({a.column})", ctype.key)
                    term(a.value, f"value({a.column})", ctype.value)
                elif isinstance(ctype, ListType):
                    if _by_uuid(a.key):  # l[SCYLLA_TIMEUUID_LIST_INDEX(?)] = ?
                        assert isinstance(a.key, ast.FunctionCall)
                        for arg in a.key.args:
                            _term(out, arg, f"uuid_idx({a.column})", native_type("uuid"), table)
                    else:
                        term(a.key, f"idx({a.column})", native_type("int"))
                    term(a.value, f"value({a.column})", ctype.elem)
            elif isinstance(a, ast.SetField) and isinstance(ctype, UserType):
                index = ctype.field_names.index(a.field) if a.field in ctype.field_names else -1
                if index >= 0:
                    term(a.value, f"{a.column}.{a.field}", ctype.field_types[index])
        _where(out, s.where, table)
        _conditions(out, s.conditions, table)
    elif isinstance(s, ast.Delete):
        for target in s.targets:
            ctype = column(target.column)
            if target.key is not None and isinstance(ctype, MapType):
                term(target.key, f"key({target.column})", ctype.key)
            elif target.key is not None and isinstance(ctype, ListType):
                term(target.key, f"idx({target.column})", native_type("int"))
            elif target.key is not None and isinstance(ctype, SetType):
                term(target.key, f"value({target.column})", ctype.elem)  # DELETE s[?]
        _using(out, s.using, table)
        _where(out, s.where, table)
        _conditions(out, s.conditions, table)
    else:
        _where(out, s.where, table)
        _using(out, s.using, table)
        term(s.per_partition_limit, "[per_partition_limit]", native_type("int"))
        term(s.limit, "[limit]", native_type("int"))


def _by_uuid(key: ast.Term) -> bool:
    """Whether a list subscript is ``SCYLLA_TIMEUUID_LIST_INDEX(...)``: its argument is the
    element's key, received as ScyllaDB's ``lists::uuid_index_spec_of`` gives it
    (``uuid_idx(l)``, of type uuid), not as a position."""
    return isinstance(key, ast.FunctionCall) and key.name.lower() == "scylla_timeuuid_list_index"


def _using(out: list[Receiver], using: ast.Using, table: TableSchema | None) -> None:
    if table is None:
        return
    _term(out, using.timestamp, "[timestamp]", native_type("bigint"), table)
    _term(out, using.ttl, "[ttl]", native_type("int"), table)
    _term(out, using.timeout, "[timeout]", native_type("duration"), table)


def _where(out: list[Receiver], where: tuple[ast.Relation, ...], table: TableSchema) -> None:
    for rel in where:
        check_relation_operator(rel)  # before the receivers, as ScyllaDB's PREPARE checks
        if rel.token:
            _term(out, rel.value, "partition key token", native_type("bigint"), table)
            continue
        types = []
        for name in rel.columns:
            col = table.column(name)
            if col is None:
                raise InvalidRequest(f"Undefined column name {name}")
            types.append(col.type)
        ctype = TupleType(tuple(types)) if rel.multi else types[0]
        name = "(" + ",".join(rel.columns) + ")" if rel.multi else rel.columns[0]
        if rel.key is not None:  # m[?] = ?, l[?] = ? (get_lhs_receiver of a subscript)
            if isinstance(ctype, MapType):
                _term(out, rel.key, f"key({name})", ctype.key, table)
                ctype = ctype.value
            elif isinstance(ctype, ListType):
                _term(out, rel.key, f"index({name})", native_type("int"), table)
                ctype = ctype.elem
            elif isinstance(ctype, SetType):
                _term(out, rel.key, f"value({name})", ctype.elem, table)
                ctype = ctype.elem
            name = f"value({name})"
        _relation_value(out, rel.operator.upper(), rel.value, name, ctype, table)


def _relation_value(
    out: list[Receiver],
    op: str,
    value: ast.Term,
    name: str,
    ctype: CqlType,
    table: TableSchema,
    condition: bool = False,
) -> None:
    """The markers of a relation's right-hand side, received as ``get_rhs_receiver`` says:
    ``IN(c)`` for the list of an IN (in an LWT condition, a list that may hold nulls), the
    element for CONTAINS, the key for CONTAINS KEY.

    Raises:
        InvalidRequest: CONTAINS of a column that is no collection, CONTAINS KEY of one
            that is no map (ScyllaDB's messages, at PREPARE).
    """
    if op in ("IN", "NOT IN"):
        values = (
            InValuesType(ctype.frozen()) if condition else ListType(ctype.frozen(), frozen=True)
        )
        _term(out, value, f"{op}({name})", values, table)
    elif op == "CONTAINS":
        if isinstance(ctype, ListType | SetType):
            _term(out, value, f"value({name})", ctype.elem, table)
        elif isinstance(ctype, MapType):
            _term(out, value, f"value({name})", ctype.value, table)
        else:
            raise InvalidRequest(f'Cannot use CONTAINS on non-collection column "{name}"')
    elif op == "CONTAINS KEY":
        if not isinstance(ctype, MapType):
            raise InvalidRequest(f"Cannot use CONTAINS KEY on non-map column {name}")
        _term(out, value, f"key({name})", ctype.key, table)
    else:
        _term(out, value, name, ctype.frozen(), table)


def _conditions(
    out: list[Receiver], conditions: tuple[ast.Condition, ...], table: TableSchema
) -> None:
    """The markers of an LWT's ``IF`` terms (``v = ?``, ``m[?] = ?``, ``u.f = ?``,
    ``v IN ?``): prepared as relations, so named as the WHERE clause's are (a UDT field's
    receiver is the field's name, ``get_lhs_receiver`` of a field selection)."""
    for cond in conditions:
        col = table.column(cond.column)
        if col is None:
            raise InvalidRequest(f"Unknown identifier {cond.column}")
        ctype, name = col.type, cond.column
        if cond.key is not None and isinstance(ctype, MapType):
            _term(out, cond.key, f"key({name})", ctype.key, table)
            ctype, name = ctype.value, f"value({name})"
        elif cond.key is not None and isinstance(ctype, ListType):
            _term(out, cond.key, f"index({name})", native_type("int"), table)
            ctype, name = ctype.elem, f"value({name})"
        elif cond.field is not None and isinstance(ctype, UserType):
            if cond.field in ctype.field_names:
                ctype = ctype.field_types[ctype.field_names.index(cond.field)]
            name = cond.field
        op = cond.operator.upper()
        if op in ("<", "<=", ">", ">="):
            check_no_duration_slice(col.type)  # ScyllaDB refuses it at PREPARE
        _relation_value(out, op, cond.value, name, ctype, table, True)


def _term(out: list[Receiver], t: object, spec: str, ctype: CqlType, table: TableSchema) -> None:
    """The markers inside a term received as ``spec`` of type ``ctype``, each receiving its
    part: a collection literal's elements ``value(c)`` (a map's keys ``key(c)``), a tuple's
    components ``c[i]``, a UDT's fields ``c.f``, a function's arguments ``argN(ks.fn)``."""
    if t is None:
        return
    if isinstance(t, ast.BindMarker):
        out.append(Receiver(t.index, t.name or spec, ctype, table, spec))
    elif isinstance(t, ast.ListLiteral | ast.SetLiteral):
        if isinstance(ctype, ListType | SetType | VectorType):
            for item in t.items:
                _term(out, item, f"value({spec})", ctype.elem, table)
        else:
            for item in t.items:
                _term(out, item, spec, ctype, table)
    elif isinstance(t, ast.MapLiteral) and isinstance(ctype, MapType):
        for k, v in t.entries:
            _term(out, k, f"key({spec})", ctype.key, table)
            _term(out, v, f"value({spec})", ctype.value, table)
    elif isinstance(t, ast.TupleLiteral):
        for i, item in enumerate(t.items):
            if isinstance(ctype, ListType):  # IN (?, ?): each item is one element
                _term(out, item, f"value({spec})", ctype.elem, table)
            elif isinstance(ctype, TupleType) and i < len(ctype.types):
                _term(out, item, f"{spec}[{i}]", ctype.types[i], table)
            else:
                _term(out, item, spec, ctype, table)
    elif isinstance(t, ast.UdtLiteral) and isinstance(ctype, UserType):
        for field, value in t.fields:
            if field not in ctype.field_names:  # refused at PREPARE, as its markers are
                raise InvalidRequest(
                    f"Unknown field '{field}' in value of user defined type {ctype.name}"
                )
            ft = ctype.field_types[ctype.field_names.index(field)]
            _term(out, value, f"{spec}.{field}", ft, table)
    elif isinstance(t, ast.TypeCast):
        cast = _native_cast(t.type)
        if cast is None:
            _term(out, t.term, spec, ctype, table)
        else:  # (int)? receives an int, named as casted_spec_of names it
            inner = "?" if isinstance(t.term, ast.BindMarker) else render_term(t.term)
            _term(out, t.term, f"({cast.cql_name}){inner}", cast, table)
    elif isinstance(t, ast.FunctionCall):
        arg_type = _function_arg(t, ctype)
        name = t.name.lower() if "." in t.name else f"system.{t.name.lower()}"
        for i, arg in enumerate(t.args):
            _term(out, arg, f"arg{i}({name})", arg_type, table)


def _native_cast(ref: ast.TypeRef) -> CqlType | None:
    """The native type a cast names (None: a collection, tuple, vector or UDT)."""
    if ref.params or ref.keyspace is not None or ref.size is not None:
        return None
    try:
        return native_type(ref.name)
    except InvalidRequest:  # a user-defined type of the current keyspace
        return None


def _function_arg(call: ast.FunctionCall, ctype: CqlType) -> CqlType:
    """The type a function's marker argument takes (the time functions take timestamps,
    ``fromJson`` the JSON text)."""
    convert = conversion(call.name)
    if convert is not None:  # intAsBlob(?) takes an int, blobAsInt(?) a blob
        return convert.source
    fn = call.name.lower()
    if fn in ("mintimeuuid", "maxtimeuuid"):
        return native_type("timestamp")
    if fn == "fromjson":  # the JSON text of the value
        return native_type("text")
    return ctype
