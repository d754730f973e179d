"""The installed ``cqlcdc`` command as a user runs it: a clean terminal and honest exit
statuses. The three runs are independent processes, started at once (a Spark start each is
the cost, and the cores are two)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

CLI = Path(sys.executable).with_name("cqlcdc")
SCRIPT = """
CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};
CREATE TABLE ks.t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true};
INSERT INTO ks.t (pk, v) VALUES (1, 1);
SELECT pk, v FROM ks.t;
"""
RUNS = {
    "quiet": (SCRIPT, ()),
    "verbose": (SCRIPT, ("--verbose", "--format", "json")),
    "failing": ("SELECT * FROM nowhere.t;\n", ()),
}


def _run(directory: Path, script: str, extra: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """``cqlcdc run`` of ``script`` on the data directory ``directory/data``."""
    directory.mkdir()
    path = directory / "s.cql"
    path.write_text(script)
    return subprocess.run(
        [str(CLI), "run", str(path), "--data-dir", str(directory / "data"), *extra],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    """Each run's directory and completed process."""
    root = tmp_path_factory.mktemp("cli")
    with ThreadPoolExecutor(len(RUNS)) as pool:
        futures = {
            name: pool.submit(_run, root / name, script, extra)
            for name, (script, extra) in RUNS.items()
        }
        return {name: (root / name, future.result()) for name, future in futures.items()}


def test_spark_start_up_noise_goes_to_the_data_directorys_log(runs: dict[str, Any]) -> None:
    directory, done = runs["quiet"]
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "(1 rows)" in done.stdout
    log = (directory / "data" / "spark.log").read_text()
    assert "log4j" in log


def test_verbose_shows_it(runs: dict[str, Any]) -> None:
    directory, done = runs["verbose"]
    assert done.returncode == 0, done.stderr
    assert "log4j" in done.stderr
    assert not (directory / "data" / "spark.log").exists()


def test_a_failed_statement_makes_the_exit_status_1(runs: dict[str, Any]) -> None:
    _, done = runs["failing"]
    assert done.returncode == 1
    assert "Keyspace nowhere does not exist" in done.stderr
