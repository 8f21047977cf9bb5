"""Newer first by vectors: a recall rule tried for issue 18.4 and not kept, with its figures.

Recall puts a memory filed *related* to an older one (the judge's unsure update) just
above it (:func:`palace_retrievers.memory.recall.newer_first`). The rule tried here takes
two current memories as one subject without a link too: when the cosine of their stored
vectors is at least a threshold, the newer goes just above the older (oldest first, over
all the candidates before the cut to ``k``; not above a memory holding the asked slot
more than it). This script runs ``benchmarks/remember.py`` on ``--sets`` (the same pairs,
users and decisions) and asks each of its searches again under every threshold, on the
same palace, then prints per threshold and language:

- **stale answer**: of the update pairs, the share whose top memory hit of
  ``palace.search(old, k=5)`` is the old memory (``remember.py``'s figure);
- **old displaced**: of the ``new`` pairs, the share whose old memory stayed current and
  whose top memory hit of that search is the new memory: two true memories of two
  subjects, the one asked about in its own words put second (``remember.py``'s figure).

``links only`` is the palace as shipped. The rule for a threshold, written before the
report sets were run: the one with the lowest stale + old displaced (each is a wrong top
memory for a question in the old memory's words) on the sets it is chosen on; links only
when none is lower.

Usage::

    .venv/bin/python benchmarks/newer_first.py --limit 80 \\
        --sets blind_caregivers blind_narrative blind_team_ops   # choosing
    .venv/bin/python benchmarks/newer_first.py --sets blind_voice blind_crm blind_zhcampus
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import remember

from palace_retrievers import Palace
from palace_retrievers.memory import recall
from palace_retrievers.records import Hit

THRESHOLDS = (0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5)


def near(
    newer: Hit, older: Hit, vectors: Mapping[str, npt.NDArray[np.float32]], threshold: float
) -> bool:
    """Both current, their stored vectors' cosine at least ``threshold``, and ``older``
    holding the asked slot no more than ``newer``."""
    if newer.memory is None or older.memory is None:
        return False
    if newer.memory.status != "active" or older.memory.status != "active":
        return False
    if older.scores.get("held", 0.0) > newer.scores.get("held", 0.0):
        return False
    a, b = vectors.get(newer.id), vectors.get(older.id)
    return a is not None and b is not None and float(a @ b) >= threshold


def by_vectors(
    hits: Sequence[Hit], vectors: Mapping[str, npt.NDArray[np.float32]], threshold: float
) -> list[Hit]:
    """``hits`` with each memory hit put just above the best older hit ranked above it
    that it is :func:`near`, oldest first (the rule tried)."""
    current = {h.id: h for h in hits}
    dated = sorted((h.memory.created_at, h.id) for h in hits if h.memory is not None)
    for k, (filed, hit_id) in enumerate(dated):
        hit = current[hit_id]
        above = [
            current[i]
            for before, i in dated[:k]
            if before < filed
            and current[i].score >= hit.score
            and near(hit, current[i], vectors, threshold)
        ]
        if above:
            score = max(h.score for h in above) + recall.NEWER_BY
            scores = {**hit.scores, "final": score, "newer": 1.0}
            current[hit_id] = Hit(drawer=hit.drawer, score=score, scores=scores, memory=hit.memory)
    return sorted(current.values(), key=lambda h: (-h.score, h.id))


class Sweep:
    """Asks each search of ``remember.py`` again under every threshold; records the top
    memory hit (old, new or another memory) per user and threshold."""

    def __init__(self) -> None:
        self.tops: dict[str, dict[str, str]] = {}
        self.threshold: float | None = None
        self.ledger: Any = None
        self.search = Palace.search
        self.links_only = recall.newer_first

    def newer_first(self, hits: Sequence[Hit]) -> list[Hit]:
        linked = self.links_only(hits)
        if self.threshold is None or len(linked) < 2:
            return linked
        vectors = self.ledger.memory_vectors([h.id for h in linked])
        return by_vectors(linked, vectors, self.threshold)

    def asked(self, palace: Palace, query: str, k: int = 5, **kwargs: Any) -> list[Hit]:
        user = str(kwargs.get("user_id"))
        self.ledger = palace.ledger
        tops = {}
        for threshold in (None, *THRESHOLDS):
            self.threshold = threshold
            hits = [h for h in self.search(palace, query, k=k, **kwargs) if h.is_memory]
            top = hits[0].id if hits else ""
            tops["links only" if threshold is None else str(threshold)] = (
                "old"
                if top == f"old_{user}"
                else "other"
                if top.startswith("other_") or not top
                else "new"
            )
        self.tops[user] = tops
        self.threshold = None
        return self.search(palace, query, k=k, **kwargs)


def report(sweep: Sweep, rows: Sequence[dict[str, Any]]) -> None:
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for row in rows:
        tops = sweep.tops.get(f"{row['set']}-{row['k']}")
        if tops is None:
            continue
        for lang in (row["lang"], "all"):
            for name, top in tops.items():
                if row["label"] == "update":
                    counts[(lang, name, "updates")] += 1
                    counts[(lang, name, "stale")] += top == "old"
                elif row["label"] == "new":
                    counts[(lang, name, "news")] += 1
                    counts[(lang, name, "displaced")] += top == "new" and row["decided"] != "update"
    print(
        "\n| language | same subject | stale answer | old displaced | sum |\n|---|---|---|---|---|"
    )
    for lang in sorted({k[0] for k in counts}, key=lambda x: (x == "all", x)):
        for name in ("links only", *map(str, THRESHOLDS)):
            stale = counts[(lang, name, "stale")] / max(counts[(lang, name, "updates")], 1)
            moved = counts[(lang, name, "displaced")] / max(counts[(lang, name, "news")], 1)
            rule = name if name == "links only" else f"links, or cosine ≥ {name}"
            print(f"| {lang} | {rule} | {stale:.3f} | {moved:.3f} | {stale + moved:.3f} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", required=True, help="set names, e.g. blind_voice")
    parser.add_argument("--limit", type=int, help="the first N pairs of each set")
    parser.add_argument("--others", type=int, default=200, help="unrelated memories per user")
    args = parser.parse_args(argv)
    remember.LIMIT = args.limit
    sweep = Sweep()
    recall.newer_first = sweep.newer_first

    def search(palace: Palace, query: str, k: int = 5, **kwargs: Any) -> list[Hit]:
        return sweep.asked(palace, query, k, **kwargs)

    Palace.search = search  # type: ignore[assignment,method-assign]
    with tempfile.TemporaryDirectory(prefix="palace-newer-first-") as folder:
        dump = Path(folder) / "pairs.jsonl"
        try:
            remember.run(args.sets, ["shipped"], args.others, 0, None, dump)
        finally:
            Palace.search = sweep.search  # type: ignore[method-assign]
            recall.newer_first = sweep.links_only
        with dump.open(encoding="utf-8") as stream:
            rows = [json.loads(line) for line in stream]
    report(sweep, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
