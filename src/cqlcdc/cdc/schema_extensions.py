"""A table's schema extensions as ScyllaDB stores them in ``system_schema.tables.extensions``.

ScyllaDB keeps ``cdc``, ``tombstone_gc`` and ``paxos_grace_seconds`` as extensions, each
value in its internal (IDL) serialization: integers little-endian, a string as its uint32
length then its bytes, a map as its uint32 size then its entries in key order. ScyllaDB's
CDC libraries decode ``extensions['cdc']`` that way to learn the log's TTL.

>>> serialize_string_map({"ttl": "60"}).hex()
'010000000300000074746c020000003630'
>>> deserialize_string_map(serialize_string_map({"ttl": "60"}))
{'ttl': '60'}
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping

from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.table_options import DEFAULT_TOMBSTONE_GC


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<I", len(data)) + data


def serialize_string_map(entries: Mapping[str, str]) -> bytes:
    """``ser::serialize_to_buffer`` of a ``std::map<sstring, sstring>`` (sorted by key)."""
    out = [struct.pack("<I", len(entries))]
    for key in sorted(entries, key=lambda k: k.encode()):
        out += (_string(key), _string(entries[key]))
    return b"".join(out)


def deserialize_string_map(data: bytes) -> dict[str, str]:
    """The inverse of ``serialize_string_map``.

    Raises:
        ValueError: the bytes are not exactly one serialized map.
    """
    try:
        (count,) = struct.unpack_from("<I", data)
        offset = 4
        strings: list[str] = []
        for _ in range(2 * count):
            (size,) = struct.unpack_from("<I", data, offset)
            offset += 4
            if offset + size > len(data):
                raise ValueError("a serialized string runs past the end")
            strings.append(data[offset : offset + size].decode())
            offset += size
    except struct.error as e:
        raise ValueError(f"a truncated serialized map: {e}") from None
    if offset != len(data):
        raise ValueError(f"{len(data) - offset} bytes after a serialized map")
    return dict(zip(strings[::2], strings[1::2], strict=True))


def parse_option_map(text: str) -> dict[str, str]:
    """``{'k': 'v', ...}`` (the DESCRIBE text a table keeps for a map option) as a dict."""
    return dict(re.findall(r"'((?:[^']|'')*)'\s*:\s*'((?:[^']|'')*)'", text))


def table_extensions(table: TableSchema) -> dict[str, bytes]:
    """The ``extensions`` map of a table made by CQL: ``cdc`` once its options were set
    (``cdc::options::to_map``), ``tombstone_gc`` always, ``paxos_grace_seconds`` when set."""
    options = dict(table.options)
    extensions: dict[str, bytes] = {}
    if table.cdc.declared:
        extensions["cdc"] = serialize_string_map(table.cdc.as_map())
    # CREATE TABLE always attaches one (cf_prop_defs::apply_to_builder)
    tombstone_gc = parse_option_map(options.get("tombstone_gc", DEFAULT_TOMBSTONE_GC))
    extensions["tombstone_gc"] = serialize_string_map(tombstone_gc)
    if "paxos_grace_seconds" in options:
        extensions["paxos_grace_seconds"] = struct.pack("<i", int(options["paxos_grace_seconds"]))
    return extensions


__all__ = [
    "deserialize_string_map",
    "parse_option_map",
    "serialize_string_map",
    "table_extensions",
]
