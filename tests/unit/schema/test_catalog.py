"""Catalog DDL: rules and ScyllaDB's messages, CDC log lifecycle, versions, UDT indices."""

from __future__ import annotations

from pathlib import Path

import pytest

from cqlcdc.cql import ast
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import (
    AlreadyExists,
    ConfigurationError,
    CqlSyntaxError,
    InvalidRequest,
    Unauthorized,
)
from cqlcdc.schema.catalog import Catalog

from .helpers import T, cdc, create_table, new_catalog, pkck, qn, s

KS = ast.CreateKeyspace("ks", (("class", "SimpleStrategy"), ("replication_factor", "1")))


def alter(name: str, action: ast.AlterTableAction) -> ast.AlterTable:
    return ast.AlterTable(qn(name), action)


@pytest.fixture
def cat() -> Catalog:
    return new_catalog()


# -- keyspaces ---------------------------------------------------------------------------


def test_keyspace_rules(cat: Catalog) -> None:
    with pytest.raises(AlreadyExists, match=r'^Cannot add existing keyspace "ks"$'):
        cat.execute(KS, None)
    cat.execute(ast.CreateKeyspace("ks", KS.replication, if_not_exists=True), None)
    with pytest.raises(ConfigurationError, match="Missing mandatory replication strategy class"):
        cat.execute(ast.CreateKeyspace("k2"), None)
    with pytest.raises(InvalidRequest, match="system keyspace is not user-modifiable"):
        cat.execute(ast.CreateKeyspace("system", KS.replication), None)
    with pytest.raises(InvalidRequest, match='"a-b" is not a valid keyspace name'):
        cat.execute(ast.CreateKeyspace("a-b", KS.replication), None)
    with pytest.raises(InvalidRequest, match=r"^Unknown keyspace nope$"):
        cat.execute(ast.AlterKeyspace("nope", KS.replication), None)
    with pytest.raises(InvalidRequest, match=r"^Keyspace 'nope' does not exist$"):
        cat.execute(ast.UseKeyspace("nope"), None)
    cat.execute(ast.UseKeyspace("ks"), None)
    with pytest.raises(ConfigurationError, match=r"^Cannot drop non existing keyspace 'nope'.$"):
        cat.execute(ast.DropKeyspace("nope"), None)
    cat.execute(ast.DropKeyspace("nope", if_exists=True), None)


def test_nts_replication_factor_expands(cat: Catalog) -> None:
    cat.execute(
        ast.CreateKeyspace(
            "k2", (("class", "NetworkTopologyStrategy"), ("replication_factor", "3"))
        ),
        None,
    )
    ks = cat.keyspace("k2")
    assert ks is not None
    assert ks.replication == (("class", "NetworkTopologyStrategy"), ("datacenter1", "3"))


@pytest.mark.parametrize(
    "options",
    [
        (("nosuchdc", "3"),),
        (("datacenter1", "1"), ("INVALID_DC", "1")),
        (("replication_factor", "1"), ("dc2", "1")),
    ],
)
def test_nts_takes_only_the_nodes_data_centre(
    cat: Catalog, options: tuple[tuple[str, str], ...]
) -> None:
    """ScyllaDB's network_topology_strategy.cc (test/cql/locator_test): an unknown DC name is
    refused, at CREATE and at ALTER; our one DC is system.local's ``datacenter1``."""
    (bad,) = [dc for dc, _ in options if dc not in ("datacenter1", "replication_factor")]
    message = f"^Unrecognized strategy option {{{bad}}} passed to NetworkTopologyStrategy$"
    replication = (("class", "NetworkTopologyStrategy"), *options)
    with pytest.raises(ConfigurationError, match=message):
        cat.execute(ast.CreateKeyspace("k2", replication), None)
    assert cat.keyspace("k2") is None
    with pytest.raises(ConfigurationError, match=message):
        cat.execute(ast.AlterKeyspace("ks", replication), None)
    cat.execute(
        ast.CreateKeyspace("k3", (("class", "NetworkTopologyStrategy"), ("datacenter1", "3"))),
        None,
    )


