"""One decision for every judge: a judge's opinion of a pair becomes a typed verdict.

The policy (``[memory]`` in ``palace.toml``) is the palace's, not the judge's, and it is
built on one rule: **never hide a true memory, never drop a new value**.

- An **update** supersedes the old memory only when the judge calls it an update with a
  probability of update of at least ``memory.supersede_confidence``. A less sure update
  is **related**: the new memory is filed as new, linked to the old one
  (``metadata["related"]``), and both stay current; recall shows the newer first.
- A **duplicate** files nothing only when the judge's probability of update stays below
  ``memory.duplicate_doubt``: in doubt between a repeat and a new value, the new memory
  is filed (related), since a dropped update loses the value for good while an extra
  related memory costs a line. Nor is a pair whose two texts are the same words around
  other numbers ("... is 2027-01-01" / "... is 2027-01-02") a duplicate, whatever the
  judge says: it is filed (related). Of the 17,268 labelled pairs in ``benchmarks/data``,
  86 are of that shape, none of them a duplicate (82 updates, 4 new).
- A **new** with a probability of update or duplicate of at least
  ``memory.related_confidence`` is related; otherwise it is simply new.

A judge that fails is no verdict at all: :func:`undecided` files the memory as new.

**One new value replaces one old value.** Judges read each pair alone, and a new text that
states a change ("finally moved to days, 7am-7pm now") can sound like an update of many of
the user's memories at once. :func:`settle` looks at a new memory's verdicts together: only
the candidate the judge is surest is updated supersedes, and only when its probability of
update leads every other candidate's by ``memory.supersede_margin``; the other updates
(and a leader without that lead) are filed as related.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from palace_retrievers.memory.judges import Opinion

Kind = Literal["duplicate", "update", "related", "new"]
_NUMBER = re.compile(r"\d+(?:[.,:/\-]\d+)*")


@dataclass(frozen=True, slots=True)
class Policy:
    """How sure a judge must be (see the module's docstring)."""

    supersede_confidence: float = 0.0
    duplicate_doubt: float = 1.0
    related_confidence: float = 1.0
    supersede_margin: float | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the palace does with a new memory against one old memory.

    Attributes:
        kind: ``duplicate`` (file nothing), ``update`` (supersede the old memory),
            ``related`` (file the new one linked to the old one) or ``new``.
        confidence: The judge's probability of what it called the pair.
        reasons: Why: the judge's notes, and the policy's when it changed the call.
        judge: The judge's name.
        update: The judge's probability of update (what :func:`settle` compares).
    """

    kind: Kind
    confidence: float
    reasons: tuple[str, ...]
    judge: str
    update: float = 0.0


def only_numbers_differ(old: str, new: str) -> bool:
    """Whether ``old`` and ``new`` are the same words (case and spacing aside) around
    numbers that differ: the same sentence with another value, never a repeat."""

    def shape(text: str) -> str:
        return " ".join(_NUMBER.sub("#", text.casefold()).split())

    def numbers(text: str) -> list[str]:
        return [n.replace(",", "") for n in _NUMBER.findall(text)]

    return shape(old) == shape(new) and numbers(old) != numbers(new)


def decide(
    opinion: Opinion, policy: Policy, judge: str, texts: tuple[str, str] | None = None
) -> Verdict:
    """The verdict on one pair from ``judge``'s ``opinion`` under ``policy`` (``texts``:
    the pair's old and new text, for the rule on numbers)."""
    p = opinion.probabilities
    update, duplicate = float(p["update"]), float(p["duplicate"])
    reasons = opinion.reasons
    if opinion.verdict == "update":
        if update >= policy.supersede_confidence:
            return Verdict("update", update, reasons, judge, update)
        note = f"an update at {update:.2f}, under supersede_confidence"
        return Verdict("related", update, (*reasons, note), judge, update)
    if opinion.verdict == "duplicate":
        if texts is not None and only_numbers_differ(*texts):
            note = "a duplicate, but the same words around other numbers: filed"
            return Verdict("related", duplicate, (*reasons, note), judge, update)
        if update < policy.duplicate_doubt or policy.duplicate_doubt >= 1.0:
            return Verdict("duplicate", duplicate, reasons, judge, update)
        note = f"a duplicate, but an update at {update:.2f} (duplicate_doubt): filed"
        return Verdict("related", duplicate, (*reasons, note), judge, update)
    if max(update, duplicate) >= policy.related_confidence and policy.related_confidence < 1.0:
        note = f"new, but update {update:.2f} / duplicate {duplicate:.2f}: related"
        return Verdict("related", float(p["new"]), (*reasons, note), judge, update)
    return Verdict("new", float(p["new"]), reasons, judge, update)


def settle(verdicts: Sequence[Verdict], policy: Policy) -> list[Verdict]:
    """A new memory's verdicts on all its candidates, with at most one update: the one
    with the highest probability of update, if it leads every other candidate's by
    ``policy.supersede_margin`` (``None``: no such rule, every update stands). The
    other updates become related."""
    margin = policy.supersede_margin
    updates = [i for i, v in enumerate(verdicts) if v.kind == "update"]
    if margin is None or not updates:
        return list(verdicts)
    best = max(updates, key=lambda i: verdicts[i].update)
    rest = [v.update for i, v in enumerate(verdicts) if i != best]
    lead = verdicts[best].update - max(rest, default=0.0)
    out = []
    for i, verdict in enumerate(verdicts):
        if verdict.kind == "update" and (i != best or lead < margin):
            note = (
                f"an update at {verdict.update:.2f}, but not the one surest, by "
                f"{lead:.2f} < supersede_margin"
                if i == best
                else f"an update at {verdict.update:.2f}, but another candidate is surer"
            )
            verdict = replace(verdict, kind="related", reasons=(*verdict.reasons, note))
        out.append(verdict)
    return out


def undecided(judge: str, why: str) -> Verdict:
    """The verdict when ``judge`` could not judge: filed as new, nothing superseded."""
    return Verdict("new", 0.0, (f"the judge failed: {why}",), judge)
