"""ScyllaDB's per-row TTL column (issue 26, section 4): the DDL forms and their messages,
DESCRIBE, the catalog's persistence, and rows hidden once their expiration time has passed
(the semantics of ScyllaDB's test/cqlpy/test_ttl_row.py)."""

from __future__ import annotations

import pytest

from cqlcdc.cdc.log_writer import LogWriter, WriteInfo
from cqlcdc.errors import CqlSyntaxError, InvalidRequest
from cqlcdc.schema import persist
from cqlcdc.schema.row_ttl import FIVE_YEARS_S, is_expired
from cqlcdc.storage.row_expiry import expiration_sweeps, row_ttl_deletion
from tests.core_model import CoreModel, parse_qualified

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
NOW_S = 1_700_000_000


def _model() -> CoreModel:
    m = CoreModel(clock_us=NOW_S * 1_000_000)
    m.run(KS)
    return m


def _ttl_column(m: CoreModel, table: str) -> str | None:
    return m.table(parse_qualified(table)).ttl_column


def _refused(m: CoreModel, cql: str) -> str:
    with pytest.raises(InvalidRequest) as caught:
        m.run(cql)
    return caught.value.message


def test_create_table_marks_one_regular_column() -> None:
    m = _model()
    m.run('CREATE TABLE ks.t (p int PRIMARY KEY, v int, "eXp" timestamp TTL)')
    assert _ttl_column(m, "ks.t") == "eXp"
    m.run("CREATE TABLE ks.u (p int PRIMARY KEY, EXPiration bigint TTL)")
    assert _ttl_column(m, "ks.u") == "expiration"
    assert "\n    expiration bigint TTL,\n" in m.run("DESCRIBE TABLE ks.u")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("p int PRIMARY KEY, e1 timestamp TTL, e2 timestamp TTL",
         "Cannot have more than one TTL column in a table. Saw e1 and e2"),
        ("p int PRIMARY KEY, e double TTL",
         "TTL column 'e' must be of type timestamp, bigint or int, can't be double"),
        ("e timestamp TTL PRIMARY KEY", "TTL column e cannot be part of the PRIMARY KEY"),
        ("p int, e timestamp TTL, PRIMARY KEY (p, e)",
         "TTL column e cannot be part of the PRIMARY KEY"),
        ("p int, c int, e timestamp TTL STATIC, PRIMARY KEY (p, c)",
         "TTL column e cannot be a static column"),
    ],
)  # fmt: skip
def test_create_table_refuses_as_scylla_does(columns: str, message: str) -> None:
    assert _refused(_model(), f"CREATE TABLE ks.t ({columns})") == message


def test_alter_table_sets_and_unsets_it() -> None:
    m = _model()
    m.run(
        "CREATE TABLE ks.t (p int, c int, s timestamp STATIC, e1 timestamp, e2 int, "
        "d double, PRIMARY KEY (p, c))"
    )
    assert _refused(m, "ALTER TABLE ks.t TTL NULL") == (
        "Cannot unset TTL column, table ks.t does not have a TTL column set"
    )
    assert _refused(m, "ALTER TABLE ks.t TTL nope") == (
        "Column 'nope' does not exist in table ks.t"
    )
    assert _refused(m, "ALTER TABLE ks.t TTL d") == (
        "TTL column d must be of type timestamp, bigint or int, can't be double"
    )
    assert _refused(m, "ALTER TABLE ks.t TTL c") == (
        "Cannot use a primary key column c as a TTL column"
    )
    assert _refused(m, "ALTER TABLE ks.t TTL s") == "Cannot use a static column s as a TTL column"
    m.run("ALTER TABLE ks.t TTL e1")
    assert _ttl_column(m, "ks.t") == "e1"
    assert _refused(m, "ALTER TABLE ks.t TTL e1") == (
        "Cannot set TTL column, table ks.t already has a TTL column defined: e1"
    )
    m.run("ALTER TABLE ks.t TTL NULL")
    m.run("ALTER TABLE ks.t TTL e2")
    assert _ttl_column(m, "ks.t") == "e2"
    with pytest.raises(CqlSyntaxError, match="TTL"):  # ADD takes no TTL mark (the grammar's)
        m.run("ALTER TABLE ks.t ADD x timestamp TTL")


