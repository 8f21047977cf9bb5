"""Where the memory gate loses an update or a duplicate: by vector, by full text, or both.

For each labelled update and duplicate pair of the sets (``benchmarks/data/
memory_pairs_*.jsonl``, ``--langs`` only), the pair's user is seated as
``benchmarks/remember.py`` seats them (``--others`` unrelated memories of the pair's
language, then the old memory), and the gate is asked for the new text's candidates
(``Remembering.candidates``, :mod:`palace_retrievers.memory.candidates`). Printed per set
and language: the gate recall, and the shares of pairs whose old memory is

- among the ``memory.candidates`` nearest by vector (the rank among all the user's
  memories, from their stored vectors),
- among the ``memory.lexical_candidates`` best by full text (``lexical_memories``),
- among neither,
- in the list-wise judge's shortlist of 3 (:func:`~palace_retrievers.memory.learned.
  listwise.shortlist` over the gate's candidates, with their full-text ranks, as the
  judge gets them), the few the pair judges read.

Nothing is judged or remembered, so a run is a few minutes. Unlike ``remember.py``, the
``new`` pairs are skipped before the users are seated, so the draws of unrelated
memories differ from its run (the same from one run of this script to the next).

``--limit N`` takes the first ``N`` pairs of each set (before the ``new`` ones are
skipped), for a short run (the other pairs' texts then join the pool of unrelated
memories, so the draws differ from a full run's).

Usage::

    .venv/bin/python benchmarks/gate.py --sets blind_zhcampus heldout24 --langs zh
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import remember

from palace_plugins.builtin.embedders.sentence_transformers import SentenceTransformerEmbedder
from palace_retrievers import Palace
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.memory.learned.listwise import shortlist


@dataclass
class Count:
    """The counts of one (set, language) cell."""

    pairs: int = 0
    gate: int = 0
    vector: int = 0
    text: int = 0
    neither: int = 0
    shortlisted: int = 0

    def add(self, other: Count) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def row(self, name: str) -> str:
        shares = (self.gate, self.vector, self.text, self.neither, self.shortlisted)
        return (
            f"| {name} | {self.pairs} | "
            + " | ".join(f"{n / self.pairs:.3f}" if self.pairs else "nan" for n in shares)
            + " |"
        )


def asked(
    palace: Palace, name: str, pairs: Sequence[dict[str, str]], others: remember.Others
) -> dict[str, Count]:
    """The counts of set ``name``'s update and duplicate pairs, by language."""
    config = palace.config.memory
    rng = random.Random(0)
    counts: dict[str, Count] = defaultdict(Count)
    for k, pair in enumerate(pairs):
        if pair["label"] not in ("update", "duplicate"):
            continue
        user, old_id = remember.seat(palace, name, k, pair, others, rng)
        vector = palace._embed([pair["new"]])[0]
        found = palace._remembering.gathered(pair["new"], user_id=user, vector=vector)
        mine = palace.ledger.memory_vectors(
            [f"other_{user}_{j}" for j in range(others.count)] + [old_id]
        )
        cosines = {i: float(v @ vector) for i, v in mine.items()}
        rank = sorted(cosines, key=lambda i: -cosines[i]).index(old_id)
        by_text = palace.ledger.lexical_memories(
            pair["new"], user_id=user, statuses=CURRENT, limit=config.lexical_candidates
        )
        near, text = rank < config.candidates, any(i == old_id for i, _ in by_text)
        chosen = shortlist(
            [c.memory.text for c in found],
            pair["new"],
            [cosines.get(c.memory.id, 0.0) for c in found],
            3,
            [c.lexical_rank for c in found],
        )
        count = counts[pair["lang"]]
        count.pairs += 1
        count.gate += any(c.memory.id == old_id for c in found)
        count.vector += near
        count.text += text
        count.neither += not (near or text)
        count.shortlisted += any(found[j].memory.id == old_id for j in chosen)
        remember.unseat(palace, user)
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", required=True, help="set names, e.g. heldout24")
    parser.add_argument("--langs", nargs="+", default=["en", "zh"])
    parser.add_argument("--others", type=int, default=200, help="unrelated memories per user")
    parser.add_argument("--limit", type=int, help="the first LIMIT pairs of each set")
    args = parser.parse_args(argv)
    model = SentenceTransformerEmbedder(options={"batch_size": 128})
    data = {
        n: [p for p in remember.load(n)[: args.limit] if p["lang"] in args.langs] for n in args.sets
    }
    avoid = {t for pairs in data.values() for p in pairs for t in (p["old"], p["new"])}
    others = remember.Others.of(model, avoid, args.others)
    print(
        "| set | pairs | gate recall | by vector | by full text | neither | shortlist of 3 |\n"
        "|---|---|---|---|---|---|---|"
    )
    by_lang: dict[str, Count] = defaultdict(Count)
    with remember.palace_for({}, model) as palace:
        for name in args.sets:
            for lang, count in sorted(asked(palace, name, data[name], others).items()):
                print(count.row(f"{name} ({lang})"), flush=True)
                by_lang[lang].add(count)
    for lang, count in sorted(by_lang.items()):
        print(count.row(f"**all ({lang})**"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
