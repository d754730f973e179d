"""A write the pipeline cannot apply stops its table alone (issue 26, containment): the
other tables keep taking writes, reads and DDL; the table's writers are told at once; one
log line; a restart works; ``cqlcdc recover`` shows the table and resumes it.

The fault is injected through the processor's test hook (``CQLCDC_TEST_FAULT_TABLE``,
``CoreProcessor.fault_table``), through the real engine and the real server."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.cdc.processor import FAULT_TABLE_ENV
from cqlcdc.cli import main
from cqlcdc.datadir.containment import STOPPED_FILE
from cqlcdc.errors import ServerError
from tests.e2e.serving import serving

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
CDC = "WITH cdc = {'enabled': true}"
# a writer is told within this many seconds, not after WRITE_TIMEOUT_S (120 s): a few
# seconds alone, more while the suite shares two cores with Spark's first task
PROMPT_S = 30.0
# the first read of a fresh server waits for Spark's first batch (seconds on a busy machine)
READ_TIMEOUT_S = 60.0


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in result)


def _setup(s: Any) -> None:
    s.execute(KS)
    s.execute(f"CREATE TABLE ks.good (pk int PRIMARY KEY, v int) {CDC}")
    s.execute(f"CREATE TABLE ks.bad (pk int PRIMARY KEY, v int) {CDC}")
    s.execute("INSERT INTO ks.good (pk, v) VALUES (1, 1)")
    s.execute("INSERT INTO ks.bad (pk, v) VALUES (1, 1)")


@pytest.mark.parametrize("where", ["driver", "executors"])
def test_a_fault_in_one_table_stops_it_alone(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: Any, where: str
) -> None:
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        _setup(s)
        c = s.coordinator
        if where == "executors":  # every batch runs the core in Spark tasks
            c.engine.config = dataclasses.replace(c.engine.config, driver_max_rows=0)
            # their Python workers start now, not in the timed write below
            s.execute("CREATE TABLE ks.warm (pk int PRIMARY KEY)")
            s.execute("INSERT INTO ks.warm (pk) VALUES (1)")
        c.processor.fault_table = "ks.bad"
        caplog.set_level(logging.ERROR, logger="cqlcdc")
        started = time.monotonic()
        with pytest.raises(ServerError, match="was not applied") as info:
            s.execute("INSERT INTO ks.bad (pk, v) VALUES (2, 2)")
        assert time.monotonic() - started < PROMPT_S
        seq = int(re.search(r"write seq=(\d+)", info.value.message).group(1))  # type: ignore[union-attr]
        assert "fault injected" in info.value.message
        assert f"cqlcdc recover --data-dir {data}" in info.value.message

        lines = [r.getMessage() for r in caplog.records if r.name == "cqlcdc"]
        assert len(lines) == 1, lines
        assert "table ks.bad stopped at write seq=" in lines[0]
        assert f"seq={seq}" in lines[0] and "fault injected" in lines[0]
        assert f"cqlcdc recover --data-dir {data} --retry-table ks.bad" in lines[0]
        assert "\n" not in lines[0]

        # new writes to the stopped table are refused up front, even unwaited ones
        with pytest.raises(ServerError, match=r"Table ks\.bad is stopped"):
            s.execute("INSERT INTO ks.bad (pk, v) VALUES (3, 3)", wait=False)
        # an initial scan would append its records: refused the same way
        with pytest.raises(ServerError, match=r"Table ks\.bad is stopped"):
            s.execute(
                "ALTER TABLE ks.bad ADD CHANGEFEED f WITH (MODE = 'UPDATES', "
                "FORMAT = 'JSON', INITIAL_SCAN = TRUE)"
            )
        # every other table goes on: writes, reads, DDL; the stopped one still answers reads
        s.execute("INSERT INTO ks.good (pk, v) VALUES (2, 2)")
        s.execute("ALTER TABLE ks.good ADD w int")
        s.execute("INSERT INTO ks.good (pk, v, w) VALUES (3, 3, 3)")
        assert _rows(s.execute("SELECT pk, v FROM ks.good")) == [(1, 1), (2, 2), (3, 3)]
        assert len(s.execute("SELECT pk FROM ks.good_scylla_cdc_log").all()) == 3
        assert _rows(s.execute("SELECT pk, v FROM ks.bad")) == [(1, 1)]
        assert c.engine.query is not None and c.engine.query.isActive
    finally:
        s.close()
    assert (data / STOPPED_FILE).exists()

    # a restart works: the table is still stopped, its held write kept, the others go on
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        with pytest.raises(ServerError, match=r"Table ks\.bad is stopped"):
            s.execute("INSERT INTO ks.bad (pk, v) VALUES (4, 4)")
        s.execute("INSERT INTO ks.good (pk, v) VALUES (4, 4)")
        assert len(s.execute("SELECT pk FROM ks.good").all()) == 4
        assert _rows(s.execute("SELECT pk, v FROM ks.bad")) == [(1, 1)]
    finally:
        s.close()

    capsys.readouterr()
    assert main(["recover", "--data-dir", str(data)]) == 0
    shown = capsys.readouterr().out
    assert f"table ks.bad stopped at write seq={seq}" in shown
    assert "fault injected" in shown and "1 write(s) held" in shown
    assert "--retry-table ks.bad" in shown and "--skip-table ks.bad" in shown

    # the cause is gone (no hook after a restart): the held write is applied again
    assert main(["recover", "--data-dir", str(data), "--retry-table", "ks.bad"]) == 0
    assert "1 held write(s) appended again" in capsys.readouterr().out
    assert not (data / STOPPED_FILE).exists()
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, v FROM ks.bad")) == [(1, 1), (2, 2)]
        s.execute("INSERT INTO ks.bad (pk, v) VALUES (5, 5)")
        assert _rows(s.execute("SELECT pk, v FROM ks.bad")) == [(1, 1), (2, 2), (5, 5)]
        assert len(s.execute("SELECT pk FROM ks.bad_scylla_cdc_log").all()) == 3
    finally:
        s.close()


def test_a_retry_that_fails_again_stops_the_table_again_and_skip_drops_it(
    spark: Any, tmp_path: Path, capsys: Any
) -> None:
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        _setup(s)
        s.coordinator.processor.fault_table = "ks.bad"
        for pk in (2, 3):  # acknowledged at durability, then held
            s.execute(f"INSERT INTO ks.bad (pk, v) VALUES ({pk}, {pk})", wait=False)
        s.flush()
        assert "bad" in str(s.coordinator.engine.stopped)
    except ServerError:  # the second write may already be refused: it stopped in between
        pass
    finally:
        s.close()
    held = len(_held_seqs(data))
    assert held in (1, 2)
    assert main(["recover", "--data-dir", str(data), "--retry-table", "ks.bad"]) == 0
    os.environ[FAULT_TABLE_ENV] = "ks.bad"
    try:
        s = cqlcdc.connect(data_dir=data, master="local[2]")
    finally:
        del os.environ[FAULT_TABLE_ENV]
    try:
        s.flush()
        assert "ks.bad" in [e.table for e in s.coordinator.engine.stopped.values()]
        s.execute("INSERT INTO ks.good (pk, v) VALUES (2, 2)")
    finally:
        s.close()
    capsys.readouterr()
    assert main(["recover", "--data-dir", str(data), "--skip-table", "ks.bad"]) == 0
    assert f"{held} held write(s) dropped for good" in capsys.readouterr().out
    assert main(["recover", "--data-dir", str(data), "--skip-table", "ks.bad"]) == 1
    assert "table ks.bad is not stopped" in capsys.readouterr().err
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, v FROM ks.bad")) == [(1, 1)]
        s.execute("INSERT INTO ks.bad (pk, v) VALUES (6, 6)")
        assert _rows(s.execute("SELECT pk, v FROM ks.bad")) == [(1, 1), (6, 6)]
        assert _rows(s.execute("SELECT pk, v FROM ks.good")) == [(1, 1), (2, 2)]
    finally:
        s.close()


def _held_seqs(data: Path) -> list[int]:
    from cqlcdc.datadir.commit import Manifest, Snapshot
    from cqlcdc.datadir.containment import HELD

    manifest = Manifest.load(data)
    if manifest.version_of(HELD) is None:
        return []
    return Snapshot(data / "tables", manifest).read(HELD).column("seq").to_pylist()


def _serve(data: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """``cqlcdc serve`` as a process on a free port, once it says it listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cli = Path(sys.executable).with_name("cqlcdc")
    proc = subprocess.Popen(
        [str(cli), "serve", "--data-dir", str(data), "--port", str(port), "--master", "local[1]"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "serving" in line:
            return proc, port
    raise AssertionError(f"cqlcdc serve exited with {proc.wait()}")


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the server; its exit status must be 0. Returns the rest of its stderr."""
    proc.send_signal(signal.SIGTERM)
    assert proc.stderr is not None
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, rest
    return rest


def _server_error(error: Exception) -> Exception:
    """The server's own error inside the driver's NoHostAvailable (a ServerError)."""
    from cassandra.protocol import ServerError as DriverServerError

    inner = list(getattr(error, "errors", {}).values())
    assert len(inner) == 1 and isinstance(inner[0], DriverServerError), error
    return inner[0]


def test_through_cqlcdc_serve_with_the_driver(spark: Any, tmp_path: Path) -> None:
    from cassandra.cluster import Cluster, NoHostAvailable
    from cassandra.policies import RoundRobinPolicy

    data = tmp_path / "data"
    proc, port = _serve(data, {FAULT_TABLE_ENV: "ks.bad"})
    cluster = Cluster(["127.0.0.1"], port=port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect()
        cql.execute(KS)
        cql.execute(f"CREATE TABLE ks.good (pk int PRIMARY KEY, v int) {CDC}")
        cql.execute(f"CREATE TABLE ks.bad (pk int PRIMARY KEY, v int) {CDC}")
        good = cql.prepare("INSERT INTO ks.good (pk, v) VALUES (?, ?)")
        bad = cql.prepare("INSERT INTO ks.bad (pk, v) VALUES (?, ?)")
        cql.execute(good, (0, 0))
        # a writer that waits for its outcome (a conditional write) is told within seconds
        # that its write was held, not applied (not after the 120 s write timeout)
        started = time.monotonic()
        with pytest.raises(NoHostAvailable) as info:  # the driver tried the next host: none
            cql.execute("INSERT INTO ks.bad (pk, v) VALUES (1, 1) IF NOT EXISTS")
        assert time.monotonic() - started < PROMPT_S
        told = str(_server_error(info.value))
        assert "to ks.bad was not applied" in told and "fault injected" in told, told
        # later writes to it are refused up front, unwaited ones too; the other table takes
        # writes and answers reads all along
        for pk in range(1, 4):
            with pytest.raises(NoHostAvailable) as info:
                cql.execute(bad, (pk, pk))
            assert "Table ks.bad is stopped" in str(_server_error(info.value))
            cql.execute(good, (pk, pk))
            select = "SELECT v FROM ks.good WHERE pk = %s"
            assert cql.execute(select, (pk,), timeout=READ_TIMEOUT_S).one().v == pk
        assert cql.execute("SELECT count(*) FROM ks.bad").one().count == 0
        assert cql.execute("SELECT count(*) FROM ks.good").one().count == 4
        cql.execute("CREATE TABLE ks.other (pk int PRIMARY KEY)")
        cql.execute("INSERT INTO ks.other (pk) VALUES (1)")
    finally:
        cluster.shutdown()
        rest = _stop(proc)
    lines = [ln for ln in rest.splitlines() if "stopped at write seq=" in ln]
    assert len(lines) == 1, rest
    assert lines[0].startswith("cqlcdc: ERROR: table ks.bad stopped at write seq=")
    assert "fault injected" in lines[0]
    assert f"cqlcdc recover --data-dir {data.resolve()} --retry-table ks.bad" in lines[0]

    # restart (without the fault): works, the table is still stopped, the rest goes on. The
    # server runs in this process over the session's Spark (what the data directory keeps
    # across a restart is the point; ``cqlcdc serve``'s own start was tested above, and a
    # second one would cost a JVM and its Python workers)
    with serving(cqlcdc.connect(data_dir=data, master="local[2]")) as server:
        cluster = Cluster(["127.0.0.1"], port=server.port, load_balancing_policy=RoundRobinPolicy())
        try:
            cql = cluster.connect()
            with pytest.raises(NoHostAvailable) as info:
                cql.execute("INSERT INTO ks.bad (pk, v) VALUES (200, 200)")
            assert "Table ks.bad is stopped" in str(_server_error(info.value))
            cql.execute("INSERT INTO ks.good (pk, v) VALUES (200, 200)")
            select = "SELECT count(*) FROM ks.good"
            assert cql.execute(select, timeout=READ_TIMEOUT_S).one().count == 5
        finally:
            cluster.shutdown()

    cli = Path(sys.executable).with_name("cqlcdc")
    shown = subprocess.run(
        [str(cli), "recover", "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert "table ks.bad stopped at write seq=" in shown.stdout
    assert "1 write(s) held" in shown.stdout
