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
    """

    def __init__(self, trees: list[dict[str, Any]]) -> None:
        self._trees = [
            (
                np.asarray(t["feature"], dtype=np.int64),
                np.asarray(t["threshold"], dtype=np.float64),
                np.asarray(t["left"], dtype=np.int64),
                np.asarray(t["right"], dtype=np.int64),
                np.asarray(t["value"], dtype=np.float64),
            )
            for t in trees
        ]
        if not self._trees:
            raise ValueError("a forest needs trees")

    def probabilities(self, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The class probabilities for one feature vector."""
        sample = np.asarray(x, dtype=np.float32)
        total = np.zeros(self._trees[0][4].shape[1])
        for feature, threshold, left, right, value in self._trees:
            node = 0
            while left[node] >= 0:
                node = left[node] if sample[feature[node]] <= threshold[node] else right[node]
            leaf = value[node]
            total += leaf / max(float(leaf.sum()), 1e-12)
        result: npt.NDArray[np.float64] = total / len(self._trees)
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


@cache
def load(path: Path = MODEL_FILE) -> PairModel:
    """The shipped pair model (read once)."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the pair model {path}: {exc}") from exc
    return PairModel(spec)
