"""Byte encodings of mutations (ingest payloads) and partition fragments (base table rows).

Pickle (protocol 5) behind a format tag: the objects are our own value classes, the files
are written and read only by the engine, and the tag lets a later format coexist. Reading
goes through an unpickler that builds only the classes listed here (``_PERSISTED``: the
storage value classes, CQL types and values, and the stdlib value types a CQL value can
be), found by the name the bytes give them: a data file can make it build nothing else
(no function call, no other class), and a class that moves or is renamed gets an alias in
``_ALIASES`` instead of making every data directory unreadable. The golden fixtures in
``tests/unit/store`` pin the bytes.
"""

from __future__ import annotations

import importlib
import io
import pickle
from dataclasses import dataclass
from decimal import Decimal
from ipaddress import IPv4Address, IPv6Address
from uuid import UUID

from cqlcdc.errors import CorruptIngestFile
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell, RowMarker
from cqlcdc.storage.conditions import Conditional, ConditionCheck, StatementCondition
from cqlcdc.storage.keys import Bound
from cqlcdc.storage.mutations import ListOp
from cqlcdc.storage.partition import Partition, RangeTombstone, Row
from cqlcdc.types.base import CqlType
from cqlcdc.types.values import Duration, MapValue, UdtValue

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


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


_PERSISTED: dict[str, type] = {
    _name(cls): cls
    for cls in (
        Partition,
        Row,
        RangeTombstone,
        Bound,
        Cell,
        CounterCell,
        RowMarker,
        CollectionCells,
        ListOp,
        Conditional,
        StatementCondition,
        ConditionCheck,
        WritePayload,
        ConditionalWrite,
        ScanRequest,
        SweepRequest,
        TickRequest,
        Duration,
        MapValue,
        UdtValue,
        Decimal,
        UUID,
        IPv4Address,
        IPv6Address,
    )
}
# names older data directories use for a class since moved or renamed: "old.module.Name":
# the class (none yet; the golden fixtures fail when one is needed)
_ALIASES: dict[str, type] = {}
_TYPES_PACKAGE = "cqlcdc.types."  # CQL types (conditions keep a value's type) are allowed


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        key = f"{module}.{name}"
        found = _PERSISTED.get(key) or _ALIASES.get(key)
        if found is None and module.startswith(_TYPES_PACKAGE) and "." not in name:
            candidate = getattr(importlib.import_module(module), name, None)
            if isinstance(candidate, type) and issubclass(candidate, CqlType):
                found = candidate
        if found is None:
            raise pickle.UnpicklingError(f"stored bytes name {key}, not a cqlcdc storage class")
        return found


def _loads(data: bytes, what: str) -> object:
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except Exception as err:  # any malformed pickle: a truncated one raises many kinds
        raise CorruptIngestFile(f"{what} cannot be decoded: {type(err).__name__}: {err}") from err


def encode_payload(payload: Payload) -> bytes:
    return _TAG + pickle.dumps(payload, protocol=5)


def decode_payload(data: bytes) -> Payload:
    if not data.startswith(_TAG):
        raise CorruptIngestFile("ingest payload has an unknown format tag")
    obj = _loads(data[len(_TAG) :], "an ingest payload")
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
    obj = _loads(data[len(_TAG) :], "a base fragment")
    if not isinstance(obj, Partition):
        raise CorruptIngestFile("a base fragment does not hold a partition")
    return obj


def merge_fragments(pk: tuple[object, ...], fragments: list[bytes]) -> Partition:
    """A partition's state: the merge of every fragment written to it, in order."""
    state = Partition(pk)
    for frag in fragments:
        state.apply(decode_fragment(frag))
    return state
