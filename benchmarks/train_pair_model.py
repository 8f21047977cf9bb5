"""Train the pair forest of :mod:`palace_retrievers.pair_model` and say how well it holds.

Reads the labelled memory pairs of ``benchmarks/data`` named in :data:`TRAIN` (the dev
set, held-out 1–12 and train 2–4), computes each pair's features with the real all-MiniLM-L6-v2,
and fits a random forest (scikit-learn, which sentence-transformers installs; 100 trees,
depth at most 6, seed 0). It prints, leaving one set out at a time, what the forest alone
and the structural matcher followed by the forest would decide on the set left out, then
writes the forest fitted on every training set as JSON to
``palace_retrievers/data/pair_forest.json`` (``--out`` to write elsewhere, ``--dry-run``
to write nothing).

The sets named in :data:`BLIND` (held-out 13) are never trained on: they measure the
forest on phrasings and slots nobody tuned anything to (``benchmarks/memory.py pairs``).

Usage::

    .venv/bin/python benchmarks/train_pair_model.py            # ~1 min
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import SETS, embedder, load_pairs, score

from palace_retrievers import pair_model
from palace_retrievers.memory_match import compare

BLIND = ("memory_pairs_heldout13.jsonl",)
TRAIN = tuple(name for name in SETS.values() if name not in BLIND)
TREES, DEPTH, SEED = 100, 6, 0
THRESHOLD = 0.65  # memory.pair_model_threshold's default
VETO = 0.8  # memory.pair_model_veto's default


def fit(x: np.ndarray, y: np.ndarray) -> RandomForestClassifier:
    return RandomForestClassifier(TREES, max_depth=DEPTH, random_state=SEED).fit(x, y)


def to_json(model: RandomForestClassifier) -> dict[str, Any]:
    """The fitted forest in the form :class:`pair_model.Forest` reads."""
    trees = []
    for estimator in model.estimators_:
        tree = estimator.tree_
        trees.append(
            {
                "feature": tree.feature.tolist(),
                "threshold": [float(t) for t in tree.threshold],
                "left": tree.children_left.tolist(),
                "right": tree.children_right.tolist(),
                "value": [[round(float(v), 6) for v in row] for row in tree.value[:, 0, :]],
            }
        )
    return {
        "labels": [str(label) for label in model.classes_],
        "features": list(pair_model.FEATURES),
        "trained_on": list(TRAIN),
        "trees": trees,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=pair_model.FOREST_FILE)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    model = embedder()
    rows: list[np.ndarray] = []
    labels: list[str] = []
    groups: list[int] = []
    rules: list[str] = []
    for group, name in enumerate(TRAIN):
        pairs = load_pairs(name)
        lined = [pair_model.line_up(p["old"], p["new"]) for p in pairs]
        texts = sorted({t for pair in lined for t in pair.texts()})
        vectors = np.asarray(model.embed_documents(texts))
        where = {t: i for i, t in enumerate(texts)}
        for p, pair in zip(pairs, lined, strict=True):
            feats = pair_model.features(pair, vectors[[where[t] for t in pair.texts()]])
            rows.append(feats)
            labels.append(p["label"])
            groups.append(group)
            rules.append(compare(p["old"], p["new"], similarity=min(1.0, feats[0])).verdict)
    x, y, g = np.vstack(rows), np.array(labels), np.array(groups)
    proba = np.zeros((len(y), len(pair_model.LABELS)))
    for group in range(len(TRAIN)):
        held = g == group
        forest = fit(x[~held], y[~held])
        assert tuple(forest.classes_) == pair_model.LABELS
        proba[held] = forest.predict_proba(x[held])
    verdicts = np.array(rules)

    def decide(threshold: float, with_rules: bool) -> list[str]:
        out = []
        for verdict, p in zip(verdicts, proba, strict=True):
            probabilities = dict(zip(pair_model.LABELS, p, strict=True))
            out.append(
                pair_model.combine(verdict if with_rules else "new", probabilities, threshold, VETO)
            )
        return out

    print(
        f"Each set left out in turn (threshold {THRESHOLD}, veto {VETO}):\n\n"
        "| set left out | pairs | "
        "forest alone: update P / R | rules, then the forest: update P / R | "
        "duplicate P / R |\n|---|---|---|---|---|"
    )
    alone, both = decide(THRESHOLD, False), decide(THRESHOLD, True)
    for group, name in enumerate(TRAIN):
        idx = [i for i in range(len(y)) if g[i] == group]
        truth = [str(y[i]) for i in idx]
        a = score(truth, [alone[i] for i in idx], "update")
        b = score(truth, [both[i] for i in idx], "update")
        d = score(truth, [both[i] for i in idx], "duplicate")
        print(
            f"| {name} | {len(idx)} | {a.precision:.3f} / {a.recall:.3f} | "
            f"{b.precision:.3f} / {b.recall:.3f} | {d.precision:.3f} / {d.recall:.3f} |"
        )
    print(
        "\nAll sets together, by threshold:\n\n| threshold | forest alone: update P / R | "
        "rules, then the forest: update P / R |\n|---|---|---|"
    )
    truth = [str(label) for label in y]
    for threshold in (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8):
        a = score(truth, decide(threshold, False), "update")
        b = score(truth, decide(threshold, True), "update")
        print(
            f"| {threshold} | {a.precision:.3f} / {a.recall:.3f} | "
            f"{b.precision:.3f} / {b.recall:.3f} |"
        )
    print(
        "\n(The rules have seen every one of these sets; the forest has not seen the one left out.)"
    )
    if args.dry_run:
        return 0
    spec = to_json(fit(x, y))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(spec, separators=(",", ":")) + "\n", encoding="utf-8")
    check = pair_model.Forest(spec)
    final = fit(x, y)
    expected = final.predict_proba(x)
    got = np.array([[check.probabilities(row)[label] for label in final.classes_] for row in x])
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes); "
        f"largest difference from scikit-learn on the training pairs: "
        f"{float(np.abs(got - expected).max()):.2e}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