def test_drop_keyspace_drops_everything_but_keeps_versions(cat: Catalog) -> None:
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")),)), None)
    cat.execute(create_table("t", pkck(("v", T("ut"))), options=(cdc(enabled="true"),)), None)
    t = cat.table("ks", "t")
    assert t is not None
    cat.execute(ast.DropKeyspace("ks"), None)
    assert cat.keyspace("ks") is None
    assert cat.table("ks", "t") is None and cat.table("ks", "t_scylla_cdc_log") is None
    assert cat.user_type("ks", "ut") is None
    assert cat.table_by_id(t.table_id) == t


# -- tables ------------------------------------------------------------------------------


def test_no_keyspace_specified(cat: Catalog) -> None:
    stmt = ast.CreateTable(ast.QualifiedName(None, "t"), (ast.ColumnDef("pk", T("int")),), ("pk",))
    with pytest.raises(
        InvalidRequest,
        match=r"^No keyspace has been specified. USE a keyspace, or explicitly specify "
        "keyspace.tablename$",
    ):
        cat.execute(stmt, None)
    cat.execute(stmt, "ks")
    assert cat.table("ks", "t") is not None


def test_create_table_exists(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck()), None)
    with pytest.raises(
        AlreadyExists, match=r'^Cannot add already existing table "t" to keyspace "ks"$'
    ) as info:
        cat.execute(create_table("t", pkck()), None)
    assert (info.value.keyspace, info.value.table) == ("ks", "t")
    cat.execute(create_table("t", pkck(), if_not_exists=True), None)


def test_create_table_unknown_keyspace(cat: Catalog) -> None:
    stmt = ast.CreateTable(qn("t", "nope"), (ast.ColumnDef("pk", T("int")),), ("pk",))
    with pytest.raises(InvalidRequest, match=r"non-existent keyspace: nope$"):
        cat.execute(stmt, None)


