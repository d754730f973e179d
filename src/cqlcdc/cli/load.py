"""``cqlcdc load``: CQL files or CSV/Parquet/JSON-lines rows into a table (``cqlcdc.loader``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cqlcdc.cli.sessions import open_session
from cqlcdc.cli.shell import Runner
from cqlcdc.errors import CqlError


def cmd_load(args: argparse.Namespace) -> int:
    """Load CQL files, or CSV/Parquet/JSON-lines rows bound to a prepared write."""
    from cqlcdc.loader import Progress, count_rows, load

    cql = [p for p in args.files if p.endswith(".cql")]
    rows = [p for p in args.files if not p.endswith(".cql")]
    session = open_session(args)
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
