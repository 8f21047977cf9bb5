"""Memory decisions end to end, as a user meets them: an old memory, then ``remember(new)``.

Each labelled pair of a set (``benchmarks/data/memory_pairs_*.jsonl``: ``old``, ``new``,
``label`` in update / duplicate / new, ``lang``) gets a user of its own, who already has
``--others`` (200) unrelated memories in the palace: texts of other sets' pairs in the
pair's language, filed straight into the ledger with their vectors and slots (what a
long-lived user has; filing them through ``remember`` would only slow the run). Then, with
the real all-MiniLM-L6-v2 and the palace's default judge, the old memory is filed (straight
into the ledger, as the unrelated ones: the decision measured is the new memory's) a day
before ``remember(new)``, and:

- **gate recall**: of the update and duplicate pairs, the share whose old memory is among
  the candidates the judge reads for the new one (``Remembering.candidates``), measured
  just before ``remember(new)``;
- **update P / R**: the palace's update = the old memory ends ``superseded`` by the new
  one; **duplicate P / R**: ``remember(new)`` answered ``duplicate`` of the old memory;
- **related**: the new memory was filed linked to the old one as related (an unsure
  update or duplicate: both stay current, the newer first);
- **stale answer**: of the update pairs, the share where the top memory hit of
  ``palace.search(old, k=5)`` -- the old text itself as the question, the hardest case
  for the new value -- is the old memory;
- **hidden true memory**: of the ``new`` pairs, the share where the old memory ended
  superseded (a memory still true hidden);
- **dropped update**: of the update pairs, the share answered ``duplicate`` (the new value
  filed nowhere).

After each decider's table, **why stale**: the stale update pairs by what was decided
(``duplicate``: nothing filed; ``related``; ``new``, judged so or never judged against the
old memory, which the gate missed; an ``update`` leaves the old memory superseded, so
never stale) and where the new memory was among the memory hits of that
search (its rank, or ``not among the hits``), and, as the cost of putting a newer memory
first, **old displaced**: of the ``new`` pairs (two memories both true), the share where the
old memory stayed current and the new memory is the top memory hit of
``palace.search(old, k=5)``. ``--dump FILE``
writes one JSON line per pair (label, decision, the ranks of both memories among the
memory hits, the cosine of their stored vectors) for a closer look.

Each decider is a ``[memory]`` configuration; ``baseline`` is the palace before the
decision was reworked (cosine floor 0.5 and slot as the only gate; every judge's update
supersedes, every duplicate drops), run in the same process on the same pairs. Results
are printed per set, then per language; nothing is asserted.

Usage::

    .venv/bin/python benchmarks/remember.py --sets blind_team_ops blind_caregivers
    .venv/bin/python benchmarks/remember.py --sets heldout16 heldout17 --deciders shipped
    .venv/bin/python benchmarks/remember.py --speed --baseline-weights DIR  # p50 / p95
    .venv/bin/python benchmarks/remember.py --speed --deciders shipped --calls 60
    .venv/bin/python benchmarks/remember.py --speed --deciders shipped --skip-every \
        --against /tmp/base   # and a worktree of another commit, in turns
    .venv/bin/python benchmarks/remember.py --speed --deciders shipped --skip-every \
        --calls 20 --profile 40   # where a call's time goes (cProfile, the calling thread)
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from palace_plugins.builtin.embedders.sentence_transformers import SentenceTransformerEmbedder
from palace_retrievers import Palace
from palace_retrievers.memory.decide import Policy, Verdict, decide, settle
from palace_retrievers.memory.judges import JudgeContext, Opinion, Pair
from palace_retrievers.records.memories import Memory

DATA = Path(__file__).resolve().parent / "data"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

#: The gate and the policy as they were before the judge rework (issue 18).
BEFORE: dict[str, Any] = {
    "candidate_similarity": 0.5,
    "candidates": 10,
    "lexical_candidates": 0,
    "supersede_confidence": 0.0,
    "related_confidence": 1.0,
    "duplicate_doubt": 1.0,
}
#: ``[memory]`` settings per decider: ``shipped`` (the defaults and weights of this
#: checkout) and ``baseline`` (the gate and policy of before, with the judges' weights of
#: before from ``--baseline-weights``), run in one process on the same pairs.
DECIDERS: dict[str, dict[str, Any]] = {"shipped": {}, "baseline": BEFORE}
#: The learned judge's weight files, by name in a ``--baseline-weights`` folder.
WEIGHTS = {"pair_model_file": "pair_model.json", "pair_reader_file": "pair_reader.safetensors"}
#: Where the unrelated memories come from: sets nobody evaluates with this script.
OTHERS_FROM = ("train2", "train3", "train4", "train5", "train6", "train7", "train8")


LIMIT: int | None = None
"""``--limit``: the first pairs of each set only (a smoke run of the script itself)."""


def load(name: str) -> list[dict[str, str]]:
    path = DATA / f"memory_pairs_{name}.jsonl"
    with path.open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def evaluated(name: str) -> list[dict[str, str]]:
    """The pairs of set ``name`` that are run (all of them, unless ``--limit``)."""
    return load(name)[:LIMIT]


def unrelated_texts(avoid: set[str]) -> dict[str, list[str]]:
    """Texts of other sets' pairs by language, none of ``avoid``."""
    out: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for name in OTHERS_FROM:
        for pair in load(name):
            for text in (pair["old"], pair["new"]):
                if text not in seen and text not in avoid:
                    seen.add(text)
                    out[pair["lang"]].append(text)
    return out