@pytest.mark.parametrize(
    ("stmt", "message"),
    [
        (create_table("t", [("pk", T("int"))], pk=(), ck=()), "No PRIMARY KEY specified"),
        (
            create_table("t", [("pk", T("int"))], pk=("x",), ck=()),
            "Unknown definition x referenced in PRIMARY KEY",
        ),
        (
            create_table("t", [("pk", T("int")), ("pk", T("int"))], ck=()),
            "Multiple definition of identifier pk",
        ),
        (
            create_table("t", [("pk", T("list", T("int")))], ck=()),
            "Invalid non-frozen collection type for PRIMARY KEY component pk",
        ),
        (
            create_table("t", [("pk", T("counter"))], ck=()),
            "counter type is not supported for PRIMARY KEY part pk",
        ),
        (
            create_table("t", [("pk", T("duration"))], ck=()),
            "duration type is not supported for PRIMARY KEY part pk",
        ),
        (
            create_table("t", [("pk", T("int")), ("s", T("int"))], ck=(), statics=("s",)),
            "Static columns are only useful",
        ),
        (
            create_table("t", pkck(), statics=("ck",)),
            "Static column ck cannot be part of the PRIMARY KEY",
        ),
        (create_table("t-x", pkck()), "is not a valid table name"),
        (
            create_table("t", pkck(), clustering_order=(("x", "DESC"),)),
            "Missing CLUSTERING ORDER for column ck",
        ),
    ],
)
def test_create_table_invalid(cat: Catalog, stmt: ast.CreateTable, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        cat.execute(stmt, None)


def test_counter_mix(cat: Catalog) -> None:
    with pytest.raises(
        ConfigurationError, match=r"^Cannot add a non counter column \(v\) in a counter"
    ):
        cat.execute(create_table("t", pkck(("c", T("counter")), ("v", T("int")))), None)


def test_counters_cdc_unsupported(cat: Catalog) -> None:
    # seed case counters-cdc-unsupported
    with pytest.raises(
        InvalidRequest,
        match=r"^Cannot create CDC log for table ks.t. Counter support not implemented$",
    ):
        cat.execute(
            create_table("t", pkck(("v", T("counter"))), options=(cdc(enabled="true"),)), None
        )
    assert cat.table("ks", "t") is None
    cat.execute(create_table("t", pkck(("v", T("counter")))), None)
    with pytest.raises(InvalidRequest, match="Counter support not implemented"):
        cat.execute(alter("t", ast.SetOptions((cdc(enabled="true"),))), None)


def test_unknown_property(cat: Catalog) -> None:
    with pytest.raises(CqlSyntaxError, match="Unknown property 'nope'"):
        cat.execute(create_table("t", pkck(), options=(("nope", s("x")),)), None)


def test_cdc_option_errors_reach_the_user(cat: Catalog) -> None:
    with pytest.raises(ConfigurationError, match='Invalid value for CDC option "enabled": maybe'):
        cat.execute(create_table("t", pkck(), options=(cdc(enabled="maybe"),)), None)


# -- ALTER TABLE -------------------------------------------------------------------------


def test_alter_versions_and_history(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(("v", T("int")))), None)
    v1 = cat.table("ks", "t")
    assert v1 is not None and v1.schema_version == 1 and v1.table_id
    cat.execute(alter("t", ast.AddColumns((ast.ColumnDef("w", T("text")),))), None)
    cat.execute(alter("t", ast.DropColumns(("v",))), None)
    v3 = cat.table("ks", "t")
    assert v3 is not None and v3.schema_version == 3 and v3.table_id == v1.table_id
    assert [c.name for c in v3.columns] == ["pk", "ck", "w"]
    v2 = cat.table_by_id(v1.table_id, 2)
    assert v2 is not None and [c.name for c in v2.columns] == ["pk", "ck", "v", "w"]
    assert cat.table_by_id(v1.table_id, 1) == v1
    assert cat.table_by_id(v1.table_id) == v3
    assert cat.table_by_id(v1.table_id, 4) is None


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        (
            ast.AddColumns((ast.ColumnDef("v", T("int")),)),
            InvalidRequest,
            "Invalid column name v because it conflicts with an existing column",
        ),
        (
            ast.AddColumns((ast.ColumnDef("pk", T("int")),)),
            InvalidRequest,
            "conflicts with a PRIMARY KEY part",
        ),
        (
            ast.AddColumns((ast.ColumnDef("c", T("counter")),)),
            ConfigurationError,
            r"Cannot add a counter column \(c\) in a non counter column family",
        ),
        (ast.DropColumns(("x",)), InvalidRequest, "^Column x was not found in table t$"),
        (ast.DropColumns(("ck",)), InvalidRequest, "^Cannot drop PRIMARY KEY part ck$"),
        (ast.RenameColumns((("v", "w"),)), InvalidRequest, "Cannot rename non PRIMARY KEY part v"),
        (ast.RenameColumns((("x", "w"),)), InvalidRequest, "Cannot rename unknown column x"),
        (ast.RenameColumns((("ck", "v"),)), InvalidRequest, "another column of that name"),
        (
            ast.AlterColumnType("v", T("text")),
            ConfigurationError,
            "Cannot change v from type int to type text: types are incompatible.",
        ),
        (ast.DropChangefeed("nope"), InvalidRequest, "Changefeed nope does not exist"),
    ],
)
def test_alter_errors(
    cat: Catalog, action: ast.AlterTableAction, error: type[Exception], message: str
) -> None:
    cat.execute(create_table("t", pkck(("v", T("int")))), None)
    with pytest.raises(error, match=message):
        cat.execute(alter("t", action), None)


