"""A small disk for the full-disk tests: a tmpfs mounted for one test, and a file that takes
every free byte of it (the tests run as root; where mounting is impossible they skip)."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(mount: Path, size: int) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes at ``mount`` (made), unmounted afterwards; the test is
    skipped where it cannot be mounted."""
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    """A file taking every free byte of ``directory``'s file system."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\0" * size
            try:
                while True:
                    out.write(block)
            except OSError as e:
                assert e.errno == errno.ENOSPC
    return filler
