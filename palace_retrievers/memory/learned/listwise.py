"""The list-wise reading: each candidate judged against the new memory's other candidates.

The pair judges read one (old, new) pair at a time. A new text that states a change ("the
stand-up is at 10:30 now") then reads as an update of many of a user's memories at once,
since each pair alone only asks *does this sound like a new value?*. But a new value
changes one old value, and that old memory is the one the new text is most *about*: the
nearest by meaning, or the one sharing its rarest words, among all the user's memories
the gate brought in.

So the list-wise model reads, for each candidate, the pair judges' probabilities *and*
where the candidate stands among the others: its cosine, its lexical overlap with the new
text (:func:`overlap`: words, and for Chinese, Japanese or Korean runs their characters
and character pairs, so it needs no word list and reads Chinese whatever the embedder),
how far each leads the best other candidate, and their ranks. Its output replaces the
pair judges' probabilities: the chance that *this* old memory is the one the new text
repeats or updates. Its numbers (a random forest and a logistic regression, averaged, in
the form :mod:`.pair_estimators` reads) are trained by ``benchmarks/train_listwise.py`` on
the candidate lists ``benchmarks/judge_rows.py`` gathers end to end, for one set of pair
judges' weights (the probabilities it reads are theirs): each list as gathered among a
user's 200 memories, and shorter lists drawn from it, since a user with one or two
memories is as common as one with two hundred and a lone candidate's lead and rank read
unlike any in a long list.

The model in ``data/listwise.json`` is trained for the shipped pair judges (its
``trained_on`` names the sets); benchmarks/README.md ("Memory decisions end to end") says
what it reaches and what it does not.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.judges import LABELS
from palace_retrievers.memory.learned.pair_estimators import Forest, Linear

LISTWISE_FILE = Path(__file__).resolve().parent / "data" / "listwise.json"
MINILM_LISTWISE_FILE = Path(__file__).resolve().parent / "data" / "minilm" / "listwise.json"
"""The list-wise model trained for the shipped MiniLM reader (with the pair model)."""
FEATURES = (
    "update",
    "duplicate",
    "structural_update",
    "structural_duplicate",
    "cosine",
    "cosine_lead",
    "cosine_rank",
    "overlap",
    "overlap_lead",
    "overlap_rank",
    "update_lead",
    "candidates",
    "cjk",
)
JUDGES = ("pair_model", "pair_reader")
"""The pair judges whose probabilities a list-wise model can read (averaged), in order."""
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")


def grams(text: str) -> frozenset[str]:
    """What :func:`overlap` compares: the words of ``text`` (NFKC, case-folded), with each
    run of CJK characters read as its characters and its character pairs."""
    text = unicodedata.normalize("NFKC", text).casefold()
    out: set[str] = set()
    for run in _CJK.findall(text):
        out.update(run)
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    out.update(_WORD.findall(_CJK.sub(" ", text)))
    return frozenset(out)


def overlap(a: str, b: str) -> float:
    """The Dice coefficient of the two texts' :func:`grams`."""
    ga, gb = grams(a), grams(b)
    if not ga or not gb:
        return 0.0
    return 2 * len(ga & gb) / (len(ga) + len(gb))


def shortlist(
    olds: Sequence[str],
    new: str,
    cosines: Sequence[float],
    size: int,
    lexical_ranks: Sequence[int | None] | None = None,
) -> list[int]:
    """The indices of the ``size`` candidates the pair judges are asked about, nearest by
    cosine first.

    For a new text with Chinese, Japanese or Korean characters, three ways in take
    turns, each bringing its best candidate not yet chosen (a way with nothing left to
    bring passes its turn): the gate's **full text** (``lexical_ranks``: each candidate's
    place in the ledger's full-text order, ``None`` when the full text did not bring it),
    the most shared **grams** (:func:`overlap`, which reads character pairs; ties by
    cosine), then the nearest by **cosine**, last because the palace's embedder
    (all-MiniLM-L6-v2) lacks most of those characters. For any other text the embedder
    reads the meaning: the ``size`` nearest by cosine.

    The pair judges (a cross-encoder pass and six embeddings a candidate) are what makes
    ``remember`` slow; the old memory a new text repeats or updates is nearly always one
    of the few it is nearest to by meaning or by words (benchmarks/README.md, "The
    shortlist: the full text's order for Chinese").
    """
    n = len(olds)
    if size <= 0 or size >= n:
        return list(range(n))
    by_cosine = sorted(range(n), key=lambda k: -cosines[k])
    if not _CJK.search(new):
        return by_cosine[:size]
    ranked = {k: r for k, r in enumerate(lexical_ranks or ()) if r is not None}
    laps = [overlap(old, new) for old in olds]
    ways = [
        sorted(ranked, key=ranked.__getitem__),
        sorted(range(n), key=lambda k: (-laps[k], -cosines[k])),
        by_cosine,
    ]
    chosen: list[int] = []
    while len(chosen) < size:
        for way in ways:
            best = next((k for k in way if k not in chosen), None)
            if best is not None and len(chosen) < size:
                chosen.append(best)
    return sorted(chosen, key=lambda k: -cosines[k])