def test_alter_unknown_table(cat: Catalog) -> None:
    with pytest.raises(InvalidRequest, match=r"^unconfigured table nope$"):
        cat.execute(alter("nope", ast.DropColumns(("v",))), None)


def test_static_add_needs_clustering(cat: Catalog) -> None:
    cat.execute(create_table("t", [("pk", T("int"))], ck=()), None)
    with pytest.raises(InvalidRequest, match="Static columns are only useful"):
        cat.execute(alter("t", ast.AddColumns((ast.ColumnDef("s", T("int"), True),))), None)


def test_rename_key_column_renames_log_column(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(("v", T("int"))), options=(cdc(enabled="true"),)), None)
    cat.execute(alter("t", ast.RenameColumns((("ck", "c2"),))), None)
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None and log.column("c2") is not None and log.column("ck") is None


def test_changefeeds_stored(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck()), None)
    feed = ast.AddChangefeed("f", (("MODE", s("UPDATES")), ("FORMAT", s("JSON"))))
    cat.execute(alter("t", feed), None)
    t = cat.table("ks", "t")
    assert t is not None and t.changefeeds == (
        ("f", (("MODE", "'UPDATES'"), ("FORMAT", "'JSON'"))),
    )
    with pytest.raises(InvalidRequest, match="Changefeed f already exists"):
        cat.execute(alter("t", feed), None)
    cat.execute(alter("t", ast.DropChangefeed("f")), None)
    t = cat.table("ks", "t")
    assert t is not None and t.changefeeds == () and t.schema_version == 3


# -- CDC log lifecycle -------------------------------------------------------------------


def test_alter_with_cdc_replaces_whole_map(cat: Catalog) -> None:
    cat.execute(
        create_table("t", pkck(), options=(cdc(enabled="true", preimage="full", ttl="5"),)), None
    )
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="true", postimage="true"),))), None)
    t = cat.table("ks", "t")
    assert t is not None
    assert (t.cdc.preimage, t.cdc.postimage, t.cdc.ttl_s) == ("false", True, 86400)
    with pytest.raises(InvalidRequest, match='requires specifying "enabled" flag'):
        cat.execute(alter("t", ast.SetOptions((cdc(preimage="true"),))), None)


def test_log_lifecycle_detach_and_reattach(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(("v", T("int"))), options=(cdc(enabled="true"),)), None)
    log1 = cat.table("ks", "t_scylla_cdc_log")
    assert log1 is not None and cat.is_attached_log("ks", "t_scylla_cdc_log")
    # disable: the log is kept (detached)
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="false"),))), None)
    detached = cat.table("ks", "t_scylla_cdc_log")
    assert detached == log1 and not cat.is_attached_log("ks", "t_scylla_cdc_log")
    # base changes while detached do not reach the log...
    cat.execute(alter("t", ast.DropColumns(("v",))), None)
    cat.execute(alter("t", ast.AddColumns((ast.ColumnDef("w", T("set", T("int"))),))), None)
    assert cat.table("ks", "t_scylla_cdc_log") == log1
    # ...until CDC is re-enabled: same log table, columns updated
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="true"),))), None)
    log2 = cat.table("ks", "t_scylla_cdc_log")
    assert log2 is not None and log2.table_id == log1.table_id
    assert log2.schema_version == log1.schema_version + 1
    assert log2.column("v") is None and log2.column("cdc$deleted_v") is None
    assert log2.column("cdc$deleted_elements_w") is not None


def test_add_drop_column_updates_log(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(("v", T("int"))), options=(cdc(enabled="true"),)), None)
    cat.execute(
        alter("t", ast.AddColumns((ast.ColumnDef("m", T("map", T("int"), T("text"))),))), None
    )
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None
    m = log.column("m")
    assert m is not None and m.type.cql_name == "frozen<map<int, text>>"
    cat.execute(alter("t", ast.DropColumns(("m",))), None)
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None and log.column("m") is None
    assert log.column("cdc$deleted_elements_m") is None


