"""Each labelled pair's candidates and what the learned judge thinks of them, written once.

For each pair of ``--sets`` (``benchmarks/data/memory_pairs_<name>.jsonl``), its user gets
``--others`` (200) unrelated memories and the old memory, as in ``remember.py``; then the
new text's candidates are gathered *wide* (the ``--vector`` nearest, the ``--lexical``
best full-text matches, every memory of its slot) and the learned judge's parts read every
one. One JSON line per pair::

    {"set", "gold", "lang", "new",
     "candidates": [{"old": is the pair's old memory, "text", "same": same text as the new one,
                     "cosine", "vector_rank", "lexical_rank" (null when not found that
                     way), "slot": found by slot, "structural": its verdict,
                     "learned": {"duplicate", "new", "update"} (the averaged learned
                     judges), "verdict": the learned judge's combined call}]}

With ``--shortlist N`` the learned judge's parts read only the ``N`` candidates of the
list the learned judge reads since it reads a shortlist (:func:`listwise.shortlist`,
taken over the whole list with each candidate's full-text rank, as the palace's gate
hands them to the judge: give the palace's gate as ``--vector``/``--lexical``, 16 and
8); the others carry ``"structural": null, "learned": null, "verdict": "new"``: rows to
replay the palace as it decides (``train_listwise.py --evaluate``), at a few pairs'
work a row, not to train on.

From these rows any narrower gate (a smaller ``vector``/``lexical``) and any policy or
list-wise rule can be replayed without the model (``train_listwise.py``). The weights are
the shipped ones, or those of ``--weights DIR`` (``pair_model.json``,
``pair_reader.safetensors``).

Usage::

    .venv/bin/python benchmarks/judge_rows.py --sets heldout20 heldout21 --out rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from remember import Others, load, palace_for, seat

from palace_plugins.builtin.embedders.sentence_transformers import SentenceTransformerEmbedder
from palace_retrievers import Palace
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.memory.judges import JudgeContext, Pair
from palace_retrievers.memory.learned import listwise
from palace_retrievers.memory.learned.judge import LearnedJudge


def rows_for(
    palace: Palace,
    judge: LearnedJudge,
    name: str,
    pairs: Sequence[dict[str, str]],
    others: Others,
    vector_k: int,
    lexical_k: int,
    seed: int,
    shortlist: int = 0,
) -> list[dict[str, Any]]:
    """The rows of set ``name`` (see the module's docstring)."""
    rng = random.Random(seed)
    ledger = palace.ledger
    context = JudgeContext(embed=palace._embed, model=palace.embedder.model_name)
    out = []
    for k, pair in enumerate(pairs):
        user, old_id = seat(palace, name, k, pair, others, rng)
        text = pair["new"]
        vector = palace._embed([text])[0]
        near = ledger.nearest_memories(vector, user_id=user, statuses=CURRENT, limit=vector_k)
        found = ledger.lexical_memories(text, user_id=user, statuses=CURRENT, limit=lexical_k)
        lexical = [i for i, _ in found]
        slot = palace._remembering._slot_of(text)
        by_slot = (
            {m.id for m in ledger.slot_memories(slot, user_id=user, statuses=CURRENT)}
            if slot
            else set()
        )
        memories = {m.id: m for m, _ in near}
        for m in ledger.get_memories([i for i in [*lexical, *by_slot] if i not in memories]):
            memories[m.id] = m
        vectors = ledger.memory_vectors(list(memories))
        cosine = {i: float(vectors[i] @ vector) if i in vectors else 0.0 for i in memories}
        vector_rank = {m.id: r for r, (m, _) in enumerate(near)}
        lexical_rank = {i: r for r, i in enumerate(lexical)}
        ids = sorted(memories, key=lambda i: (-cosine[i], i))
        every = [Pair(memories[i].text, text, cosine[i], lexical_rank.get(i)) for i in ids]
        read = listwise.shortlist(
            [p.old for p in every],
            text,
            [p.similarity for p in every],
            shortlist,
            [p.lexical_rank for p in every],
        )
        asked = [every[k] for k in read]
        structural: list[str | None] = [None] * len(every)
        learned: list[dict[str, float] | None] = [None] * len(every)
        verdicts = ["new"] * len(every)
        for k, pair_, opinion in zip(
            read, asked, judge.judge(asked, context) if asked else [], strict=True
        ):
            structural[k] = judge._structural(pair_)[0]
            learned[k] = {k_: round(float(v), 5) for k_, v in opinion.probabilities.items()}
            verdicts[k] = opinion.verdict
        out.append(
            {
                "set": name,
                "gold": pair["label"],
                "lang": pair["lang"],
                "new": text,
                "candidates": [
                    {
                        "old": i == old_id,
                        "text": memories[i].text,
                        "same": memories[i].text == text,
                        "cosine": round(cosine[i], 5),
                        "vector_rank": vector_rank.get(i),
                        "lexical_rank": lexical_rank.get(i),
                        "slot": i in by_slot,
                        "structural": s,
                        "learned": p,
                        "verdict": v,
                    }
                    for i, s, p, v in zip(ids, structural, learned, verdicts, strict=True)
                ],
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--weights", type=Path, help="a folder with the judges' weights")
    parser.add_argument("--others", type=int, default=200)
    parser.add_argument("--vector", type=int, default=24)
    parser.add_argument("--lexical", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--shortlist",
        type=int,
        default=0,
        help="read only each list's shortlist of this many (0: every candidate)",
    )
    args = parser.parse_args(argv)
    model = SentenceTransformerEmbedder(options={"batch_size": 128})
    data = {name: load(name) for name in args.sets}
    avoid = {t for pairs in data.values() for p in pairs for t in (p["old"], p["new"])}
    others = Others.of(model, avoid, args.others)
    started = time.monotonic()
    # the pair judges' own opinions (the list-wise model is trained on them)
    with (
        palace_for({}, model, args.weights, listwise=False) as palace,
        args.out.open("w") as stream,
    ):
        _, judge = palace.memory_judge()
        if not isinstance(judge, LearnedJudge):
            raise SystemExit("the palace's judge is not the learned one")
        for name in args.sets:
            rows = rows_for(
                palace,
                judge,
                name,
                data[name],
                others,
                args.vector,
                args.lexical,
                args.seed,
                args.shortlist,
            )
            for row in rows:
                stream.write(json.dumps(row, ensure_ascii=False) + "\n")
            stream.flush()
            print(f"{name}: {len(rows)} pairs, {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
