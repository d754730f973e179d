"""A CDC consumer written with the plain cassandra-driver, as ScyllaDB's CDC libraries read.

It follows ScyllaDB's reading algorithm: find the CDC generations
(``system_distributed.cdc_generation_timestamps``), each generation's streams
(``cdc_streams_descriptions_v2``), then read the log table window by window, every stream of
the window in one query (``"cdc$stream_id" IN ? AND "cdc$time" > minTimeuuid(?) AND
"cdc$time" <= maxTimeuuid(?)``), and apply each change to a copy of the table, with the
change's own write time, so the copy ends equal to the source.

It handles tables of atomic (non-collection) columns: inserts, updates, row and partition
deletes, range deletes, and cells set to null.

    python examples/cdc_consumer.py --port 9042 ks.orders ks.orders_copy
"""

from __future__ import annotations

import argparse
import datetime
import uuid
from typing import Any

from cassandra.cluster import Cluster, Session
from cassandra.policies import RoundRobinPolicy

UPDATE, INSERT, ROW_DELETE, PARTITION_DELETE = 1, 2, 3, 4
RANGE_START_INCL, RANGE_START_EXCL, RANGE_END_INCL, RANGE_END_EXCL = 5, 6, 7, 8


def write_time_us(cdc_time: uuid.UUID) -> int:
    """The write timestamp a log row carries: the microseconds of its ``cdc$time``."""
    return (cdc_time.time - 0x01B21DD213814000) // 10


def generations(session: Session) -> list[datetime.datetime]:
    rows = session.execute(
        "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"
    )
    return sorted(r.time for r in rows)


def streams_of(session: Session, generation: datetime.datetime) -> list[bytes]:
    rows = session.execute(
        "SELECT streams FROM system_distributed.cdc_streams_descriptions_v2 WHERE time = %s",
        (generation,),
    )
    return sorted({sid for r in rows for sid in r.streams})


class Copier:
    """Applies the delta rows of ``source``'s log to ``target`` (same columns)."""

    def __init__(self, session: Session, source: str, target: str) -> None:
        self.session = session
        ks, table = source.split(".")
        meta = session.cluster.metadata.keyspaces[ks].tables[table]
        self.partition_key = [c.name for c in meta.partition_key]
        self.clustering_key = [c.name for c in meta.clustering_key]
        keys = set(self.partition_key + self.clustering_key)
        self.values = [c for c in meta.columns if c not in keys]
        self.target = target
        self.log = f"{ks}.{table}_scylla_cdc_log"
        self.range_start: Any = None

    def read_window(
        self, streams: list[bytes], start: datetime.datetime, end: datetime.datetime
    ) -> int:
        query = self.session.prepare(
            f'SELECT * FROM {self.log} WHERE "cdc$stream_id" IN ? '
            'AND "cdc$time" > minTimeuuid(?) AND "cdc$time" <= maxTimeuuid(?)'
        )
        rows = list(self.session.execute(query, (streams, start, end)))
        # streams are read together: order the window's changes by time, then batch order
        rows.sort(key=lambda r: (r.cdc_time.time, r.cdc_stream_id, r.cdc_batch_seq_no))
        for row in rows:
            self.apply(row)
        return len(rows)

    def apply(self, row: Any) -> None:
        op = row.cdc_operation
        ts = write_time_us(row.cdc_time)
        key = {c: getattr(row, c) for c in self.partition_key + self.clustering_key}
        if op in (UPDATE, INSERT):
            names = [c for c in self.values if getattr(row, c) is not None]
            names += [c for c in self.values if getattr(row, f"cdc_deleted_{c}", None)]
            if op == INSERT:
                columns = list(key) + names
                marks = ", ".join(["%s"] * len(columns))
                self.session.execute(
                    f"INSERT INTO {self.target} ({', '.join(columns)}) VALUES ({marks}) "
                    f"USING TIMESTAMP {ts}",
                    [*key.values(), *(getattr(row, c) for c in names)],
                )
            elif names:
                sets = ", ".join(f"{c} = %s" for c in names)
                where = self._where(key)
                self.session.execute(
                    f"UPDATE {self.target} USING TIMESTAMP {ts} SET {sets} WHERE {where}",
                    [*(getattr(row, c) for c in names), *key.values()],
                )
        elif op == ROW_DELETE:
            self._delete(key, ts)
        elif op == PARTITION_DELETE:
            self._delete({c: key[c] for c in self.partition_key}, ts)
        elif op in (RANGE_START_INCL, RANGE_START_EXCL):
            self.range_start = (op, key)
        elif op in (RANGE_END_INCL, RANGE_END_EXCL) and self.range_start is not None:
            self._delete_range(self.range_start, (op, key), ts)
            self.range_start = None

    def _where(self, key: dict[str, Any]) -> str:
        return " AND ".join(f"{c} = %s" for c in key if key[c] is not None)

    def _delete(self, key: dict[str, Any], ts: int) -> None:
        present = {c: v for c, v in key.items() if v is not None}
        self.session.execute(
            f"DELETE FROM {self.target} USING TIMESTAMP {ts} WHERE {self._where(present)}",
            list(present.values()),
        )

    def _delete_range(
        self, start: tuple[int, dict[str, Any]], end: tuple[int, dict[str, Any]], ts: int
    ) -> None:
        (start_op, start_key), (end_op, end_key) = start, end
        where = [f"{c} = %s" for c in self.partition_key]
        values = [start_key[c] for c in self.partition_key]
        bounds = [
            (start_key, ">=" if start_op == RANGE_START_INCL else ">"),
            (end_key, "<=" if end_op == RANGE_END_INCL else "<"),
        ]
        for key, operator in bounds:
            prefix = [c for c in self.clustering_key if key.get(c) is not None]
            if len(prefix) == 1:
                where.append(f"{prefix[0]} {operator} %s")
            elif prefix:
                marks = ", ".join(["%s"] * len(prefix))
                where.append(f"({', '.join(prefix)}) {operator} ({marks})")
            values += [key[c] for c in prefix]
        self.session.execute(
            f"DELETE FROM {self.target} USING TIMESTAMP {ts} WHERE {' AND '.join(where)}", values
        )


def copy(
    session: Session,
    source: str,
    target: str,
    until: datetime.datetime,
    window: datetime.timedelta | None = None,
) -> int:
    """Read every window of every generation up to ``until`` (``window``: the window size;
    None: one window per generation, a catch-up); returns the log rows applied."""
    copier = Copier(session, source, target)
    applied = 0
    gens = generations(session)
    for i, generation in enumerate(gens):
        streams = streams_of(session, generation)
        end_of_generation = gens[i + 1] if i + 1 < len(gens) else until
        start = generation
        while start < end_of_generation:
            end = end_of_generation if window is None else min(start + window, end_of_generation)
            applied += copier.read_window(streams, start, end)
            start = end
    return applied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="keyspace.table with CDC enabled")
    parser.add_argument("target", help="keyspace.table with the same columns")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9042)
    parser.add_argument("--window-s", type=float, help="window size (default: a generation)")
    args = parser.parse_args()
    cluster = Cluster(
        [args.host], port=args.port, protocol_version=4, load_balancing_policy=RoundRobinPolicy()
    )
    session = cluster.connect()
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=1)
    window = datetime.timedelta(seconds=args.window_s) if args.window_s else None
    applied = copy(session, args.source, args.target, now, window)
    print(f"applied {applied} log rows from {args.source} to {args.target}")
    cluster.shutdown()


if __name__ == "__main__":
    main()
