"""Train the list-wise model (:mod:`palace_retrievers.memory.learned.listwise`) and choose
the gate and the policy with it, on candidate lists gathered by ``judge_rows.py``.

Each candidate of each row of the ``--train`` files is a training example: its features
(:func:`listwise.features`, over the candidates the gate lets in) and its label, the
pair's gold label for the pair's old memory and ``new`` for every other (the user's
unrelated memories), on the full list and on shorter lists drawn from it
(:func:`sublists`; ``--long-only`` leaves them out). Candidates with the new text itself
are left out (the palace drops an exact repeat before judging). A random forest (100
trees, depth 6, seed 0) and a logistic regression (standard scaling, C 1) are fitted, the
old memories' examples weighed ``--weight`` times an other's, then written to ``--out``
in the form :class:`listwise.Listwise` reads.

Then, on the ``--select`` rows (never trained on), for each gate (``vector`` nearest,
``lexical`` full-text matches, the slot; ``--one-gate``: the ``--gate`` only), it prints
gate recall by language and, for the pair judges alone and with the list-wise model, the
policy of before and the one the rule of ``benchmarks/README.md`` chooses ("Choosing the
judges, the gate and the policy"), replayed as ``remember.py --grid`` does, on users with
1, 2, 5 (:func:`few`) and 200 memories pooled, and each size at the chosen policy.

The shipped model (``--baseline``, read with its own features' columns, so a model of
fewer features is replayed beside one of more) is replayed on the same lists, at the
shipped policy and at the rule's choice. ``--evaluate`` replays both on other rows (e.g.
a spent blind set's, gathered with ``judge_rows.py --shortlist 3 --vector 16 --lexical
8``: the palace's gate and shortlist) at the shipped policy, per set and language; with
``--misses`` each pair either decides wrongly is printed.

``--drop NAME ...`` fits the new model without those of :data:`listwise.FEATURES` (replayed
here only, as ``--extra``'s), to measure what they earn.

``--extra NAME ...`` adds candidate features of ``listwise_extra.py`` to the new model
(replayed here only: the palace reads a model of :data:`listwise.FEATURES` alone, so
``--out`` is refused with them), to measure what each earns before it joins.

``--shortlist 3`` replays the lists as the learned judge reads them since it reads only
a shortlist (the others are new); with the shipped model on the selection rows that
decides as the whole list does (benchmarks/README.md, "Speed: a shortlist ...").

Usage::

    .venv/bin/python benchmarks/train_listwise.py --one-gate --train rows_train.jsonl \\
        --select rows_select.jsonl --out palace_retrievers/memory/learned/data/listwise.json
    .venv/bin/python benchmarks/train_listwise.py --one-gate --shortlist 3 \\
        --train rows_train.jsonl --select rows_select.jsonl \\
        --evaluate rows_blind.jsonl --misses --extra new_marks old_marks shared_marks
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from listwise_extra import EXTRA, columns
from remember import (
    Judged,
    choose,
    grid_row,
    policies,
    policy_tally,
    qualifies,
    simulated,
)
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from train_pair_model import forest_trees

from palace_retrievers.config import MemoryConfig
from palace_retrievers.memory.decide import Policy
from palace_retrievers.memory.judges import LABELS, Opinion
from palace_retrievers.memory.learned import listwise
from palace_retrievers.memory.learned.pair_estimators import Forest, Linear

TREES, DEPTH, SEED, C = 100, 6, 0, 1.0
_DEFAULTS = MemoryConfig()
#: The policy the palace ships (``[memory]`` defaults), printed beside the rule's choice.
SHIPPED = Policy(
    _DEFAULTS.supersede_confidence,
    _DEFAULTS.duplicate_doubt,
    _DEFAULTS.related_confidence,
    _DEFAULTS.supersede_margin,
)
SHORT = (1, 2, 3, 5, 9)  # the shorter lists' sizes (see sublists)
FEW = (1, 2, 5)  # users with this many memories, replayed on the --select rows
GATES = ((8, 4), (12, 6), (16, 8), (20, 10))
EMBEDDER = "all-MiniLM-L6-v2"


#: ``--extra``: the candidate features added after :data:`listwise.FEATURES`.
EXTRA_NAMES: list[str] = []
#: ``--drop``: features of :data:`listwise.FEATURES` the new model is fitted without.
DROPPED: list[str] = []
#: ``--judges``: the pair judges whose probabilities the rows hold (written into the model).
JUDGES_READ: list[str] = list(listwise.JUDGES)


class Replayed:
    """A list-wise model replayed from its spec on the columns of its own features, of
    :data:`listwise.FEATURES` and :data:`EXTRA_NAMES` (a model of fewer features, as the
    shipped one, reads its own columns)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        names = (*listwise.FEATURES, *EXTRA_NAMES)
        self.columns = [names.index(name) for name in spec["features"]]
        self.labels = tuple(spec["labels"])
        self.forest = Forest(spec["forest"]["trees"])
        self.linear = Linear(spec["linear"])

    def probabilities(self, rows: np.ndarray) -> list[dict[str, float]]:
        out = []
        for row in rows[:, self.columns]:
            p = (self.forest.probabilities(row) + self.linear.probabilities(row)) / 2
            out.append({label: float(x) for label, x in zip(self.labels, p, strict=True)})
        return out


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
    """:func:`listwise.features` of the candidates, then the :data:`EXTRA_NAMES`."""
    olds = [c["text"] for c in candidates]
    x = listwise.features(
        olds,
        row["new"],
        [c["cosine"] for c in candidates],
        [c["learned"] for c in candidates],
        [c["structural"] for c in candidates],
    )
    return np.hstack([x, columns(olds, row["new"], EXTRA_NAMES)]) if EXTRA_NAMES else x


