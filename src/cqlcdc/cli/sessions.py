"""Opening a session for a command: the embedded engine on ``--data-dir`` or a running
``cqlcdc serve`` through ``--connect``, and the options of each.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from cqlcdc.cli.data_dir import (
    add_data_dir_arguments,
    add_lease_argument,
    data_dir_location,
)


def open_session(args: argparse.Namespace) -> Any:
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
