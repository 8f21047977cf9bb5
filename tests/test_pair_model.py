"""The learned pair model (palace_retrievers.memory.learned.pair_model, pair_estimators).

The model's readers (forest, linear, their average) and the lining up of two texts are
pure logic, tested on hand-made trees and vectors. What the shipped model decides is
tested with the REAL all-MiniLM-L6-v2 through ``Palace.remember`` (real Chroma, real
SQLite), on pairs written for this test (in no benchmark set) that the structural matcher
alone calls new.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from palace_retrievers import Palace
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.learned import pair_model
from palace_retrievers.memory.learned.pair_estimators import Forest, Linear, PairModel
from palace_retrievers.memory.learned.structural import compare

DATA = Path(pair_model.__file__).resolve().parent / "data"


def one_tree(feature: int, threshold: float, left: list[float], right: list[float]) -> dict:
    """A stump: feature <= threshold goes to the left leaf."""
    return {
        "feature": [feature, -2, -2],
        "threshold": [threshold, -2.0, -2.0],
        "left": [1, -1, -1],
        "right": [2, -1, -1],
        "value": [[1.0, 1.0, 1.0], left, right],
    }


def linear(width: int, coef: list[list[float]], intercept: list[float]) -> dict:
    """A linear model over ``width`` inputs, unscaled (mean 0, scale 1)."""
    return {"mean": [0.0] * width, "scale": [1.0] * width, "coef": coef, "intercept": intercept}


def test_the_forest_averages_the_shares_of_its_leaves() -> None:
    forest = Forest(
        [
            one_tree(0, 0.5, [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]),  # duplicate, new, update
            one_tree(1, 0.2, [2.0, 2.0, 0.0], [0.0, 1.0, 3.0]),  # counts, not shares
        ]
    )
    x = np.zeros(len(pair_model.FEATURES))
    x[0], x[1] = 0.9, 0.1
    assert forest.probabilities(x) == pytest.approx([0.25, 0.25, 0.5])
    x[0] = 0.5  # at the threshold: left, as scikit-learn decides
    assert forest.probabilities(x)[1] == pytest.approx(0.75)


def test_thresholds_are_compared_in_float32_as_scikit_learn_does() -> None:
    threshold = float(np.float32(0.3))  # scikit-learn's thresholds sit between float32 values
    forest = Forest([one_tree(0, threshold, [0, 1, 0], [0, 0, 1])])
    x = np.zeros(len(pair_model.FEATURES))
    x[0] = 0.3  # a float64 above the float32 threshold, equal to it in float32
    assert forest.probabilities(x)[1] == 1.0


def walk(trees: list[dict], x: np.ndarray) -> np.ndarray:
    """The forest's probabilities for one sample, node by node (the reference)."""
    sample = np.asarray(x, dtype=np.float32)
    total = np.zeros(len(trees[0]["value"][0]))
    for t in trees:
        node = 0
        while t["left"][node] >= 0:
            goes_left = sample[t["feature"][node]] <= np.float64(t["threshold"][node])
            node = t["left"][node] if goes_left else t["right"][node]
        leaf = np.asarray(t["value"][node], dtype=np.float64)
        total += leaf / max(float(leaf.sum()), 1e-12)
    return total / len(trees)


@pytest.mark.parametrize("shipped", ["pair_model.json", "listwise.json"])
def test_the_forest_walks_all_samples_at_once_as_one_at_a_time(shipped: str) -> None:
    trees = json.loads((DATA / shipped).read_text(encoding="utf-8"))["forest"]["trees"]
    forest = Forest(trees)
    width = max(max(t["feature"]) for t in trees) + 1
    rng = np.random.default_rng(7)
    samples = rng.uniform(-0.5, 1.5, (60, width))
    thresholds = [
        v for t in trees for v, f in zip(t["threshold"], t["feature"], strict=True) if f >= 0
    ]
    samples[40:] = rng.choice(thresholds, (20, width))  # exactly at thresholds: left
    many = forest.probabilities_many(samples)
    for x, got in zip(samples, many, strict=True):
        assert np.array_equal(got, walk(trees, x))
        assert np.array_equal(forest.probabilities(x), got)


