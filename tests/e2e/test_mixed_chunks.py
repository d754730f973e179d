"""A group of bulk writes spanning buckets is one ingest record; the engine splits it, in
the driver and in Spark tasks alike (each task reads the record whole and applies its
buckets' share): the tables and logs are what the same writes one by one give."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from cqlcdc.storage.bulk import GROUP_CHUNK_MAX
from tests.e2e.test_bulk_writes import CDC, PREPARED, SHAPE, _read, _text, _workload

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("where", ["driver", "executors"])
def test_a_group_spanning_buckets_applies_like_its_writes_one_by_one(
    session: Any, where: str
) -> None:
    c = session.coordinator
    if where == "executors":  # every batch with writes applied one by one runs as tasks
        c.engine.config = dataclasses.replace(c.engine.config, driver_max_rows=0)
    for table in ("bulk", "rows"):
        # images with TTLs: the bulk writes are applied one by one (their cost sends a batch
        # to the executors when told to)
        session.execute(f"CREATE TABLE ks.{table} {SHAPE} {CDC['images']}")
    prepared = {kind: session.prepare(text.format(t="bulk")) for kind, text in PREPARED.items()}
    work = _workload(120, seed=3)
    assert len(work) <= GROUP_CHUNK_MAX  # one chunk, over many of the 16 buckets
    results = session.execute_many([prepared[k] for k, _ in work], [v for _, v in work])
    assert all(not isinstance(r, Exception) for r in results)
    for kind, values in work:
        session.execute(_text(PREPARED[kind], "rows", values), wait=False)
    session.flush()
    bulk, rows = _read(session, "bulk"), _read(session, "rows")
    assert bulk[0] == rows[0] and len(bulk[0]) > 10
    assert sorted(bulk[1], key=repr) == sorted(rows[1], key=repr)
