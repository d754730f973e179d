"""Schema admission: a DDL whose table an output cannot hold is refused by that DDL."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.pipeline.admission import admit
from cqlcdc.schema.model import CdcOptions, Column, TableSchema
from cqlcdc.schema.physical import LEGACY
from cqlcdc.types import native_type, resolve_type
from cqlcdc.types.base import CqlType
from cqlcdc.types.udt import UserType


def cql_type(text: str) -> CqlType:
    """A CQL type written as in a column definition."""
    stmt = parse_statement(f"CREATE TABLE ks.x (k int PRIMARY KEY, v {text})")
    assert isinstance(stmt, ast.CreateTable)
    return resolve_type(stmt.columns[1].type, "ks", lambda ks, name: None)


EVERY_NATIVE = [
    "ascii",
    "bigint",
    "blob",
    "boolean",
    "date",
    "decimal",
    "double",
    "duration",
    "float",
    "inet",
    "int",
    "smallint",
    "text",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varchar",
    "varint",
]


def table(*columns: Column, cdc: bool = True) -> TableSchema:
    key = Column("pk", native_type("int"), "partition_key")
    return TableSchema(
        "ks", "t", (key, *columns), cdc=CdcOptions(enabled=cdc, preimage="true", postimage=True)
    )


def test_every_type_and_name_is_admitted_in_a_table_of_today() -> None:
    udt = UserType("ks", "u", ("a", "A", "_bucket"), tuple(native_type(n) for n in ("time",) * 3))
    types = [native_type(n) for n in EVERY_NATIVE] + [
        cql_type("list<time>"),
        cql_type("set<timestamp>"),
        cql_type("map<time, frozen<list<date>>>"),
        cql_type("frozen<tuple<time, timestamp>>"),
        cql_type("vector<float, 3>"),
        udt,
    ]
    names = ["v", "V", "_bucket", "marker", "k$x", "a b", "é", "_ticks", "$", ""]
    columns = [Column(f"{n}{i}", t, "regular") for i, t in enumerate(types) for n in names[:2]]
    columns += [Column(n, native_type("int"), "regular") for n in names]
    admit(table(*columns))


def test_a_base_column_named_as_a_log_column_is_refused_with_cdc() -> None:
    clash = table(Column("cdc$stream_id", native_type("int"), "regular"))
    with pytest.raises(InvalidRequest, match=r"cdc\$stream_id .* CDC log"):
        admit(clash)
    admit(replace(clash, cdc=CdcOptions()))


def test_a_legacy_table_that_delta_cannot_hold_is_refused_with_the_reason() -> None:
    case = replace(
        table(
            Column("somecolumn", native_type("int"), "regular"),
            Column("SomeColumn", native_type("int"), "regular"),
        ),
        physical_layout=LEGACY,
    )
    with pytest.raises(InvalidRequest, match="somecolumn and SomeColumn"):
        admit(case)
    time = replace(table(Column("tm", native_type("time"), "regular")), physical_layout=LEGACY)
    with pytest.raises(InvalidRequest, match="Time64"):
        admit(time)
    admit(replace(time, cdc=CdcOptions()))  # its base rows store time as an integer
