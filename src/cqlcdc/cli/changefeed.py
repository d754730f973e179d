"""``cqlcdc changefeed read``: a feed's records as JSON lines, from the data directory's
files or through a running server's ``system_cqlcdc`` tables (``--connect``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from cqlcdc.cli.sessions import open_session
from cqlcdc.errors import CqlError


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

    session = open_session(args)
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