def cjk_share(text: str) -> float:
    """The share of ``text``'s characters (spaces aside) in CJK runs."""
    letters = len("".join(text.split()))
    return sum(map(len, _CJK.findall(text))) / letters if letters else 0.0


def features(
    olds: Sequence[str],
    new: str,
    cosines: Sequence[float],
    probabilities: Sequence[dict[str, float]],
    structural: Sequence[str],
) -> npt.NDArray[np.float64]:
    """One row of :data:`FEATURES` per candidate (``olds``, with their cosine to ``new``,
    the pair judges' ``probabilities`` and the structural matcher's verdicts)."""
    n = len(olds)
    cos = np.asarray(cosines, dtype=np.float64)
    lap = np.asarray([overlap(old, new) for old in olds], dtype=np.float64)
    upd = np.asarray([p["update"] for p in probabilities], dtype=np.float64)
    dup = np.asarray([p["duplicate"] for p in probabilities], dtype=np.float64)
    rows = np.zeros((n, len(FEATURES)))
    rows[:, 0], rows[:, 1] = upd, dup
    rows[:, 2] = [s == "update" for s in structural]
    rows[:, 3] = [s == "duplicate" for s in structural]
    rows[:, 4], rows[:, 5], rows[:, 6] = cos, _lead(cos), _rank(cos)
    rows[:, 7], rows[:, 8], rows[:, 9] = lap, _lead(lap), _rank(lap)
    rows[:, 10] = _lead(upd)
    rows[:, 11] = 1.0 / n if n else 0.0
    rows[:, 12] = cjk_share(new)
    return rows


def _lead(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each value minus the largest of the others (minus 0 when it is alone)."""
    if len(values) < 2:
        return values.copy()
    order = np.argsort(-values, kind="stable")
    first, second = values[order[0]], values[order[1]]
    best_other = np.where(np.arange(len(values)) == order[0], second, first)
    out: npt.NDArray[np.float64] = values - best_other
    return out


def _rank(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """1 for the largest value, 1/2 for the second, ... (ties share the better rank)."""
    ranks = np.asarray([(values > v).sum() for v in values], dtype=np.float64)
    out: npt.NDArray[np.float64] = 1.0 / (1.0 + ranks)
    return out


class Listwise:
    """The trained list-wise model: a forest and a logistic regression, averaged."""

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            self.labels = tuple(str(label) for label in spec["labels"])
            names = tuple(str(name) for name in spec["features"])
            self.trained_on = tuple(str(name) for name in spec.get("trained_on", ()))
            self.embedder = str(spec["embedder"])
            # The pair judges whose averaged probabilities it reads (a model from before
            # this was written down read both).
            self.judges = tuple(str(name) for name in spec.get("judges", JUDGES))
            self._forest = Forest(spec["forest"]["trees"])
            self._linear = Linear(spec["linear"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ConfigError(f"not a list-wise model: {exc}") from exc
        if names != FEATURES or set(self.labels) != set(LABELS):
            raise ConfigError("the list-wise model was trained on other features or labels")

    def probabilities(self, rows: npt.NDArray[np.float64]) -> list[dict[str, float]]:
        """Each candidate's probability of each label (all rows in one pass)."""
        rows = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
        p = (self._forest.probabilities_many(rows) + self._linear.probabilities_many(rows)) / 2
        return [{label: float(x) for label, x in zip(self.labels, row, strict=True)} for row in p]


@cache
def model(path: Path = LISTWISE_FILE) -> Listwise:
    """The list-wise model in ``path`` (read once)."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the list-wise model {path}: {exc}") from exc
    return Listwise(spec)