def test_log_columns_cannot_be_changed(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(("v", T("int"))), options=(cdc(enabled="true"),)), None)
    with pytest.raises(
        InvalidRequest,
        match=r"^You cannot modify the set of columns of a CDC log "
        "table directly. Modify the base table instead.$",
    ):
        cat.execute(alter("t_scylla_cdc_log", ast.DropColumns(("v",))), None)
    with pytest.raises(InvalidRequest, match=r"^Cannot rename a column of a CDC log table.$"):
        cat.execute(alter("t_scylla_cdc_log", ast.RenameColumns((("pk", "p"),))), None)
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="false"),))), None)
    with pytest.raises(InvalidRequest, match="Although the base table has deactivated CDC"):
        cat.execute(
            alter("t_scylla_cdc_log", ast.AddColumns((ast.ColumnDef("x", T("int")),))), None
        )


def test_log_properties_may_change(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(), options=(cdc(enabled="true"),)), None)
    cat.execute(alter("t_scylla_cdc_log", ast.SetOptions((("comment", s("mine")),))), None)
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None and dict(log.options)["comment"] == "'mine'"
    # re-attaching does not reset the log's properties
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="false"),))), None)
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="true"),))), None)
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None and dict(log.options)["comment"] == "'mine'"


def test_no_nested_cdc(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(), options=(cdc(enabled="true"),)), None)
    with pytest.raises(InvalidRequest, match="creating nested CDC logs is not allowed"):
        cat.execute(alter("t_scylla_cdc_log", ast.SetOptions((cdc(enabled="true"),))), None)


def test_user_table_named_like_the_log_blocks_cdc(cat: Catalog) -> None:
    cat.execute(create_table("t_scylla_cdc_log", pkck()), None)
    message = (
        "^Cannot create CDC log table for table ks.t because a table of name "
        "ks.t_scylla_cdc_log already exists$"
    )
    with pytest.raises(InvalidRequest, match=message):
        cat.execute(create_table("t", pkck(), options=(cdc(enabled="true"),)), None)
    cat.execute(create_table("t", pkck()), None)
    with pytest.raises(InvalidRequest, match="t_scylla_cdc_log already exists"):
        cat.execute(alter("t", ast.SetOptions((cdc(enabled="true"),))), None)


def test_drop_table_drops_log(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(), options=(cdc(enabled="true"),)), None)
    with pytest.raises(Unauthorized, match=r"^Cannot DROP cdc log table t_scylla_cdc_log$"):
        cat.execute(ast.DropTable(qn("t_scylla_cdc_log")), None)
    cat.execute(ast.DropTable(qn("t")), None)
    assert cat.table("ks", "t") is None and cat.table("ks", "t_scylla_cdc_log") is None
    with pytest.raises(
        InvalidRequest, match=r"^Cannot drop non existing table 't' in keyspace 'ks'.$"
    ):
        cat.execute(ast.DropTable(qn("t")), None)
    cat.execute(ast.DropTable(qn("t"), if_exists=True), None)


def test_detached_log_can_be_dropped(cat: Catalog) -> None:
    cat.execute(create_table("t", pkck(), options=(cdc(enabled="true"),)), None)
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="false"),))), None)
    cat.execute(ast.DropTable(qn("t_scylla_cdc_log")), None)
    assert cat.table("ks", "t_scylla_cdc_log") is None
    cat.execute(alter("t", ast.SetOptions((cdc(enabled="true"),))), None)
    assert cat.table("ks", "t_scylla_cdc_log") is not None


# -- user types --------------------------------------------------------------------------


def test_udt_field_indices_are_stable(cat: Catalog) -> None:
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")), ("b", T("text")))), None)
    cat.execute(ast.AlterType(qn("ut"), add=("c", T("int"))), None)
    cat.execute(ast.AlterType(qn("ut"), renames=(("a", "z"),)), None)
    ut = cat.user_type("ks", "ut")
    assert ut is not None
    assert tuple(ut.field_names) == ("z", "b", "c")
    assert [t.cql_name for t in ut.field_types] == ["int", "text", "int"]


