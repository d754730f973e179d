"""Small builders of DDL AST nodes shared by the schema tests."""

from __future__ import annotations

from cqlcdc.cql import ast
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog


def T(name: str, *params: ast.TypeRef, size: int | None = None) -> ast.TypeRef:
    return ast.TypeRef(name, tuple(params), size=size)


def s(text: str) -> ast.Constant:
    return ast.Constant("string", text)


def cdc(**entries: str) -> tuple[str, ast.MapLiteral]:
    return ("cdc", ast.MapLiteral(tuple((s(k), s(v)) for k, v in entries.items())))


def qn(name: str, keyspace: str | None = "ks") -> ast.QualifiedName:
    return ast.QualifiedName(keyspace, name)


def create_table(
    name: str,
    columns: list[tuple[str, ast.TypeRef]],
    pk: tuple[str, ...] = ("pk",),
    ck: tuple[str, ...] = ("ck",),
    options: tuple[tuple[str, ast.OptionValue], ...] = (),
    statics: tuple[str, ...] = (),
    **kwargs: object,
) -> ast.CreateTable:
    defs = tuple(ast.ColumnDef(n, t, n in statics) for n, t in columns)
    return ast.CreateTable(qn(name), defs, pk, ck, options=options, **kwargs)  # type: ignore[arg-type]


def new_catalog(data_dir: object = None) -> Catalog:
    cat = Catalog(None if data_dir is None else DocumentDirectory.of(data_dir))  # type: ignore[arg-type]
    cat.execute(
        ast.CreateKeyspace("ks", (("class", "SimpleStrategy"), ("replication_factor", "1"))),
        None,
    )
    return cat


def pkck(*rest: tuple[str, ast.TypeRef]) -> list[tuple[str, ast.TypeRef]]:
    return [("pk", T("int")), ("ck", T("int")), *rest]
