"""The data directory as the pure core sees it: small named documents, no file system.

The core (catalog, CDC generations, TRUNCATE points, initial-scan progress) keeps a few JSON
documents beside the tables, and must read them wherever the directory is: a local disk or
an object store, in the driver or in a Spark executor. How they are read and written
(``pyarrow.fs``, atomic replacement, caching) is the layer above's:
``cqlcdc.documents.DocumentDirectory`` implements these Protocols over a ``Location``. The
core takes them as arguments and never imports ``cqlcdc.location`` (an import-linter
contract holds it to that), so it stays free of I/O libraries and testable in memory.
"""

from __future__ import annotations

from typing import Any, Protocol


class Document(Protocol):
    """One JSON document (``cqlcdc.documents.JsonDocument``). The value :meth:`load`
    returns may be shared: callers copy it before changing it."""

    def load(self) -> Any:
        """The document's value, or None when there is none."""
        ...

    def save(self, value: Any) -> None:
        """Replace the document with ``value``, durably (a crash leaves the old or the new)."""
        ...


class Directory(Protocol):
    """A data directory's documents, by name. Picklable: executors get the processor's."""

    def document(self, name: str) -> Document:
        """The document ``name`` (a reader that caches: keep it to read again cheaply)."""
        ...

    def read_text(self, name: str) -> str | None:
        """The text of file ``name``, read now (None: there is none)."""
        ...

    def write_text(self, name: str, text: str) -> None:
        """Replace file ``name`` with ``text``, durably, making the directory if needed."""
        ...

    def makedirs(self) -> None:
        """Make the directory (and its parents) if it is missing."""
        ...


__all__ = ["Directory", "Document"]
