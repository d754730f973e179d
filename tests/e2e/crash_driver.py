"""A writer process for crash tests: killed with SIGKILL at random points and restarted.

Usage: python crash_driver.py DATA_DIR TOTAL GROUP [MODE]

Write i sets ``v = 'w<i>'`` on row (pk = i % 97, ck = i % 13) of ks.t (CDC on, and in modes
``rows`` and ``bulk`` a changefeed with 4 partitions). Writes go in groups through
``execute_many``: as CQL text in mode ``rows``, as executions of one prepared UPDATE in the
bulk modes (the bulk path: one Arrow chunk per bucket; with the feed its writes are applied one
by one in the pipeline, without it column-wise). After a group is
acknowledged its last index is appended to ``acked.txt`` (fsync). On restart the driver
resumes after the last write that is durable in the ingest log (acknowledged or not: a
durable write will be applied, so sending it again would duplicate it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

KS = (
    "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
    "{'class': 'SimpleStrategy', 'replication_factor': 1}"
)
TABLE = (
    "CREATE TABLE IF NOT EXISTS ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) "
    "WITH cdc = {'enabled': true}"
)
FEED = (
    "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'NEW_AND_OLD_IMAGES', FORMAT = 'JSON', "
    "TOPIC_MIN_ACTIVE_PARTITIONS = 4, VIRTUAL_TIMESTAMPS = TRUE)"
)


PREPARED = "UPDATE ks.t SET v = ? WHERE pk = ? AND ck = ?"


def statement(i: int) -> str:
    return f"UPDATE ks.t SET v = 'w{i}' WHERE pk = {i % 97} AND ck = {i % 13}"


def parameters(i: int) -> tuple[str, int, int]:
    return (f"w{i}", i % 97, i % 13)


def main() -> None:
    data_dir, total, group = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) > 4 else "rows"
    import cqlcdc

    session = cqlcdc.connect(data_dir=data_dir, master="local[1]")
    session.execute(KS)
    session.execute(TABLE)
    table = session.catalog.table("ks", "t")
    if mode != "bulk-nofeed" and (table is None or not table.changefeeds):
        session.execute(FEED)
    update = session.prepare(PREPARED)
    marker = data_dir / "first_seq.txt"
    if not marker.exists():
        marker.write_text(str(session.coordinator.ingest.last_seq() + 1))
    first_seq = int(marker.read_text())
    done = session.coordinator.ingest.last_seq() - first_seq + 1  # writes durable so far
    acked = data_dir / "acked.txt"
    i = done
    while i < total:
        batch = list(range(i, min(i + group, total)))
        if mode == "rows":
            results = session.execute_many([statement(j) for j in batch])
        else:
            results = session.execute_many([update] * len(batch), [parameters(j) for j in batch])
        for r in results:
            if isinstance(r, Exception):
                raise r
        with open(acked, "a") as sink:
            sink.write(f"{batch[-1]}\n")
            sink.flush()
            os.fsync(sink.fileno())
        i = batch[-1] + 1
    session.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
