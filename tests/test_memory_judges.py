"""Memory judges as plugins: the hookspec, the built-ins through the conformance suite,
the one decision policy, and a judge's verdicts acting through ``Palace.remember``.

The palaces here use the FAKE embedder and the exact backend: these tests are about
wiring and policy, not meaning (the learned judge's accuracy is measured by
``benchmarks/remember.py``). The ``llm`` judge talks to a deterministic fake chat model
(:class:`ScriptedChat`), which labels each pair by a rule the test sets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fakes import make_plugin

from palace_plugins.builtin.judges.learned_judge import learned_judge
from palace_plugins.builtin.judges.llm_judge import LLMJudge
from palace_plugins.testing import JudgeTests
from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.decide import Policy, Verdict, decide, only_numbers_differ, settle
from palace_retrievers.memory.judges import JudgeContext, MemoryJudge, Opinion, Pair

PAIR = re.compile(r"\[(\d+)\] OLD: (.*)\n    NEW: (.*)")


class ScriptedChat:
    """A fake chat model: answers the llm judge's prompt with one item per pair, labelled
    by ``rule(old, new)``; counts its calls."""

    def __init__(self, rule: Callable[[str, str], tuple[str, float]]) -> None:
        self.rule = rule
        self.calls = 0

    def invoke(self, messages: Sequence[tuple[str, str]]) -> Any:
        self.calls += 1
        items = []
        for number, old, new in PAIR.findall(messages[-1][1]):
            label, confidence = self.rule(old, new)
            items.append(
                {"pair": int(number), "label": label, "confidence": confidence, "reason": "rule"}
            )
        content = "Sure:\n```json\n" + json.dumps({"pairs": items}) + "\n```"
        return type("Message", (), {"content": content})()


def by_words(old: str, new: str) -> tuple[str, float]:
    """Same text: duplicate; sharing the first two words: update; else new."""
    if old == new:
        return "duplicate", 0.95
    if old.split()[:2] == new.split()[:2]:
        return "update", 0.9
    return "new", 0.9


class TestLearnedJudge(JudgeTests):
    @pytest.fixture
    def judge_factory(self) -> Callable[[Mapping[str, Any]], MemoryJudge]:
        return learned_judge


class TestLLMJudge(JudgeTests):
    @pytest.fixture
    def judge_factory(self) -> Callable[[Mapping[str, Any]], MemoryJudge]:
        return LLMJudge

    @pytest.fixture
    def judge_options(self) -> Mapping[str, Any]:
        return {"model": ScriptedChat(by_words)}


def test_the_llm_judge_needs_a_model_and_knows_its_options() -> None:
    with pytest.raises(ConfigError, match="needs a 'model' option"):
        LLMJudge({})
    with pytest.raises(ConfigError, match="unknown option"):
        LLMJudge({"model": ScriptedChat(by_words), "temperature": 0})


def test_the_llm_judge_raises_on_an_answer_that_leaves_a_pair_out() -> None:
    judge = LLMJudge({"model": ScriptedChat(lambda old, new: ("maybe", 0.5))})
    context = JudgeContext(embed=lambda texts: [], model="m")  # type: ignore[arg-type,return-value]
    with pytest.raises(Exception, match="no usable label"):
        judge.judge([Pair("a b", "a c", 0.5)], context)


# -- the policy ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "update", "duplicate", "expected"),
    [
        ("update", 0.9, 0.05, "update"),  # a sure update supersedes
        ("update", 0.4, 0.1, "related"),  # an unsure one is filed beside it
        ("duplicate", 0.1, 0.85, "duplicate"),
        ("duplicate", 0.35, 0.6, "related"),  # in doubt between repeat and new value: file
        ("new", 0.45, 0.1, "related"),
        ("new", 0.1, 0.2, "new"),
    ],
)
def test_the_policy_never_hides_a_true_memory_nor_drops_a_new_value(
    verdict: str, update: float, duplicate: float, expected: str
) -> None:
    probabilities = {"update": update, "duplicate": duplicate, "new": 1 - update - duplicate}
    policy = Policy(supersede_confidence=0.5, duplicate_doubt=0.3, related_confidence=0.4)
    got = decide(Opinion(verdict, probabilities, ("because",)), policy, "j")
    assert got.kind == expected
    assert got.judge == "j"
    assert got.reasons[0] == "because"


def test_one_new_value_supersedes_at_most_the_surest_old_one() -> None:
    """A change statement that sounds like an update of several memories updates only
    the one the judge is surest of, and only with a lead; the rest are related."""
    policy = Policy(supersede_confidence=0.5, supersede_margin=0.1)

    def verdict(update: float) -> Verdict:
        return decide(
            Opinion("update", {"update": update, "duplicate": 0.0, "new": 1 - update}), policy, "j"
        )

    settled = settle([verdict(0.7), verdict(0.95), verdict(0.6)], policy)
    assert [v.kind for v in settled] == ["related", "update", "related"]
    close = settle([verdict(0.9), verdict(0.85)], policy)
    assert [v.kind for v in close] == ["related", "related"]  # no lead: nothing hidden
    assert [v.kind for v in settle([verdict(0.9)], policy)] == ["update"]
    unset = Policy(supersede_confidence=0.5)
    assert [v.kind for v in settle([verdict(0.9), verdict(0.85)], unset)] == ["update"] * 2


# -- judges acting through the palace -----------------------------------------------------


def _judge_plugin(name: str, judge: MemoryJudge) -> object:
    def register(register: Callable[[str, Any], None]) -> None:
        register(name, lambda options: judge)

    return make_plugin(f"palace-test-{name}", palace_register_memory_judges=register)


class Fixed(MemoryJudge):
    """A third-party judge: every pair gets ``opinion``; or raises when ``opinion`` is None."""

    def __init__(self, opinion: Opinion | None) -> None:
        self.opinion = opinion
        self.seen: list[Pair] = []

    def judge(self, pairs: Sequence[Pair], context: JudgeContext) -> list[Opinion]:
        self.seen += pairs
        if self.opinion is None:
            raise RuntimeError("the judge is down")
        return [self.opinion for _ in pairs]


MEMORY_RELAXED = {
    "candidate_similarity": 0.0,
    "supersede_confidence": 0.5,
    "duplicate_doubt": 0.3,
    "related_confidence": 0.4,
}


def _palace(
    open_palace: Callable[..., Palace], tmp_path: Path, judge: str, plugin: object
) -> Palace:
    return open_palace(
        tmp_path / "palace",
        backend="sqlite",
        config={"memory": {"judge": judge, **MEMORY_RELAXED}},
        plugins=[plugin],
    )


def test_a_third_party_judges_sure_update_supersedes(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    judge = Fixed(Opinion("update", {"update": 0.9, "duplicate": 0.05, "new": 0.05}, ("acme",)))
    palace = _palace(open_palace, tmp_path, "acme", _judge_plugin("acme", judge))
    old = palace.remember("Deploys happen on Tuesdays", user_id="u1").memory
    new = palace.remember("Releases go out every Thursday", user_id="u1")
    assert new.action == "updated"
    assert palace.memory(old.id, user_id="u1").status == "superseded"
    assert judge.seen[-1] == Pair(old.text, new.memory.text, judge.seen[-1].similarity)
    event = palace.history(new.memory.id, user_id="u1")[0]
    assert event.detail["judge"] == "acme"
    assert event.detail["reasons"] == ["acme"]


def test_an_unsure_update_files_both_linked_and_newest_first(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    judge = Fixed(Opinion("update", {"update": 0.45, "duplicate": 0.05, "new": 0.5}))
    palace = _palace(open_palace, tmp_path, "acme", _judge_plugin("acme", judge))
    old = palace.remember("Deploys happen on Tuesdays", user_id="u1").memory
    new = palace.remember("Deploys happen on Thursdays now", user_id="u1")
    assert new.action == "added"
    assert new.memory.metadata["related"] == [old.id]
    assert palace.memory(old.id, user_id="u1").status == "active"
    listed = [m.id for m in palace.memories(user_id="u1")]
    assert listed.index(new.memory.id) < listed.index(old.id)
    # Asked in the old memory's very words, search still puts the newer value first.
    hits = [h for h in palace.search(old.text, k=5, user_id="u1") if h.is_memory]
    assert [h.id for h in hits[:2]] == [new.memory.id, old.id]
    assert hits[0].scores["related"] == 1.0
    block = palace.context(old.text, user_id="u1")
    assert block.index("Thursdays") < block.index("Tuesdays")


def test_a_doubtful_duplicate_is_filed_not_dropped(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    judge = Fixed(Opinion("duplicate", {"update": 0.4, "duplicate": 0.55, "new": 0.05}))
    palace = _palace(open_palace, tmp_path, "acme", _judge_plugin("acme", judge))
    old = palace.remember("Rent is $1,850 per month", user_id="u1").memory
    new = palace.remember("Rent is $2,100 a month", user_id="u1")
    assert new.action == "added"
    assert new.memory.metadata["related"] == [old.id]


@pytest.mark.parametrize(
    ("old", "new", "differ"),
    [
        ("The deploy date is 2027-01-01", "The deploy date is 2027-01-02", True),
        ("Deploy window: slot 0", "deploy  window: SLOT 1", True),
        ("Rent is $1,850 a month", "Rent is $1850 a month", False),  # the same number
        ("Rent is $1,850 a month", "Rent is $2,100 per month", False),  # other words too
        ("The meeting is at 9:30", "The meeting is at 9:30", False),
        ("I have two kids", "I have 2 kids", False),
    ],
)
def test_only_numbers_differ_reads_the_same_words_around_other_numbers(
    old: str, new: str, differ: bool
) -> None:
    assert only_numbers_differ(old, new) is differ


def test_a_sure_duplicate_of_the_same_words_around_other_numbers_is_filed(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """Whatever the judge says, another number in the same sentence is not a repeat: the
    new value is filed beside the old one, not dropped."""
    judge = Fixed(Opinion("duplicate", {"update": 0.02, "duplicate": 0.97, "new": 0.01}))
    palace = _palace(open_palace, tmp_path, "acme", _judge_plugin("acme", judge))
    old = palace.remember("The deploy date of the payments service is 2027-01-01", user_id="u1")
    new = palace.remember("The deploy date of the payments service is 2027-01-02", user_id="u1")
    assert new.action == "added"
    assert new.memory.metadata["related"] == [old.memory.id]
    again = palace.remember("the deploy date of the payments service is 2027-01-02", user_id="u1")
    assert again.action == "duplicate"  # the same numbers: the judge's repeat stands


def test_a_judge_that_fails_never_supersedes(
    open_palace: Callable[..., Palace], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    palace = _palace(open_palace, tmp_path, "down", _judge_plugin("down", Fixed(None)))
    old = palace.remember("Deploys happen on Tuesdays", user_id="u1").memory
    new = palace.remember("Deploys happen on Thursdays", user_id="u1")
    assert new.action == "added"
    assert palace.memory(old.id, user_id="u1").status == "active"
    assert "the memory judge 'down' failed" in caplog.text


def test_the_llm_judge_decides_through_remember(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    chat = ScriptedChat(by_words)
    palace = open_palace(
        tmp_path / "palace",
        backend="sqlite",
        config={
            "memory": {"judge": "llm", **MEMORY_RELAXED},
            "memory_judges": {"llm": {"model": "unused"}},
        },
    )
    palace._selected.judge = LLMJudge({"model": chat})  # a fake chat model (see the docstring)
    old = palace.remember("Standup is at 9:30", user_id="u1").memory
    assert palace.remember("Standup is at 10:30 from Monday", user_id="u1").action == "updated"
    assert palace.memory(old.id, user_id="u1").status == "superseded"
    assert palace.remember("Lunch is at noon", user_id="u1").action == "added"
    assert chat.calls >= 2


def test_palace_plugins_lists_the_judges() -> None:
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    listed = {p["name"]: p for p in json.loads(result.output)}
    assert "palace_register_memory_judges" in listed["learned-judge"]["hooks"]
    assert "palace_register_memory_judges" in listed["llm-judge"]["hooks"]
