"""The engine's local scratch: a temp directory per process, swept when its process is gone.

Everything durable is in the data directory; the scratch holds only what a start rebuilds
(Spark's checkpoint, thrown away at every start, and the source's tip file). Its name carries
the process id, so an engine that was killed (``stop`` never ran) leaves a directory the
next engine on the machine recognises and removes.

>>> new_scratch_dir().name.startswith(f"{SCRATCH_PREFIX}{os.getpid()}-")  # doctest: +SKIP
True
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

SCRATCH_PREFIX = "cqlcdc-engine-"


def sweep_stale_scratch() -> None:
    """Remove the scratch directories of engines whose process is gone (a kill -9, a
    crash: ``stop`` never ran). Each is named for its process id; a directory whose
    process still runs, or another user's, is left alone."""
    for path in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid_text = path.name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue  # alive, owned by another user


def new_scratch_dir() -> Path:
    """A new scratch directory for this process, after sweeping those of gone ones."""
    sweep_stale_scratch()
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
