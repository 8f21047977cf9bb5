"""Recall: memories found for a query, scored, merged with drawer hits, and put in context.

**Candidates.** The owner's ``active`` memories nearest the query in the ``memories``
vector collection, and their full-text (FTS5) matches: ``memory.recall_candidates`` (or
``k``, if larger) of each. A memory passes the search's filters when its ``kind``, owner and date
(``created_at``) pass them, and its wing and room are the filter's or empty (a memory
with no wing applies to every wing of its owner). Expired memories are never recalled.

**The asked slot and the asked time.** A question may name a slot
(:func:`~palace_retrievers.memory.slots.question_slots`: "Where do I live?" asks ``i|lives_in``)
and a past period (:func:`~palace_retrievers.memory.asof.period_in`: "in March 2024", "2024年3月",
"last year"; else a search's ``until``, when it is in the past, is the asked moment; else
the asked time is now). Both are read from the query's words, without the ledger. Then:

- the owner's memories filed in the asked slot (:meth:`Ledger.slot_memories`, one indexed
  query per asked slot, 1 or 2; plus the candidates whose slot matches it by
  :func:`~palace_retrievers.memory.slots.slots_match`) are laid out on one timeline per
  predicate: each holds from its ``created_at`` until the next one's (or, superseded,
  until its successor's ``created_at``, else its ``status_at``). A memory that held the
  slot during the asked time is a candidate whatever its match, superseded or not, with
  ``held`` = the share of the asked time it held (1 for the current value of a question
  about now);
- for a past period, the owner's *superseded* memories that match the query's words
  (one more full-text query) and held during the period (``created_at`` to
  ``status_at``) are candidates too, on the same terms as the active ones;
- for a past period, memories that ``palace gc`` archived for having been superseded
  (``GC_REASONS``' ``"superseded"``) count as superseded ones, in the slot's timeline
  and among the word matches (the same two queries), holding until they were
  superseded (their successor's ``created_at``, else the time of their ``supersede``
  event). The archive reason is read from the memories' histories, in one indexed
  query for all the archived memories that may have held during the period (superseded
  before they were archived, not expired, stated before the period ends and archived
  after it starts), none if there is none.
  Memories archived as expired or unused, or deleted, are never recalled, and a
  question about now never recalls an archived memory.

A memory filed without a slot is found by its match alone. A query that names no slot
and no past period costs no ledger query more than before.

**Match.** How well a text matches the query, the gate of recall: ``match = v × cosine +
b × coverage``, where ``coverage`` is the share of the query's terms (as BM25 sees them:
stop words dropped, lightly stemmed) that the text contains, and ``v``, ``b`` are
``search.vector_weight`` and ``search.bm25_weight`` scaled to sum to 1. The words count
because a short memory's embedding alone is a weak judge: with MiniLM, "which database
do we use?" is nearer "My favourite editor is Emacs" (0.31) than "We moved the orders
database to PostgreSQL 15" (0.25). A memory needs a match of at least
``memory.min_relevance`` to be recalled at all.

**Score.** ``recall = 0.6 × relevance + 0.2 × importance + 0.1 × freshness + 0.1 × heat``
(the weights are ``memory.*_weight``), where

- *relevance* is how well the memory answers the query beside the drawer hits, on one
  scale (:mod:`palace_retrievers.memory.scale`): the drawer hits and the memory
  candidates scored as one list by the drawers' own fusion (cosine and BM25), the
  memory's fused score divided by the best of the list, in [0, 1] — a memory that
  answers the query as well as the best drawer gets 1;
- *freshness* is ``0.5 ** (days since updated_at / memory.half_life_days)``;
- *heat* is ``min(access_count, memory.heat_cap) / memory.heat_cap``;

and a memory that held the asked slot during the asked time (``held`` > 0) has a
relevance of 1: it answers the question, whatever its wording.

**Merge.** A memory hit's score is ``memory.weight × worth × relevance × standing +
memory.slot_weight × held``: ``worth`` (``scores["scale"]``) is what a relevance of 1
scores beside the drawers (the top drawer hit's score over its own relevance, see
:mod:`palace_retrievers.memory.scale`), and ``standing`` is the recall score the memory
would have at relevance 1, heat left out, over that of a memory its owner asked to keep
(importance 1) that is not fresh (``(relevance_weight + importance_weight × importance +
freshness_weight × freshness) / (relevance_weight + importance_weight)``: 1 for such a
memory, 0.825 to 1.125 with the defaults). Heat is left out so that a search does not
change the next one's ranking against the drawers (each search warms the memories it
returns). So relevance alone sets the scale: a memory that answers as well as the top
drawer, and that its owner asked to keep, scores what that drawer scores, one that
answers better ranks above it, and one that answers worse ranks below it. The memory that
holds the asked slot at the asked time ranks first (above the drawers too). Drawer hits
keep their scores untouched, and the two lists are merged by score (ties: by id) and cut
to ``k``. So drawers rank among themselves exactly as without memories, and a palace with
no memories searches exactly as before. ``memory.scale = "recall"`` merges as before
this scale: relevance is the memory's match over the best match among the drawer hits and
memory candidates (a max normalisation of ``match``), and the score is ``memory.weight ×
recall + memory.slot_weight × held``, beside the drawers' fused scores. With
``include_history``, the superseded
predecessors of each memory hit follow it (newest first), with its score, ``history``
= their distance in the chain and ``superseded`` = 1 in ``scores``; they do not count
towards ``k`` and are not counted as accesses.

**Newer first.** When the judge was unsure whether a new memory updates an old one, both
stay current and the new one is filed *related* to the old (``metadata["related"]``, see
:mod:`palace_retrievers.memory.decide`). Recall then shows both, with their dates, the
newer first: :func:`newer_first` puts each memory hit just above the best older hit it is
related to, when that one ranked above it (its score that hit's plus 1e-6,
``scores["related"]`` = 1), taking the hits oldest first so that a chain of values ends
newest first. It looks at all the candidates before the cut to ``k``, so a related newer
value ranked far below comes up with its older one; nothing is hidden or dropped. The
subject is the judge's link alone. Two memories whose stored vectors are near (a cosine
from 0.5 to 0.95) were tried as one subject too: with all-MiniLM-L6-v2, for every stale
answer that fixed, at least one newer memory of *another* subject came first (``new``
pairs of ``benchmarks/remember.py``); and no pair of those sets that stayed current
shared a slot (``benchmarks/newer_first.py``; benchmarks/README.md, "Why stale, and newer
first").

**Context.** :func:`context_block` writes the block an assistant puts in its prompt: a
header telling the model to use only the memories that apply, then one line per memory,
``[YYYY-MM-DD] (kind) text``, best first, until the token budget is spent. Tokens are
approximated as ``ceil(characters / 4)`` per line (the usual rule of thumb for English
with GPT-style tokenizers; Chinese text uses more tokens per character, so budget more).

About 590 lines: one recall (candidates, the asked slot and time, the scores, the merge
and the context block), whose steps share the candidates and the asked time it reads once
per query; the documentation above is a third of it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

from palace_retrievers.config import MemoryConfig, SearchConfig
from palace_retrievers.ledger import Ledger
from palace_retrievers.memory.asof import Period, period_in, point, without_period
from palace_retrievers.memory.scale import shared_scale
from palace_retrievers.memory.slots import question_slots, slots_match
from palace_retrievers.records import Filter, Hit
from palace_retrievers.records.memories import MEMORY_KINDS, Memory, MemoryEvent
from palace_retrievers.search.indexes import IndexSet
from palace_retrievers.terms import terms

#: The statuses of the memories a question about a past period may recall (``archived``:
#: only those ``palace gc`` archived for having been superseded; see the module's
#: documentation).
HISTORY_STATUSES = ("active", "superseded", "archived")
#: The statuses of a memory that no longer holds its slot, having been superseded.
_REPLACED = ("superseded", "archived")

#: The first line of :func:`context_block`.
CONTEXT_HEADER = (
    "Memories from earlier conversations with this user, most relevant first. "
    "Use only those that apply to the current request and ignore the rest; "
    "a dated memory may be out of date."
)


def tokens(text: str) -> int:
    """Approximate tokens of ``text``: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


