"""The ``cqlcdc`` command: its parser and ``main``. Each command is a module of this
package: ``run``/``shell`` (``shell``), ``serve``, ``load``, ``changefeed`` (``read``; ``publish``),
``replay``, ``status``, ``recover``; ``sessions`` opens the engine or a server for them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from cqlcdc.cli.changefeed import cmd_changefeed_read
from cqlcdc.cli.data_dir import (
    add_data_dir_arguments,
    data_dir_location,
)
from cqlcdc.cli.load import cmd_load
from cqlcdc.cli.publish import add_publish_command
from cqlcdc.cli.recover import add_recover_command
from cqlcdc.cli.replay import add_replay_command
from cqlcdc.cli.serve import add_serve_command
from cqlcdc.cli.sessions import connect_arguments, engine_arguments
from cqlcdc.cli.shell import Runner, cmd_run, cmd_shell
from cqlcdc.cli.status import add_status_command
from cqlcdc.errors import CqlError, DataDirLocked
from cqlcdc.location import UnsupportedLocation


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
    add_serve_command(sub)
    add_recover_command(sub)
    return parser


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


__all__ = ["Runner", "build_parser", "entry", "main"]