def test_alter_type_reaches_tables_and_logs(cat: Catalog) -> None:
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")),)), None)
    cat.execute(create_table("t", pkck(("v", T("ut"))), options=(cdc(enabled="true"),)), None)
    cat.execute(ast.AlterType(qn("ut"), add=("b", T("int"))), None)
    t = cat.table("ks", "t")
    log = cat.table("ks", "t_scylla_cdc_log")
    assert t is not None and log is not None and t.schema_version == 2
    tv = t.column("v")
    lv = log.column("v")
    assert tv is not None and tuple(tv.type.field_names) == ("a", "b")  # type: ignore[attr-defined]
    assert lv is not None and lv.type.cql_name == "frozen<ut>"
    assert tuple(lv.type.field_names) == ("a", "b")  # type: ignore[attr-defined]


def test_udt_errors(cat: Catalog) -> None:
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")),)), None)
    with pytest.raises(InvalidRequest, match=r"^A user type of name ks.ut already exists$"):
        cat.execute(ast.CreateType(qn("ut"), (("a", T("int")),)), None)
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")),), if_not_exists=True), None)
    with pytest.raises(InvalidRequest, match="A user type cannot contain counters"):
        cat.execute(ast.CreateType(qn("u2"), (("a", T("counter")),)), None)
    with pytest.raises(InvalidRequest, match="non-frozen user type fields"):
        cat.execute(ast.CreateType(qn("u2"), (("a", T("ut")),)), None)
    with pytest.raises(InvalidRequest, match="a field of the same name already exists"):
        cat.execute(ast.AlterType(qn("ut"), add=("a", T("int"))), None)
    with pytest.raises(InvalidRequest, match=r"^Unknown field x in type ks.ut$"):
        cat.execute(ast.AlterType(qn("ut"), renames=(("x", "y"),)), None)
    with pytest.raises(InvalidRequest, match=r"^No user type named ks.nope exists.$"):
        cat.execute(ast.DropType(qn("nope")), None)
    cat.execute(ast.CreateType(qn("u2"), (("x", T("frozen", T("ut"))),)), None)
    with pytest.raises(InvalidRequest, match="still used by user type u2"):
        cat.execute(ast.DropType(qn("ut")), None)
    cat.execute(ast.DropType(qn("u2")), None)
    cat.execute(create_table("t", pkck(("v", T("frozen", T("ut"))))), None)
    with pytest.raises(
        InvalidRequest, match=r"^Cannot drop user type ks.ut as it is still used by table ks.t$"
    ):
        cat.execute(ast.DropType(qn("ut")), None)
    cat.execute(ast.DropTable(qn("t")), None)
    cat.execute(ast.DropType(qn("ut")), None)
    assert cat.user_type("ks", "ut") is None


def test_nested_udt_alter_propagates(cat: Catalog) -> None:
    cat.execute(ast.CreateType(qn("inner"), (("a", T("int")),)), None)
    cat.execute(ast.CreateType(qn("outer"), (("i", T("frozen", T("inner"))),)), None)
    cat.execute(create_table("t", pkck(("v", T("frozen", T("outer"))))), None)
    cat.execute(ast.AlterType(qn("inner"), add=("b", T("int"))), None)
    outer = cat.user_type("ks", "outer")
    assert outer is not None
    assert tuple(outer.field_types[0].field_names) == ("a", "b")  # type: ignore[attr-defined]
    t = cat.table("ks", "t")
    assert t is not None
    v = t.column("v")
    assert v is not None
    assert tuple(v.type.field_types[0].field_names) == ("a", "b")  # type: ignore[attr-defined]


# -- persistence -------------------------------------------------------------------------