def test_the_linear_model_is_a_softmax_of_scaled_inputs() -> None:
    model = Linear(
        {
            "mean": [1.0, 0.0],
            "scale": [2.0, 1.0],
            "coef": [[1, 0], [0, 1], [0, 0]],
            "intercept": [0, 0, 0],
        }
    )
    p = model.probabilities([3.0, 0.0])  # scaled: (1, 0)
    assert p == pytest.approx(np.exp([1, 0, 0]) / np.exp([1, 0, 0]).sum())
    with pytest.raises(ValueError, match="width"):
        Linear({"mean": [0.0], "scale": [1.0, 1.0], "coef": [[1.0]], "intercept": [0.0]})


def test_the_pair_model_averages_forest_and_linear_model() -> None:
    width = 2
    model = PairModel(
        {
            "labels": list(pair_model.LABELS),
            "features": ["a"],
            "forest": {"trees": [one_tree(0, 0.5, [1, 0, 0], [0, 0, 1])]},
            "linear": linear(width, [[0, 0], [0, 0], [0, 0]], [0, 0, 0]),  # uniform
        }
    )
    got = model.probabilities([0.9], [0.0])
    assert got == pytest.approx({"duplicate": 1 / 6, "new": 1 / 6, "update": 0.5 + 1 / 6})
    with pytest.raises(ConfigError, match="reads 2 inputs"):
        model.probabilities([0.9], [0.0, 1.0])


@pytest.mark.parametrize(
    "broken",
    [
        {"labels": ["a"], "features": []},
        {"labels": [], "features": [], "forest": {"trees": []}, "linear": linear(1, [[1]], [0])},
        {"labels": [], "features": [], "forest": {"trees": [{}]}, "linear": linear(1, [[1]], [0])},
        {
            "labels": [],
            "features": [],
            "forest": {"trees": [one_tree(0, 0, [1, 0, 0], [1, 0, 0])]},
            "linear": linear(1, [[1]], [0, 1]),
        },
    ],
)
def test_a_broken_model_is_refused(broken: dict) -> None:
    with pytest.raises(ConfigError, match="not a pair model"):
        PairModel(broken)


def test_a_model_of_other_features_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    spec = {
        "labels": list(pair_model.LABELS),
        "features": ["cosine"],
        "forest": {"trees": [one_tree(0, 0, [1, 0, 0], [1, 0, 0])]},
        "linear": linear(1, [[1], [0], [0]], [0, 0, 0]),
    }
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ConfigError, match="does not match this version"):
        pair_model.model(path)


def test_a_damaged_model_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read the pair model"):
        pair_model.model(path)


def test_the_shipped_model_reads_and_was_not_trained_on_the_blind_set() -> None:
    model = pair_model.model()
    assert model.features == pair_model.FEATURES
    assert "memory_pairs.jsonl" in model.trained_on
    assert model.embedder == "sentence-transformers/all-MiniLM-L6-v2"
    held_out = [f"memory_pairs_heldout{n}.jsonl" for n in (16, 17, 18, 19)]
    assert not set(held_out) & set(model.trained_on)


def test_lining_up_masks_what_the_other_text_lacks() -> None:
    pair = pair_model.line_up("My gym is Planet Fitness", "I switched my gym to Equinox")
    # The white space between masked words stays, as the forest was trained.
    assert pair.old_template == "My gym something  "
    assert pair.new_template == "I something my gym something "
    assert pair.old_values == "is planet fitness"  # the words as the tokeniser reads them
    assert pair.new_values == "switched to equinox"
    assert pair.cue
    assert pair.new_named
    assert pair.old_named
    assert not any((pair.chinese, pair.person, pair.negation, pair.typed))
    same = pair_model.line_up("I walk to work", "i walk to work")
    assert same.old_values == same.new_values == pair_model.NOTHING
    assert same.old_template == "I walk to work"


