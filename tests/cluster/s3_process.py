"""moto's S3 server as a process of its own, for ``rig.moto_server`` (the cluster rig, the
``moto_s3`` fixture of every test run, the benchmarks): on 127.0.0.1:PORT until its stdin
closes (the test process closing it at teardown, or dying).

Why a process, not a thread of the test process: delta-rs holds the GIL in some calls (a
table's restore), which deadlocks against a server thread in the same process.

Why not ``python -m moto.server``: this machine is shared with other test runs, and that
server's command line matches a ``pkill -f moto.server`` of theirs and exits on the SIGTERM
(it was seen to die mid-run). Here SIGTERM and SIGINT are ignored and the command line
names no moto; the end of stdin stops it, so it never outlives the test process either.

>>> python tests/cluster/s3_process.py 45123 < pipe  # doctest: +SKIP
"""

from __future__ import annotations

import signal
import sys

from moto.server import ThreadedMotoServer


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=True)
    server.start()
    print(f"S3 server on 127.0.0.1:{sys.argv[1]}", flush=True)
    sys.stdin.buffer.read()  # until EOF
    server.stop()


if __name__ == "__main__":
    main()
