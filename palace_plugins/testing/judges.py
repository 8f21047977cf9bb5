"""The conformance suite of memory judges: :class:`JudgeTests`.

A judge reads pairs (old memory, new memory, their cosine, the old memory's full-text
rank) and gives one :class:`~palace_retrievers.memory.judges.Opinion` per pair (see
:mod:`palace_retrievers.memory.judges`). The suite checks what the palace relies on: one
valid opinion per pair, in order, probabilities of the three labels that sum to 1; no
pairs, no call needed and no opinions; the same pairs judged alone or together get the
same opinions; text in any script, or very long, is judged without an error. It does not
score a judge's accuracy: that is ``benchmarks/remember.py``'s job, on labelled pairs.

Provide ``judge_factory`` (``factory(options) -> MemoryJudge``) and, when the judge needs
the pairs it will be shown to answer (a scripted fake model, say), override
``sample_pairs``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from palace_plugins.factories import MemoryJudgeFactory as JudgeFactory
from palace_retrievers.memory.judges import (
    LABELS,
    JudgeContext,
    MemoryJudge,
    Opinion,
    Pair,
    check_opinions,
)

__all__ = ["SAMPLE_PAIRS", "JudgeFactory", "JudgeTests"]

#: Pairs in English and Chinese, of each kind, with plausible cosines.
SAMPLE_PAIRS: tuple[Pair, ...] = (
    Pair("I live in Lisbon", "I moved to Porto last month", 0.62),
    Pair("The team standup is at 9am", "Team standup: 9 a.m.", 0.91),
    Pair("My sister lives in Berlin", "I work as a data analyst", 0.12),
    Pair("我每天早上七点起床", "我现在每天六点半起床", 0.83),
    Pair("Allergies: penicillin", "Zoë Ångström met Σωκράτης in Zürich ☕ " + "long " * 400, 0.01),
)


def _embed(texts: Sequence[str]) -> np.ndarray:
    """A deterministic fake embedder (characters by code point, unit rows): the suite
    tests the contract, not meaning."""
    rows = np.zeros((len(texts), 32), dtype=np.float32)
    for i, text in enumerate(texts):
        for ch in text:
            rows[i, ord(ch) % 32] += 1.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: np.ndarray = rows / np.maximum(norms, 1e-12)
    return unit


CONTEXT = JudgeContext(embed=_embed, model="palace-testing/fake")


class JudgeTests:
    """Subclass and provide ``judge_factory``; every test below must pass."""

    @pytest.fixture
    def judge_factory(self) -> JudgeFactory:
        raise NotImplementedError("provide the judge_factory fixture")

    @pytest.fixture
    def judge_options(self) -> Mapping[str, Any]:
        """Options the factory is built with (override for a judge that needs some)."""
        return {}

    @pytest.fixture
    def sample_pairs(self) -> Sequence[Pair]:
        return SAMPLE_PAIRS

    @pytest.fixture
    def judge(self, judge_factory: JudgeFactory, judge_options: Mapping[str, Any]) -> MemoryJudge:
        judge = judge_factory(judge_options)
        assert isinstance(judge, MemoryJudge)
        return judge

    def test_one_valid_opinion_per_pair_in_order(
        self, judge: MemoryJudge, sample_pairs: Sequence[Pair]
    ) -> None:
        opinions = judge.judge(list(sample_pairs), CONTEXT)
        check_opinions("under test", list(sample_pairs), opinions)
        for opinion in opinions:
            assert opinion.verdict in LABELS
            assert set(opinion.probabilities) == set(LABELS)
            assert 0.0 <= opinion.confidence <= 1.0
            assert all(isinstance(reason, str) for reason in opinion.reasons)

    def test_no_pairs_no_opinions(self, judge: MemoryJudge) -> None:
        assert judge.judge([], CONTEXT) == []

    def test_a_pair_alone_is_judged_as_among_others(
        self,
        judge_factory: JudgeFactory,
        judge_options: Mapping[str, Any],
        sample_pairs: Sequence[Pair],
    ) -> None:
        together = judge_factory(judge_options).judge(list(sample_pairs), CONTEXT)
        for pair, opinion in zip(sample_pairs, together, strict=True):
            alone = judge_factory(judge_options).judge([pair], CONTEXT)[0]
            assert alone.verdict == opinion.verdict
            for label in LABELS:
                assert alone.probabilities[label] == pytest.approx(
                    opinion.probabilities[label], abs=1e-3
                )

    def test_pairs_with_full_text_ranks_are_judged(
        self,
        judge_factory: JudgeFactory,
        judge_options: Mapping[str, Any],
        sample_pairs: Sequence[Pair],
    ) -> None:
        """Pairs carry the old memory's place in the gate's full-text order (a judge may
        read it or ignore it): the sample pairs (each its own new text) with ranks get
        valid opinions, the same verdicts as without."""
        ranked = [replace(pair, lexical_rank=k) for k, pair in enumerate(sample_pairs)]
        plain = judge_factory(judge_options).judge(list(sample_pairs), CONTEXT)
        opinions = judge_factory(judge_options).judge(ranked, CONTEXT)
        check_opinions("under test", ranked, opinions)
        for before, after in zip(plain, opinions, strict=True):
            assert before.verdict == after.verdict

    def test_opinions_are_plain_values(
        self, judge: MemoryJudge, sample_pairs: Sequence[Pair]
    ) -> None:
        for opinion in judge.judge(list(sample_pairs), CONTEXT):
            assert isinstance(opinion, Opinion)
            assert all(isinstance(v, float) for v in opinion.probabilities.values())
