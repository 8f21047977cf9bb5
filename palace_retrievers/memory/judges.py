"""Memory judges: given an old memory and a new one, duplicate, update or new?

A judge is a plugin (``palace_register_memory_judges``, ``register(name, factory)`` with
``factory(options) -> MemoryJudge``), chosen by ``memory.judge``: ``learned`` by default
(no LLM, offline weights: :mod:`palace_plugins.builtin.judges.learned_judge`), ``llm`` for any
LangChain chat model (:mod:`palace_plugins.builtin.judges.llm_judge`), or a third party's. A
judge only gives its opinion of each pair; what the palace then does (supersede, drop as
a repeat, file linked as related, file as new) is decided by :func:`.decide.decide`
under the palace's policy, the same for every judge.

The three labels, as the judges are told:

- **duplicate**: the new text says what the old one says; nothing new is learned and
  the old text is still exactly right (other words, units or numeral forms);
- **update**: the new text gives a new value for the same attribute of the same subject,
  so the old text is no longer true;
- **new**: anything else, in particular when the old text is still true afterwards
  (another attribute, another subject, an added detail, another item of a list, a past
  event, a one-off exception).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from palace_retrievers.embedder import Vectors
from palace_retrievers.errors import PluginError

LABELS = ("duplicate", "new", "update")


@dataclass(frozen=True, slots=True)
class Pair:
    """What a judge reads: an old memory's text, the new text, the cosine of their
    embeddings (the palace's model), and the old memory's place in the gate's full-text
    order for the new text (``lexical_rank``: 0 for the best match, ``None`` when the full
    text did not bring it; :mod:`palace_retrievers.memory.candidates`). A judge may ignore
    the rank; the learned judge's shortlist reads it."""

    old: str
    new: str
    similarity: float
    lexical_rank: int | None = None


@dataclass(frozen=True, slots=True)
class JudgeContext:
    """What the palace lends a judge: its embedder (unit vectors, one row a text) and the
    embedding model's name (a learned judge is trained for one model)."""

    embed: Callable[[Sequence[str]], Vectors]
    model: str


@dataclass(frozen=True, slots=True)
class Opinion:
    """A judge's opinion of one pair.

    Attributes:
        verdict: ``"duplicate"``, ``"update"`` or ``"new"``: the judge's call.
        probabilities: How sure it is of each label (they sum to 1).
        reasons: Short notes on why, for the memory's history and for debugging.
    """

    verdict: str
    probabilities: Mapping[str, float]
    reasons: tuple[str, ...] = field(default=())

    @property
    def confidence(self) -> float:
        """The probability of the judge's own verdict."""
        return float(self.probabilities[self.verdict])

    @classmethod
    def certain(cls, verdict: str, *reasons: str) -> Opinion:
        """An opinion with all its weight on ``verdict``."""
        return cls(verdict, {label: float(label == verdict) for label in LABELS}, reasons)


class MemoryJudge(ABC):
    """Judges pairs of memories. Subclass it and register a factory under
    ``palace_register_memory_judges``; :class:`palace_plugins.testing.JudgeTests` checks
    the contract."""

    @abstractmethod
    def judge(self, pairs: Sequence[Pair], context: JudgeContext) -> list[Opinion]:
        """One opinion per pair, in order. All of a new memory's pairs come in one call,
        so a judge can batch them (one forward pass, one prompt). Raising is allowed:
        the palace then files the new memory as new (never supersedes on a failure)."""


def check_opinions(name: str, pairs: Sequence[Pair], opinions: object) -> list[Opinion]:
    """``opinions`` if they are one valid :class:`Opinion` per pair.

    Raises:
        PluginError: they are not.
    """
    if not isinstance(opinions, list) or len(opinions) != len(pairs):
        raise PluginError(f"memory judge {name!r} did not give one opinion per pair")
    for opinion in opinions:
        if not isinstance(opinion, Opinion) or opinion.verdict not in LABELS:
            raise PluginError(f"memory judge {name!r} gave {opinion!r}, not an Opinion")
        total = sum(float(opinion.probabilities.get(label, -1.0)) for label in LABELS)
        if abs(total - 1.0) > 1e-3 or min(opinion.probabilities.values()) < 0.0:
            raise PluginError(
                f"memory judge {name!r}: probabilities must be of {', '.join(LABELS)} and "
                f"sum to 1, got {dict(opinion.probabilities)}"
            )
    return opinions