def freshness(memory: Memory, now: datetime, half_life_days: float) -> float:
    """``0.5 ** (days since updated_at / half_life_days)``, 1 for a future date."""
    days = max((now - memory.updated_at).total_seconds() / 86_400, 0.0)
    return float(0.5 ** (days / half_life_days))


def heat(memory: Memory, cap: int) -> float:
    """``min(access_count, cap) / cap``."""
    return min(memory.access_count, cap) / cap


def coverage(query_terms: Collection[str], text_terms: Iterable[str]) -> float:
    """The share of ``query_terms`` found in ``text_terms`` (0 when there are none)."""
    if not query_terms:
        return 0.0
    return len(set(query_terms).intersection(text_terms)) / len(set(query_terms))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory that may be recalled, with how well it matches the query."""

    memory: Memory
    cosine: float
    coverage: float
    match: float
    held: float = 0.0


@dataclass(frozen=True, slots=True)
class Asked:
    """What a query asks about, read from its words alone.

    Attributes:
        slots: The slots it asks (:func:`~palace_retrievers.memory.slots.question_slots`).
        period: The past period it asks about (from its words, or the search's past
            ``until``); ``None``: now.
        rest: The query without the words naming the period.
    """

    slots: tuple[str, ...]
    period: Period | None
    rest: str


def asked(query: str, where: Filter, now: datetime) -> Asked:
    """The slots and the past period ``query`` asks about (see the module's documentation)."""
    period = period_in(query, now=now)
    rest = without_period(query, period) if period is not None else query
    if period is None and where.until is not None and where.until < now:
        period = point(where.until)
    return Asked(question_slots(rest), period, rest)


def held_slot(
    members: Sequence[Memory],
    period: Period,
    statuses: Collection[str],
    ended: Mapping[str, datetime] | None = None,
) -> dict[str, float]:
    """Memory id → share of ``period`` it held its slot, for the memories of one asked
    slot (see the module's documentation); those that never held it are left out.

    ``ended`` gives, for archived members, when they were superseded: a superseded or
    archived member holds until its successor's ``created_at`` when the successor is
    among ``members``, else until ``ended``'s time (a superseded one: ``status_at``).
    """
    ended = ended or {}
    by_id = {m.id: m for m in members}
    out: dict[str, float] = {}
    for predicate in {(m.slot or "").rpartition("|")[2] for m in members}:
        line = sorted(
            (m for m in members if (m.slot or "").rpartition("|")[2] == predicate),
            key=lambda m: (m.created_at, m.id),
        )
        for memory in line:
            if memory.status not in statuses:
                continue
            ends = [m.created_at for m in line if m.created_at > memory.created_at]
            if memory.status in _REPLACED:
                successor = by_id.get(memory.superseded_by or "")
                stop = ended.get(memory.id, memory.status_at)
                ends.append(successor.created_at if successor is not None else stop)
            share = period.share(memory.created_at, min(ends, default=None))
            if share > 0:
                out[memory.id] = share
    return out


def superseded_at(events: Sequence[MemoryEvent]) -> datetime | None:
    """When an archived memory was superseded, from its history (oldest event first),
    if ``palace gc`` archived it for that (its last archiving event is ``archive`` with
    reason ``"superseded"``); ``None`` otherwise (expired, unused, deleted)."""
    archived = [i for i, e in enumerate(events) if e.new_status == "archived"]
    if not archived:
        return None
    last = events[archived[-1]]
    if last.event != "archive" or last.detail.get("reason") != "superseded":
        return None
    times = [
        e.at
        for e in events[: archived[-1]]
        if e.new_status == "superseded" and e.event != "restore"  # a restore ends nothing
    ]
    return times[-1] if times else None


def recall_scores(
    candidate: Candidate,
    relevance: float,
    now: datetime,
    config: MemoryConfig,
    *,
    worth: float | None = None,
) -> dict[str, float]:
    """The parts of a memory's recall score (see the module's documentation), with the
    relevance given; ``worth`` puts it on the drawers' scale (``None``: the merge of
    ``memory.scale = "recall"``)."""
    memory = candidate.memory
    if candidate.held > 0:
        relevance = 1.0  # it holds the asked slot: it answers, whatever its wording
    fresh = freshness(memory, now, config.half_life_days)
    hot = heat(memory, config.heat_cap)
    recall = (
        config.relevance_weight * relevance
        + config.importance_weight * memory.importance
        + config.freshness_weight * fresh
        + config.heat_weight * hot
    )
    scores = {
        "vector": candidate.cosine,
        "coverage": candidate.coverage,
        "match": candidate.match,
        "relevance": relevance,
        "importance": memory.importance,
        "freshness": fresh,
        "heat": hot,
        "recall": recall,
        "held": candidate.held,
        "memory": 1.0,
    }
    scaled = config.weight * recall
    if worth is not None:
        kept = config.relevance_weight + config.importance_weight
        settled = recall + config.relevance_weight * (1 - relevance) - config.heat_weight * hot
        standing = settled / kept if kept else 1.0
        scaled = config.weight * worth * relevance * standing
        scores["scale"] = worth
        scores["standing"] = standing
    scores["final"] = scaled + config.slot_weight * candidate.held
    return scores


def passes(
    memory: Memory, where: Filter, now: datetime, statuses: Collection[str] = ("active",)
) -> bool:
    """True when a memory (``active``, or of ``statuses``) may be recalled by a search
    with ``where``."""
    if memory.status not in statuses or memory.expired(now):
        return False
    if (memory.user_id or "") != where.owner:
        return False
    if where.kind is not None and memory.kind != where.kind:
        return False
    if where.wing is not None and memory.wing not in ("", where.wing):
        return False
    if where.room is not None and memory.room not in ("", where.room):
        return False
    ts = memory.created_at.timestamp()
    if where.since is not None and ts < where.since.timestamp():
        return False
    return not (where.until is not None and ts > where.until.timestamp())


class Recall:
    """Finds and scores a query's memories.

    Args:
        ledger: Where memories are read from.
        indexes: The vector indexes (the ``memories`` collection).
        config: The ``[memory]`` section.
        search: The ``[search]`` section (fusion weights, terms).
    """

    def __init__(
        self, *, ledger: Ledger, indexes: IndexSet, config: MemoryConfig, search: SearchConfig
    ) -> None:
        self._ledger = ledger
        self._indexes = indexes
        self._config = config
        self._search = search
        total = search.vector_weight + search.bm25_weight
        self._vector_weight = search.vector_weight / total
        self._term_weight = search.bm25_weight / total

    def terms(self, text: str) -> list[str]:
        """``text``'s terms as the search's BM25 sees them."""
        return terms(text, stop_words=self._search.stop_words, stemming=self._search.stemming)

    def match(self, cosine: float, query_terms: Collection[str], text: str) -> tuple[float, float]:
        """``(coverage, match)`` of a text with this cosine to the query."""
        covered = coverage(query_terms, self.terms(text))
        return covered, self._vector_weight * cosine + self._term_weight * covered

    def wanted(self, where: Filter) -> bool:
        """Whether a search with ``where`` looks at memories at all: memories are on, the
        ``kind`` filter is unset or a memory kind, and the owner has active memories."""
        if not self._config.search:
            return False
        if where.kind is not None and where.kind not in MEMORY_KINDS:
            return False
        return bool(self._ledger.list_memories(user_id=where.user_id, limit=1))

    def candidates(
        self,
        query: str,
        vector: npt.NDArray[np.float32],
        where: Filter,
        now: datetime,
        query_terms: Collection[str],
        *,
        k: int = 0,
    ) -> list[Candidate]:
        """The memories that may be recalled for ``query``, with how well they match
        (``max(k, memory.recall_candidates)`` by vector and as many by full text, and
        those holding the slot the query asks about; see the module's documentation)."""
        limit = max(k, self._config.recall_candidates)
        ask = asked(query, where, now)
        statuses = ("active",) if ask.period is None else HISTORY_STATUSES
        index_where = Filter(
            user_id=where.user_id, kind=where.kind, since=where.since, until=where.until
        )
        matches = self._indexes.query("memories", vector=vector, k=limit, where=index_where)
        cosines = {m.id: m.similarity for m in matches}
        wanted = [
            i
            for i, _ in self._ledger.lexical_memories(query, user_id=where.user_id, limit=limit)
            if i not in cosines
        ]
        if ask.period is not None:
            wanted += [
                i
                for i, _ in self._ledger.lexical_memories(
                    ask.rest or query, user_id=where.user_id, statuses=_REPLACED, limit=limit
                )
                if i not in cosines
            ]
        members = {
            m.id: m
            for slot in ask.slots
            for m in self._ledger.slot_memories(slot, user_id=where.user_id, statuses=statuses)
        }
        loaded = {m.id: m for m in self._ledger.get_memories([*cosines, *dict.fromkeys(wanted)])}
        loaded.update(members)
        ended: dict[str, datetime] = {}
        if ask.period is not None:
            ended = self.archived_ends(loaded.values(), ask.period, now)
            loaded = {i: m for i, m in loaded.items() if m.status != "archived" or i in ended}
            members = {i: m for i, m in members.items() if i in loaded}
        query_vector = np.asarray(vector, dtype=np.float32)
        missing = [i for i in loaded if i not in cosines]
        for memory_id, stored in self._ledger.memory_vectors(missing).items():
            cosines[memory_id] = float(stored @ query_vector)
        period = ask.period or point(now)
        for memory in loaded.values():
            if memory.slot and any(slots_match(memory.slot, s) for s in ask.slots):
                members.setdefault(memory.id, memory)
        held = held_slot(list(members.values()), period, statuses, ended)
        out = []
        for memory in loaded.values():
            share = held.get(memory.id, 0.0)
            if share > 0:
                ok = passes(memory, where, now, statuses)
            elif memory.status in _REPLACED:  # a past period's word match
                ok = (
                    ask.period is not None
                    and passes(memory, where, now, _REPLACED)
                    and ask.period.share(memory.created_at, ended.get(memory.id, memory.status_at))
                    > 0
                )
            else:
                ok = passes(memory, where, now)
            if not ok:
                continue
            cosine = cosines.get(memory.id, 0.0)
            covered, match = self.match(cosine, query_terms, memory.text)
            if share > 0 or match >= self._config.min_relevance:
                out.append(Candidate(memory, cosine, covered, match, share))
        return out

    def archived_ends(
        self, memories: Iterable[Memory], period: Period, now: datetime
    ) -> dict[str, datetime]:
        """For the archived ``memories`` that ``palace gc`` archived for having been
        superseded and that may have held during ``period``: when they were superseded
        (see the module's documentation). One history query for all of them, none if
        there is none."""
        ids = [
            memory.id
            for memory in memories
            if memory.status == "archived"
            and memory.superseded_by
            and not memory.expired(now)
            and memory.created_at < period.end
            and memory.status_at > period.start  # else archived (so superseded) before it
        ]
        if not ids:
            return {}
        out: dict[str, datetime] = {}
        histories = self._ledger.memory_histories(ids)
        for memory_id in ids:
            at = superseded_at(histories.get(memory_id, []))
            if at is not None:
                out[memory_id] = at
        return out

    def hits(
        self,
        candidates: Sequence[Candidate],
        *,
        drawers: Sequence[Hit],
        query_terms: Sequence[str],
        now: datetime,
    ) -> list[Hit]:
        """Memory hits, best first, scored beside ``drawers`` (the query's drawer hits,
        best first) on one scale (see the module's documentation)."""
        if self._config.scale == "recall":
            best = max(
                (self.match(h.scores.get("vector", 0.0), query_terms, h.text)[1] for h in drawers),
                default=0.0,
            )
            top = max([best, *(c.match for c in candidates)])
            relevances = [min(max(c.match / top, 0.0), 1.0) if top > 0 else 0.0 for c in candidates]
            worth: float | None = None
        else:
            shared = shared_scale(
                query_terms,
                drawers,
                [self.terms(h.text) for h in drawers],
                [(c.cosine, self.terms(c.memory.text)) for c in candidates],
                self._search,
            )
            relevances, worth = shared.relevance, shared.worth
        hits = []
        for candidate, relevance in zip(candidates, relevances, strict=True):
            scores = recall_scores(candidate, relevance, now, self._config, worth=worth)
            memory = candidate.memory
            hits.append(
                Hit(drawer=memory.as_drawer(), score=scores["final"], scores=scores, memory=memory)
            )
        hits.sort(key=lambda h: (-h.score, h.id))
        return newer_first(hits)

    def with_history(self, hits: Sequence[Hit]) -> list[Hit]:
        """``hits`` with the superseded predecessors of each memory hit after it."""
        out: list[Hit] = []
        for hit in hits:
            out.append(hit)
            if hit.memory is None:
                continue
            depth, frontier, seen = 0, [hit.memory.id], {hit.memory.id}
            while frontier:
                depth += 1
                before = self._ledger.predecessors(frontier)
                frontier = []
                for memories in before.values():
                    for m in sorted(memories, key=lambda m: (m.created_at, m.id), reverse=True):
                        if m.id in seen or m.user_id != hit.memory.user_id:
                            continue
                        seen.add(m.id)
                        frontier.append(m.id)
                        scores = {"history": float(depth), "superseded": 1.0, "final": hit.score}
                        out.append(
                            Hit(drawer=m.as_drawer(), score=hit.score, scores=scores, memory=m)
                        )
        return out


#: How far above an older memory of its subject a newer one is put (see :func:`newer_first`).
NEWER_BY = 1e-6


def newer_first(hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` with each memory hit filed as *related* to older ones (an unsure update or
    duplicate: both stay current) put just above the best of those that ranked above it:
    for one subject the newer value comes first, and nothing is hidden. Hits are taken
    oldest first (``created_at``), so a chain of related values ends newest first. A
    raised hit's score becomes that memory's plus :data:`NEWER_BY`, and
    ``scores["related"]`` is 1."""
    current = {h.id: h for h in hits}
    dated = sorted((h.memory.created_at, h.id) for h in hits if h.memory is not None)
    for filed, hit_id in dated:
        hit = current[hit_id]
        related = hit.memory.metadata.get("related") if hit.memory is not None else None
        if not isinstance(related, list) or not related:
            continue
        above = [
            current[i]
            for i in related
            if i in current
            and (older := current[i].memory) is not None
            and older.created_at < filed
            and current[i].score >= hit.score
        ]
        if not above:
            continue
        score = max(h.score for h in above) + NEWER_BY
        current[hit_id] = hit.rescored(score, related=1.0)
    return sorted(current.values(), key=lambda h: (-h.score, h.id))


def merge(drawer_hits: Sequence[Hit], memory_hits: Sequence[Hit], k: int) -> list[Hit]:
    """Drawer and memory hits in one list by score (ties: by id), cut to ``k``."""
    merged = sorted([*drawer_hits, *memory_hits], key=lambda h: (-h.score, h.id))
    return merged[:k]


def context_block(hits: Sequence[Hit], *, max_tokens: int) -> str:
    """The prompt block of ``hits`` (see the module's documentation); ``""`` when no
    line fits or there is none."""
    budget = max_tokens - tokens(CONTEXT_HEADER)
    lines = []
    for hit in hits:
        kind = hit.memory.kind if hit.memory is not None else hit.drawer.kind
        when = (
            hit.memory.created_at
            if hit.memory is not None
            else hit.drawer.content_date or hit.drawer.filed_at
        )
        day = when.date().isoformat()
        line = f"[{day}] ({kind}) " + " ".join(hit.text.split())
        cost = tokens(line)
        if cost <= budget:
            lines.append(line)
            budget -= cost
    if not lines:
        return ""
    return "\n".join([CONTEXT_HEADER, *lines])