def test_lining_up_notices_people_negations_and_typed_values() -> None:
    assert pair_model.line_up("I wake up at 6:30", "My son wakes up at 6:30").person
    assert pair_model.line_up("我的车是白色的", "我老婆的车是白色的").person
    assert pair_model.line_up("I eat meat", "I don't eat meat anymore").negation
    assert pair_model.line_up("我吃肉", "我不吃肉了").negation
    assert pair_model.line_up("The gym opens at 6am", "The gym opens at 7am").typed
    assert pair_model.line_up("宽带是电信的", "宽带换成联通了").chinese


def test_features_read_the_six_vectors_in_order() -> None:
    pair = pair_model.line_up("a b", "a c")
    eye = np.eye(6)
    vectors = np.stack([eye[0], eye[0], eye[1], eye[2] + eye[1], eye[3], 2 * eye[3]])
    f = pair_model.features(pair, vectors)
    assert len(f) == len(pair_model.FEATURES)
    assert f[0] == pytest.approx(1.0)  # cosine
    assert f[1] == pytest.approx(np.sqrt(0.5))  # template cosine (vectors are normalised)
    assert f[2] == pytest.approx(1.0)  # value cosine
    assert f[3] == pytest.approx(np.sqrt(0.5) - 1.0)
    assert pair_model.pair_vectors(vectors).shape == (6 * 6,)
    with pytest.raises(ValueError, match="6 vectors"):
        pair_model.features(pair, vectors[:5])


# -- the shipped forest, with the real model -----------------------------------------------

#: Updates the structural matcher misses (written for this test, in no benchmark set).
MISSED_UPDATES = [
    (
        "My mechanic is Joe at Main Street Auto",
        "I take the car to Precision Motors now instead of Joe",
    ),
    ("我们家的宽带用的是电信", "家里宽带已经改用联通"),
    ("孩子在阳光幼儿园上学", "孩子转到了蓝天幼儿园"),
]
#: Pairs that share words but are two facts.
TWO_FACTS = [
    ("The team uses Jira for tickets", "The team uses Slack for chat"),
    ("My yoga class is on Tuesdays", "My yoga class costs 20 dollars"),
    ("My yoga class is on Tuesdays", "My sister does yoga on Tuesdays"),
]


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    return open_palace(tmp_path / "palace", fake=False)  # real MiniLM, real Chroma


@pytest.mark.parametrize(("old", "new"), MISSED_UPDATES)
def test_an_update_the_rules_miss_supersedes_through_the_forest(
    palace: Palace, open_palace: Callable[..., Palace], tmp_path: Path, old: str, new: str
) -> None:
    a, b = palace._embed([old, new])
    sim = float(np.dot(a, b))
    assert sim >= palace.config.memory.candidate_similarity  # compared at all
    if compare(old, new, similarity=sim).verdict != "new":
        pytest.fail("the structural matcher now finds this update: pick a pair it misses")
    probabilities = pair_model.judge(old, new, palace._embed)
    assert probabilities["update"] >= palace.config.memory.pair_model_threshold
    first = palace.remember(old, user_id="u1")
    second = palace.remember(new, user_id="u1")
    assert second.action == "updated"
    assert palace.memory(first.memory.id, user_id="u1").superseded_by == second.memory.id
    assert [m.text for m in palace.memories(user_id="u1")] == [new]
    # Without the learned judges (the forest and the reader) the same pair leaves two truths.
    config = {"memory": {"pair_model": False, "pair_reader": False}}
    off = open_palace(tmp_path / "off", fake=False, config=config)
    off.remember(old, user_id="u1")
    assert off.remember(new, user_id="u1").action == "added"
    assert len(off.memories(user_id="u1")) == 2


