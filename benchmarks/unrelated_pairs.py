"""Unrelated pairs for the learned judges' training: a memory against another person's.

The labelled sets pair each old memory only with texts about the same subject, so the
judges never see the pairs a palace mostly hands them: a new memory against the user's
*other* memories (the candidate gate brings the nearest ones in, however far). Trained
without them, the judges read "I moved to Porto" against "I work as a data analyst" as an
update (0.89): they learned what a change sounds like, not what it changes.

So each training pair's new text is also paired, with probability ``share``, with the old
text of another family (another subject, usually another writer's person), labelled
``new``: half the time a random one of the same language (one in five of the other
language), half the time one of its 3rd to 30th nearest by cosine (the kind the gate
brings in), skipping any that states the same slot (:func:`slots.slot_of`), which in one
person's palace could be a real update.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

from palace_retrievers.memory.slots import slot_of

Embed = Callable[[list[str]], object]
NEAR = range(3, 30)


def unrelated_pairs(
    groups: Sequence[Sequence[dict[str, str]]],
    embed: Embed,
    *,
    share: float = 0.5,
    seed: int = 0,
) -> list[list[dict[str, str]]]:
    """For each group of labelled pairs, its unrelated pairs (see the module docstring);
    the old texts come from every group."""
    rng = random.Random(seed)
    olds: dict[str, tuple[str, str]] = {}
    for group in groups:
        for p in group:
            olds.setdefault(p["old"], (p.get("family", p["old"]), p["lang"]))
    old_texts = sorted(olds)
    news = sorted({p["new"] for group in groups for p in group})
    vectors = np.asarray(embed(old_texts + news), dtype=np.float32)
    old_vectors = vectors[: len(old_texts)]
    new_row = {t: len(old_texts) + i for i, t in enumerate(news)}
    by_lang: dict[str, list[int]] = {}
    for i, text in enumerate(old_texts):
        by_lang.setdefault(olds[text][1], []).append(i)
    slots = {t: slot_of(t) for t in old_texts}
    out: list[list[dict[str, str]]] = []
    for group in groups:
        made: list[dict[str, str]] = []
        for p in group:
            if rng.random() >= share:
                continue
            family = p.get("family", p["old"])
            slot = slot_of(p["new"])
            if rng.random() < 0.5:
                lang = (
                    p["lang"]
                    if rng.random() < 0.8 or len(by_lang) < 2
                    else _other(p["lang"], by_lang)
                )
                pool = [i for i in by_lang.get(lang, []) if olds[old_texts[i]][0] != family]
                picked = rng.choice(pool) if pool else None
            else:
                sims = old_vectors @ vectors[new_row[p["new"]]]
                ranked = [
                    int(i)
                    for i in np.argsort(-sims)
                    if olds[old_texts[int(i)]][0] != family
                    and (slot is None or slots[old_texts[int(i)]] != slot)
                ]
                near = [ranked[k] for k in NEAR if k < len(ranked)]
                picked = rng.choice(near) if near else None
            if picked is None:
                continue
            made.append(
                {
                    "old": old_texts[picked],
                    "new": p["new"],
                    "label": "new",
                    "lang": p["lang"],
                    "family": "unrelated",
                }
            )
        out.append(made)
    return out


def _other(lang: str, by_lang: dict[str, list[int]]) -> str:
    return next(other for other in sorted(by_lang) if other != lang)
