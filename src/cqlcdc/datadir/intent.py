"""``batch.json``: the seqs of the batch being committed, written before its first output commit.

The manifest names the last batch committed in every output; between it and the next
manifest, some outputs may hold the next batch already. A restarted driver must commit that
batch again with exactly the same records (an output that has it skips its commit by batch
id, so a batch that grew would lose the new records there). Spark's checkpoint could say
which records those were, but it is local scratch: a driver restarted on another machine has
none. So the batch's seq range lives in the data directory, one small write per batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cqlcdc.location import Location

INTENT_NAME = "batch.json"


@dataclass(frozen=True, slots=True)
class BatchIntent:
    """Batch ``batch_id`` applies the records ``from_seq + 1 .. to_seq``."""

    batch_id: int
    from_seq: int
    to_seq: int

    @classmethod
    def load(cls, data_dir: Location | str | Path) -> BatchIntent | None:
        text = Location.of(data_dir).child(INTENT_NAME).read_text()
        if not text:
            return None
        body = json.loads(text)
        return cls(int(body["batch_id"]), int(body["from_seq"]), int(body["to_seq"]))

    def save(self, data_dir: Location | str | Path) -> None:
        body = {"batch_id": self.batch_id, "from_seq": self.from_seq, "to_seq": self.to_seq}
        Location.of(data_dir).child(INTENT_NAME).write_atomically(json.dumps(body))


__all__ = ["INTENT_NAME", "BatchIntent"]