@dataclass(frozen=True)
class Others:
    """The unrelated memories each pair's user starts with: ``count`` texts drawn from
    ``texts`` of the pair's language, filed with their ``vectors`` and ``slots``."""

    texts: dict[str, list[str]]
    count: int
    vectors: dict[str, np.ndarray]
    slots: dict[str, str | None]

    @classmethod
    def of(cls, model: SentenceTransformerEmbedder, avoid: set[str], count: int) -> Others:
        from palace_retrievers.memory.slots import slot_of

        texts = unrelated_texts(avoid)
        every = sorted({t for ts in texts.values() for t in ts})
        vectors = dict(zip(every, np.asarray(model.embed_documents(every)), strict=True))
        return cls(texts, count, vectors, {t: slot_of(t) for t in every})


def seat(
    palace: Palace, name: str, k: int, pair: dict[str, str], others: Others, rng: random.Random
) -> tuple[str, str]:
    """The user of pair ``k`` of set ``name``, with their unrelated memories and the
    pair's old memory filed a day before the new one (straight into the ledger with its
    vector and slot, as the unrelated ones: the decision measured is the new memory's);
    returns the user and the old memory's id."""
    user = f"{name}-{k}"
    pool = others.texts[pair["lang"]]
    file_others(palace, user, rng.sample(pool, min(others.count, len(pool))), others)
    old_id = f"old_{user}"
    vector = palace._embed([pair["old"]])[0]
    memory = Memory(
        id=old_id,
        text=pair["old"],
        user_id=user,
        slot=palace._remembering._slot_of(pair["old"]),
        created_at=START,
        updated_at=START,
        status_at=START,
    )
    palace.ledger.save_memories(
        [memory], vectors={old_id: vector}, model=palace.embedder.model_name
    )
    return user, old_id


def unseat(palace: Palace, user: str) -> None:
    """Delete every memory of ``user``, a pair's user done with: the ledger then holds
    about one user's memories at a time (the others' are never read: each pair's user is
    its own owner), and the exact index does not reread a growing table every pair."""
    done = palace.ledger.list_memories(user_id=user, statuses=None, limit=None)
    palace.ledger.delete_memories([m.id for m in done])


@dataclass
class Tally:
    """Counts for one (set, language) cell."""

    pairs: int = 0
    gate_asked: int = 0
    gate_hit: int = 0
    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    related: int = 0
    stale: int = 0
    updates: int = 0
    hidden: int = 0
    news: int = 0
    dropped: int = 0
    collateral: int = 0
    why_stale: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    displaced: int = 0

    def add(self, other: Tally) -> None:
        self.pairs += other.pairs
        self.gate_asked += other.gate_asked
        self.gate_hit += other.gate_hit
        for key, value in other.counts.items():
            self.counts[key] += value
        self.related += other.related
        self.stale += other.stale
        self.updates += other.updates
        self.hidden += other.hidden
        self.news += other.news
        self.dropped += other.dropped
        self.collateral += other.collateral
        for key, value in other.why_stale.items():
            self.why_stale[key] += value
        self.displaced += other.displaced

    def pr(self, label: str) -> str:
        true_positive = self.counts[(label, label)]
        predicted = sum(v for (_, said), v in self.counts.items() if said == label)
        actual = sum(v for (gold, _), v in self.counts.items() if gold == label)
        precision = true_positive / predicted if predicted else float("nan")
        recall = true_positive / actual if actual else float("nan")
        return f"{precision:.3f} / {recall:.3f}"

    def row(self, name: str) -> str:
        gate = self.gate_hit / self.gate_asked if self.gate_asked else float("nan")
        stale = self.stale / self.updates if self.updates else float("nan")
        hidden = self.hidden / self.news if self.news else float("nan")
        dropped = self.dropped / self.updates if self.updates else float("nan")
        collateral = self.collateral / self.pairs if self.pairs else float("nan")
        return (
            f"| {name} | {self.pairs} | {gate:.3f} | {self.pr('update')} | "
            f"{self.pr('duplicate')} | {self.related} | {stale:.3f} | {hidden:.3f} | "
            f"{dropped:.3f} | {collateral:.3f} |"
        )