def sublists(
    candidates: Sequence[dict[str, Any]], rng: random.Random
) -> list[list[dict[str, Any]]]:
    """``candidates`` and shorter lists drawn from them, as a user with fewer memories
    meets them: for each size of :data:`SHORT` the pair's old memory (when the gate let it
    in) with ``size - 1`` others drawn at random, and ``size`` others without it. A user
    with one or two memories is as common as one with two hundred; a model trained on
    long lists alone reads a lone candidate's lead and rank as no long list has them."""
    lists = [list(candidates)]
    olds = [c for c in candidates if c["old"]]
    others = [c for c in candidates if not c["old"]]
    for size in SHORT:
        if size > len(candidates):
            break
        if olds and size - 1 <= len(others):
            lists.append(olds + rng.sample(others, size - 1))
        if size <= len(others):
            lists.append(rng.sample(others, size))
    # the features are computed nearest first, as the palace gathers them
    return [sorted(chosen, key=lambda c: -c["cosine"]) for chosen in lists]


def examples(
    rows: Sequence[dict[str, Any]], vector: int, lexical: int, *, short: bool = True
) -> tuple[Any, Any]:
    """Every gated candidate of every row as a training example, on the full list and
    (with ``short``) on the shorter lists of :func:`sublists` too."""
    rng = random.Random(SEED)
    xs, ys = [], []
    for row in rows:
        candidates = gated(row, vector, lexical)
        if not candidates:
            continue
        for chosen in sublists(candidates, rng) if short else [candidates]:
            x = row_features(row, chosen)
            for c, features in zip(chosen, x, strict=True):
                if c["same"]:
                    continue
                xs.append(features)
                ys.append(row["gold"] if c["old"] else "new")
    return np.asarray(xs), np.asarray(ys)


def fit(
    x: Any, y: Any, trained_on: Sequence[str], weights: dict[str, float] | None = None
) -> dict[str, Any]:
    names = [*listwise.FEATURES, *EXTRA_NAMES]
    kept = [i for i, name in enumerate(names) if name not in DROPPED]
    x = x[:, kept]
    forest = RandomForestClassifier(
        TREES, max_depth=DEPTH, random_state=SEED, class_weight=weights
    ).fit(x, y)
    scaler = StandardScaler().fit(x)
    linear = LogisticRegression(C=C, max_iter=5000, class_weight=weights).fit(
        scaler.transform(x), y
    )
    assert tuple(forest.classes_) == tuple(linear.classes_) == LABELS
    return {
        "labels": list(LABELS),
        "features": [names[i] for i in kept],
        "trained_on": list(trained_on),
        "embedder": EMBEDDER,
        "judges": list(JUDGES_READ),
        "forest": {"trees": forest_trees(forest)},
        "linear": {
            "mean": scaler.mean_.tolist(),
            "scale": scaler.scale_.tolist(),
            "coef": linear.coef_.tolist(),
            "intercept": linear.intercept_.tolist(),
        },
    }


def judged(
    rows: Sequence[dict[str, Any]],
    lists: Sequence[Sequence[dict[str, Any]]],
    model: listwise.Listwise | Replayed | None,
) -> list[Judged]:
    """The rows, each with its list of candidates, as ``remember.py --grid`` replays them:
    the pair judges' opinions, or the list-wise model's."""
    out = []
    for row, candidates in zip(rows, lists, strict=True):
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


