"""``--connect HOST:PORT``: ``run``, ``shell``, ``load`` and ``changefeed read`` through a
running server print exactly what they print on the data directory itself (issue 12,
item 6), errors and exit codes included, and say in one line when nothing answers."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.cli import main
from cqlcdc.server import CqlServer

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE KEYSPACE IF NOT EXISTS {ks}
    WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}};
USE {ks};
CREATE TABLE IF NOT EXISTS t (pk int, ck int, v text, m map<int, text>, d decimal,
    PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true, 'preimage': true}};
INSERT INTO t (pk, ck, v, m, d) VALUES (1, 1, 'it''s', {{1: 'a'}}, 1.50);
UPDATE t SET v = 'b', m = m + {{2: 'b'}} WHERE pk = 1 AND ck = 1;
INSERT INTO t (pk, ck, v) VALUES (2, 1, null) IF NOT EXISTS;
DELETE FROM t WHERE pk = 1 AND ck = 1;
SELECT * FROM t;
SELECT "cdc$operation", pk, ck, v, m FROM t_scylla_cdc_log;
SELECT count(*) FROM t;
DESCRIBE TABLES;
DESCRIBE TABLE t;
SELECT * FROM nope;
INSERT INTO t (pk) VALUES (1);
"""


@pytest.fixture(scope="module")
def served(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = tmp_path_factory.mktemp("served")
    session = cqlcdc.connect(data_dir=data, master="local[2]")
    server = CqlServer(session.coordinator, port=0)
    host, port = server.start_in_thread()
    try:
        yield f"{host}:{port}", data
    finally:
        server.stop_thread()
        session.close()


def _run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_run_prints_what_the_data_directory_prints(
    served: tuple[str, Path], tmp_path: Path, capsys: Any, fmt: str
) -> None:
    address, _ = served
    script = tmp_path / "s.cql"
    script.write_text(SCRIPT.format(ks=f"ks_{fmt}"))
    local = _run(capsys, "run", str(script), "--data-dir", str(tmp_path / "own"), "--format", fmt)
    remote = _run(capsys, "run", str(script), "--connect", address, "--format", fmt)
    assert remote[0] == local[0] == 1  # the two failing statements
    assert remote[1] == local[1]
    assert remote[2] == local[2]
    assert "unconfigured table nope" in remote[2 if fmt == "table" else 1]


def test_shell(served: tuple[str, Path], capsys: Any, monkeypatch: Any) -> None:
    address, _ = served
    lines = [
        "CREATE KEYSPACE IF NOT EXISTS sh WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1};",
        "CREATE TABLE IF NOT EXISTS sh.x (k int PRIMARY KEY, v int);",
        "INSERT INTO sh.x (k, v)",
        "  VALUES (1, 2);",
        "SELECT * FROM sh.x;",
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code, out, _ = _run(capsys, "shell", "--connect", address)
    assert code == 0
    assert " k | v" in out and " 1 | 2" in out


def test_load_and_changefeed_read(served: tuple[str, Path], tmp_path: Path, capsys: Any) -> None:
    address, data = served
    setup = tmp_path / "setup.cql"
    setup.write_text(
        "CREATE KEYSPACE IF NOT EXISTS ld WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1};\n"
        "CREATE TABLE IF NOT EXISTS ld.t (pk int PRIMARY KEY, v text, n bigint) "
        "WITH cdc = {'enabled': true};\n"
        "ALTER TABLE ld.t ADD CHANGEFEED f WITH (format = 'json', mode = 'updates');\n"
    )
    assert _run(capsys, "run", str(setup), "--connect", address)[0] == 0
    rows = tmp_path / "rows.csv"
    rows.write_text("pk,v,n\n" + "".join(f"{i},v{i},{i * 10}\n" for i in range(300)))
    code, _, err = _run(capsys, "load", "ld.t", str(rows), "--connect", address)
    assert code == 0, err
    assert "300 rows loaded" in err
    bad = tmp_path / "bad.csv"
    bad.write_text("pk,v,n\nx,v,1\n")
    code, _, err = _run(capsys, "load", "ld.t", str(bad), "--connect", address)
    assert code == 1
    assert f"{bad}:1: InvalidRequest: Invalid value 'x' for column pk of type int" in err
    # the feed read through the server is the feed read from the files
    remote = _run(capsys, "changefeed", "read", "ld.t/f", "--connect", address)
    local = _run(capsys, "changefeed", "read", "ld.t/f", "--data-dir", str(data))
    assert remote == local
    assert len(remote[1].splitlines()) == 300
    one = _run(
        capsys, "changefeed", "read", "ld.t/f", "--connect", address,
        "--partition", "0", "--from-offset", "2",
    )  # fmt: skip
    assert (
        one[1].splitlines()
        == [line for line in local[1].splitlines() if '"partition": 0,' in line][2:]
    )
    missing = _run(capsys, "changefeed", "read", "ld.t/nope", "--connect", address)
    assert missing[0] == 1


def test_load_stopped_by_the_server_says_what_is_durable(
    served: tuple[str, Path], tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """A server error is one ``cqlcdc:`` line from the command (a process of its own, so
    the driver's log would show), never a traceback: before any row is written (PREPARE)
    and part way (from the 121st write on), with how many rows are durable; exactly those
    are in the table."""
    import subprocess
    import sys
    import threading

    from cqlcdc.errors import ServerError
    from cqlcdc.server.executing import SessionRequests

    address, _ = served
    setup = tmp_path / "setup.cql"
    setup.write_text(
        "CREATE KEYSPACE IF NOT EXISTS st WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1};\n"
        "CREATE TABLE IF NOT EXISTS st.t (pk int PRIMARY KEY, v text);\n"
    )
    assert _run(capsys, "run", str(setup), "--connect", address)[0] == 0
    rows = tmp_path / "rows.csv"
    rows.write_text("pk,v\n" + "".join(f"{i},v{i}\n" for i in range(400)))
    full = "Ingest append failed: no space left on device"

    def load() -> tuple[int, str]:
        cli = Path(sys.executable).with_name("cqlcdc")
        done = subprocess.run(
            [str(cli), "load", "st.t", str(rows), "--connect", address],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stderr

    def refuse(self: SessionRequests, request: Any) -> Any:
        raise ServerError(full)

    with monkeypatch.context() as patched:
        patched.setattr(SessionRequests, "_prepare", refuse)
        code, err = load()
    assert code == 1
    assert err.splitlines() == [
        f"cqlcdc: ServerError: {full} (load stopped at {rows}:1; 0 rows are durable)"
    ]

    # a single-row EXECUTE goes to the write combiner from the event loop (submit_write)
    executed = SessionRequests.submit_write
    lock, count = threading.Lock(), [0]

    def fail_after_120(self: SessionRequests, request: Any) -> Any:
        with lock:
            count[0] += 1
            if count[0] > 120:
                raise ServerError(full)
        return executed(self, request)

    with monkeypatch.context() as patched:
        patched.setattr(SessionRequests, "submit_write", fail_after_120)
        code, err = load()
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"cqlcdc: ServerError: {full} (load stopped at {rows}:")
    assert lines[0].endswith("; 120 rows are durable)")
    count_cql = tmp_path / "count.cql"
    count_cql.write_text("SELECT count(*) FROM st.t;\n")
    code, out, _ = _run(capsys, "run", str(count_cql), "--connect", address)
    assert code == 0 and " 120\n" in out, out
