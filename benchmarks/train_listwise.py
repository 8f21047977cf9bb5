"""Train the list-wise model (:mod:`palace_retrievers.memory.learned.listwise`) and choose
the gate and the policy with it, on candidate lists gathered by ``judge_rows.py``.

Each candidate of each row of the ``--train`` files is a training example: its features
(:func:`listwise.features`, over the candidates the gate lets in) and its label, the
pair's gold label for the pair's old memory and ``new`` for every other (the user's
unrelated memories). Candidates with the new text itself are left out (the palace drops
an exact repeat before judging). A random forest (100 trees, depth 6, seed 0) and a
logistic regression (standard scaling, C 1) are fitted, then written to ``--out`` in the
form :class:`listwise.Listwise` reads.

Then, on the ``--select`` rows (never trained on), for each gate (``vector`` nearest,
``lexical`` full-text matches, the slot), it prints gate recall by language and, for the
pair judges alone and with the list-wise model, the policy of before and the one the rule
of ``benchmarks/README.md`` chooses ("Choosing the judges, the gate and the policy"),
replayed as ``remember.py --grid`` does.

Usage::

    .venv/bin/python benchmarks/train_listwise.py --train rows_train.jsonl \\
        --select rows_select.jsonl --out palace_retrievers/memory/learned/data/listwise.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from remember import Judged, choose, grid_row, policies, policy_tally, qualifies
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from train_pair_model import forest_trees

from palace_retrievers.memory.decide import Policy
from palace_retrievers.memory.judges import LABELS, Opinion
from palace_retrievers.memory.learned import listwise

TREES, DEPTH, SEED, C = 100, 6, 0, 1.0
GATES = ((8, 4), (12, 6), (16, 8), (20, 10))
EMBEDDER = "all-MiniLM-L6-v2"


def read(paths: Sequence[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        with path.open(encoding="utf-8") as stream:
            rows += [json.loads(line) for line in stream if line.strip()]
    return rows


def gated(row: dict[str, Any], vector: int, lexical: int) -> list[dict[str, Any]]:
    """The row's candidates the gate (``vector`` nearest, ``lexical`` matches, the slot)
    lets in, nearest first."""
    return [
        c
        for c in row["candidates"]
        if (c["vector_rank"] is not None and c["vector_rank"] < vector)
        or (c["lexical_rank"] is not None and c["lexical_rank"] < lexical)
        or c["slot"]
    ]


def row_features(row: dict[str, Any], candidates: Sequence[dict[str, Any]]) -> np.ndarray:
    return listwise.features(
        [c["text"] for c in candidates],
        row["new"],
        [c["cosine"] for c in candidates],
        [c["learned"] for c in candidates],
        [c["structural"] for c in candidates],
    )


def examples(rows: Sequence[dict[str, Any]], vector: int, lexical: int) -> tuple[Any, Any]:
    xs, ys = [], []
    for row in rows:
        candidates = gated(row, vector, lexical)
        if not candidates:
            continue
        x = row_features(row, candidates)
        for c, features in zip(candidates, x, strict=True):
            if c["same"]:
                continue
            xs.append(features)
            ys.append(row["gold"] if c["old"] else "new")
    return np.asarray(xs), np.asarray(ys)


def fit(x: Any, y: Any, trained_on: Sequence[str]) -> dict[str, Any]:
    forest = RandomForestClassifier(TREES, max_depth=DEPTH, random_state=SEED).fit(x, y)
    scaler = StandardScaler().fit(x)
    linear = LogisticRegression(C=C, max_iter=5000).fit(scaler.transform(x), y)
    assert tuple(forest.classes_) == tuple(linear.classes_) == LABELS
    return {
        "labels": list(LABELS),
        "features": list(listwise.FEATURES),
        "trained_on": list(trained_on),
        "embedder": EMBEDDER,
        "forest": {"trees": forest_trees(forest)},
        "linear": {
            "mean": scaler.mean_.tolist(),
            "scale": scaler.scale_.tolist(),
            "coef": linear.coef_.tolist(),
            "intercept": linear.intercept_.tolist(),
        },
    }


def judged(
    rows: Sequence[dict[str, Any]], vector: int, lexical: int, model: listwise.Listwise | None
) -> list[Judged]:
    """The rows as ``remember.py --grid`` replays them: the pair judges' opinions, or the
    list-wise model's."""
    out = []
    for row in rows:
        candidates = gated(row, vector, lexical)
        if model is None or not candidates:
            opinions = [Opinion(c["verdict"], c["learned"]) for c in candidates]
        else:
            probabilities = model.probabilities(row_features(row, candidates))
            opinions = [Opinion(max(p, key=p.__getitem__), p) for p in probabilities]
        out.append(
            Judged(
                gold=row["gold"],
                lang=row["lang"],
                is_old=tuple(c["old"] for c in candidates),
                same_text=tuple(c["same"] for c in candidates),
                opinions=tuple(opinions),
            )
        )
    return out


