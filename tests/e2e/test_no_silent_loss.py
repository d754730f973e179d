"""Nothing acknowledged is lost and no data directory is wedged: oversized keys are
rejected on every write path, a record the core cannot apply stops its table (alone) with
a name and a way out (``cqlcdc recover``), and a second process is told who owns the
directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import cqlcdc
from cqlcdc.cli import main
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.errors import InvalidRequest, ServerError
from cqlcdc.loader import load
from cqlcdc.storage.token import murmur3_token
from cqlcdc.write_outcomes import pipeline_errors
from cqlcdc.writes import row_records

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
BIG = "x" * 70_000
TOO_LONG = "Key length of 70000 is longer than maximum of 65535"
CLI = Path(sys.executable).with_name("cqlcdc")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a user runs it."""
    return subprocess.run(
        [str(CLI), *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in result)


@pytest.fixture
def data(spark: Any, tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def session(data: Path) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        s.execute(KS)
        s.execute(
            "CREATE TABLE ks.t (pk int, ck text, v int, PRIMARY KEY (pk, ck)) "
            "WITH cdc = {'enabled': true}"
        )
        s.execute("ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON')")
        s.execute(
            "CREATE TABLE ks.c (a text, b text, v int, PRIMARY KEY ((a, b))) "
            "WITH cdc = {'enabled': true}"
        )
        yield s
    finally:
        s.close()


def test_oversized_keys_are_rejected_on_every_write_path(
    session: Any, data: Path, tmp_path: Path
) -> None:
    s = session
    rejected: list[Any] = []

    def expect_rejected(result: Any) -> None:
        rejected.append(result)
        assert isinstance(result, InvalidRequest), result
        assert result.message.startswith("Key length of 700"), result.message

    def expect_raises(run: Any) -> None:
        with pytest.raises(InvalidRequest, match="Key length of 700") as info:
            run()
        expect_rejected(info.value)

    insert = s.prepare("INSERT INTO ks.t (pk, ck, v) VALUES (?, ?, ?)")
    compound = s.prepare("INSERT INTO ks.c (a, b, v) VALUES (?, ?, ?)")
    expect_raises(lambda: s.execute(f"INSERT INTO ks.t (pk, ck, v) VALUES (1, '{BIG}', 1)"))
    expect_raises(lambda: s.execute(f"INSERT INTO ks.c (a, b, v) VALUES ('{BIG}', 'b', 1)"))
    expect_raises(lambda: s.execute(insert, (1, BIG, 1)))
    expect_raises(lambda: s.execute(compound, ("a", BIG, 1)))
    expect_raises(lambda: s.execute(f"UPDATE ks.t SET v = 1 WHERE pk = 1 AND ck = '{BIG}'"))
    expect_raises(lambda: s.execute(f"DELETE FROM ks.t WHERE pk = 1 AND ck >= '{BIG}'"))
    expect_raises(
        lambda: s.execute(
            "BEGIN BATCH INSERT INTO ks.t (pk, ck, v) VALUES (2, 'ok', 2); "
            f"INSERT INTO ks.t (pk, ck, v) VALUES (2, '{BIG}', 2); APPLY BATCH"
        )
    )
    # execute_many: the row path (few writes) and the bulk path (many), each error in its slot
    few = s.execute_many([insert, insert], [(3, "ok", 3), (3, BIG, 3)])
    assert few[0].is_write
    expect_rejected(few[1])
    params = [(4, f"k{i}", i) for i in range(40)]
    params[7] = (4, BIG, 7)
    many = s.execute_many([insert] * 40, params)
    expect_rejected(many[7])
    assert all(r.is_write for i, r in enumerate(many) if i != 7)
    pairs = [(f"a{i}", f"b{i}", i) for i in range(40)]
    pairs[9] = (BIG, "b", 9)
    many = s.execute_many([compound] * 40, pairs)
    expect_rejected(many[9])
    # execute_arrow, typed columns
    arrow = pa.table({"pk": [5, 5], "ck": ["ok", BIG], "v": [5, 5]})
    by_arrow = s.execute_arrow(insert, arrow)
    expect_rejected(by_arrow[1])
    # load, from CSV
    csv = tmp_path / "rows.csv"
    csv.write_text(f"pk,ck,v\n6,ok,6\n6,{BIG},6\n")
    loaded = load(s, "ks.t", [csv])
    assert loaded.rows == 1
    ((_, row, err),) = loaded.failed
    assert row == 2
    expect_rejected(err)
    assert len(rejected) == 12

    # the session goes on, the rejected writes left no trace, the accepted ones are logged
    s.execute("INSERT INTO ks.t (pk, ck, v) VALUES (9, 'after', 9)")
    base = _rows(s.execute("SELECT pk, ck, v FROM ks.t"))
    expected = [(3, "ok", 3)]  # the batch is rejected whole, (2, 'ok') with it
    expected += [(4, f"k{i}", i) for i in range(40) if i != 7]
    expected += [(5, "ok", 5), (6, "ok", 6), (9, "after", 9)]
    assert base == sorted(expected)
    logged = _rows(s.execute("SELECT pk, ck, v FROM ks.t_scylla_cdc_log"))
    assert logged == sorted(expected)
    assert len(s.execute("SELECT a FROM ks.c").all()) == 39
    s.close()
    # a restart of the same data directory works and keeps everything
    again = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(again.execute("SELECT pk, ck, v FROM ks.t")) == sorted(expected)
        again.execute("INSERT INTO ks.t (pk, ck, v) VALUES (10, 'later', 10)")
        assert len(again.execute("SELECT pk FROM ks.t_scylla_cdc_log").all()) == len(expected) + 1
    finally:
        again.close()
    done = _cli("changefeed", "read", "ks.t/f", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert BIG not in done.stdout
    assert len(done.stdout.splitlines()) == len(expected) + 1


def _bad_record(c: Any, table: str) -> IngestRecord:
    """A durable record the core cannot decode: what a defect would leave in the log."""
    schema = c.catalog.table("ks", table)
    pk = (7).to_bytes(4, "big", signed=True)
    return c.record(schema, murmur3_token(pk), pk, b"\x00not a payload", c.next_seq)


def test_a_record_the_core_cannot_apply_stops_its_table_until_recover_skips_it(
    spark: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute("CREATE TABLE ks.u (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    s.execute("CREATE TABLE ks.w (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    s.execute("INSERT INTO ks.u (pk, v) VALUES (1, 1)")
    c = s.coordinator
    with c.lock:
        bad = _bad_record(c, "u")
        # a valid write right behind it, in the same batch (acknowledged once durable)
        insert = cqlcdc.session._statement("INSERT INTO ks.u (pk, v) VALUES (2, 2)")
        records, _ = row_records(c, insert, None, None, bad.seq + 1)  # type: ignore[arg-type]
        good = records[0]
        c.append([bad, good])
    s.flush()  # the table stops; the batch commits: every other table goes on
    s.execute("INSERT INTO ks.w (pk, v) VALUES (1, 1)")
    assert _rows(s.execute("SELECT pk, v FROM ks.w")) == [(1, 1)]
    with pytest.raises(ServerError, match=r"Table ks\.u is stopped: write seq=") as info:
        s.execute("INSERT INTO ks.u (pk, v) VALUES (3, 3)")
    assert f"cqlcdc recover --data-dir {data}" in info.value.message
    errors = pipeline_errors(c, bad.seq, good.seq)
    assert set(errors) == {bad.seq, good.seq}
    assert f"cannot apply ingest record seq={bad.seq} (table ks.u" in errors[bad.seq].message
    s.close()

    shown = _cli("recover", "--data-dir", str(data))
    assert shown.returncode == 0, shown.stderr
    assert f"table ks.u stopped at write seq={bad.seq}" in shown.stdout
    assert "2 write(s) held" in shown.stdout
    assert "--retry-table ks.u" in shown.stdout
    # the bad write is dropped, the others applied again: one command
    done = _cli("recover", "--data-dir", str(data), "--skip", str(bad.seq), "--retry-table", "ks.u")
    assert done.returncode == 0, done.stderr
    assert f"1 held write(s) {bad.seq} dropped for good" in done.stdout
    assert "ks.u: 1 held write(s) appended again" in done.stdout
    committed = _cli("recover", "--data-dir", str(data), "--skip", "1")
    assert committed.returncode == 1
    assert committed.stderr.count("\n") == 1 and "committed already" in committed.stderr

    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, v FROM ks.u")) == [(1, 1), (2, 2)]
        assert len(s.execute("SELECT pk FROM ks.u_scylla_cdc_log").all()) == 2
        s.execute("INSERT INTO ks.u (pk, v) VALUES (3, 3)")
        assert len(s.execute("SELECT pk FROM ks.u").all()) == 3
    finally:
        s.close()


def test_a_second_process_is_told_who_owns_the_data_directory(
    session: Any, data: Path, tmp_path: Path
) -> None:
    script = tmp_path / "s.cql"
    script.write_text("SELECT * FROM ks.t;\n")
    rows = tmp_path / "rows.csv"
    rows.write_text("pk,ck,v\n1,a,1\n")
    commands = [
        ["run", str(script)],
        ["shell"],
        ["load", "ks.t", str(rows)],
        ["replay", "ks.t_scylla_cdc_log", "ks.t"],
        ["recover", "--skip", "99"],
    ]
    # independent processes: at once (a process start is the cost, and the cores are two)
    with ThreadPoolExecutor(len(commands)) as pool:
        runs = list(pool.map(lambda command: _cli(*command, "--data-dir", str(data)), commands))
    for command, done in zip(commands, runs, strict=True):
        assert done.returncode == 1, (command, done.stderr)
        assert done.stderr.count("\n") == 1, (command, done.stderr)
        assert str(data) in done.stderr and f"pid {os.getpid()}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_changefeed_read_exits_zero_every_time(session: Any, data: Path) -> None:
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (1, 'a', 1)")
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (2, 'b', 2)")
    session.flush()
    # 20 runs (a crash at exit came now and then), two at a time: a process start is the
    # cost and the cores are two
    read = ("changefeed", "read", "ks.t/f", "--data-dir", str(data))
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: _cli(*read), range(20)))
    for done in runs:
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 2
        assert "terminate called" not in done.stderr


def test_recover_says_what_is_wrong_in_one_line(tmp_path: Path, capsys: Any) -> None:
    assert main(["recover", "--data-dir", str(tmp_path), "--skip", "3"]) == 1
    assert capsys.readouterr().err == f"cqlcdc: {tmp_path} is not a cqlcdc data directory\n"
    (tmp_path / "ingest").mkdir()
    assert main(["recover", "--data-dir", str(tmp_path), "--skip", "3..x"]) == 1
    assert "not a seq or a range A..B" in capsys.readouterr().err
    assert main(["recover", "--data-dir", str(tmp_path)]) == 0
    assert "no stopped write" in capsys.readouterr().out


IMAGES = "cdc = {'enabled': true, 'preimage': true, 'postimage': true}"


def test_compact_storage_rows_have_no_marker_and_keep_every_acknowledged_write(
    session: Any,
) -> None:
    """ScyllaDB's COMPACT STORAGE (issue 13, item 2): no row marker, so an INSERT logs as an
    UPDATE (op 1) and a row whose cells are gone is gone; a key-only table keeps its rows
    through its hidden value, which neither SELECT nor the log shows; keys alone are refused
    where they would store nothing."""
    session.execute(
        f"CREATE TABLE ks.dense (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        f"WITH COMPACT STORAGE AND {IMAGES}"
    )
    session.execute(
        "CREATE TABLE ks.keys (pk int, ck int, PRIMARY KEY (pk, ck)) "
        f"WITH COMPACT STORAGE AND {IMAGES}"
    )
    session.execute("INSERT INTO ks.dense (pk, ck, v) VALUES (1, 1, 10)")
    session.execute("UPDATE ks.dense SET v = 11 WHERE pk = 1 AND ck = 1")
    session.execute("INSERT INTO ks.dense (pk, ck, v) VALUES (1, 2, 20)")
    session.execute("DELETE v FROM ks.dense WHERE pk = 1 AND ck = 2")  # the row goes with it
    assert sorted(tuple(r) for r in session.execute("SELECT * FROM ks.dense")) == [(1, 1, 11)]
    log = [
        tuple(r)
        for r in session.execute('SELECT "cdc$operation", pk, ck, v FROM ks.dense_scylla_cdc_log')
    ]
    assert log == [
        (1, 1, 1, 10), (9, 1, 1, 10),  # an INSERT without a marker logs as an UPDATE
        (0, 1, 1, 10), (1, 1, 1, 11), (9, 1, 1, 11),
        (1, 1, 2, 20), (9, 1, 2, 20),
        (0, 1, 2, 20), (1, 1, 2, None), (9, 1, 2, None),
    ]  # fmt: skip
    with pytest.raises(InvalidRequest, match="Column v is mandatory for this COMPACT STORAGE"):
        session.execute("INSERT INTO ks.dense (pk, ck) VALUES (3, 3)")
    session.execute("INSERT INTO ks.keys (pk, ck) VALUES (2, 22)")
    session.execute("INSERT INTO ks.keys (pk, ck) VALUES (2, 23)")
    session.execute("DELETE FROM ks.keys WHERE pk = 2 AND ck = 23")
    assert [tuple(r) for r in session.execute("SELECT * FROM ks.keys")] == [(2, 22)]
    keys_log = session.execute("SELECT * FROM ks.keys_scylla_cdc_log")
    # the hidden value is not a column of the log
    assert sorted(c for c in keys_log.column_names if not c.startswith("cdc$")) == ["ck", "pk"]
    assert [tuple(r) for r in session.execute(
        'SELECT "cdc$operation", pk, ck FROM ks.keys_scylla_cdc_log'
    )] == [(1, 2, 22), (9, 2, 22), (1, 2, 23), (9, 2, 23), (0, 2, 23), (3, 2, 23)]  # fmt: skip


def test_compact_storage_through_the_cli(spark: Any, tmp_path: Path, capsys: Any) -> None:
    script = tmp_path / "cs.cql"
    script.write_text(
        f"{KS};\nCREATE TABLE ks.cs (pk int, ck int, PRIMARY KEY (pk, ck)) WITH COMPACT "
        "STORAGE AND cdc = {'enabled': true};\nINSERT INTO ks.cs (pk, ck) VALUES (2, 22);\n"
        "SELECT * FROM ks.cs;\n"
    )
    code = main(["run", str(script), "--data-dir", str(tmp_path / "d"), "--format", "json"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0
    assert [line["ok"] for line in lines] == [True, True, True, True]
    assert lines[3]["rows"] == [["2", "22"]]
