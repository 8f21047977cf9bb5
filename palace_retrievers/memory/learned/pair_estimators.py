"""The learned part of :mod:`palace_retrievers.memory.learned.pair_model`, read from plain JSON.

Two estimators, trained by ``benchmarks/train_pair_model.py`` with scikit-learn and shipped
as their numbers only (no pickle, no scikit-learn at run time):

- a random forest over the pair's few named features (:data:`pair_model.FEATURES`): how
  alike the masked templates and the differing words are, cues, names, people...;
- a logistic regression over those features and the pair's vectors side by side
  (:func:`pair_model.pair_vectors`), which can read *what* differs (two banks, two
  cities) where the forest reads only *how much*.

:class:`PairModel` averages their probabilities: on the sets left out in training, the
average found more updates than either alone at the same precision (benchmarks/README.md,
"Memories").
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import ConfigError

MODEL_FILE = Path(__file__).resolve().parent / "data" / "pair_model.json"


class Forest:
    """A random forest's trees as arrays.

    Each tree is ``feature``, ``threshold``, ``left``, ``right`` (child indexes, -1 at a
    leaf) and ``value`` (the class shares at each node). A sample goes left when its
    feature, as float32, is at most the threshold (as scikit-learn decides), and the
    forest's probabilities are the mean of its leaves' shares.

    The trees are kept end to end in one set of arrays, so that every sample walks every
    tree at once, one level a step (numpy, not a Python loop per node): a ``remember``
    asks for a few samples of a hundred trees each.
    """

    def __init__(self, trees: list[dict[str, Any]]) -> None:
        if not trees:
            raise ValueError("a forest needs trees")
        sizes = [len(t["feature"]) for t in trees]
        self._roots = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        parts: dict[str, list[npt.NDArray[Any]]] = {
            "feature": [],
            "threshold": [],
            "left": [],
            "right": [],
            "share": [],
        }
        for root, t in zip(self._roots, trees, strict=True):
            left = np.asarray(t["left"], dtype=np.int64)
            right = np.asarray(t["right"], dtype=np.int64)
            value = np.asarray(t["value"], dtype=np.float64)
            if not (len(left) == len(right) == len(value) == len(t["threshold"])):
                raise ValueError("a tree's arrays disagree in length")
            parts["feature"].append(np.maximum(np.asarray(t["feature"], dtype=np.int64), 0))
            parts["threshold"].append(np.asarray(t["threshold"], dtype=np.float64))
            parts["left"].append(np.where(left >= 0, left + root, -1))
            parts["right"].append(np.where(right >= 0, right + root, -1))
            parts["share"].append(value / np.maximum(value.sum(axis=1, keepdims=True), 1e-12))
        self._feature = np.concatenate(parts["feature"])
        self._threshold = np.concatenate(parts["threshold"])
        self._left = np.concatenate(parts["left"])
        self._right = np.concatenate(parts["right"])
        self._share = np.concatenate(parts["share"])

    def probabilities(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The class probabilities for one feature vector."""
        one: npt.NDArray[np.float64] = self.probabilities_many(np.asarray(x)[None, :])[0]
        return one

    def probabilities_many(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The class probabilities for each row of ``x`` (samples × features)."""
        samples = np.asarray(x, dtype=np.float32)
        if samples.ndim != 2:
            raise ValueError("probabilities_many reads a matrix, one sample a row")
        nodes = np.broadcast_to(self._roots, (samples.shape[0], len(self._roots))).copy()
        rows = np.arange(samples.shape[0])[:, None]
        while True:
            left = self._left[nodes]
            inner = left >= 0
            if not inner.any():
                break
            goes_left = samples[rows, self._feature[nodes]] <= self._threshold[nodes]
            nodes = np.where(inner, np.where(goes_left, left, self._right[nodes]), nodes)
        leaves = self._share[nodes]  # samples × trees × classes
        total = np.zeros((samples.shape[0], leaves.shape[2]))
        for tree in range(leaves.shape[1]):  # tree by tree, as the sum was always taken
            total += leaves[:, tree]
        result: npt.NDArray[np.float64] = total / leaves.shape[1]
        return result


class Linear:
    """A multinomial logistic regression after standard scaling: softmax(W·(x−μ)/σ + b)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self._mean = np.asarray(spec["mean"], dtype=np.float64)
        self._scale = np.asarray(spec["scale"], dtype=np.float64)
        self._coef = np.asarray(spec["coef"], dtype=np.float64)
        self._intercept = np.asarray(spec["intercept"], dtype=np.float64)
        width = self._mean.shape[0]
        if self._scale.shape != (width,) or self._coef.shape[1:] != (width,):
            raise ValueError("the linear model's arrays disagree in width")
        if self._intercept.shape != self._coef.shape[:1]:
            raise ValueError("the linear model needs one intercept per class")

    @property
    def width(self) -> int:
        """How many inputs it reads."""
        return int(self._mean.shape[0])

    def probabilities(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The class probabilities for one input vector."""
        z = (np.asarray(x, dtype=np.float64) - self._mean) / self._scale
        logits = self._coef @ z + self._intercept
        exp = np.exp(logits - logits.max())
        result: npt.NDArray[np.float64] = exp / exp.sum()
        return result

    def probabilities_many(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The class probabilities for each row of ``x``, row by row (a few
        microseconds each; the same sums in the same order as :meth:`probabilities`)."""
        return np.stack([self.probabilities(row) for row in np.asarray(x, dtype=np.float64)])


class PairModel:
    """The forest and the linear model, averaged.

    Attributes:
        labels: The class of each probability, in order.
        features: The names of the forest's inputs (checked against the code's).
        trained_on: The labelled sets it was fitted on.
        embedder: The embedding model whose vectors it was trained on (its features mean
            nothing with another model's vectors).
    """

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            self.labels = tuple(str(label) for label in spec["labels"])
            self.features = tuple(str(name) for name in spec["features"])
            self.trained_on = tuple(str(name) for name in spec.get("trained_on", ()))
            self.embedder = str(spec.get("embedder", ""))
            self.forest = Forest(spec["forest"]["trees"])
            self.linear = Linear(spec["linear"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ConfigError(f"not a pair model: {exc}") from exc

    def probabilities(self, features: npt.ArrayLike, vectors: npt.ArrayLike) -> dict[str, float]:
        """Each label's probability, from the named features and the pair's vectors."""
        named = np.asarray(features, dtype=np.float64)
        both = np.concatenate([named, np.asarray(vectors, dtype=np.float64)])
        if both.shape[0] != self.linear.width:
            raise ConfigError(
                f"the pair model reads {self.linear.width} inputs, this pair has {both.shape[0]}"
            )
        p = (self.forest.probabilities(named) + self.linear.probabilities(both)) / 2
        return {label: float(x) for label, x in zip(self.labels, p, strict=True)}

    def probabilities_many(
        self, features: npt.ArrayLike, vectors: npt.ArrayLike
    ) -> list[dict[str, float]]:
        """:meth:`probabilities` of many pairs at once (one row of each a pair)."""
        named = np.asarray(features, dtype=np.float64)
        both = np.concatenate([named, np.asarray(vectors, dtype=np.float64)], axis=1)
        if both.shape[1] != self.linear.width:
            raise ConfigError(
                f"the pair model reads {self.linear.width} inputs, these pairs have {both.shape[1]}"
            )
        p = (self.forest.probabilities_many(named) + self.linear.probabilities_many(both)) / 2
        return [{label: float(x) for label, x in zip(self.labels, row, strict=True)} for row in p]


@cache
def load(path: Path = MODEL_FILE) -> PairModel:
    """The shipped pair model (read once)."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the pair model {path}: {exc}") from exc
    return PairModel(spec)
