"""What the core keeps in the data directory beside its tables: the TRUNCATE points
(``truncations.json``) and the CDC generations (``cdc_generations.json``).

Apart from the processor because more than the row path reads them: the coordinator makes
and extends the generations, the pipeline's table scans skip truncated fragments.
"""

from __future__ import annotations

from typing import Any

from cqlcdc.cdc.streams import Generations
from cqlcdc.directory import Directory

GENERATIONS_FILE = "cdc_generations.json"


class Truncations:
    """TRUNCATE points: base fragments with ``seq <= truncations[table_id]`` are gone.

    TRUNCATE empties the base table but not its CDC log (reference section 6); rather than
    rewriting files, the engine records the last seq the truncation covers and every reader
    of base state skips older fragments. Kept in ``<data_dir>/truncations.json``.
    """

    def __init__(self, data_dir: Directory) -> None:
        self.document = data_dir.document("truncations.json")
        self._raw: Any = None
        self._seqs: dict[str, int] = {}

    def seqs(self) -> dict[str, int]:
        raw = self.document.load()
        if raw is None:
            return {}
        if raw is not self._raw:
            self._seqs = {str(k): int(v) for k, v in raw.items()}
            self._raw = raw
        return self._seqs

    def upto(self, table_id: str) -> int:
        return self.seqs().get(table_id, 0)

    def truncate(self, table_id: str, seq: int) -> None:
        seqs = dict(self.seqs())
        seqs[table_id] = seq
        self.document.save(seqs)


def load_generations(data_dir: Directory, num_ranges: int = 16, seed: int = 0) -> Generations:
    """The CDC generations of a data directory (created with the first one if missing)."""
    data_dir.makedirs()
    return Generations.load_or_create(data_dir.document(GENERATIONS_FILE), num_ranges, seed)
