"""``cqlcdc serve``: the CQL native protocol (cqlsh, the drivers, ScyllaDB's CDC libraries)
over one data directory, until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from cqlcdc.cli.sessions import engine_arguments, open_session


def add_serve_command(sub: Any) -> None:
    """``cqlcdc serve`` and its options."""
    serve = sub.add_parser("serve", help="serve the CQL native protocol (cqlsh, drivers)")
    engine_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=9042, help="port (default 9042)")
    serve.add_argument("--tls-cert", help="serve TLS with this PEM certificate (chain)")
    serve.add_argument("--tls-key", help="the certificate's PEM private key")
    serve.add_argument(
        "--auth",
        action="store_true",
        help="require a login (PasswordAuthenticator: roles of the data directory; "
        "first login cassandra/cassandra) and check permissions",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=256,
        help="connections at once (default 256); when full, the oldest not yet logged in "
        "makes room",
    )
    serve.add_argument(
        "--handshake-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection not logged in (TLS, STARTUP, login) this long after it "
        "connected (default 10)",
    )
    serve.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="close a logged-in connection that sends nothing for this long (default: never)",
    )
    serve.add_argument(
        "--max-request-memory",
        type=int,
        default=512,
        metavar="MIB",
        help="request bodies held at once by the whole server, in MiB (default 512, at "
        "least the 256 MiB a frame may hold)",
    )
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=_cores(),
        metavar="N",
        help="processes serving the protocol on the port (default: the machine's cores, "
        f"{_cores()} here); they decode, bind and answer, and forward to this one, which "
        "owns the data directory. 1: this process serves alone",
    )
    serve.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (only a port: on "
        "127.0.0.1; default: off)",
    )
    log_format_argument(serve)
    serve.set_defaults(func=cmd_serve)


def log_format_argument(p: argparse.ArgumentParser) -> None:
    """``--log-format``: the command's own log on stderr as text lines or JSON lines."""
    p.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="the log on stderr: text lines (default), or one JSON object per line for a "
        "log shipper",
    )


def _log_to_stderr(fmt: str = "text") -> None:
    """Show the server's own log (the ``cqlcdc`` loggers: a table stopped, a connection
    that failed) on stderr, one line per event, beside Spark's ``spark.log``."""
    from cqlcdc.observe.logs import configure

    configure(fmt, sys.stderr)


def versions() -> str:
    """cqlcdc's version and those of what it runs on, for the start line."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    parts = []
    for name in ("cqlcdc", "pyspark", "deltalake", "pyarrow"):
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    parts.append(f"Python {platform.python_version()}")
    return ", ".join(parts)


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text!r}")
    return value


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the CQL native protocol until SIGTERM or SIGINT: then stop accepting, finish
    the requests in flight, commit, and exit 0."""
    import asyncio
    import signal

    from cqlcdc.errors import InvalidRequest
    from cqlcdc.server.service import CqlServer, tls_context

    context = None
    if args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            raise InvalidRequest("--tls-cert and --tls-key go together")
        context = tls_context(args.tls_cert, args.tls_key)
    if args.metrics:
        from cqlcdc.server.metrics import parse_metrics_address

        try:
            parse_metrics_address(args.metrics)
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
    _log_to_stderr(args.log_format)
    log = logging.getLogger("cqlcdc.serve")
    session = open_session(args)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = CqlServer(
            session.coordinator,
            args.host,
            args.port,
            ssl_context=context,
            auth=args.auth,
            max_connections=args.max_connections,
            handshake_timeout_s=args.handshake_timeout,
            idle_timeout_s=args.idle_timeout,
            max_body_bytes_in_flight=args.max_request_memory * 1024 * 1024,
            protocol_workers=args.workers,
            tls_files=(args.tls_cert, args.tls_key) if context is not None else None,
        )
        host, port = await server.start()
        endpoint = None
        if args.metrics:
            from cqlcdc.server.metrics import MetricsEndpoint

            try:
                endpoint = MetricsEndpoint.start(server, args.metrics, _version())
            except OSError as e:
                await server.close()
                raise OSError(
                    e.errno, f"cannot serve metrics on {args.metrics}: {e.strerror}"
                ) from None
        tls = " (TLS)" if context is not None else ""
        auth = " (logins required)" if args.auth else ""
        metrics = f", metrics on {endpoint.url}" if endpoint is not None else ""
        workers = f", {args.workers} protocol workers" if args.workers > 1 else ""
        log.info(
            "serving %s on %s:%d%s%s%s%s (%s, pid %d)",
            session.data_dir, host, port, tls, auth, metrics, workers, versions(), os.getpid(),
        )  # fmt: skip
        await stop.wait()
        log.info("stopping: finishing the requests in flight, then committing")
        await server.close()
        if endpoint is not None:
            endpoint.close()

    try:
        asyncio.run(run())
    finally:
        session.close()
    log.info("stopped; every acknowledged write of %s is committed", session.data_dir)
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cqlcdc")
    except PackageNotFoundError:
        return "unknown"
