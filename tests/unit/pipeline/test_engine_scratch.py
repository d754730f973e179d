"""The engine's local scratch: a directory per process, swept when its process is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cqlcdc.pipeline import scratch


def test_scratch_of_a_gone_process_is_swept_and_a_live_ones_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = tmp_path / f"cqlcdc-engine-{int(gone.stdout)}-abc_1234"
    mine = tmp_path / f"cqlcdc-engine-{os.getpid()}-def_5678"
    parent = tmp_path / f"cqlcdc-engine-{os.getppid()}-ghi_9012"  # alive: not ours, kept
    older = tmp_path / "cqlcdc-engine-jkl_3456"  # no process id in its name: left alone
    for directory in (dead, mine, parent, older):
        (directory / "checkpoint").mkdir(parents=True)
    scratch.sweep_stale_scratch()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (mine, parent, older)
    )
