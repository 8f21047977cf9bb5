"""Train the pair model of :mod:`palace_retrievers.memory.learned.pair_model` and say how well it
holds.

Reads the labelled memory pairs of ``benchmarks/data`` named in :data:`TRAIN` (every
set of ``memory.SETS`` but ``memory.BLIND``), computes each pair's features and vectors
with the real all-MiniLM-L6-v2, and fits the two estimators of
:mod:`palace_retrievers.memory.learned.pair_estimators`
with scikit-learn (which sentence-transformers installs): a random forest over the named
features (100 trees, depth at most 6, seed 0) and a logistic regression over the features
and the pair's vectors (standard scaled, C = 0.02). It prints, leaving one set out at a
time, what their averaged probabilities alone and the structural matcher followed by them
(:func:`pair_model.combine`) would decide on the set left out, then writes the model
fitted on every training set as JSON to ``palace_retrievers/memory/learned/data/pair_model.json``
(``--out`` to write elsewhere, ``--dry-run`` to write nothing) and checks that the JSON
reader agrees with scikit-learn.

The sets named in ``memory.BLIND`` (held-out 16–20, 22, 24, 26) are never trained on: they
measure the model on phrasings and slots it never saw (``benchmarks/memory.py pairs``), and
the list-wise model is trained on the pair judges' opinions of held-out 20, 22, 24, 26.

Usage::

    .venv/bin/python benchmarks/train_pair_model.py            # ~8 min
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import BLIND, SETS, embedder, load_pairs, score
from unrelated_pairs import unrelated_pairs

from palace_retrievers.config import MemoryConfig
from palace_retrievers.memory.learned import pair_estimators, pair_model
from palace_retrievers.memory.learned.structural import compare

TRAIN = tuple(name for name in SETS.values() if name not in BLIND)
TREES, DEPTH, SEED = 100, 6, 0
C = 0.02  # the logistic regression's inverse regularisation
THRESHOLD = MemoryConfig().pair_model_threshold
VETO = MemoryConfig().pair_model_veto


@dataclass
class Fitted:
    """The two estimators, fitted on the same pairs."""

    forest: RandomForestClassifier
    scaler: StandardScaler
    linear: LogisticRegression

    def predict_proba(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        both = self.scaler.transform(np.hstack([x, v]))
        return (self.forest.predict_proba(x) + self.linear.predict_proba(both)) / 2


def fit(x: np.ndarray, v: np.ndarray, y: np.ndarray) -> Fitted:
    forest = RandomForestClassifier(TREES, max_depth=DEPTH, random_state=SEED).fit(x, y)
    scaler = StandardScaler().fit(np.hstack([x, v]))
    linear = LogisticRegression(C=C, max_iter=5000).fit(scaler.transform(np.hstack([x, v])), y)
    assert tuple(forest.classes_) == tuple(linear.classes_) == pair_model.LABELS
    return Fitted(forest, scaler, linear)


def forest_trees(forest: Any) -> list[dict[str, Any]]:
    """A fitted random forest's trees as :class:`pair_estimators.Forest` reads them."""
    trees = []
    for estimator in forest.estimators_:
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
    return trees


def to_json(model: Fitted, embedder_name: str) -> dict[str, Any]:
    """The fitted model in the form :class:`pair_estimators.PairModel` reads."""
    return {
        "labels": [str(label) for label in model.forest.classes_],
        "features": list(pair_model.FEATURES),
        "trained_on": list(TRAIN),
        "embedder": embedder_name,
        "forest": {"trees": forest_trees(model.forest)},
        "linear": {
            "mean": model.scaler.mean_.tolist(),
            "scale": model.scaler.scale_.tolist(),
            "coef": model.linear.coef_.tolist(),
            "intercept": model.linear.intercept_.tolist(),
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=pair_estimators.MODEL_FILE)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument(
        "--unrelated", type=float, default=0.5, help="share of pairs given an unrelated twin"
    )
    parser.add_argument("--no-cross", action="store_true", help="skip the leave-one-out table")
    args = parser.parse_args(argv)
    model = embedder()
    labelled = [load_pairs(name) for name in TRAIN]
    extra = unrelated_pairs(labelled, model.embed_documents, share=args.unrelated, seed=SEED)
    print(f"{sum(map(len, labelled))} labelled pairs and {sum(map(len, extra))} unrelated")
    rows: list[np.ndarray] = []
    sides: list[np.ndarray] = []
    labels: list[str] = []
    groups: list[int] = []
    rules: list[str] = []
    for group in range(len(TRAIN)):
        pairs = labelled[group] + extra[group]
        lined = [pair_model.line_up(p["old"], p["new"]) for p in pairs]
        texts = sorted({t for pair in lined for t in pair.texts()})
        vectors = np.asarray(model.embed_documents(texts))
        where = {t: i for i, t in enumerate(texts)}
        for p, pair in zip(pairs, lined, strict=True):
            six = vectors[[where[t] for t in pair.texts()]]
            feats = pair_model.features(pair, six)
            rows.append(feats)
            sides.append(pair_model.pair_vectors(six))
            labels.append(p["label"])
            groups.append(group)
            rules.append(compare(p["old"], p["new"], similarity=min(1.0, feats[0])).verdict)
    x, v, y, g = np.vstack(rows), np.vstack(sides), np.array(labels), np.array(groups)
    proba = np.zeros((len(y), len(pair_model.LABELS)))
    for group in range(0 if args.no_cross else len(TRAIN)):
        held = g == group
        proba[held] = fit(x[~held], v[~held], y[~held]).predict_proba(x[held], v[held])
    verdicts = np.array(rules)

    def decide(threshold: float, with_rules: bool) -> list[str]:
        out = []
        for verdict, p in zip(verdicts, proba, strict=True):
            probabilities = dict(zip(pair_model.LABELS, p, strict=True))
            out.append(
                pair_model.combine(verdict if with_rules else "new", probabilities, threshold, VETO)
            )
        return out

    if args.no_cross:
        return _write(args, x, v, y, model.model_name)
    print(
        f"Each set left out in turn (threshold {THRESHOLD}, veto {VETO}):\n\n"
        "| set left out | pairs | "
        "model alone: update P / R | rules, then the model: update P / R | "
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
        "\nAll sets together, by threshold:\n\n| threshold | model alone: update P / R | "
        "rules, then the model: update P / R |\n|---|---|---|"
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
        "\n(The rules have seen every one of these sets; the model has not seen the one left out.)"
    )
    return _write(args, x, v, y, model.model_name)


def _write(args: argparse.Namespace, x: Any, v: Any, y: Any, embedder_name: str) -> int:
    """Fit on every pair and write the JSON (unless ``--dry-run``), checked against
    scikit-learn."""
    if args.dry_run:
        return 0
    final = fit(x, v, y)
    spec = to_json(final, embedder_name)
    spec["unrelated_share"] = args.unrelated
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(spec, separators=(",", ":")) + "\n", encoding="utf-8")
    check = pair_estimators.PairModel(json.loads(args.out.read_text(encoding="utf-8")))
    expected = final.predict_proba(x, v)
    got = np.array(
        [
            [check.probabilities(row, side)[label] for label in pair_model.LABELS]
            for row, side in zip(x, v, strict=True)
        ]
    )
    print(
        f"wrote {args.out} ({args.out.stat().st_size} bytes); "
        f"largest difference from scikit-learn on the training pairs: "
        f"{float(np.abs(got - expected).max()):.2e}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
