"""The ``cqlcdc`` command line: run (table and JSON output, exit status) and the shell."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cqlcdc.cli import main

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};
-- a comment; with a semicolon
CREATE TABLE ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true};
INSERT INTO ks.t (pk, ck, v) VALUES (0, 0, 'a;b');
UPDATE ks.t SET v = null WHERE pk = 0 AND ck = 1;
SELECT * FROM ks.nope;
SELEC oops;
SELECT pk, ck, v FROM ks.t;
SELECT "cdc$operation", v, "cdc$deleted_v" FROM ks.t_scylla_cdc_log;
DESCRIBE TABLE ks.t;
"""


def _run(tmp_path: Path, capsys: Any, *extra: str) -> tuple[int, str, str]:
    script = tmp_path / "s.cql"
    script.write_text(SCRIPT)
    code = main(["run", str(script), "--data-dir", str(tmp_path / "data"), *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_contract(spark: Any, tmp_path: Path, capsys: Any) -> None:
    code, out, _ = _run(tmp_path, capsys, "--format", "json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 1  # two statements failed
    assert [x["statement"] for x in lines] == list(range(1, 10))
    assert lines[2]["cql"] == "INSERT INTO ks.t (pk, ck, v) VALUES (0, 0, 'a;b');"
    assert lines[4] == {
        "statement": 5,
        "cql": "SELECT * FROM ks.nope;",
        "ok": False,
        "error": {"code": 0x2200, "class": "InvalidRequest", "message": "unconfigured table nope"},
    }
    assert lines[5]["error"]["class"] == "CqlSyntaxError" and lines[5]["error"]["code"] == 0x2000
    assert lines[6]["columns"] == ["pk", "ck", "v"] and lines[6]["rows"] == [["0", "0", "a;b"]]
    assert lines[7]["rows"] == [["2", "a;b", None], ["1", None, "True"]]
    assert lines[8]["columns"] == ["describe"]
    assert lines[8]["rows"][0][0].startswith("CREATE TABLE ks.t (")


def test_run_table_output_and_errors(spark: Any, tmp_path: Path, capsys: Any) -> None:
    code, out, err = _run(tmp_path, capsys)
    assert code == 1
    assert " pk | ck | v\n----+----+-----\n  0 |  0 | a;b\n\n(1 rows)" in out
    assert "InvalidRequest: Error from server: code=2200" in err and "unconfigured table" in err
    assert "s.cql:" in err


def test_shell_reads_statements_across_lines(
    spark: Any, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    stdin = io.StringIO(
        "CREATE KEYSPACE ks WITH replication =\n"
        "  {'class': 'SimpleStrategy', 'replication_factor': 1};\n"
        "USE ks;\n"
        "CREATE TABLE t (pk int PRIMARY KEY, v int);\n"
        "INSERT INTO t (pk, v)\n VALUES (1, 2);\n"
        "SELECT * FROM t;\n"
    )
    monkeypatch.setattr(sys, "stdin", stdin)
    code = main(["shell", "--data-dir", str(tmp_path / "data")])
    out, _ = capsys.readouterr()
    assert code == 0
    assert " pk | v\n----+---\n  1 | 2\n\n(1 rows)" in out
