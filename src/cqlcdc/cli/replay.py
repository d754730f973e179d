"""``cqlcdc replay LOG TARGET``: rebuild a table from a CDC log (or print the CQL that would).

>>> cqlcdc replay ks.t_scylla_cdc_log ks.copy --print  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from cqlcdc.cli.data_dir import data_dir_location
from cqlcdc.errors import CqlError


def add_replay_command(
    subparsers: Any, engine_arguments: Callable[[argparse.ArgumentParser], None]
) -> argparse.ArgumentParser:
    """Register ``replay`` on the ``cqlcdc`` command's subparsers.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers()`` returned.
        engine_arguments: adds the options of a command that opens a data directory.

    Returns:
        The ``replay`` parser (its ``func`` default runs the command).
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "replay", help="rebuild a table from a CDC log's delta rows"
    )
    p.add_argument("log_table", help="the log table, ks.<base>_scylla_cdc_log")
    p.add_argument("target_table", help="an existing table with the base table's columns")
    engine_arguments(p)
    p.add_argument(
        "--print",
        dest="print_only",
        action="store_true",
        help="print the CQL statements instead of executing them",
    )
    p.set_defaults(func=cmd_replay)
    return p


def cmd_replay(args: argparse.Namespace) -> int:
    """Run ``cqlcdc replay``: 0 on success, 1 when the engine rejects something."""
    from cqlcdc.cdc.replay import read_log, replay, replay_statements
    from cqlcdc.session import connect

    session = connect(
        data_dir=data_dir_location(args),
        master=args.master,
        verbose=args.verbose,
        aws_region=args.aws_region,
        lease_ttl_s=args.lease_ttl,
    )
    try:
        if args.print_only:
            base, rows = read_log(session, args.log_table)
            for stmt in replay_statements(base, rows, args.target_table):
                print(f"{stmt};")
        else:
            count = replay(session, args.log_table, args.target_table)
            print(f"replayed {count} statements into {args.target_table}", file=sys.stderr)
    except CqlError as e:
        print(f"cqlcdc replay: {e.class_name}: {e.message}", file=sys.stderr)
        return 1
    finally:
        session.close()
    return 0
