"""The catalog in a data directory: ``<data_dir>/catalog.json``, written atomically
(``Directory.write_text``; over a Location: temp + fsync + rename on a disk, one PUT in an
object store).

Types are stored structurally (``typeshape.type_to_json``), so every table version reloads
exactly, including versions that reference an older definition of a user type.
"""

from __future__ import annotations

import json
from typing import Any

from cqlcdc.directory import Directory
from cqlcdc.schema.model import (
    CdcOptions,
    Column,
    DroppedColumn,
    Keyspace,
    SecondaryIndex,
    TableSchema,
)
from cqlcdc.schema.typeshape import type_from_json, type_to_json

FORMAT_VERSION = 1
CATALOG_FILE = "catalog.json"


def keyspace_to_json(ks: Keyspace) -> dict[str, Any]:
    return {
        "name": ks.name,
        "replication": [list(p) for p in ks.replication],
        "durable_writes": ks.durable_writes,
    }


def keyspace_from_json(data: dict[str, Any]) -> Keyspace:
    return Keyspace(
        name=data["name"],
        replication=tuple((str(k), str(v)) for k, v in data["replication"]),
        durable_writes=bool(data["durable_writes"]),
    )


def table_to_json(t: TableSchema) -> dict[str, Any]:
    return {
        "keyspace": t.keyspace,
        "name": t.name,
        "columns": [
            {
                "name": c.name,
                "type": type_to_json(c.type),
                "kind": c.kind,
                "position": c.position,
                "descending": c.descending,
            }
            for c in t.columns
        ],
        "cdc": {
            "enabled": t.cdc.enabled,
            "preimage": t.cdc.preimage,
            "postimage": t.cdc.postimage,
            "delta": t.cdc.delta,
            "ttl_s": t.cdc.ttl_s,
            "enabled_set": t.cdc.enabled_set,
        },
        "options": [list(p) for p in t.options],
        "compact_storage": t.compact_storage,
        "ttl_column": t.ttl_column,
        "log_of": t.log_of,
        "table_id": t.table_id,
        "schema_version": t.schema_version,
        "changefeeds": [[name, [list(p) for p in opts]] for name, opts in t.changefeeds],
        "feed_topics": [list(p) for p in t.feed_topics],
        "disabled_feeds": list(t.disabled_feeds),
        "feed_partitioners": [list(p) for p in t.feed_partitioners],
        "indexes": [
            {"name": i.name, "column": i.column, "kind": i.kind, "local_key": list(i.local_key)}
            for i in t.indexes
        ],
        "dropped": [
            {"name": d.name, "type": type_to_json(d.type), "static": d.static, "at": d.timestamp}
            for d in t.dropped
        ],
        "physical_layout": t.physical_layout,
    }


def table_from_json(data: dict[str, Any]) -> TableSchema:
    cdc = data["cdc"]
    return TableSchema(
        keyspace=data["keyspace"],
        name=data["name"],
        columns=tuple(
            Column(
                name=c["name"],
                type=type_from_json(c["type"]),
                kind=c["kind"],
                position=int(c["position"]),
                descending=bool(c["descending"]),
            )
            for c in data["columns"]
        ),
        cdc=CdcOptions(
            enabled=bool(cdc["enabled"]),
            preimage=cdc["preimage"],
            postimage=bool(cdc["postimage"]),
            delta=cdc["delta"],
            ttl_s=int(cdc["ttl_s"]),
            enabled_set=bool(cdc["enabled_set"]),
        ),
        options=tuple((str(k), str(v)) for k, v in data["options"]),
        compact_storage=bool(data["compact_storage"]),
        ttl_column=data.get("ttl_column"),
        log_of=data["log_of"],
        table_id=data["table_id"],
        schema_version=int(data["schema_version"]),
        changefeeds=tuple(
            (str(name), tuple((str(k), str(v)) for k, v in opts))
            for name, opts in data["changefeeds"]
        ),
        feed_topics=tuple((str(k), str(v)) for k, v in data.get("feed_topics", ())),
        disabled_feeds=tuple(str(name) for name in data.get("disabled_feeds", ())),
        feed_partitioners=tuple((str(k), str(v)) for k, v in data.get("feed_partitioners", ())),
        indexes=tuple(
            SecondaryIndex(i["name"], i["column"], i["kind"], tuple(i["local_key"]))
            for i in data.get("indexes", ())
        ),
        dropped=tuple(
            DroppedColumn(d["name"], type_from_json(d["type"]), bool(d["static"]), int(d["at"]))
            for d in data.get("dropped", ())
        ),
        physical_layout=int(data.get("physical_layout", 1)),
    )


def load_document(data_dir: Directory) -> dict[str, Any] | None:
    """The catalog document saved in ``data_dir``, or None when there is none yet."""
    text = data_dir.read_text(CATALOG_FILE)
    if text is None:
        return None
    data: dict[str, Any] = json.loads(text)
    if data.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"unsupported catalog format in {data_dir}/{CATALOG_FILE}: {data.get('format')!r}"
        )
    return data


def dump_document(data: dict[str, Any]) -> str:
    return json.dumps({"format": FORMAT_VERSION, **data}, indent=1, sort_keys=True)


__all__ = [
    "CATALOG_FILE",
    "dump_document",
    "keyspace_from_json",
    "keyspace_to_json",
    "load_document",
    "table_from_json",
    "table_to_json",
]
