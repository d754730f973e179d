"""``--data-dir`` takes a local path or ``s3://bucket/prefix`` on every command,
``--storage-option KEY=VALUE`` sets the object store, ``--lease-ttl`` the lease; any other
scheme is refused in one line with exit status 2, before anything is created."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from cqlcdc.cli import build_parser, main
from cqlcdc.cli.data_dir import data_dir_location
from cqlcdc.location import Location, UnsupportedLocation
from cqlcdc.session import connect

# every command that opens a data directory, with the arguments it needs besides
COMMANDS = [
    ["run", "x.cql"],
    ["shell"],
    ["load", "ks.t", "rows.csv"],
    ["serve"],
    ["replay", "ks.t_scylla_cdc_log", "ks.copy"],
    ["recover"],
    ["changefeed", "read", "ks.t/feed"],
    ["changefeed", "publish", "ks.t/feed", "--bootstrap", "h:9092", "--topic", "t"],
]


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_takes_a_uri_and_storage_options(command: list[str]) -> None:
    args = _parse(
        [
            *command,
            "--data-dir",
            "s3://bucket/d1/",
            "--storage-option",
            "AWS_REGION=eu-west-1",
            "--storage-option",
            "AWS_ENDPOINT_URL=http://127.0.0.1:9000",
        ]
    )
    assert data_dir_location(args) == Location(
        "s3://bucket/d1",
        (("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"), ("AWS_REGION", "eu-west-1")),
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_local_data_dir_stays_a_resolved_path(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    location = data_dir_location(_parse([*command, "--data-dir", "d"]))
    assert location.is_local and location.path == tmp_path / "d"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_another_scheme_is_refused_in_one_line_with_status_2(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--data-dir", "gs://bucket/d1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "cqlcdc: Data directory 'gs://bucket/d1': scheme 'gs' is not supported "
        "(a local path or s3://bucket/prefix)\n"
    )
    assert os.listdir(tmp_path) == []  # no local directory named "gs:"


def test_an_s3_uri_without_a_bucket_is_refused(capsys: Any) -> None:
    assert main(["serve", "--data-dir", "s3:///d1"]) == 2
    assert capsys.readouterr().err == "cqlcdc: Data directory 's3:///d1' names no bucket\n"


def test_a_storage_option_without_a_value_is_refused(capsys: Any) -> None:
    assert main(["serve", "--data-dir", "s3://b/d", "--storage-option", "AWS_REGION"]) == 2
    err = capsys.readouterr().err
    assert err == "cqlcdc: --storage-option takes KEY=VALUE, not 'AWS_REGION'\n"


def test_the_data_dir_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CQLCDC_DATA_DIR", "s3://bucket/from-env")
    assert data_dir_location(_parse(["serve"])).uri == "s3://bucket/from-env"
    monkeypatch.delenv("CQLCDC_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    assert data_dir_location(_parse(["serve"])).uri == str(tmp_path / "cqlcdc-data")


def test_lease_ttl_on_the_commands_that_own_the_data_dir(capsys: Any) -> None:
    assert _parse(["serve", "--lease-ttl", "3"]).lease_ttl == 3.0
    assert _parse(["run", "x.cql", "--lease-ttl", "2.5"]).lease_ttl == 2.5
    assert _parse(["serve"]).lease_ttl is None  # $CQLCDC_LEASE_TTL, else 30 s
    for bad in ("0", "-1", "soon"):
        with pytest.raises(SystemExit) as exited:
            _parse(["serve", "--lease-ttl", bad])
        assert exited.value.code == 2
    assert "--lease-ttl" in capsys.readouterr().err


def test_connect_refuses_another_scheme_before_starting_anything() -> None:
    with pytest.raises(UnsupportedLocation, match="scheme 'ftp' is not supported"):
        connect(data_dir="ftp://host/d1")


def test_a_held_data_dir_is_refused_in_one_line_naming_the_holder(
    tmp_path: Path, capsys: Any
) -> None:
    from cqlcdc.datadir.lease import Lease

    (tmp_path / "ingest").mkdir()
    with Lease(tmp_path):
        assert main(["recover", "--data-dir", str(tmp_path), "--skip", "5"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"cqlcdc: data directory {tmp_path} is in use by another cqlcdc")
    assert f"pid {os.getpid()}, since " in err and "until it exits" in err


def test_a_held_s3_data_dir_is_refused_in_one_line_naming_the_holder(
    s3_data_dir: Location, capsys: Any
) -> None:
    from cqlcdc.datadir.lease import Lease

    s3_data_dir.child("ingest", "_trimmed_upto_seq").write_atomically("0")
    with Lease(s3_data_dir, ttl_s=30):
        assert main(["recover", "--data-dir", s3_data_dir.uri, "--skip", "5"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(f"cqlcdc: data directory {s3_data_dir.uri} is in use by another")
    assert f"pid {os.getpid()}, since " in err and "its lease expires at" in err
