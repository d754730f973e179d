"""What to do when the pipeline cannot apply a write.

Writes are validated before they are appended, so the core should never meet a record it
cannot apply. If it does (a defect), the failure is attributed to its table, which stops
alone (``cqlcdc.datadir.containment``). A failure no table can be blamed for stops the engine
at that record instead of skipping an acknowledged write, and is recorded in
``failure.json``. ``cqlcdc recover`` shows it and, when told to, adds the record's seq to
``skipped.json``: the engine then drops that record (reporting it as failed to anyone
waiting for it) and applies every other write.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from cqlcdc.datadir.lease import Lease
from cqlcdc.errors import InvalidRequest
from cqlcdc.failure_text import unapplied_records
from cqlcdc.location import Location

FAILURE_FILE = "failure.json"
SKIPPED_FILE = "skipped.json"


@dataclass(frozen=True, slots=True)
class Failure:
    """The records the engine stopped at: ``first_seq..last_seq`` (one record: equal)."""

    first_seq: int
    last_seq: int
    batch_id: int
    message: str

    def skip_argument(self) -> str:
        if self.first_seq == self.last_seq:
            return str(self.first_seq)
        return f"{self.first_seq}..{self.last_seq}"


def unapplied_failure(error_text: str, batch_id: int) -> Failure | None:
    """The failure an ``UnappliedWrite`` describes, found in an error's text (None: the
    error is not about a record, e.g. a full disk)."""
    records = unapplied_records(error_text)
    if records is None:
        return None
    return Failure(records.first_seq, records.last_seq, batch_id, records.message)


def save_failure(data_dir: Location | str | os.PathLike[str], failure: Failure) -> None:
    write_json(Location.of(data_dir) / FAILURE_FILE, dataclasses.asdict(failure))


def load_failure(data_dir: Location | str | os.PathLike[str]) -> Failure | None:
    text = (Location.of(data_dir) / FAILURE_FILE).read_text()
    if text is None:
        return None
    data = json.loads(text)
    return Failure(data["first_seq"], data["last_seq"], data["batch_id"], data["message"])


def clear_failure(data_dir: Location | str | os.PathLike[str]) -> None:
    """Forget the recorded failure (none recorded: nothing to do)."""
    (Location.of(data_dir) / FAILURE_FILE).delete()


def load_skipped(data_dir: Location | str | os.PathLike[str]) -> dict[int, str]:
    """Seqs of ingest records to drop, with the reason each is reported as failed."""
    text = (Location.of(data_dir) / SKIPPED_FILE).read_text()
    if text is None:
        return {}
    return {int(seq): reason for seq, reason in json.loads(text).items()}


def parse_seqs(text: str) -> range:
    """``N`` or ``A..B`` (inclusive) as a range of seqs.

    Raises:
        InvalidRequest: not of that form.
    """
    match = re.fullmatch(r"(\d+)(?:\.\.(\d+))?", text.strip())
    if match is None:
        raise InvalidRequest(f"not a seq or a range A..B of seqs: {text!r}")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if last < first:
        raise InvalidRequest(f"empty range of seqs: {text!r}")
    return range(first, last + 1)


def skip_records(
    data_dir: Location | str | os.PathLike[str], seqs: range, committed_seq: int
) -> int:
    """Have the engine drop the ingest records ``seqs`` (under the data directory's lease, so
    no engine runs meanwhile). Returns how many seqs were added.

    Raises:
        DataDirLocked: a process holds the data directory.
        InvalidRequest: a seq is already committed (applied; nothing to skip).
    """
    root = Location.of(data_dir)
    with Lease(root):
        if seqs.start <= committed_seq:
            raise InvalidRequest(
                f"ingest record seq={seqs.start} is committed already (every seq up to "
                f"{committed_seq} is): only a write the pipeline has not applied can be skipped"
            )
        failure = load_failure(root)
        reason = failure.message if failure is not None else "skipped by cqlcdc recover"
        skipped = load_skipped(root)
        added = [seq for seq in seqs if seq not in skipped]
        for seq in added:
            skipped[seq] = f"write seq={seq} skipped by cqlcdc recover: {reason}"
        write_json(root / SKIPPED_FILE, {str(k): v for k, v in sorted(skipped.items())})
        if failure is not None and failure.first_seq in seqs and failure.last_seq in seqs:
            clear_failure(root)
        return len(added)


def write_json(path: Location | str | os.PathLike[str], data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON, durably (a crash leaves the old or the new)."""
    Location.of(path).write_atomically(json.dumps(data, indent=1))


__all__ = [
    "Failure",
    "clear_failure",
    "load_failure",
    "load_skipped",
    "parse_seqs",
    "save_failure",
    "skip_records",
    "unapplied_failure",
    "write_json",
]
