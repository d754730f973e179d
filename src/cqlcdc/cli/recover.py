"""``cqlcdc recover``: the stopped tables and the write the pipeline stopped at, and the
way on: retry or drop a stopped table's held writes, or skip a write.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cqlcdc.cli.data_dir import (
    add_data_dir_arguments,
    data_dir_location,
)


def add_recover_command(sub: Any) -> None:
    """``cqlcdc recover`` and its options."""
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