def few(rows: Sequence[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Each row's candidates as a user with ``size`` memories meets them: the pair's old
    memory and ``size - 1`` of the others drawn at random (all of them pass any gate)."""
    rng = random.Random(SEED + size)
    lists = []
    for row in rows:
        olds = [c for c in row["candidates"] if c["old"]]
        others = [c for c in row["candidates"] if not c["old"]]
        chosen = olds + rng.sample(others, min(size - len(olds), len(others)))
        lists.append(sorted(chosen, key=lambda c: -c["cosine"]))
    return lists


def shortened(
    row: dict[str, Any], candidates: Sequence[dict[str, Any]], size: int, lexical: int
) -> list[dict[str, Any]]:
    """``candidates`` as the learned judge reads them with a shortlist of ``size``
    (:func:`listwise.shortlist`; 0: all): the others are never read, so they are new,
    as a candidate the gate did not let in is. Each candidate's full-text rank is the
    stored one when the gate's full text (its ``lexical`` best) brought it, else none, as
    the palace hands it to the judge."""
    chosen = listwise.shortlist(
        [c["text"] for c in candidates],
        row["new"],
        [c["cosine"] for c in candidates],
        size,
        [ranked(c, lexical) for c in candidates],
    )
    return [candidates[k] for k in chosen]


def ranked(candidate: dict[str, Any], lexical: int) -> int | None:
    """The candidate's full-text rank as the palace's gate of ``lexical`` full-text
    matches gives it (``None`` beyond them, or not found)."""
    rank = candidate["lexical_rank"]
    return rank if rank is not None and rank < lexical else None


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
    for policy, tally in [r for r in results if r[0] in (before, SHIPPED)] + [chosen]:
        print(grid_row(policy, tally))
    for lang in ("en", "zh"):
        sub = [r for r in rows if r.lang == lang]
        for policy in dict.fromkeys((SHIPPED, chosen[0])):
            if sub:
                print(f"{lang}: " + grid_row(policy, policy_tally(sub, policy)))
    return results


def evaluate(
    rows: Sequence[dict[str, Any]],
    models: dict[str, listwise.Listwise | Replayed],
    gate: tuple[int, int],
    shortlist: int,
    misses: bool,
) -> None:
    """Each model replayed on ``rows`` at the shipped policy, per set and language (and
    with ``misses`` each pair it decides wrongly)."""
    lists = [shortened(row, gated(row, *gate), shortlist, gate[1]) for row in rows]
    cells = sorted({(r["set"], r["lang"]) for r in rows})
    for name, model in models.items():
        decided = judged(rows, lists, model)
        print(
            f"\n### {name}, at the shipped policy\n\n(each line: the set (language), then "
            "margin | supersede | doubt | related | update P / R | duplicate P / R | hidden "
            "true | dropped update | related | unrelated superseded)\n"
        )
        for set_name, lang in cells:
            sub = [
                d
                for d, r in zip(decided, rows, strict=True)
                if (r["set"], r["lang"]) == (set_name, lang)
            ]
            print(f"{set_name} ({lang}): " + grid_row(SHIPPED, policy_tally(sub, SHIPPED)))
        for lang in sorted({lang for _, lang in cells}):
            sub = [d for d in decided if d.lang == lang]
            print(f"all ({lang}): " + grid_row(SHIPPED, policy_tally(sub, SHIPPED)))
        print("all: " + grid_row(SHIPPED, policy_tally(decided, SHIPPED)))
        if misses:
            for row, candidates, d in zip(rows, lists, decided, strict=True):
                said = simulated(d, SHIPPED)[0]
                if said == row["gold"]:
                    continue
                print(
                    f"\n- {row['set']} {row['lang']} gold {row['gold']}, said {said}: {row['new']}"
                )
                for c, opinion in zip(candidates, d.opinions, strict=True):
                    shown = " ".join(
                        f"{k[0]} {v:.2f}" for k, v in sorted(opinion.probabilities.items())
                    )
                    mark = "OLD " if c["old"] else ""
                    print(f"    {mark}[{shown}] {c['text']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, nargs="+", required=True)
    parser.add_argument("--select", type=Path, nargs="+", required=True)
    parser.add_argument("--out", type=Path, help="write the model of --gate here")
    parser.add_argument("--gate", type=int, nargs=2, default=(16, 8), metavar=("VECTOR", "LEXICAL"))
    parser.add_argument("--one-gate", action="store_true", help="only the gate of --gate")
    parser.add_argument(
        "--weight",
        type=float,
        default=1.0,
        help="weight of an old memory's example (update, duplicate) against an other's (new)",
    )
    parser.add_argument(
        "--long-only", action="store_true", help="train on the full lists alone (no sublists)"
    )
    parser.add_argument(
        "--shortlist",
        type=int,
        default=0,
        help="replay each --select list as the learned judge reads it: only its shortlist "
        "of this many (listwise.shortlist; 0: every candidate), the others new",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=listwise.LISTWISE_FILE,
        help="the list-wise model replayed beside the new one (default: the shipped one)",
    )
    parser.add_argument("--evaluate", type=Path, nargs="+", help="rows to replay both models on")
    parser.add_argument(
        "--judges",
        nargs="+",
        default=list(listwise.JUDGES),
        choices=list(listwise.JUDGES),
        help="the pair judges whose averaged probabilities the rows hold (reader_rows.py "
        "--alone: pair_reader)",
    )
    parser.add_argument("--misses", action="store_true", help="print --evaluate's wrong calls")
    parser.add_argument(
        "--extra", nargs="+", default=[], choices=list(EXTRA), help="candidate features added"
    )
    parser.add_argument(
        "--drop",
        nargs="+",
        default=[],
        choices=list(listwise.FEATURES),
        help="features the new model is fitted without (an ablation)",
    )
    args = parser.parse_args(argv)
    if (args.extra or args.drop) and args.out:
        parser.error("a model with --extra or --drop is not one the palace reads: no --out")
    EXTRA_NAMES[:] = args.extra
    JUDGES_READ[:] = [name for name in listwise.JUDGES if name in args.judges]
    DROPPED[:] = args.drop
    baseline = Replayed(json.loads(args.baseline.read_text(encoding="utf-8")))
    train, select = read(args.train), read(args.select)
    trained_on = sorted({r["set"] for r in train})
    weights = {"new": 1.0, "update": args.weight, "duplicate": args.weight}
    print(f"train: {len(train)} pairs of {', '.join(trained_on)}; select: {len(select)} pairs")
    print(f"replayed as users with {', '.join(map(str, FEW))} and 200 memories, pooled")
    every: list[tuple[str, Policy, Any]] = []
    for vector, lexical in [tuple(args.gate)] if args.one_gate else GATES:
        x, y = examples(train, vector, lexical, short=not args.long_only)
        spec = fit(x, y, trained_on, weights)
        model: listwise.Listwise | Replayed = (
            Replayed(spec) if EXTRA_NAMES or DROPPED else listwise.Listwise(spec)
        )
        if args.out and (vector, lexical) == tuple(args.gate):
            args.out.write_text(json.dumps(spec), encoding="utf-8")
            print(f"wrote {args.out}")
        lists = [
            shortened(row, gated(row, vector, lexical), args.shortlist, lexical) for row in select
        ]
        plain = judged(select, lists, None)
        print(
            f"\n## gate: {vector} by vector, {lexical} by full text, the slot: gate recall "
            f"{gate_recall(plain)} (en {gate_recall(plain, 'en')}, zh {gate_recall(plain, 'zh')})"
        )
        sizes = {
            f"{n} memories": [
                shortened(row, chosen, args.shortlist, lexical)
                for row, chosen in zip(select, few(select, n), strict=True)
            ]
            for n in FEW
        } | {"200 memories": lists}
        replays: tuple[tuple[str, listwise.Listwise | Replayed | None], ...] = (
            ("pair judges alone", None),
            (f"the baseline list-wise model ({args.baseline.name})", baseline),
            ("with the list-wise model", model),
        )
        for name, m in replays:
            by_size = {size: judged(select, chosen, m) for size, chosen in sizes.items()}
            results = report(name, [r for rows in by_size.values() for r in rows])
            policy = choose(results)[0]
            for size, rows in by_size.items():
                print(f"{size}: " + grid_row(policy, policy_tally(rows, policy)))
            every += [(f"{name}, gate {vector}/{lexical}", p, t) for p, t in results]
        if args.evaluate and (vector, lexical) == tuple(args.gate):
            models = {f"baseline ({args.baseline.name})": baseline, "new": model}
            evaluate(read(args.evaluate), models, (vector, lexical), args.shortlist, args.misses)
    policy, tally = choose([(p, t) for _, p, t in every])
    where = next(name for name, p, t in every if p == policy and t is tally)
    print(f"\nOver every gate and all: the rule chooses {where}:\n{grid_row(policy, tally)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
