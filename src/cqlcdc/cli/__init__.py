"""The ``cqlcdc`` command: ``run FILE.cql`` (like ``cqlsh -f``) and an interactive ``shell``.

``--format json`` prints one JSON object per statement; that shape is a stable contract:

    {"statement": n, "cql": "...", "ok": true, "columns": [...], "rows": [[...], ...]}
    {"statement": n, "cql": "...", "ok": false,
     "error": {"code": 8704, "class": "InvalidRequest", "message": "..."}}
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from cqlcdc.cli.data_dir import (
    add_data_dir_arguments,
    add_lease_argument,
    data_dir_location,
)
from cqlcdc.cli.publish import add_publish_command
from cqlcdc.cli.replay import add_replay_command
from cqlcdc.cli.status import add_status_command
from cqlcdc.cql import ast, parse_statement, split_statements
from cqlcdc.errors import CqlError, CqlSyntaxError, DataDirLocked
from cqlcdc.location import UnsupportedLocation

_ERROR_KIND = {
    0x2000: "Syntax error in CQL query",
    0x2200: "Invalid query",
    0x2300: "Invalid configuration in query",
    0x2400: "Query invalid because of configuration issue",
    0x0000: "Server error",
}


def cqlsh_text(value: Any, ctype: Any) -> str:
    """A cell as cqlsh prints it (``null`` for CQL null)."""
    if value is None:
        return "null"
    if ctype is None:
        return str(value)
    return str(ctype.to_cqlsh(value))


def format_table(columns: Sequence[str], rows: Sequence[Sequence[str | None]]) -> str:
    """cqlsh's table: headers left-aligned, values right-aligned, then ``(N rows)``."""
    cells = [["null" if c is None else c for c in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = [" " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("-" + "-+-".join("-" * w for w in widths) + "-")
    for row in cells:
        lines.append(" " + " | ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    lines.append("")
    lines.append(f"({len(rows)} rows)")
    return "\n".join(lines)


def error_json(err: CqlError) -> dict[str, Any]:
    return {"code": err.code, "class": err.class_name, "message": err.message}


def error_text(err: CqlError, where: str) -> str:
    kind = _ERROR_KIND.get(err.code, err.class_name)
    return (
        f"{where}:{err.class_name}: Error from server: code={err.code:04x} [{kind}] "
        f'message="{err.message}"'
    )


class Runner:
    """Runs statements against a session and prints each result or error."""

    def __init__(self, session: Any, fmt: str, out: TextIO, err: TextIO) -> None:
        self.session = session
        self.fmt = fmt
        self.out = out
        self.err = err
        self.count = 0
        self.failures = 0

    def run_text(self, text: str, source: str) -> None:
        """Run a script. Consecutive writes go to the engine as one group (one durable
        append, one wait), which keeps their order and saves a commit round trip each."""
        pending: list[tuple[str, str, ast.Statement]] = []
        for piece in split_statements(text):
            where = f"{source}:{piece.line}"
            try:
                stmt = parse_statement(piece.text)
            except CqlError as e:
                self._flush(pending)
                self.count += 1
                self._report(e, piece.text, where)
                continue
            if isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
                pending.append((piece.text, where, stmt))
                continue
            self._flush(pending)
            self.run_one(piece.text, where, stmt)
        self._flush(pending)

    def _flush(self, pending: list[tuple[str, str, ast.Statement]]) -> None:
        if not pending:
            return
        group = list(pending)
        pending.clear()
        try:
            results = self.session.execute_many([stmt for _, _, stmt in group])
        except CqlError as e:
            results = [e] * len(group)
        for (cql, where, _), result in zip(group, results, strict=True):
            self.count += 1
            if isinstance(result, CqlError):
                self._report(result, cql, where)
            else:
                self._print_result(cql, result)

    def run_one(self, cql: str, where: str, stmt: ast.Statement | None = None) -> None:
        """Run one statement and print its result or error."""
        self.count += 1
        try:
            result = self.session.execute(stmt if stmt is not None else cql)
        except CqlError as e:
            self._report(e, cql, where)
            return
        except Exception as e:  # an engine failure: report it as a server error, keep going
            self._report(CqlError(f"{type(e).__name__}: {e}"), cql, where)
            return
        self._print_result(cql, result)

    def _report(self, err: CqlError, cql: str, where: str) -> None:
        self.failures += 1
        if self.fmt == "json":
            self._json({"ok": False, "error": error_json(err)}, cql)
        else:
            print(error_text(err, where), file=self.err, flush=True)

    def _json(self, body: dict[str, Any], cql: str) -> None:
        obj = {"statement": self.count, "cql": cql, **body}
        print(json.dumps(obj, ensure_ascii=False), file=self.out, flush=True)

    def _print_result(self, cql: str, result: Any) -> None:
        if result.describe is not None:
            if self.fmt == "json":
                self._json({"ok": True, "columns": ["describe"], "rows": [[result.describe]]}, cql)
            else:
                print("\n" + result.describe + "\n", file=self.out, flush=True)
            return
        if self.fmt == "json":
            rows = [
                [
                    None if v is None else cqlsh_text(v, t)
                    for v, t in zip(r, result.column_types, strict=True)
                ]
                for r in result
            ]
            self._json({"ok": True, "columns": result.column_names, "rows": rows}, cql)
            return
        if not result.column_names:
            return
        rows = [
            [cqlsh_text(v, t) for v, t in zip(r, result.column_types, strict=True)] for r in result
        ]
        print("\n" + format_table(result.column_names, rows) + "\n", file=self.out, flush=True)


def _connect(args: argparse.Namespace) -> Any:
    """The embedded engine on ``--data-dir``, or with ``--connect`` a running server's."""
    if getattr(args, "connect", None):
        import logging

        from cqlcdc.remote.session import RemoteSession, parse_address

        # the command prints each error it gets in one line; the driver's own log would
        # add its warnings and tracebacks (Python's last-resort handler prints them)
        driver_log = logging.getLogger("cassandra")
        driver_log.addHandler(logging.NullHandler())
        driver_log.propagate = False
        host, port = parse_address(args.connect)
        return RemoteSession(host, port, username=args.username, password=_password(args))
    from cqlcdc.session import connect

    return connect(
        data_dir=data_dir_location(args),
        master=args.master,
        verbose=args.verbose,
        aws_region=getattr(args, "aws_region", ""),
        lease_ttl_s=getattr(args, "lease_ttl", None),
    )


def _password(args: argparse.Namespace) -> str | None:
    """``--password``, else ``$CQLCDC_PASSWORD``, else asked for on the terminal when a
    user is given (never echoed)."""
    if args.username is None:
        return None
    if args.password is not None:
        return str(args.password)
    if "CQLCDC_PASSWORD" in os.environ:
        return os.environ["CQLCDC_PASSWORD"]
    import getpass

    return getpass.getpass(f"Password for {args.username}: ")


def connect_arguments(p: argparse.ArgumentParser) -> None:
    """``--connect HOST:PORT`` (a running ``cqlcdc serve``) and its login."""
    p.add_argument(
        "--connect",
        metavar="HOST:PORT",
        help="go through a running cqlcdc serve instead of opening --data-dir",
    )
    p.add_argument("--username", "-u", help="log in as this role (serve --auth)")
    p.add_argument(
        "--password", "-p", help="its password (default: $CQLCDC_PASSWORD, else asked for)"
    )


def cmd_run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as e:
        print(f"cqlcdc: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 2
    session = _connect(args)
    runner = Runner(session, args.format, sys.stdout, sys.stderr)
    try:
        runner.run_text(text, str(path))
    finally:
        session.close()
    return 0 if runner.failures == 0 else 1


def cmd_shell(args: argparse.Namespace) -> int:
    session = _connect(args)
    runner = Runner(session, args.format, sys.stdout, sys.stdout)
    buffer = ""
    interactive = sys.stdin.isatty()
    try:
        while True:
            ks = session.keyspace
            prompt = ("cqlsh:" + ks + "> " if ks else "cqlsh> ") if not buffer else "   ... "
            try:
                line = input(prompt) if interactive else sys.stdin.readline()
            except EOFError:
                break
            if not interactive and line == "":
                break
            if not buffer and line.strip().lower() in ("exit", "quit", "exit;", "quit;"):
                break
            buffer += line + ("\n" if interactive else "")
            try:
                pieces = split_statements(buffer)
            except CqlSyntaxError:
                pieces = []
            complete = buffer.rstrip().endswith(";") or buffer.strip().upper().endswith(
                "APPLY BATCH"
            )
            if pieces and complete:
                runner.run_text(buffer, "<stdin>")
                buffer = ""
        if buffer.strip():
            runner.run_text(buffer, "<stdin>")
    finally:
        session.close()
    return 0 if runner.failures == 0 else 1


def cmd_changefeed_read(args: argparse.Namespace) -> int:
    """Print a feed's records as JSON lines: {"partition", "offset", "key", "value"}."""
    try:
        if args.connect:
            messages = _remote_feed(args)
        else:
            from cqlcdc.feed_reader import FeedReader

            reader = FeedReader(args.data_dir, args.feed)
            if args.follow:
                messages = reader.follow(args.partition, args.from_offset, on_gap="notice")
            else:
                messages = reader.read(args.partition, args.from_offset, on_gap="notice")
        for msg in messages:
            print(json.dumps(msg.to_json(), ensure_ascii=False), flush=True)
    except CqlError as e:
        print(f"cqlcdc: {e.class_name}: {e.message}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, BrokenPipeError):
        return 0
    return 0


def _remote_feed(args: argparse.Namespace) -> Iterator[Any]:
    """The messages ``FeedReader`` gives, read through a server's ``system_cqlcdc`` tables:
    the same records, the same gap notices, ``--follow`` polling for new ones."""
    import time

    from cqlcdc.feed_reader import FeedMessage, check_partition

    session = _connect(args)
    try:
        offsets = session.feed_offsets(args.feed)
        if args.partition is not None:
            check_partition(args.partition, len(offsets))
        positions = {
            p: args.from_offset
            for p, _, _ in offsets
            if args.partition is None or p == args.partition
        }
        while True:
            got = False
            earliest = {p: first for p, first, _ in session.feed_offsets(args.feed)}
            for p in sorted(positions):
                start = positions[p]
                if start < earliest[p]:
                    yield FeedMessage(p, start, None, {"gap": {"from": start, "to": earliest[p]}})
                    start = positions[p] = earliest[p]
                    got = True
                for offset, key, value in session.feed_records(args.feed, p, start):
                    positions[p] = offset + 1
                    got = True
                    yield FeedMessage(
                        p, offset, None if key is None else json.loads(key), json.loads(value)
                    )
            if not args.follow:
                return
            if not got:
                time.sleep(0.2)
    finally:
        session.close()


def cmd_load(args: argparse.Namespace) -> int:
    """Load CQL files, or CSV/Parquet/JSON-lines rows bound to a prepared write."""
    from cqlcdc.loader import Progress, count_rows, load

    cql = [p for p in args.files if p.endswith(".cql")]
    rows = [p for p in args.files if not p.endswith(".cql")]
    session = _connect(args)
    failures = 0
    try:
        if cql:
            with open(os.devnull, "w") as quiet:  # results are not printed; errors are
                runner = Runner(session, "table", quiet, sys.stderr)
                for path in cql:
                    runner.run_text(Path(path).read_text(), path)
            failures += runner.failures
        if rows:
            progress = Progress(count_rows(rows))
            try:
                result = load(
                    session,
                    args.table,
                    rows,
                    statement=args.statement,
                    columns=args.columns.split(",") if args.columns else None,
                    chunk=args.chunk,
                    progress=progress,
                )
            finally:
                progress.close()
            for path, row, err in result.failed[:20]:
                print(f"{path}:{row}: {err.class_name}: {err.message}", file=sys.stderr)
            if len(result.failed) > 20:
                print(f"... and {len(result.failed) - 20} more failed rows", file=sys.stderr)
            failures += len(result.failed)
            if result.stopped is not None:  # what is durable is what was acknowledged
                path, row, err = result.stopped
                print(
                    f"cqlcdc: {err.class_name}: {err.message} (load stopped at {path}:{row}; "
                    f"{result.rows:,} rows are durable)",
                    file=sys.stderr,
                )
                return 1
            print(
                f"{result.rows:,} rows loaded in {result.seconds:.1f} s "
                f"({result.rows_per_s:,.0f} rows/s), {len(result.failed):,} failed",
                file=sys.stderr,
            )
    except CqlError as e:
        print(f"cqlcdc: {e.class_name}: {e.message}", file=sys.stderr)
        return 1
    finally:
        session.close()
    return 0 if failures == 0 else 1


def engine_arguments(p: argparse.ArgumentParser) -> None:
    """The options of every command that opens a data directory's engine."""
    add_data_dir_arguments(p)
    add_lease_argument(p)
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the JVM's console output (default: DATA_DIR/spark.log)",
    )
    p.add_argument(
        "--aws-region",
        default=os.environ.get("CQLCDC_AWS_REGION", ""),
        help="awsRegion of DynamoDB Streams feed records whose feed sets no AWS_REGION "
        "(YDB's server-wide default; default: $CQLCDC_AWS_REGION, else empty)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cqlcdc", description="CQL with ScyllaDB-exact CDC logs, computed on Spark."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        engine_arguments(p)
        connect_arguments(p)
        p.add_argument("--format", choices=["table", "json"], default="table")

    run = sub.add_parser("run", help="run the statements of a .cql file, like cqlsh -f")
    run.add_argument("file")
    common(run)
    run.set_defaults(func=cmd_run)
    shell = sub.add_parser("shell", help="interactive CQL shell")
    common(shell)
    shell.set_defaults(func=cmd_shell)
    feed = sub.add_parser("changefeed", help="read changefeed topics, publish them to Kafka")
    feed_sub = feed.add_subparsers(dest="feed_command", required=True)
    read = feed_sub.add_parser("read", help="print a feed's records as JSON lines")
    read.add_argument("feed", help="keyspace.table/feed")
    add_data_dir_arguments(read)
    read.add_argument("--partition", type=int, default=None)
    read.add_argument("--from-offset", type=int, default=0)
    read.add_argument("--follow", action="store_true", help="keep printing new records")
    connect_arguments(read)
    read.set_defaults(func=cmd_changefeed_read)
    add_publish_command(feed_sub)
    add_replay_command(sub, engine_arguments)
    add_status_command(sub, connect_arguments)
    loadp = sub.add_parser(
        "load", help="bulk-load CQL files or CSV/Parquet/JSON-lines rows into a table"
    )
    loadp.add_argument("table", help="keyspace.table the rows go to")
    loadp.add_argument("files", nargs="+", help=".cql, .csv (with header), .parquet, .jsonl")
    loadp.add_argument(
        "--statement", help="a write with ? or :name markers (default: INSERT of the columns)"
    )
    loadp.add_argument("--columns", help="comma-separated file columns to use (default: all)")
    loadp.add_argument(
        "--chunk", type=int, default=50_000, help="rows per durable append (default 50000)"
    )
    common(loadp)
    loadp.set_defaults(func=cmd_load)
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
    recover = sub.add_parser(
        "recover",
        help="show stopped tables and the write the pipeline stopped at; retry or drop a "
        "stopped table's held writes, or skip a write (--skip SEQ)",
    )
    add_data_dir_arguments(recover)
    recover.add_argument(
        "--skip",
        action="append",
        metavar="SEQ",
        help="drop ingest record SEQ (or A..B) and report it as failed; repeatable",
    )
    recover.add_argument(
        "--retry-table",
        action="append",
        metavar="KS.TABLE",
        help="append a stopped table's held writes again, in their order, and let it take "
        "writes again (a write that still fails stops it again); repeatable",
    )
    recover.add_argument(
        "--skip-table",
        action="append",
        metavar="KS.TABLE",
        help="drop a stopped table's held writes for good (their writers were told they "
        "failed) and let it take writes again; repeatable",
    )
    recover.set_defaults(func=cmd_recover)
    return parser


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
    session = _connect(args)

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


def cmd_recover(args: argparse.Namespace) -> int:
    """Show stopped tables and the write the pipeline stopped at; resume a stopped table
    (``--retry-table``, ``--skip-table``) or skip a write (``--skip``)."""
    from cqlcdc.datadir.commit import Manifest
    from cqlcdc.datadir.containment import drop_held, resume_table, stopped_reports
    from cqlcdc.datadir.recovery import load_failure, load_skipped, parse_seqs, skip_records

    data_dir = data_dir_location(args)
    if "ingest" not in data_dir.list_names():
        print(f"cqlcdc: {data_dir} is not a cqlcdc data directory", file=sys.stderr)
        return 1
    # --skip first: the write a stopped table cannot apply is dropped before the rest of
    # its held writes are appended again (--retry-table), in one command
    for text in args.skip or []:
        seqs = parse_seqs(text)
        dropped = drop_held(data_dir, seqs)  # a held write of a stopped table
        if dropped:
            print(f"{dropped} held write(s) {text} dropped for good (reported as failed)")
            continue
        added = skip_records(data_dir, seqs, Manifest.load(data_dir).max_seq)
        print(
            f"{added} ingest record(s) will be dropped and reported as failed when "
            f"{data_dir} is next opened; every other write is applied",
        )
    for table in args.retry_table or []:
        entry, held = resume_table(data_dir, table, retry=True)
        print(
            f"{entry.table}: {held} held write(s) appended again in their order; they "
            f"are applied when {data_dir} is next opened"
        )
    for table in args.skip_table or []:
        entry, held = resume_table(data_dir, table, retry=False)
        print(
            f"{entry.table}: {held} held write(s) dropped for good (their writers were "
            "told they failed); the table takes writes again"
        )
    if args.skip or args.retry_table or args.skip_table:
        return 0
    reports = stopped_reports(data_dir)
    for report in reports:
        stopped = report.stopped
        print(
            f"table {stopped.table} stopped at write seq={stopped.first_seq} (batch "
            f"{stopped.batch_id}): {stopped.error}; {report.held} write(s) held"
        )
        print(
            f"to apply them again: cqlcdc recover --data-dir {data_dir} --retry-table "
            f"{stopped.table}; to drop them for good: cqlcdc recover --data-dir {data_dir} "
            f"--skip-table {stopped.table}"
        )
    failure = load_failure(data_dir)
    if failure is None and not reports:
        print(f"no stopped write recorded in {data_dir}")
    elif failure is not None:
        print(f"the pipeline stopped at batch {failure.batch_id}: {failure.message}")
        print(
            f"to go on without it: cqlcdc recover --data-dir {data_dir} "
            f"--skip {failure.skip_argument()}"
        )
    for _, reason in sorted(load_skipped(data_dir).items()):
        print(f"skipped: {reason}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``cqlcdc`` command; an error of the engine is one line on stderr, exit 1; a
    data directory that cannot be stored in (``--data-dir ftp://...``) one line, exit 2."""
    args = build_parser().parse_args(argv)
    if hasattr(args, "data_dir"):
        try:
            args.data_dir = data_dir_location(args)
        except UnsupportedLocation as e:
            print(f"cqlcdc: {e}", file=sys.stderr)
            return 2
    try:
        return int(args.func(args))
    except DataDirLocked as e:
        print(f"cqlcdc: {e.message}", file=sys.stderr)
        return 1
    except CqlError as e:
        print(f"cqlcdc: {e.class_name}: {e.message}", file=sys.stderr)
        return 1
    except OSError as e:  # a data directory or file that cannot be used
        where = f": {e.filename}" if e.filename else ""
        print(f"cqlcdc: {e.strerror or e}{where}", file=sys.stderr)
        return 1
    except UnsupportedLocation as e:  # a command that cannot work in an object store yet
        print(f"cqlcdc: {e}", file=sys.stderr)
        return 2


def entry() -> None:
    """The console script: ``main``, then leave without the interpreter's teardown.

    Every command has closed its session by now (all writes committed, the engine stopped)
    and printed everything; what is left are native threads of pyarrow, delta-rs and the
    Spark gateway, and tearing the interpreter down under them aborts the process now and
    then (``terminate called without an active exception``: delta-rs issue 2184). So the
    output is flushed and the process exits with the status the command meant, at once.
    The Spark JVM exits when its gateway pipe closes.
    """
    try:
        code = main()
    except SystemExit as e:  # argparse's usage errors and --help
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except KeyboardInterrupt:
        code = 130
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to print
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
