"""The gate: which of the owner's current memories a new memory is judged against.

A new value is lost before anything judges it if its old memory never reaches the judge.
A cosine floor alone loses the updates phrased far from the old text ("Rent is $2,100 a
month" after "pays 1,850 per month in rent"; a note against a chat line), so the
candidates are the union of three ways in, all among the owner's current (``active`` or
``pending``) memories, never another owner's:

- **by vector**: the ``memory.candidates`` nearest, with a cosine of at least
  ``memory.candidate_similarity`` (0 by default: the nearest, however far);
- **by full text**: the ``memory.lexical_candidates`` best full-text matches of the new
  text (the ledger's full text over words and, for Chinese, Japanese and Korean, trigrams
  and character pairs): a shared name, number or rare word brings the old memory in
  whatever its cosine. For Chinese this is the way in that counts: the palace's embedder
  (all-MiniLM-L6-v2) lacks most Chinese characters, and a word shared by an old and a new
  memory is mostly two characters long (体重, 芒果, 导师), which only the pairs find;
- **by slot**: every memory filed on the new memory's slot (the same subject and
  single-valued attribute, :mod:`.slots`).

Each comes as a :class:`Candidate`: with its cosine to the new memory (from its stored
vector) and its place in the full text's order (or ``None``), nearest by cosine first. The
learned judge reads its shortlist by both (:func:`.learned.listwise.shortlist`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from palace_retrievers.config import MemoryConfig
from palace_retrievers.ledger import Ledger
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.records.memories import Memory

#: ``nearest(vector, user_id, k)``: the owner's ``(memory id, cosine)`` pairs nearest
#: ``vector`` among the *active* memories, from the vector index.
Nearest = Callable[[npt.NDArray[np.float32], str | None, int], Sequence[tuple[str, float]]]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One of the owner's current memories a new memory is judged against: its cosine to
    the new memory, and its place in the full text's order for the new text (0 for the
    best match; ``None`` when the full text did not bring it)."""

    memory: Memory
    similarity: float
    lexical_rank: int | None


def gather(
    ledger: Ledger,
    config: MemoryConfig,
    *,
    text: str,
    vector: npt.NDArray[np.float32],
    slot: str | None,
    user_id: str | None,
    nearest: Nearest | None = None,
) -> list[Candidate]:
    """The owner's current memories a new memory (``text``, its unit ``vector`` and
    ``slot``) is judged against, nearest by cosine first (ties by id)."""
    found = _by_vector(ledger, config, vector, user_id, nearest)
    wanted: list[str] = []
    if config.lexical_candidates:
        wanted += [
            memory_id
            for memory_id, _ in ledger.lexical_memories(
                text, user_id=user_id, statuses=CURRENT, limit=config.lexical_candidates
            )
        ]
    ranks = {memory_id: rank for rank, memory_id in enumerate(dict.fromkeys(wanted))}
    memories = {m.id: m for m, _ in found}
    if slot is not None:
        for m in ledger.slot_memories(slot, user_id=user_id, statuses=CURRENT):
            memories.setdefault(m.id, m)
    for m in ledger.get_memories([i for i in ranks if i not in memories]):
        if m.user_id == user_id and m.status in CURRENT:
            memories[m.id] = m
    sims = {m.id: s for m, s in found}
    missing = [i for i in memories if i not in sims]
    stored = ledger.memory_vectors(missing)
    for memory_id in missing:
        sims[memory_id] = float(stored[memory_id] @ vector) if memory_id in stored else 0.0
    out = [Candidate(m, sims[m.id], ranks.get(m.id)) for m in memories.values()]
    out.sort(key=lambda c: (-c.similarity, c.memory.id))
    return out


def _by_vector(
    ledger: Ledger,
    config: MemoryConfig,
    vector: npt.NDArray[np.float32],
    user_id: str | None,
    nearest: Nearest | None,
) -> list[tuple[Memory, float]]:
    """The nearest current memories: from the vector index when the palace gives one
    (``nearest``; pending memories, few and not in the index, are scanned), otherwise by
    the ledger's exact scan."""
    floor, k = config.candidate_similarity, config.candidates
    if nearest is None:
        return ledger.nearest_memories(
            vector, user_id=user_id, statuses=CURRENT, limit=k, min_similarity=floor
        )
    pending = ledger.nearest_memories(
        vector, user_id=user_id, statuses=("pending",), limit=k, min_similarity=floor
    )
    indexed = dict(nearest(vector, user_id, k))
    active = [
        (m, indexed[m.id])
        for m in ledger.get_memories(list(indexed))
        if m.status in CURRENT and m.user_id == user_id and indexed[m.id] >= floor
    ]
    near = sorted([*active, *pending], key=lambda pair: (-pair[1], pair[0].id))
    return near[:k]
