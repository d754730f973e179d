"""Small JSON documents of a data directory (truncations, feed scans, CDC generations, feed
offsets), read again only when they may have changed.

The owner of a data directory is its only writer. On a local disk a reader compares the
file's inode, mtime and size, as cheap as a ``stat`` (every write is a new file renamed
over the old one, so the inode changes even within the mtime's resolution). In an object
store a ``HEAD`` costs as much as the ``GET`` itself, and an object's time has a
resolution of one second, so: the owner keeps what it wrote (``_WRITTEN``) and reads its
own writes from memory; any other process (an executor task unpickles its own reader)
reads a document once per :class:`JsonDocument`.

>>> import tempfile; doc = JsonDocument(tempfile.mkdtemp() + "/d.json")
>>> doc.load() is None
True
>>> doc.save({"a": 1}); doc.load()
{'a': 1}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from cqlcdc.location import Location

# the documents this process wrote to an object store, by Location: while it owns the data
# directory nobody else writes them, so they are what a read would return
_WRITTEN: dict[Location, Any] = {}


class JsonDocument:
    """One JSON document, cached. The value returned by :meth:`load` is shared: callers
    copy it before changing it (and save the copy).

    Args:
        where: the document's Location (a local path or an object-store URI).
    """

    def __init__(self, where: Location | str | os.PathLike[str]) -> None:
        self.location = Location.of(where)
        self._read = False
        self._stamp: tuple[int, int, int] | None = None
        self._value: Any = None

    def load(self) -> Any:
        """The document's value, or None when there is none."""
        where = self.location
        if where.is_local:
            stamp = _stamp(where)
            if stamp is None:
                self._read = False
                return None
            if self._read and stamp == self._stamp:
                return self._value
            self._stamp = stamp
        else:
            if where in _WRITTEN:
                return _WRITTEN[where]
            if self._read:
                return self._value
        text = where.read_text()
        self._value = None if text is None else json.loads(text)
        self._read = True
        return self._value

    def save(self, value: Any) -> None:
        """Replace the document with ``value``, durably (``Location.write_atomically``)."""
        write_document(self.location, value)
        self._value, self._read = value, True
        if self.location.is_local:
            self._stamp = _stamp(self.location)


def _stamp(where: Location) -> tuple[int, int, int] | None:
    """What changes when a local file is replaced (None: there is no file)."""
    try:
        info = os.stat(where.uri)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


def write_document(where: Location | str | os.PathLike[str], value: Any) -> None:
    """Replace the JSON document at ``where`` with ``value``, durably; this process's later
    reads of it (any :class:`JsonDocument`) see ``value``."""
    location = Location.of(where)
    location.write_atomically(json.dumps(value))
    if not location.is_local:
        _WRITTEN[location] = value


@dataclass(frozen=True, slots=True)
class DocumentDirectory:
    """A data directory's documents at a Location: what the pure core reads and writes
    there (``cqlcdc.directory.Directory``), handed to it by the layers above (the core
    does not import ``cqlcdc.location``)."""

    root: Location

    @staticmethod
    def of(where: DocumentDirectory | Location | str | os.PathLike[str]) -> DocumentDirectory:
        """The documents of the data directory at ``where`` (a path, a URI, a Location)."""
        if isinstance(where, DocumentDirectory):
            return where
        return DocumentDirectory(Location.of(where))

    def document(self, name: str) -> JsonDocument:
        return JsonDocument(self.root / name)

    def read_text(self, name: str) -> str | None:
        return (self.root / name).read_text()

    def write_text(self, name: str, text: str) -> None:
        self.root.makedirs()
        (self.root / name).write_atomically(text)

    def makedirs(self) -> None:
        self.root.makedirs()

    def __str__(self) -> str:
        return str(self.root)


__all__ = ["DocumentDirectory", "JsonDocument", "write_document"]