def test_persistence_round_trip(tmp_path: Path) -> None:
    cat = new_catalog(tmp_path)
    cat.execute(ast.CreateType(qn("ut"), (("a", T("int")), ("b", T("text")))), None)
    cat.execute(
        create_table(
            "t",
            pkck(
                ("s", T("int")),
                ("l", T("list", T("int"))),
                ("m", T("map", T("text"), T("frozen", T("set", T("int"))))),
                ("u", T("ut")),
                ("tu", T("tuple", T("int"), T("text"))),
                ("vec", T("vector", T("float"), size=3)),
            ),
            statics=("s",),
            clustering_order=(("ck", "DESC"),),
            options=(cdc(enabled="true", preimage="full"), ("comment", s("hi"))),
        ),
        None,
    )
    cat.execute(ast.AlterType(qn("ut"), add=("c", T("int"))), None)
    cat.execute(ast.AlterType(qn("ut"), renames=(("a", "z"),)), None)
    cat.execute(alter("t", ast.AddChangefeed("f", (("MODE", s("UPDATES")),))), None)
    assert (tmp_path / "catalog.json").exists()
    again = Catalog(DocumentDirectory.of(tmp_path))
    assert again.keyspaces() == cat.keyspaces()
    assert again.user_type("ks", "ut") == cat.user_type("ks", "ut")
    assert again.tables() == cat.tables()
    for table in cat.tables():
        for version in range(1, table.schema_version + 1):
            assert again.table_by_id(table.table_id, version) == cat.table_by_id(
                table.table_id, version
            )
    # the reloaded catalog keeps working
    again.execute(alter("t", ast.DropColumns(("l",))), None)
    assert Catalog(DocumentDirectory.of(tmp_path)).table("ks", "t") == again.table("ks", "t")


def test_reload_sees_other_process_ddl(tmp_path: Path) -> None:
    reader = Catalog(DocumentDirectory.of(tmp_path))
    writer = new_catalog(tmp_path)
    writer.execute(create_table("t", pkck()), None)
    assert reader.table("ks", "t") is None
    reader.reload()
    assert reader.table("ks", "t") == writer.table("ks", "t")


# -- dropped columns ---------------------------------------------------------------------


def _run(cat: Catalog, *texts: str) -> None:
    from cqlcdc.cql import parse_statement

    for text in texts:
        cat.execute(parse_statement(text), "ks")


def test_a_drop_is_remembered_with_its_timestamp_and_survives_a_reload(tmp_path: Path) -> None:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    cat.execute(KS, None)
    _run(
        cat,
        "CREATE TABLE t (pk int, ck int, v int, s list<int> static, PRIMARY KEY (pk, ck))",
        "ALTER TABLE t DROP v USING TIMESTAMP 20000",
        "ALTER TABLE t DROP s USING TIMESTAMP 30000",
    )
    table = cat.table("ks", "t")
    assert table is not None and table.column("v") is None
    assert table.readded_at() == {}  # dropped, not added again: nothing to compare with
    _run(cat, "ALTER TABLE t ADD v text", "ALTER TABLE t ADD s list<int> static")
    reloaded = Catalog(DocumentDirectory.of(tmp_path)).table("ks", "t")
    assert reloaded is not None
    assert reloaded.readded_at() == {"v": 20000, "s": 30000}
    dropped = {d.name: d for d in reloaded.dropped}
    assert dropped["v"].type.cql_name == "int" and not dropped["v"].static
    assert dropped["s"].type.cql_name == "list<int>" and dropped["s"].static
    # dropped again, with an older timestamp: the line never moves back
    _run(cat, "ALTER TABLE t DROP v USING TIMESTAMP 100", "ALTER TABLE t ADD v int")
    table = cat.table("ks", "t")
    assert table is not None and table.readded_at()["v"] == 20000
    dropped_v = table.dropped_column("v")
    assert dropped_v is not None and dropped_v.type.cql_name == "text"  # the last drop's