def why_stale(tally: Tally) -> str:
    """The stale update pairs of ``tally`` by decision and the new memory's rank among the
    memory hits, and the old-displaced rate of its ``new`` pairs whose old memory stayed
    current (see the module's docstring)."""
    lines = ["| decided | new memory among the memory hits | stale pairs |", "|---|---|---|"]
    for (decided, rank), count in sorted(tally.why_stale.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {decided} | {rank} | {count} |")
    displaced = tally.displaced / tally.news if tally.news else float("nan")
    lines.append(f"\n{tally.stale} stale of {tally.updates} updates; old displaced {displaced:.3f}")
    return "\n".join(lines)


HEADER = (
    "| set | pairs | gate recall | update P / R | duplicate P / R | related | "
    "stale answer | hidden true | dropped update | unrelated superseded |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


@contextmanager
def palace_for(
    settings: dict[str, Any],
    model: SentenceTransformerEmbedder,
    weights: Path | None = None,
    structural: bool = True,
    listwise: bool | None = None,
    judge_options: dict[str, Any] | None = None,
) -> Iterator[Palace]:
    """A palace in a temporary folder with ``[memory]`` ``settings``, the learned judge
    reading its weights from the folder ``weights`` (``None``: the shipped ones), with or
    without its structural matcher, and with or without the list-wise model (``None``: as
    shipped, but never with a ``weights`` folder: the shipped list-wise model reads the
    shipped pair judges' probabilities), and any other ``judge_options`` of it."""
    learned: dict[str, Any] = {k: str(weights / v) for k, v in WEIGHTS.items()} if weights else {}
    if not structural:
        learned["structural"] = False
    if listwise is not None or weights:
        learned["listwise"] = bool(listwise)
    judges = {"learned": {**learned, **(judge_options or {})}}
    with tempfile.TemporaryDirectory(prefix="palace-remember-bench-") as folder:
        palace = Palace.open(
            Path(folder) / "p",
            backend="sqlite",
            embedder=model,
            config={"memory": settings, "memory_judges": judges},
        )
        try:
            yield palace
        finally:
            palace.close()


def file_others(palace: Palace, user: str, texts: Sequence[str], others: Others) -> None:
    """``texts`` as the user's memories, a minute apart before :data:`START`."""
    memories = []
    for k, text in enumerate(texts):
        at = START - timedelta(days=30, minutes=k)
        memories.append(
            Memory(
                id=f"other_{user}_{k}",
                text=text,
                user_id=user,
                slot=others.slots[text],
                created_at=at,
                updated_at=at,
                status_at=at,
            )
        )
    palace.ledger.save_memories(
        memories,
        vectors={m.id: others.vectors[m.text] for m in memories},
        model=palace.embedder.model_name,
    )


def run_set(
    palace: Palace,
    name: str,
    pairs: Sequence[dict[str, str]],
    others: Others,
    seed: int,
    dump: list[dict[str, Any]] | None = None,
) -> dict[str, Tally]:
    rng = random.Random(seed)
    tallies: dict[str, Tally] = defaultdict(Tally)
    for k, pair in enumerate(pairs):
        gold, lang = pair["label"], pair["lang"]
        tally = tallies[lang]
        tally.pairs += 1
        user, old_id = seat(palace, name, k, pair, others, rng)
        judged = True
        if gold in ("update", "duplicate"):
            tally.gate_asked += 1
            seen = palace._remembering.candidates(pair["new"], user_id=user)
            judged = any(m.id == old_id for m in seen)
            tally.gate_hit += judged
        answer = palace.remember(pair["new"], user_id=user, now=START + timedelta(days=1))
        after = palace.ledger.get_memories([old_id])[0]
        if answer.action == "duplicate" and answer.memory.id == old_id:
            said = "duplicate"
        elif after.status == "superseded" and after.superseded_by == answer.memory.id:
            said = "update"
        else:
            said = "new"
        tally.counts[(gold, said)] += 1
        tally.collateral += any(m.id != old_id for m in answer.superseded)
        related = answer.memory.metadata.get("related") or []
        tally.related += old_id in related
        decided = (
            "duplicate"
            if answer.action == "duplicate"
            else "update"
            if said == "update"
            else "related"
            if old_id in related
            else "new"
            if judged
            else "new, the old memory not among the judge's candidates"
        )
        hits, rank = [], "nothing filed"
        if gold in ("update", "new"):
            hits = [h.id for h in palace.search(pair["old"], k=5, user_id=user) if h.is_memory]
            new_id = answer.memory.id
            if new_id != old_id:
                rank = f"rank {hits.index(new_id) + 1}" if new_id in hits else "not among the hits"
        stale = bool(hits) and hits[0] == old_id
        if gold == "update":
            tally.updates += 1
            tally.dropped += answer.action == "duplicate"
            tally.stale += stale
            if stale:
                tally.why_stale[(decided, rank)] += 1
        if gold == "new":
            tally.news += 1
            tally.hidden += after.status == "superseded"
            kept = after.status == "active" and answer.memory.id != old_id
            tally.displaced += kept and bool(hits) and hits[0] == answer.memory.id
        if dump is not None:
            stored = palace.ledger.memory_vectors([old_id, answer.memory.id])
            cosine = (
                float(stored[old_id] @ stored[answer.memory.id])
                if answer.memory.id in stored and old_id in stored
                else None
            )
            dump.append(
                {
                    "set": name,
                    "k": k,
                    "label": gold,
                    "lang": lang,
                    "decided": decided,
                    "old_rank": hits.index(old_id) + 1 if old_id in hits else None,
                    "new_rank": rank,
                    "cosine": cosine,
                    "old": pair["old"],
                    "new": pair["new"],
                }
            )
        unseat(palace, user)
    return tallies


def run(
    sets: Sequence[str],
    deciders: Sequence[str],
    count: int,
    seed: int,
    baseline_weights: Path | None,
    dump: Path | None = None,
) -> None:
    model = SentenceTransformerEmbedder(options={"batch_size": 128})
    data = {name: evaluated(name) for name in sets}
    avoid = {t for pairs in data.values() for p in pairs for t in (p["old"], p["new"])}
    others = Others.of(model, avoid, count)
    rows: list[dict[str, Any]] | None = [] if dump is not None else None
    for decider in deciders:
        print(f"\n## {decider}: {DECIDERS[decider] or 'the shipped [memory] defaults'}\n")
        print(HEADER)
        by_lang: dict[str, Tally] = defaultdict(Tally)
        pooled = Tally()
        started = time.monotonic()
        weights = baseline_weights if decider == "baseline" else None
        with palace_for(DECIDERS[decider], model, weights) as palace:
            for name in sets:
                tallies = run_set(palace, name, data[name], others, seed, rows)
                whole = Tally()
                for lang, tally in sorted(tallies.items()):
                    print(tally.row(f"{name} ({lang})"))
                    whole.add(tally)
                    by_lang[lang].add(tally)
                print(whole.row(f"**{name}**"))
                pooled.add(whole)
        for lang, tally in sorted(by_lang.items()):
            print(tally.row(f"all sets ({lang})"))
        print(pooled.row("**all sets**"))
        print(f"\nWhy stale ({decider}, all sets):\n\n{why_stale(pooled)}")
        print(f"\n({time.monotonic() - started:.0f} s)")
    if dump is not None and rows is not None:
        with dump.open("w", encoding="utf-8") as stream:
            stream.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


@dataclass(frozen=True)
class Judged:
    """One labelled pair as the judge saw it: the candidates for its new text (nearest
    first), which of them is its old memory, and the judge's opinion of each."""

    gold: str
    lang: str
    is_old: tuple[bool, ...]
    same_text: tuple[bool, ...]
    opinions: tuple[Opinion, ...]


def judged_pairs(
    palace: Palace,
    name: str,
    pairs: Sequence[dict[str, str]],
    others: Others,
    seed: int,
) -> list[Judged]:
    """Each pair's candidates and the palace judge's opinions of them, as
    ``remember(new)`` would see them with the old memory among the unrelated ones."""
    rng = random.Random(seed)
    _, judge = palace.memory_judge()
    context = JudgeContext(embed=palace._embed, model=palace.embedder.model_name)
    out = []
    for k, pair in enumerate(pairs):
        user, old_id = seat(palace, name, k, pair, others, rng)
        new_vector = palace._embed([pair["new"]])[0]
        gathered = palace._remembering.gathered(pair["new"], user_id=user, vector=new_vector)
        found = [c.memory for c in gathered]
        stored = palace.ledger.memory_vectors([m.id for m in found])
        asked = [  # with the full-text ranks the palace hands the judge (its shortlist)
            Pair(
                c.memory.text,
                pair["new"],
                float(stored[c.memory.id] @ new_vector) if c.memory.id in stored else 0.0,
                c.lexical_rank,
            )
            for c in gathered
        ]
        opinions = judge.judge(asked, context) if asked else []
        out.append(
            Judged(
                gold=pair["label"],
                lang=pair["lang"],
                is_old=tuple(m.id == old_id for m in found),
                same_text=tuple(m.text == pair["new"] for m in found),
                opinions=tuple(opinions),
            )
        )
        unseat(palace, user)
    return out


def simulated(row: Judged, policy: Policy) -> tuple[str, bool, bool, bool]:
    """What ``remember(new)`` does under ``policy``: the label it gives the pair (update,
    duplicate of the old memory, or new), whether the new text was dropped as a repeat of
    another memory, whether it was linked to the old one as related, and whether it
    superseded one of the user's unrelated memories."""
    verdicts = [
        Verdict("duplicate", 1.0, (), "j") if same else decide(opinion, policy, "j")
        for same, opinion in zip(row.same_text, row.opinions, strict=True)
    ]
    kinds = [v.kind for v in settle(verdicts, policy)]
    if "duplicate" in kinds:
        first = kinds.index("duplicate")
        return (
            ("duplicate", False, False, False) if row.is_old[first] else ("new", True, False, False)
        )
    collateral = any(k == "update" and not o for k, o in zip(kinds, row.is_old, strict=True))
    old = row.is_old.index(True) if True in row.is_old else None
    if old is None:
        return "new", False, False, collateral
    said = "update" if kinds[old] == "update" else "new"
    return said, False, kinds[old] == "related", collateral


#: The candidate gate of issue 18: every vector neighbour counts, full text brings more.
NOW_GATE: dict[str, Any] = {"candidate_similarity": 0.0, "candidates": 8, "lexical_candidates": 4}
MARGINS: tuple[float | None, ...] = (None, 0.0, 0.1, 0.2)
GRID = {
    "supersede_confidence": (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    "duplicate_doubt": (0.2, 0.3, 0.4, 0.5, 1.0),
    "related_confidence": (0.3, 0.4, 0.5, 0.6, 1.0),
}


def policies() -> list[Policy]:
    """Every setting of the policy grid (:data:`MARGINS` × :data:`GRID`)."""
    return [
        Policy(s, d, r, m)
        for m in MARGINS
        for s in GRID["supersede_confidence"]
        for d in GRID["duplicate_doubt"]
        for r in GRID["related_confidence"]
    ]


def grid(sets: Sequence[str], count: int, seed: int, baseline_weights: Path | None) -> None:
    """The policy grid on ``sets`` pooled, for the shipped weights and the gate of
    before and of now (and the baseline weights, if given)."""
    model = SentenceTransformerEmbedder(options={"batch_size": 128})
    data = {name: evaluated(name) for name in sets}
    avoid = {t for pairs in data.values() for p in pairs for t in (p["old"], p["new"])}
    others = Others.of(model, avoid, count)
    keys = ("candidate_similarity", "candidates", "lexical_candidates")
    before_gate = {k: BEFORE[k] for k in keys}
    configs: list[tuple[str, dict[str, Any], Path | None, bool]] = [
        ("shipped weights, gate of now, structural matcher", NOW_GATE, None, True),
        ("shipped weights, gate of now, no structural matcher", NOW_GATE, None, False),
    ]
    if baseline_weights is not None:
        configs += [("weights of before, gate of before", before_gate, baseline_weights, True)]
    for title, gate, wpath, structural in configs:
        rows: list[Judged] = []
        with palace_for(gate, model, wpath, structural) as palace:
            for name in sets:
                rows += judged_pairs(palace, name, data[name], others, seed)
        gate_hits = [any(r.is_old) for r in rows if r.gold in ("update", "duplicate")]
        print(
            f"\n## {title}: gate recall {sum(gate_hits) / len(gate_hits):.3f} "
            f"({len(rows)} pairs)\n\n| margin | supersede | doubt | related | update P / R | "
            "duplicate P / R | hidden true | dropped update | related | unrelated superseded |\n"
            "|---|---|---|---|---|---|---|---|---|---|"
        )
        results = [(policy, policy_tally(rows, policy)) for policy in policies()]
        before = Policy(0.0, 1.0, 1.0, None)
        chosen = choose(results)
        qualifying = [r for r in results if qualifies(r[1])]
        for policy, tally in [r for r in results if r[0] == before] + [chosen]:
            print(grid_row(policy, tally))
        print(
            f"\n({len(qualifying)} of {len(results)} settings qualify; the first row is the "
            "policy of before, the second the one the rule chooses)"
        )


def policy_tally(rows: Sequence[Judged], policy: Policy) -> Tally:
    """The tally of ``rows`` decided under ``policy``."""
    tally = Tally()
    for row in rows:
        said, dropped, related, collateral = simulated(row, policy)
        tally.collateral += collateral
        tally.counts[(row.gold, said)] += 1
        tally.pairs += 1
        tally.related += related
        if row.gold == "update":
            tally.updates += 1
            tally.dropped += dropped or said == "duplicate"
        if row.gold == "new":
            tally.news += 1
            tally.hidden += said == "update"
    return tally


def rates(tally: Tally) -> tuple[float, float, float, float, float]:
    """Update precision and recall, duplicate F1, hidden true, dropped update."""

    def pr(label: str) -> tuple[float, float]:
        tp = tally.counts[(label, label)]
        said = sum(v for (_, got), v in tally.counts.items() if got == label)
        gold = sum(v for (want, _), v in tally.counts.items() if want == label)
        return (tp / said if said else 0.0), (tp / gold if gold else 0.0)

    up, ur = pr("update")
    dp, dr = pr("duplicate")
    f1 = 2 * dp * dr / (dp + dr) if dp + dr else 0.0
    return up, ur, f1, tally.hidden / max(tally.news, 1), tally.dropped / max(tally.updates, 1)


def qualifies(tally: Tally) -> bool:
    """The rule's bar: hidden true <= 0.01, dropped update <= 0.005, update P >= 0.95,
    unrelated superseded <= 0.01."""
    up, _, _, hidden, dropped = rates(tally)
    collateral = tally.collateral / max(tally.pairs, 1)
    return hidden <= 0.01 and dropped <= 0.005 and up >= 0.95 and collateral <= 0.01


def choose(results: Sequence[tuple[Policy, Tally]]) -> tuple[Policy, Tally]:
    """The setting the rule written in benchmarks/README.md chooses."""
    qualifying = [r for r in results if qualifies(r[1])]
    if qualifying:
        return max(
            qualifying,
            key=lambda r: (rates(r[1])[1], rates(r[1])[2], r[0].supersede_confidence),
        )
    return min(
        results,
        key=lambda r: (
            rates(r[1])[3] + rates(r[1])[4] + r[1].collateral / max(r[1].pairs, 1),
            -rates(r[1])[1],
        ),
    )


def grid_row(policy: Policy, tally: Tally) -> str:
    _, _, _, hidden, dropped = rates(tally)
    return (
        f"| {policy.supersede_margin} | {policy.supersede_confidence} | {policy.duplicate_doubt} | "
        f"{policy.related_confidence} | {tally.pr('update')} | {tally.pr('duplicate')} | "
        f"{hidden:.3f} | {dropped:.3f} | {tally.related} | "
        f"{tally.collateral / max(tally.pairs, 1):.3f} |"
    )


def speed_texts(memories: int, asks: int, seed: int) -> tuple[list[str], list[str]]:
    """The user's ``memories`` texts and the ``asks`` texts remembered, drawn by ``seed``."""
    texts = [t for ts in unrelated_texts(set()).values() for t in ts]
    random.Random(seed).shuffle(texts)
    return texts[:memories], texts[memories : memories + asks]


def speed_others(model: SentenceTransformerEmbedder, kept: Sequence[str]) -> Others:
    """The memories ``kept`` with their vectors and slots, to file for user ``speed``."""
    from palace_retrievers.memory.slots import slot_of

    vectors = dict(zip(kept, np.asarray(model.embed_documents(kept)), strict=True))
    return Others({}, len(kept), vectors, {t: slot_of(t) for t in kept})


def speed_palace(
    stack: ExitStack, model: SentenceTransformerEmbedder, others: Others, **options: Any
) -> Palace:
    """A palace (``palace_for(**options)``, entered on ``stack``) whose user ``speed``
    has the memories of ``others``, filed straight into the ledger with their vectors."""
    palace = stack.enter_context(palace_for(model=model, **options))
    file_others(palace, "speed", list(others.vectors), others)
    return palace


class Checkout:
    """The shipped palace of another checkout (its ``palace_retrievers`` and
    ``palace_plugins`` first on ``PYTHONPATH``), in a process of its own that remembers a
    text when told (:func:`speed_worker`) and answers how long it took."""

    def __init__(self, folder: Path, memories: int, asks: int, seed: int) -> None:
        import os
        import subprocess

        env = {**os.environ, "PYTHONPATH": str(folder.resolve())}
        command = [sys.executable, __file__, "--speed-worker", "--deciders", "shipped"]
        command += ["--calls", str(asks)]
        command += ["--seed", str(seed), "--memories", str(memories)]
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.where = self._answer()  # the worker's palace_retrievers, once it is seated

    def remember(self, text: str) -> tuple[float, float]:
        """Remember ``text`` there; the milliseconds ``remember`` took, and the
        milliseconds of CPU its process spent meanwhile (on all its threads)."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(text) + "\n")
        self.process.stdin.flush()
        wall, cpu = self._answer().split()
        return float(wall), float(cpu)

    def _answer(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the speed worker stopped ({self.process.wait()})")
        return line.strip()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def speed_worker(memories: int, asks: int, seed: int) -> None:
    """The other end of :class:`Checkout`: seat the user, say which ``palace_retrievers``
    this is, then remember each JSON text read from stdin and print its milliseconds."""
    import palace_retrievers

    model = SentenceTransformerEmbedder(options={"batch_size": 128})
    kept, _ = speed_texts(memories, asks, seed)
    with ExitStack() as stack:
        palace = speed_palace(stack, model, speed_others(model, kept), settings={})
        print(Path(palace_retrievers.__file__).parent.parent, flush=True)
        for line in sys.stdin:
            started, cpu = time.perf_counter(), time.process_time()
            palace.remember(json.loads(line), user_id="speed")
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(wall * 1000, cpu * 1000, flush=True)


def speed(
    memories: int,
    asks: int,
    seed: int,
    deciders: Sequence[str],
    baseline_weights: Path | None,
    *,
    every: bool = True,
    against: Sequence[Path] = (),
    profile: int = 0,
) -> None:
    """``remember`` p50 / p95 for a user who has ``memories`` memories already, for each
    decider, for ``shipped`` as it was before the shortlist (every candidate read, the
    pair reader on PyTorch; unless not ``every``) and for the shipped palace of each
    checkout folder in ``against`` (in a process of its own): the same texts, each text
    remembered by every palace in turn, so that all meet the same load on a shared
    machine. Beside the wall times, the CPU time its process spent on a call (all its
    threads: less swayed by the load, blind to what threads overlap); the load average
    is printed before and after. With ``profile``, the ``shipped`` palace's calls are
    profiled (:mod:`cProfile`) and the ``profile`` entries of most cumulative time
    printed: where a call's time goes."""
    import os

    from palace_retrievers.memory.learned import pair_reader

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    model = SentenceTransformerEmbedder(options={"batch_size": 128})
    kept, asked = speed_texts(memories, asks, seed)
    shipped_reader = pair_reader.reader
    torch_reader = pair_reader.Reader(pair_reader.READER_FILE, onnx=False)
    runs: dict[str, tuple[dict[str, Any], bool]] = {
        decider: ({"settings": DECIDERS[decider], "weights": weights}, False)
        for decider in deciders
        for weights in [baseline_weights if decider == "baseline" else None]
    }
    if "shipped" in deciders and every:
        every_run = {"settings": {}, "judge_options": {"shortlist": 0}}
        runs["shipped, every candidate read, reader on PyTorch"] = (every_run, True)
    times: dict[str, list[float]] = {name: [] for name in runs}
    profiled = cProfile.Profile()
    with ExitStack() as stack:
        others = speed_others(model, kept)
        palaces = {
            name: speed_palace(stack, model, others, **run) for name, (run, _) in runs.items()
        }
        checkouts: dict[str, Checkout] = {}
        for folder in against:
            checkout = Checkout(folder, memories, asks, seed)
            stack.callback(checkout.close)
            checkouts[f"shipped, the checkout in {folder} ({checkout.where})"] = checkout
        times.update({name: [] for name in checkouts})
        cpus: dict[str, list[float]] = {name: [] for name in times}
        try:
            for k, text in enumerate(["warm up the judges", *asked]):
                for name, palace in palaces.items():
                    on_torch = runs[name][1]
                    reader = (
                        (lambda path=pair_reader.READER_FILE: torch_reader)
                        if on_torch
                        else shipped_reader
                    )
                    pair_reader.reader = reader  # type: ignore[assignment]
                    started, cpu = time.perf_counter(), time.process_time()
                    with profiled if k and profile and name == "shipped" else nullcontext():
                        palace.remember(text, user_id="speed")
                    if k:
                        times[name].append((time.perf_counter() - started) * 1000)
                        cpus[name].append((time.process_time() - cpu) * 1000)
                for name, checkout in checkouts.items():
                    wall, spent = checkout.remember(text)
                    if k:
                        times[name].append(wall)
                        cpus[name].append(spent)
        finally:
            pair_reader.reader = shipped_reader
    for name, took in times.items():
        took.sort()
        p95 = took[int(0.95 * (len(took) - 1))]
        print(
            f"{name}: remember with {memories} memories of the user, {len(took)} calls: "
            f"p50 {statistics.median(took):.1f} ms, p95 {p95:.1f} ms "
            f"(CPU of its process, all threads: median {statistics.median(cpus[name]):.1f} ms)",
            flush=True,
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if profile:
        pstats.Stats(profiled).sort_stats("cumulative").print_stats(profile)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=[], help="set names, e.g. heldout16")
    parser.add_argument("--deciders", nargs="+", default=list(DECIDERS), choices=list(DECIDERS))
    parser.add_argument("--others", type=int, default=200, help="unrelated memories per user")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="the first N pairs of each set (a smoke run)")
    parser.add_argument("--speed", action="store_true", help="remember p50 / p95 instead")
    parser.add_argument("--dump", type=Path, help="a JSON line per pair to this file (see above)")
    parser.add_argument("--calls", type=int, default=200, help="remember calls timed (--speed)")
    parser.add_argument(
        "--against",
        nargs="+",
        type=Path,
        default=[],
        help="--speed: also time the shipped palace of these checkouts (e.g. a git "
        "worktree of an older commit), each in a process of its own, in turns",
    )
    parser.add_argument(
        "--skip-every",
        action="store_true",
        help="--speed: leave out the judge as it was before the shortlist (slow)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="--speed: profile the shipped palace's calls, print the N entries of most "
        "cumulative time",
    )
    parser.add_argument("--memories", type=int, default=1000, help=argparse.SUPPRESS)
    parser.add_argument("--speed-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--baseline-weights",
        type=Path,
        help="a folder with the judges' weights of before (pair_model.json, "
        "pair_reader.safetensors) for the baseline decider",
    )
    parser.add_argument(
        "--grid", action="store_true", help="the policy grid on the sets (choosing it)"
    )
    args = parser.parse_args(argv)
    global LIMIT
    LIMIT = args.limit
    if "baseline" in args.deciders and args.baseline_weights is None and not args.grid:
        parser.error("the baseline decider needs --baseline-weights")
    if args.speed_worker:
        speed_worker(args.memories, args.calls, args.seed)
        return 0
    if args.speed:
        speed(
            args.memories,
            args.calls,
            args.seed,
            args.deciders,
            args.baseline_weights,
            every=not args.skip_every,
            against=args.against,
            profile=args.profile,
        )
        return 0
    if not args.sets:
        parser.error("give --sets, or --speed")
    if args.grid:
        grid(args.sets, args.others, args.seed, args.baseline_weights)
        return 0
    run(args.sets, args.deciders, args.others, args.seed, args.baseline_weights, args.dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