@pytest.mark.parametrize(("old", "new"), TWO_FACTS)
def test_two_facts_sharing_words_both_stay(palace: Palace, old: str, new: str) -> None:
    palace.remember(old, user_id="u1")
    assert palace.remember(new, user_id="u1").action == "added"
    assert len(palace.memories(user_id="u1")) == 2


def test_a_failing_forest_leaves_the_pair_new(
    open_palace: Callable[..., Palace],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(*args: object, **kwargs: object) -> list[dict[str, float]]:
        raise ConfigError("the pair forest is damaged")

    # the pair model asked (beside the shipped e5 reader it is off by default)
    config = {"memory": {"pair_model": True}}
    palace = open_palace(tmp_path / "palace", fake=False, config=config)
    monkeypatch.setattr(pair_model, "judge_many", broken)
    old, new = MISSED_UPDATES[0]
    palace.remember(old, user_id="u1")
    assert palace.remember(new, user_id="u1").action == "added"
    assert "the learned pair judges failed" in caplog.text


def test_the_threshold_is_a_probability() -> None:
    from palace_retrievers.config import MemoryConfig

    with pytest.raises(ConfigError, match="pair_model_threshold"):
        MemoryConfig(pair_model_threshold=1.5)


@pytest.mark.parametrize(
    ("verdict", "probabilities", "expected"),
    [
        ("new", {"update": 0.7, "duplicate": 0.1, "new": 0.2}, "update"),
        ("new", {"update": 0.1, "duplicate": 0.66, "new": 0.24}, "new"),  # below 0.7
        ("new", {"update": 0.1, "duplicate": 0.72, "new": 0.18}, "duplicate"),
        ("new", {"update": 0.6, "duplicate": 0.0, "new": 0.4}, "new"),  # below the threshold
        ("update", {"update": 0.1, "duplicate": 0.05, "new": 0.85}, "new"),  # vetoed
        ("update", {"update": 0.15, "duplicate": 0.6, "new": 0.25}, "duplicate"),  # vetoed
        ("update", {"update": 0.25, "duplicate": 0.05, "new": 0.7}, "update"),  # below the veto
        ("duplicate", {"update": 0.9, "duplicate": 0.0, "new": 0.1}, "duplicate"),  # stands
    ],
)
def test_combine_weighs_the_judges_into_the_structural_verdict(
    verdict: str, probabilities: dict[str, float], expected: str
) -> None:
    assert pair_model.combine(verdict, probabilities, 0.65, 0.8, 0.7) == expected


def test_combine_reads_one_threshold_for_both_verdicts_when_given_one() -> None:
    duplicate = {"update": 0.1, "duplicate": 0.66, "new": 0.24}
    assert pair_model.combine("new", duplicate, threshold=0.65, veto=0.8) == "duplicate"
    assert pair_model.combine("new", duplicate, 0.65, 0.8, duplicate_threshold=0.7) == "new"


def test_an_added_value_is_told_from_a_replaced_one() -> None:
    assert pair_model.line_up("I play tennis", "I also play squash").additive
    assert pair_model.line_up("家里养了一只猫", "最近又养了一只狗").additive
    assert not pair_model.line_up("I play tennis", "I switched to squash").additive


def test_the_model_is_not_asked_with_another_embedders_vectors(
    open_palace: Callable[..., Palace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the FAKE embedder (pure logic): the model was trained on MiniLM vectors, so a
    palace embedding with another model keeps the structural verdicts."""
    asked: list[object] = []
    monkeypatch.setattr(pair_model, "judge_many", lambda *a, **k: asked.append(a) or [])
    palace = open_palace(tmp_path / "fake")
    assert pair_model.model().embedder != palace.embedder.model_name
    palace.remember("My gym is Planet Fitness", user_id="u1")
    palace.remember("I cancelled Planet Fitness and joined Equinox", user_id="u1")
    assert asked == []
