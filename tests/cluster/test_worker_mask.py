"""What a worker's mount namespace hides (``rig.mask``): the driver's temporary directories,
but never the checkout and venv the workers run from, even when they live inside one of
them (a clone under ``/tmp``, whose system temporary directory is hidden). No Spark here:
the mounts themselves are made in a throwaway namespace and looked at from inside it."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.cluster.rig import Mask, mask, mask_script


def test_a_checkout_inside_a_hidden_directory_is_kept(tmp_path: Path) -> None:
    system_tmp = tmp_path / "tmp"
    clone = system_tmp / "x" / "clone"
    plan = mask([system_tmp, system_tmp / "pytest-of-root"], [clone, clone / ".venv", Path("/usr")])
    assert plan == Mask(covered=[system_tmp], kept=[clone], covered_inside=[])


def test_a_hidden_directory_inside_a_kept_one_is_hidden_again(tmp_path: Path) -> None:
    clone = tmp_path / "tmp" / "clone"
    plan = mask([tmp_path / "tmp", clone / "basetemp"], [clone])
    assert plan == Mask([tmp_path / "tmp"], [clone], [clone / "basetemp"])


def test_a_checkout_outside_the_hidden_directories_needs_no_mount(tmp_path: Path) -> None:
    plan = mask([tmp_path / "tmp", tmp_path / "tmp" / "basetemp"], [tmp_path / "work" / "c"])
    assert plan == Mask([tmp_path / "tmp"], [], [])


def test_hiding_the_checkout_itself_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="they run from it"):
        mask([tmp_path / "clone"], [tmp_path / "clone"])


def test_a_kept_directory_under_a_hidden_one_inside_a_kept_one_is_refused(tmp_path: Path) -> None:
    clone = tmp_path / "tmp" / "clone"
    with pytest.raises(ValueError, match="a hidden directory holds it"):
        mask([tmp_path / "tmp", clone / "scratch"], [clone, clone / "scratch" / "venv"])


def test_the_namespace_shows_the_checkout_and_nothing_else_of_the_hidden_directory(
    tmp_path: Path,
) -> None:
    """The mounts of a clone under a hidden system temporary directory, for real: its
    files are there (and the same files: a write shows outside), the driver's are not."""
    system_tmp = tmp_path / "tmp"
    clone = system_tmp / "x" / "clone"
    files = {
        "driver": system_tmp / "spark-local" / "driver-only.txt",
        "sibling": system_tmp / "x" / "other-clone.txt",
        "source": clone / "src" / "module.py",
        "venv": clone / ".venv" / "bin" / "python",
        "scratch": clone / "basetemp" / "driver-only.txt",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(path.name)
    plan = mask([system_tmp, clone / "basetemp"], [clone, clone / ".venv"])
    look = " ; ".join(
        f"if [ -e {shlex.quote(str(p))} ]; then echo {name} seen; else echo {name} gone; fi"
        for name, p in files.items()
    )
    written = clone / "written-by-the-worker"
    script = f"{mask_script(plan)} && {look} && echo worker > {shlex.quote(str(written))}"
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    seen = dict(line.split() for line in done.stdout.splitlines())
    assert seen == {
        "driver": "gone",
        "sibling": "gone",
        "source": "seen",
        "venv": "seen",
        "scratch": "gone",
    }
    assert written.read_text() == "worker\n"  # the checkout itself, not a copy
    assert all(p.exists() for p in files.values())  # nothing hidden outside the namespace
