"""The installed ``cqlcdc`` command as a user runs it: a clean terminal and honest exit
statuses."""

from __future__ import annotations

import subprocess
import sys
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


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "s.cql"
    script.write_text(SCRIPT)
    return subprocess.run(
        [str(CLI), "run", str(script), "--data-dir", str(tmp_path / "data"), *extra],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


def test_spark_start_up_noise_goes_to_the_data_directorys_log(spark: Any, tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "(1 rows)" in done.stdout
    log = (tmp_path / "data" / "spark.log").read_text()
    assert "log4j" in log


def test_verbose_shows_it(spark: Any, tmp_path: Path) -> None:
    done = _run(tmp_path, "--verbose", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert "log4j" in done.stderr
    assert not (tmp_path / "data" / "spark.log").exists()


def test_a_failed_statement_makes_the_exit_status_1(spark: Any, tmp_path: Path) -> None:
    script = tmp_path / "bad.cql"
    script.write_text("SELECT * FROM nowhere.t;\n")
    done = subprocess.run(
        [str(CLI), "run", str(script), "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    assert "Keyspace nowhere does not exist" in done.stderr
