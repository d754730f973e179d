"""What each bind marker of a statement receives: the name and CQL type a driver needs to
serialize the value (PREPARE's bind metadata), found by walking the statement.

>>> from cqlcdc.cql import parse_statement
>>> [(b.name, b.type.cql_name) for b in bind_receivers(schema, parse_statement(
...     "UPDATE ks.t USING TTL ? SET v = ? WHERE pk = ?"), lambda n: schema)]  # doctest: +SKIP
[('[ttl]', 'int'), ('v', 'int'), ('pk', 'int')]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.conditions import check_no_duration_slice
from cqlcdc.storage.mutations import ARITHMETIC_TYPES, check_set_element
from cqlcdc.types import ListType, MapType, SetType, TupleType, UserType, native_type
from cqlcdc.types.base import CqlType
from cqlcdc.types.terms import conversion


@dataclass(frozen=True, slots=True)
class Receiver:
    """The receiver of bind marker number ``index``."""

    index: int
    name: str
    type: CqlType
    table: TableSchema


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
    return sorted(out, key=lambda r: r.index)


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


def _using(out: list[Receiver], using: ast.Using, table: TableSchema | None) -> None:
    if table is None:
        return
    _term(out, using.timestamp, "[timestamp]", native_type("bigint"), table)
    _term(out, using.ttl, "[ttl]", native_type("int"), table)
    _term(out, using.timeout, "[timeout]", native_type("duration"), table)


def _where(out: list[Receiver], where: tuple[ast.Relation, ...], table: TableSchema) -> None:
    for rel in where:
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
        op = rel.operator.upper()
        if op == "CONTAINS" and isinstance(ctype, ListType | SetType):
            _term(out, rel.value, name, ctype.elem, table)
        elif op == "CONTAINS" and isinstance(ctype, MapType):
            _term(out, rel.value, name, ctype.value, table)
        elif op == "CONTAINS KEY" and isinstance(ctype, MapType):
            _term(out, rel.value, name, ctype.key, table)
        elif rel.key is not None and isinstance(ctype, MapType):
            _term(out, rel.key, f"key({name})", ctype.key, table)
            _term(out, rel.value, f"value({name})", ctype.value, table)
        elif rel.key is not None and isinstance(ctype, ListType):
            _term(out, rel.key, f"idx({name})", native_type("int"), table)
            _term(out, rel.value, f"value({name})", ctype.elem, table)
        elif op in ("IN", "NOT IN"):
            _term(out, rel.value, f"in({name})", ListType(ctype, frozen=True), table)
        else:
            _term(out, rel.value, name, ctype, table)


def _conditions(
    out: list[Receiver], conditions: tuple[ast.Condition, ...], table: TableSchema
) -> None:
    """The markers of an LWT's ``IF`` terms (``v = ?``, ``m[?] = ?``, ``u.f = ?``,
    ``v IN ?``)."""
    for cond in conditions:
        col = table.column(cond.column)
        if col is None:
            raise InvalidRequest(f"Unknown identifier {cond.column}")
        ctype, name = col.type, cond.column
        if cond.key is not None and isinstance(ctype, MapType):
            _term(out, cond.key, f"key({name})", ctype.key, table)
            ctype, name = ctype.value, f"value({name})"
        elif cond.key is not None and isinstance(ctype, ListType):
            _term(out, cond.key, f"idx({name})", native_type("int"), table)
            ctype, name = ctype.elem, f"value({name})"
        elif cond.field is not None and isinstance(ctype, UserType):
            if cond.field in ctype.field_names:
                ctype = ctype.field_types[ctype.field_names.index(cond.field)]
            name = f"{name}.{cond.field}"
        op = cond.operator.upper()
        if op in ("<", "<=", ">", ">="):
            check_no_duration_slice(col.type)  # ScyllaDB refuses it at PREPARE
        if op in ("IN", "NOT IN"):
            _term(out, cond.value, f"in({name})", ListType(ctype.frozen(), frozen=True), table)
        elif op == "CONTAINS" and isinstance(ctype, ListType | SetType):
            _term(out, cond.value, name, ctype.elem, table)
        elif op == "CONTAINS" and isinstance(ctype, MapType):
            _term(out, cond.value, name, ctype.value, table)
        elif op == "CONTAINS KEY" and isinstance(ctype, MapType):
            _term(out, cond.value, name, ctype.key, table)
        else:
            _term(out, cond.value, name, ctype.frozen(), table)


def _term(out: list[Receiver], t: object, name: str, ctype: CqlType, table: TableSchema) -> None:
    """The markers inside a term, each receiving its part of ``ctype``."""
    if t is None:
        return
    if isinstance(t, ast.BindMarker):
        out.append(Receiver(t.index, t.name or name, ctype, table))
    elif isinstance(t, ast.ListLiteral | ast.SetLiteral):
        elem = ctype.elem if isinstance(ctype, ListType | SetType) else ctype
        for item in t.items:
            _term(out, item, name, elem, table)
    elif isinstance(t, ast.MapLiteral) and isinstance(ctype, MapType):
        for k, v in t.entries:
            _term(out, k, f"key({name})", ctype.key, table)
            _term(out, v, f"value({name})", ctype.value, table)
    elif isinstance(t, ast.TupleLiteral):
        types = ctype.types if isinstance(ctype, TupleType) else None
        for i, item in enumerate(t.items):
            item_type = types[i] if types is not None and i < len(types) else ctype
            if isinstance(ctype, ListType):  # IN (?, ?): each item is one value
                item_type = ctype.elem
            _term(out, item, name, item_type, table)
    elif isinstance(t, ast.UdtLiteral) and isinstance(ctype, UserType):
        for field, value in t.fields:
            if field not in ctype.field_names:  # refused at PREPARE, as its markers are
                raise InvalidRequest(
                    f"Unknown field '{field}' in value of user defined type {ctype.name}"
                )
            ft = ctype.field_types[ctype.field_names.index(field)]
            _term(out, value, f"{name}.{field}", ft, table)
    elif isinstance(t, ast.TypeCast):
        _term(out, t.term, name, ctype, table)
    elif isinstance(t, ast.FunctionCall):
        arg_type = _function_arg(t, ctype)
        for arg in t.args:
            if isinstance(arg, ast.BindMarker):
                out.append(Receiver(arg.index, arg.name or name, arg_type, table))
            elif isinstance(arg, ast.FunctionCall):  # blobAsInt(intAsBlob(?))
                _term(out, arg, name, arg_type, table)


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
