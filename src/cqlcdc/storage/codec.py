"""Byte encodings of mutations (ingest payloads) and partition fragments (base table rows).

Pickle (protocol 5) behind a format tag: the objects are our own frozen value classes, the
files are written and read only by the engine, and the tag lets a later format coexist.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass

from cqlcdc.errors import CorruptIngestFile
from cqlcdc.storage.conditions import Conditional
from cqlcdc.storage.mutations import ListOp
from cqlcdc.storage.partition import Partition

_TAG = b"CQM1"


@dataclass(frozen=True, slots=True)
class WritePayload:
    """What an ingest record carries: the mutation and the session-fixed inputs of the write.

    ``now_us`` is the session clock at the write (TTL expiry, list keys); ``seed`` fixes
    every random bit the pipeline needs (``cdc$time``).
    """

    partition: Partition
    list_ops: tuple[ListOp, ...]
    now_us: int
    seed: int


@dataclass(frozen=True, slots=True)
class ConditionalWrite:
    """A lightweight transaction's record: the write, applied only if ``conditional``
    holds against the partition as the earlier records left it (``storage.conditions``)."""

    write: WritePayload
    conditional: Conditional


@dataclass(frozen=True, slots=True)
class ScanRequest:
    """An initial-scan record: export this partition to changefeed ``feed`` (once).

    ``step``/``tx_id`` are the virtual timestamp of the feed's snapshot; ``created_ms`` the
    time the feed was added.
    """

    feed: str
    step: int
    tx_id: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """A TTL sweep record: report what expired in this partition at second ``at_s``."""

    at_s: int


@dataclass(frozen=True, slots=True)
class TickRequest:
    """A clock tick for an idle table: lets feeds emit barriers when no writes come.

    Its record has an empty partition key; ``now_ms`` is the session clock.
    """

    now_ms: int


Payload = WritePayload | ConditionalWrite | ScanRequest | SweepRequest | TickRequest


def encode_payload(payload: Payload) -> bytes:
    return _TAG + pickle.dumps(payload, protocol=5)


def decode_payload(data: bytes) -> Payload:
    if not data.startswith(_TAG):
        raise CorruptIngestFile("ingest payload has an unknown format tag")
    obj = pickle.loads(data[len(_TAG) :])
    if not isinstance(
        obj, WritePayload | ConditionalWrite | ScanRequest | SweepRequest | TickRequest
    ):
        raise CorruptIngestFile("ingest payload does not hold a write")
    return obj


def encode_fragment(part: Partition) -> bytes:
    return _TAG + pickle.dumps(part, protocol=5)


def decode_fragment(data: bytes) -> Partition:
    """A base fragment: pickled, or one bulk write (``cqlcdc.storage.bulk``)."""
    if not data.startswith(_TAG):
        from cqlcdc.storage.bulk import decode_bulk_fragment

        return decode_bulk_fragment(data)
    obj = pickle.loads(data[len(_TAG) :])
    assert isinstance(obj, Partition)
    return obj


def merge_fragments(pk: tuple[object, ...], fragments: list[bytes]) -> Partition:
    """A partition's state: the merge of every fragment written to it, in order."""
    state = Partition(pk)
    for frag in fragments:
        state.apply(decode_fragment(frag))
    return state
