"""``judge_rows.py``'s rows with the structural verdicts of an ablated matcher (#18.5).

A row's candidates carry the structural matcher's verdict (``structural``), which the
list-wise model reads as two of its features. To ask whether the matcher, or one of its
steps, earns its lines, this rewrites those verdicts as a palace without it would have
gathered them, keeping everything else (the pair judges' probabilities, cosines, ranks):

- ``--without matcher``: no structural matcher at all, the cosine thresholds of
  ``[memory_judges.learned]`` (``duplicate_similarity`` 0.92, ``supersede_similarity``
  0.85) give the verdict, as with ``structural = false``;
- ``--without paraphrase``: the matcher's steps 1-4 only
  (:func:`palace_retrievers.memory.learned.structural.compare` without its paraphrase step,
  which is :mod:`.paraphrase`, :mod:`.frames`, :mod:`.life_slots`, :mod:`.slot_values`
  and most of :mod:`.reading`);
- ``--without nothing``: the full matcher again (a check: it must change no verdict).

Then ``train_listwise.py --train OUT ... --out MODEL`` fits the list-wise model such a
palace would ship. benchmarks/README.md ("Ablations of the structural matcher on five new
blind writers") has the commands and what the ablations gave.

Usage::

    .venv/bin/python benchmarks/rows_structural.py rows_train.jsonl rows_train_p0.jsonl \\
        --without paraphrase
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from palace_retrievers.memory.learned import judge, structural

DUPLICATE = judge.DEFAULTS["duplicate_similarity"]
SUPERSEDE = judge.DEFAULTS["supersede_similarity"]


def verdict(old: str, new: str, cosine: float, without: str) -> str:
    """The structural verdict of (old, new) with the part ``without`` left out."""
    similarity = min(max(cosine, -1.0), 1.0)
    if without == "matcher":
        return judge.cosine_verdict(similarity, DUPLICATE, SUPERSEDE)
    if without == "paraphrase":
        match = structural._structural(old, new, similarity, DUPLICATE, SUPERSEDE)
    else:
        match = structural.compare(
            old,
            new,
            similarity=similarity,
            duplicate_threshold=DUPLICATE,
            supersede_threshold=SUPERSEDE,
        )
    return match.verdict if match.verdict in ("duplicate", "update") else "new"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--without", choices=("matcher", "paraphrase", "nothing"), required=True)
    args = parser.parse_args(argv)
    read = changed = 0
    with args.rows.open(encoding="utf-8") as stream, args.out.open("w", encoding="utf-8") as out:
        for line in stream:
            if not line.strip():
                continue
            row = json.loads(line)
            for candidate in row["candidates"]:
                if candidate.get("structural") is None:
                    continue
                now = verdict(candidate["text"], row["new"], candidate["cosine"], args.without)
                read += 1
                changed += now != candidate["structural"]
                candidate["structural"] = now
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{read} structural verdicts read again, {changed} changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