def test_a_drop_without_timestamp_takes_the_clock(cat: Catalog) -> None:
    import time

    before = time.time_ns() // 1000
    _run(cat, "CREATE TABLE t (pk int PRIMARY KEY, v int)", "ALTER TABLE t DROP v")
    table = cat.table("ks", "t")
    assert table is not None
    dropped = table.dropped_column("v")
    assert dropped is not None and before <= dropped.timestamp <= time.time_ns() // 1000


def test_readding_a_dropped_column_follows_scylla(cat: Catalog) -> None:
    _run(
        cat,
        "CREATE TABLE c (pk int PRIMARY KEY, a counter, b counter)",
        "ALTER TABLE c DROP b",
        "CREATE TABLE l (pk int, ck int, x list<text>, y list<text>, z int, PRIMARY KEY (pk, ck))",
        "ALTER TABLE l DROP (x, y, z)",
    )
    with pytest.raises(
        InvalidRequest, match=r"^Cannot re-add previously dropped counter column b$"
    ):
        _run(cat, "ALTER TABLE c ADD b counter")
    with pytest.raises(
        InvalidRequest,
        match=r"^Cannot add a collection with the name x because a collection with the same "
        "name and a different type has already been used in the past$",
    ):
        _run(cat, "ALTER TABLE l ADD x map<int, int>")
    # the same collection type, a frozen one, any type over an atomic column: allowed
    _run(cat, "ALTER TABLE l ADD x list<text>", "ALTER TABLE l ADD y frozen<list<int>>")
    _run(cat, "ALTER TABLE l ADD z text")
    table = cat.table("ks", "l")
    assert table is not None and set(table.readded_at()) == {"x", "y", "z"}


def test_the_log_of_a_readded_column_hides_its_old_values(cat: Catalog) -> None:
    _run(
        cat,
        "CREATE TABLE t (pk int PRIMARY KEY, v int, m map<int, int>) WITH cdc = {'enabled': true}",
        "ALTER TABLE t DROP (v, m) USING TIMESTAMP 7",
        "ALTER TABLE t ADD m map<int, int>",
    )
    log = cat.table("ks", "t_scylla_cdc_log")
    assert log is not None
    assert log.readded_at() == {"m": 7, "cdc$deleted_m": 7, "cdc$deleted_elements_m": 7}
    assert [d.name for d in log.dropped] == [  # in name order, as ScyllaDB drops them
        "cdc$deleted_elements_m",
        "cdc$deleted_m",
        "cdc$deleted_v",
        "m",
        "v",
    ]


@pytest.mark.parametrize(
    ("value", "canonical"),
    [
        ("NONE", "NONE"), ("none", "NONE"), ("ALWAYS", "ALWAYS"), ("200ms", "200.00ms"),
        ("0ms", "0.00ms"), ("99PERCENTILE", "99.0PERCENTILE"), ("99.0percentile", "99.0PERCENTILE"),
    ],
)  # fmt: skip
def test_speculative_retry_is_stored_in_scyllas_canonical_form(value: str, canonical: str) -> None:
    from cqlcdc.schema.table_options import speculative_retry

    assert speculative_retry(value) == canonical


@pytest.mark.parametrize(
    "value",
    ["", "x", "ms", "percentile", "dog", "nanPERCENTILE", "infPERCENTILE", "-infPERCENTILE",
     "nanms", "infms", "-1ms", "-0.1PERCENTILE", "100.001PERCENTILE", "+101PERCENTILE", "1_0ms"],
)  # fmt: skip
def test_a_speculative_retry_scylla_cannot_read_is_refused(value: str) -> None:
    """cqlpy's test_alter_table.py: every other form is a configuration error."""
    from cqlcdc.errors import ConfigurationError
    from cqlcdc.schema.table_options import speculative_retry

    with pytest.raises(ConfigurationError, match="speculative_retry"):
        speculative_retry(value)