def test_dropping_the_column_turns_it_off_for_good() -> None:
    m = _model()
    m.run("CREATE TABLE ks.t (p int PRIMARY KEY, e timestamp TTL, x int)")
    m.run("ALTER TABLE ks.t DROP x")
    assert _ttl_column(m, "ks.t") == "e"
    m.run("ALTER TABLE ks.t DROP e")
    m.run("ALTER TABLE ks.t ADD e timestamp")
    assert _ttl_column(m, "ks.t") is None


def test_the_catalog_keeps_it() -> None:
    m = _model()
    m.run("CREATE TABLE ks.t (p int PRIMARY KEY, e int TTL)")
    table = m.table(parse_qualified("ks.t"))
    assert persist.table_from_json(persist.table_to_json(table)).ttl_column == "e"


@pytest.mark.parametrize("type_name", ["timestamp", "bigint", "int"])
def test_rows_past_their_expiration_are_gone(type_name: str) -> None:
    m = _model()
    m.run(f"CREATE TABLE ks.t (p int, c int, x int, e {type_name} TTL, PRIMARY KEY (p, c))")
    scale = 1000 if type_name == "timestamp" else 1
    now = m.clock_us // 1_000_000

    def at(seconds: int) -> int:
        return seconds * scale

    m.run(f"INSERT INTO ks.t (p, c, e) VALUES (1, 1, {at(now - 60)})")  # expired
    m.run("INSERT INTO ks.t (p, c, x) VALUES (1, 2, 2)")  # no expiration: never
    m.run(f"INSERT INTO ks.t (p, c, e) VALUES (1, 3, {at(162777600)})")  # > 5 years ago: never
    m.run(f"INSERT INTO ks.t (p, c, e) VALUES (1, 4, {at(now + 3600)})")  # later
    m.run(f"INSERT INTO ks.t (p, c, e) VALUES (1, 5, {at(now - 1)})")
    m.run("UPDATE ks.t SET e = null WHERE p = 1 AND c = 5")  # cancelled before it expired
    assert m.run("SELECT c FROM ks.t WHERE p = 1") == [(2,), (3,), (4,), (5,)]
    m.clock_us += 3600 * 1_000_000
    assert m.run("SELECT c FROM ks.t WHERE p = 1") == [(2,), (3,), (5,)]


def test_the_five_year_window() -> None:
    assert is_expired(NOW_S, "bigint", NOW_S)
    assert not is_expired(NOW_S + 1, "bigint", NOW_S)
    assert not is_expired(NOW_S - FIVE_YEARS_S, "int", NOW_S)
    assert is_expired((NOW_S - FIVE_YEARS_S + 1) * 1000, "timestamp", NOW_S)
    assert not is_expired(None, "timestamp", NOW_S)


@pytest.mark.parametrize("has_ck", [True, False])
def test_the_expiration_deletion_and_its_log_rows(has_ck: bool) -> None:
    """ScyllaDB's scanner deletes an expired row (a partition without clustering key) and
    logs it as -3 (-4), after its preimage (test_row_ttl_expiration_cdc_event)."""
    m = _model()
    key = "PRIMARY KEY (p, c)" if has_ck else "PRIMARY KEY (p)"
    m.run(
        f"CREATE TABLE ks.t (p int, c int, x int, e bigint TTL, {key}) "
        "WITH cdc = {'enabled': true, 'preimage': true}"
    )
    m.run(f"INSERT INTO ks.t (p, c, x, e) VALUES (1, 2, 3, {NOW_S - 60})")
    m.run("INSERT INTO ks.t (p, c, x) VALUES (2, 2, 3)")  # no expiration
    schema = m.table(parse_qualified("ks.t"))
    state = m.states[schema.table_id]
    write_ts = m.clock_us
    # a row written already expired is swept at the next second
    assert expiration_sweeps(schema, state[(1,)], NOW_S) == {NOW_S + 1}
    assert expiration_sweeps(schema, state[(2,)], NOW_S) == set()
    assert row_ttl_deletion(schema, state[(2,)], NOW_S + 1) is None
    deletion = row_ttl_deletion(schema, state[(1,)], NOW_S + 1)
    assert deletion is not None
    ts = max((NOW_S + 1) * 1_000_000, write_ts + 1)
    assert (deletion.rows[(2,)].deletion if has_ck else deletion.deletion) == ts
    writer = LogWriter(schema, (1,), lambda _: b"\x00" * 16)
    rows = writer.write(deletion, state[(1,)], WriteInfo(NOW_S + 1, 7, expiration=True))
    ops = [(r["cdc$operation"], r.get("x"), r.get("e")) for r in rows]
    assert ops == [(0, 3, NOW_S - 60), (-3 if has_ck else -4, None, None)]