def gate_recall(rows: Sequence[Judged], lang: str | None = None) -> str:
    hits = [any(r.is_old) for r in rows if r.gold != "new" and lang in (None, r.lang)]
    return f"{sum(hits) / len(hits):.3f}" if hits else "–"


def report(title: str, rows: Sequence[Judged]) -> list[tuple[Policy, Any]]:
    """Print the policy of before and the rule's choice on ``rows``; every setting's
    result."""
    results = [(policy, policy_tally(rows, policy)) for policy in policies()]
    before = Policy(0.0, 1.0, 1.0, None)
    chosen = choose(results)
    qualifying = sum(qualifies(t) for _, t in results)
    print(f"\n{title} ({qualifying} of {len(results)} settings qualify)\n")
    print(
        "| margin | supersede | doubt | related | update P / R | duplicate P / R | hidden true "
        "| dropped update | related | unrelated superseded |\n" + "|---" * 10 + "|"
    )
    for policy, tally in [r for r in results if r[0] == before] + [chosen]:
        print(grid_row(policy, tally))
    for lang in ("en", "zh"):
        sub = [r for r in rows if r.lang == lang]
        if sub:
            print(f"{lang}: " + grid_row(chosen[0], policy_tally(sub, chosen[0])))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, nargs="+", required=True)
    parser.add_argument("--select", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, help="write the model of --gate here")
    parser.add_argument("--gate", type=int, nargs=2, default=(16, 8), metavar=("VECTOR", "LEXICAL"))
    args = parser.parse_args(argv)
    train, select = read(args.train), read(args.select)
    trained_on = sorted({r["set"] for r in train})
    print(f"train: {len(train)} pairs of {', '.join(trained_on)}; select: {len(select)} pairs")
    every: list[tuple[str, Policy, Any]] = []
    for vector, lexical in GATES:
        x, y = examples(train, vector, lexical)
        spec = fit(x, y, trained_on)
        model = listwise.Listwise(spec)
        if args.out and (vector, lexical) == tuple(args.gate):
            args.out.write_text(json.dumps(spec), encoding="utf-8")
            print(f"wrote {args.out}")
        plain = judged(select, vector, lexical, None)
        print(
            f"\n## gate: {vector} by vector, {lexical} by full text, the slot: gate recall "
            f"{gate_recall(plain)} (en {gate_recall(plain, 'en')}, zh {gate_recall(plain, 'zh')})"
        )
        for name, rows in (
            ("pair judges alone", plain),
            ("with the list-wise model", judged(select, vector, lexical, model)),
        ):
            every += [(f"{name}, gate {vector}/{lexical}", p, t) for p, t in report(name, rows)]
    policy, tally = choose([(p, t) for _, p, t in every])
    where = next(name for name, p, t in every if p == policy and t is tally)
    print(f"\nOver every gate and both: the rule chooses {where}:\n{grid_row(policy, tally)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
