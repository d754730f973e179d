"""The CDC log table schema for every column kind (reference section 1, seed DESCRIBE cases)."""

from __future__ import annotations

import pytest

from cqlcdc.cql import ast
from cqlcdc.schema.describe import describe_statement
from cqlcdc.schema.log_table import log_table_schema

from .helpers import T, cdc, create_table, new_catalog, pkck, qn


def log_lines(column: ast.TypeRef, udt: bool = False) -> list[str]:
    cat = new_catalog()
    if udt:
        cat.execute(
            ast.CreateType(qn("ut"), (("a", T("int")), ("b", T("int")), ("c", T("int")))), None
        )
    cat.execute(create_table("t", pkck(("v", column)), options=(cdc(enabled="true"),)), None)
    text = describe_statement(cat, ast.Describe("TABLE", qn("t_scylla_cdc_log")), None)
    return [line.strip().removesuffix(",") for line in text.splitlines()]


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (
            T("map", T("int"), T("text")),
            [
                '"cdc$deleted_elements_v" frozen<set<int>>',
                '"cdc$deleted_v" boolean',
                "v frozen<map<int, text>>",
            ],
        ),
        (
            T("set", T("int")),
            [
                '"cdc$deleted_elements_v" frozen<set<int>>',
                '"cdc$deleted_v" boolean',
                "v frozen<set<int>>",
            ],
        ),
        (
            T("list", T("int")),
            [
                '"cdc$deleted_elements_v" frozen<set<timeuuid>>',
                '"cdc$deleted_v" boolean',
                "v frozen<map<timeuuid, int>>",
            ],
        ),
    ],
)
def test_seed_describe_lines_for_collections(column: ast.TypeRef, expected: list[str]) -> None:
    lines = log_lines(column)
    for line in expected:
        assert line in lines


def test_seed_describe_lines_for_udt() -> None:
    lines = log_lines(T("ut"), udt=True)
    for line in [
        '"cdc$deleted_elements_v" frozen<set<smallint>>',
        '"cdc$deleted_v" boolean',
        "v frozen<ut>",
    ]:
        assert line in lines


@pytest.mark.parametrize(
    "column",
    [
        T("int"),
        T("frozen", T("list", T("int"))),
        T("frozen", T("map", T("int"), T("text"))),
        T("vector", T("float"), size=3),
        T("tuple", T("int"), T("text")),
    ],
)
def test_atomic_columns_keep_their_type_and_have_no_deleted_elements(column: ast.TypeRef) -> None:
    cat = new_catalog()
    cat.execute(create_table("t", pkck(("v", column)), options=(cdc(enabled="true"),)), None)
    base = cat.table("ks", "t")
    log = cat.table("ks", "t_scylla_cdc_log")
    assert base is not None and log is not None
    v = log.column("v")
    assert v is not None and v.type == base.column("v").type  # type: ignore[union-attr]
    assert log.column("cdc$deleted_elements_v") is None
    assert log.column("cdc$deleted_v") is not None


def test_select_star_order_and_kinds() -> None:
    cat = new_catalog()
    cat.execute(
        create_table(
            "t",
            pkck(("s", T("int")), ("c", T("int"))),
            statics=("s",),
            options=(cdc(enabled="true"),),
        ),
        None,
    )
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None and log.log_of == "t"
    assert [c.name for c in log.select_star_columns] == [
        "cdc$stream_id",
        "cdc$time",
        "cdc$batch_seq_no",
        "c",
        "cdc$deleted_c",
        "cdc$deleted_s",
        "cdc$end_of_batch",
        "cdc$operation",
        "cdc$ttl",
        "ck",
        "pk",
        "s",
    ]
    kinds = {c.name: (c.kind, c.type.cql_name) for c in log.columns}
    assert kinds["cdc$stream_id"] == ("partition_key", "blob")
    assert kinds["cdc$time"] == ("clustering", "timeuuid")
    assert kinds["cdc$batch_seq_no"] == ("clustering", "int")
    assert kinds["cdc$operation"] == ("regular", "tinyint")
    assert kinds["cdc$ttl"] == ("regular", "bigint")
    assert kinds["cdc$end_of_batch"] == ("regular", "boolean")
    assert kinds["s"] == ("regular", "int")  # static base columns are regular in the log
    assert "cdc$deleted_pk" not in kinds and "cdc$deleted_ck" not in kinds


def test_log_table_schema_function_directly() -> None:
    cat = new_catalog()
    cat.execute(create_table("t", pkck(("v", T("map", T("int"), T("text"))))), None)
    base = cat.table("ks", "t")
    assert base is not None
    log = log_table_schema(base)
    assert log.name == "t_scylla_cdc_log" and log.keyspace == "ks" and log.log_of == "t"
    assert [c.name for c in log.primary_key] == ["cdc$stream_id", "cdc$time", "cdc$batch_seq_no"]
