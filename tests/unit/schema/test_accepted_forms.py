"""Forms that ScyllaDB refuses and cqlcdc used to accept and then apply as something else
(docs/semantics.md, "Accepted forms that change nothing"): each is refused with ScyllaDB's
error, and the forms ScyllaDB accepts still are."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import ConfigurationError, CqlSyntaxError, InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.writes import check_batch, check_counter_attributes, default_ttl_s

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck))"
COUNTERS = "CREATE TABLE ks.c (pk int PRIMARY KEY, n counter)"


@pytest.fixture
def catalog() -> Catalog:
    c = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    for cql in (KS, TABLE, COUNTERS):
        c.execute(parse_statement(cql), None)
    return c


def _run(catalog: Catalog, cql: str) -> None:
    catalog.execute(parse_statement(cql), None)


def _table(catalog: Catalog, name: str) -> TableSchema:
    schema = catalog.table("ks", name)
    assert schema is not None
    return schema


# -- table options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        # a negative default TTL made every write expire as it was acknowledged
        (
            "default_time_to_live = -5",
            ConfigurationError,
            "default_time_to_live cannot be smaller than 0, (default 0)",
        ),
        (
            "paxos_grace_seconds = -1",
            ConfigurationError,
            "paxos_grace_seconds cannot be smaller than 0, (default 864000)",
        ),
        # std::stoi: not a 32-bit int
        (
            "default_time_to_live = 2147483648",
            CqlSyntaxError,
            "Invalid integer value 2147483648 for 'default_time_to_live'",
        ),
        (
            "max_index_interval = 64",
            ConfigurationError,
            "max_index_interval must be greater than min_index_interval",
        ),
        ("ID = 'not-a-uuid'", ConfigurationError, "Invalid table id"),
    ],
)
def test_out_of_range_table_options_are_refused(
    catalog: Catalog, options: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        _run(catalog, f"CREATE TABLE ks.x (pk int PRIMARY KEY, v int) WITH {options}")
    assert getattr(info.value, "message", "") == message
    assert catalog.table("ks", "x") is None
    with pytest.raises(error) as info:
        _run(catalog, f"ALTER TABLE ks.t WITH {options}")
    assert getattr(info.value, "message", "") == message
    assert dict(_table(catalog, "t").options) == {}


def test_table_options_at_their_limits_are_accepted(catalog: Catalog) -> None:
    _run(
        catalog,
        "CREATE TABLE ks.x (pk int PRIMARY KEY, v int) WITH default_time_to_live = 2147483647 "
        "AND paxos_grace_seconds = 0 AND min_index_interval = 64 AND max_index_interval = 64 "
        "AND ID = 5cd8a9b0-2f42-11eb-ac58-84f095630d16",
    )
    options = dict(_table(catalog, "x").options)
    assert options["default_time_to_live"] == "2147483647"
    assert "id" not in options  # the table gets an id of its own


def test_a_table_id_cannot_be_altered(catalog: Catalog) -> None:
    with pytest.raises(ConfigurationError) as info:
        _run(catalog, "ALTER TABLE ks.t WITH ID = 5cd8a9b0-2f42-11eb-ac58-84f095630d16")
    assert info.value.message == "Cannot alter table id."


def test_a_negative_default_ttl_left_by_an_older_version_refuses_writes(catalog: Catalog) -> None:
    schema = _table(catalog, "t")
    assert default_ttl_s(replace(schema, options=(("default_time_to_live", "60"),))) == 60
    broken = replace(schema, options=(("default_time_to_live", "-5"),))
    with pytest.raises(InvalidRequest, match=r"ks\.t: its default_time_to_live is -5"):
        default_ttl_s(broken)


# -- CLUSTERING ORDER -------------------------------------------------------------------------


def test_a_second_clustering_order_clause_adds_to_the_first(catalog: Catalog) -> None:
    # the second clause used to replace the first: the table silently became ASC
    with pytest.raises(InvalidRequest) as info:
        _run(
            catalog,
            "CREATE TABLE ks.x (pk int, ck int, PRIMARY KEY (pk, ck)) "
            "WITH CLUSTERING ORDER BY (ck DESC) AND CLUSTERING ORDER BY (ck ASC)",
        )
    assert info.value.message == (
        "Only clustering key columns can be defined in CLUSTERING ORDER directive"
    )
    _run(
        catalog,
        "CREATE TABLE ks.y (pk int, a int, b int, PRIMARY KEY (pk, a, b)) "
        "WITH CLUSTERING ORDER BY (a DESC) AND CLUSTERING ORDER BY (b ASC)",
    )
    y = _table(catalog, "y")
    assert [(c.name, c.descending) for c in y.clustering_key] == [("a", True), ("b", False)]


# -- writes -----------------------------------------------------------------------------------


def _batch(cql: str) -> ast.Batch:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Batch)
    return stmt


def _write(cql: str) -> ast.Insert | ast.Update | ast.Delete:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
    return stmt


INC = "UPDATE ks.c SET n = n + 1 WHERE pk = 1"
PUT = "INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1)"


@pytest.mark.parametrize(
    ("batch", "tables", "message"),
    [
        (
            f"BEGIN COUNTER BATCH USING TIMESTAMP 5 {INC}; APPLY BATCH",
            "c",
            "Cannot provide custom timestamp for counter BATCH",
        ),
        (
            f"BEGIN UNLOGGED BATCH USING TIMESTAMP 5 {INC}; APPLY BATCH",
            "c",
            "Cannot provide custom timestamp for a BATCH containing counters",
        ),
        # the statement's timestamp used to win silently
        (
            f"BEGIN BATCH USING TIMESTAMP 10 {PUT} USING TIMESTAMP 20; APPLY BATCH",
            "t",
            "Timestamp must be set either on BATCH or individual statements",
        ),
        # the INSERT used to be applied as if the batch were not a counter batch
        (
            f"BEGIN COUNTER BATCH {INC}; {PUT}; APPLY BATCH",
            "ct",
            "Cannot include non-counter statement in a counter batch",
        ),
        (
            f"BEGIN BATCH {INC}; APPLY BATCH",
            "c",
            "Cannot include a counter statement in a logged batch",
        ),
        (
            f"BEGIN UNLOGGED BATCH {INC}; {PUT}; APPLY BATCH",
            "ct",
            "Counter and non-counter mutations cannot exist in the same batch",
        ),
    ],
)
def test_batches_scylla_refuses_are_refused(
    catalog: Catalog, batch: str, tables: str, message: str
) -> None:
    schemas = [_table(catalog, name) for name in tables]
    with pytest.raises(InvalidRequest) as info:
        check_batch(_batch(batch), schemas)
    assert info.value.message == message


@pytest.mark.parametrize(
    ("batch", "tables"),
    [
        (f"BEGIN COUNTER BATCH {INC}; {INC}; APPLY BATCH", "cc"),
        (f"BEGIN UNLOGGED BATCH {INC}; APPLY BATCH", "c"),  # allowed by ScyllaDB
        (f"BEGIN BATCH USING TIMESTAMP 10 {PUT}; {PUT}; APPLY BATCH", "tt"),
        (f"BEGIN UNLOGGED BATCH {PUT} USING TIMESTAMP 1; {PUT}; APPLY BATCH", "tt"),
    ],
)
def test_batches_scylla_accepts_are_accepted(catalog: Catalog, batch: str, tables: str) -> None:
    check_batch(_batch(batch), [_table(catalog, name) for name in tables])


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            "UPDATE ks.c USING TTL 5 SET n = n + 1 WHERE pk = 1",  # the TTL used to be dropped
            "Cannot provide custom TTL for counter updates",
        ),
        (
            "UPDATE ks.c USING TIMESTAMP 5 SET n = n + 1 WHERE pk = 1",
            "Cannot provide custom timestamp for counter updates",
        ),
        (
            "DELETE FROM ks.c USING TIMESTAMP 5 WHERE pk = 1",
            "Cannot provide custom timestamp for counter updates",
        ),
    ],
)
def test_counter_writes_take_no_timestamp_or_ttl(
    catalog: Catalog, write: str, message: str
) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_counter_attributes(_write(write), _table(catalog, "c"))
    assert info.value.message == message
    check_counter_attributes(_write(INC), _table(catalog, "c"))
    check_counter_attributes(
        _write("UPDATE ks.t USING TIMESTAMP 5 AND TTL 5 SET v = 1 WHERE pk = 1 AND ck = 1"),
        _table(catalog, "t"),
    )
