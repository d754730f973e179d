"""Bulk loads through the engine: CSV, Parquet and JSON lines bound to prepared writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cqlcdc.cli import main

pytestmark = pytest.mark.spark

SETUP = """
CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};
CREATE TABLE ks.t (pk int, ck int, v text, m map<int, text>, PRIMARY KEY (pk, ck))
    WITH cdc = {'enabled': true};
"""


def test_load_csv_parquet_jsonl_and_cql(spark: Any, tmp_path: Path, capsys: Any) -> None:
    data = str(tmp_path / "data")
    (tmp_path / "setup.cql").write_text(SETUP)
    (tmp_path / "a.csv").write_text(
        "pk,ck,v,m\n1,1,one,{1: 'x'}\n1,2,,\n2,1,\"with, comma\",{}\nbad,1,x,\n"
    )
    pq.write_table(
        pa.table({"pk": [3, 3], "ck": [1, 2], "v": ["p1", "p2"]}), tmp_path / "b.parquet"
    )
    (tmp_path / "c.jsonl").write_text(
        "\n".join(json.dumps({"pk": 4, "ck": i, "v": f"j{i}"}) for i in range(3)) + "\n"
    )
    assert main(["load", "ks.t", str(tmp_path / "setup.cql"), "--data-dir", data]) == 0
    code = main(
        [
            "load",
            "ks.t",
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.parquet"),
            str(tmp_path / "c.jsonl"),
            "--data-dir",
            data,
        ]
    )
    err = capsys.readouterr().err
    assert code == 1  # the 'bad' row
    assert "a.csv:4: InvalidRequest: Invalid value 'bad' for column pk of type int" in err
    assert "8 rows loaded" in err
    # a custom statement with named markers: UPDATE from a file
    (tmp_path / "u.csv").write_text("pk,ck,v\n1,1,changed\n")
    assert (
        main(
            [
                "load",
                "ks.t",
                str(tmp_path / "u.csv"),
                "--data-dir",
                data,
                "--statement",
                "UPDATE ks.t SET v = :v WHERE pk = :pk AND ck = :ck",
            ]
        )
        == 0
    )
    script = tmp_path / "q.cql"
    script.write_text("SELECT pk, ck, v, m FROM ks.t;\nSELECT count(*) FROM ks.t_scylla_cdc_log;")
    capsys.readouterr()
    main(["run", str(script), "--data-dir", data, "--format", "json"])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    expected = [
        ["1", "1", "changed", "{1: 'x'}"],
        ["1", "2", None, None],
        ["2", "1", "with, comma", None],
        ["3", "1", "p1", None],
        ["3", "2", "p2", None],
        ["4", "0", "j0", None],
        ["4", "1", "j1", None],
        ["4", "2", "j2", None],
    ]
    assert sorted(lines[0]["rows"], key=str) == sorted(expected, key=str)
    assert lines[1]["rows"] == [["9"]]
