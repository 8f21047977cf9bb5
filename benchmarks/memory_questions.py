"""Memories and drawers on one scale: does a search put the item that answers first?

Each line of a ``memory_questions_<writer>.jsonl`` file in ``benchmarks/data`` is one
scenario, written by people who never saw the code: one person's (or team's) store of
*memories* (short standalone facts, each with the date it was saved; a fact that changed
holds only its current value) and *documents* (notes, chat excerpts, minutes, emails,
2-8 sentences each, with a date and a ``source``), and questions labelled with the ONE
item that answers them, about 60 % a memory and 40 % a document. Distractors are there on
purpose both ways: documents that share a memory-answered question's words without
answering it (often holding the fact's old value), memories that share a
document-answered question's words.

For each scenario one palace (in a temporary folder, the real all-MiniLM-L6-v2, the
``palace.toml`` defaults): the memories through the public remember path, one user,
oldest first, each with its date (``Palace.remember(text, user_id=…, now=date)``); the
documents as drawers through the public add path
(``Palace.add_texts(texts, metadatas=[{"source": …, "content_date": …}], user_id=…)``).
Each question is asked once through the one search pipeline, as a user gets it:
``Palace.search(q, k=10, user_id=…)``, drawers and memories merged in one list. The
answer's rank in that list gives hit@1, hit@3 and MRR (0 when it is not in the ten),
per writer and by the answer's kind (memory / document).

Four systems in the same run, each asking its own copy of the same filled palaces (a
search warms the memories it returns): **palace** (the defaults: memories scored on the
drawers' scale, see :mod:`palace_retrievers.memory.scale`, an extracted one beside its
sources), **coverage** (``memory.scale = "coverage"``: also a memory that covers fewer of
the query's terms than the top drawer below it), **relevance alone**
(``memory.scale = "relevance"``: that scale without either limit) and
**recall merge** (``memory.scale = "recall"``: a memory's recall score merged beside the
drawers' fused scores, the merge before). A memory answer that ``remember`` did not keep current
(taken for a duplicate or an update of another memory) counts as a miss and is counted.

**Mined memories** (``--sample-corpus``): the sample corpus (``examples/sample-corpus``)
mined once with the defaults, so the rules extractor files the memories it reads from
the files (fragments among them), and each query of ``examples/QUERIES.md``'s table asked
once (``Palace.search(q, k=10, wing="larkspur")``), labelled with its best answer file: the
rank of the first hit from that file (a memory counts as the file it was read from), per
system, with ``drawers only`` (``memories=False``) beside the two, and how many queries have
an extracted memory first.

Usage::

    .venv/bin/python benchmarks/memory_questions.py                  # every writer's file
    .venv/bin/python benchmarks/memory_questions.py --writer eng --misses
    .venv/bin/python benchmarks/memory_questions.py --set memory.prior=0.1
    .venv/bin/python benchmarks/memory_questions.py --sample-corpus --misses
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from palace_retrievers import Hit, Palace

DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: A row of ``examples/QUERIES.md``'s table: number, query, best answer (its first path).
QUERY_ROW = re.compile(r"^\| *\d+ *\| *(?P<query>[^|]+?) *\| *`(?P<path>[^`]+)`")
PREFIX = "memory_questions_"
USER = "owner"
K = 10
KINDS = ("memory", "document")

#: The systems compared in one run: name → ``palace.toml`` overrides.
SYSTEMS: dict[str, dict[str, Any]] = {
    "palace": {},
    "coverage": {"memory": {"scale": "coverage"}},
    "relevance alone": {"memory": {"scale": "relevance"}},
    "recall merge": {"memory": {"scale": "recall"}},
}


@dataclass
class Tally:
    """Ranks of the answers of one writer's questions of one kind (0: not in the list)."""

    ranks: list[int] = field(default_factory=list)

    def hit(self, at: int) -> float:
        return sum(1 for r in self.ranks if 0 < r <= at) / len(self.ranks) if self.ranks else 0.0

    def mrr(self) -> float:
        return sum(1 / r for r in self.ranks if r > 0) / len(self.ranks) if self.ranks else 0.0


def writers(names: Sequence[str]) -> dict[str, Path]:
    """Writer name → its file (every ``memory_questions_*.jsonl`` when ``names`` is empty)."""
    found = {p.stem[len(PREFIX) :]: p for p in sorted(DATA.glob(f"{PREFIX}*.jsonl"))}
    if not names:
        return found
    missing = [n for n in names if n not in found]
    if missing:
        sys.exit(f"no {PREFIX}<writer>.jsonl for {', '.join(missing)} in {DATA}")
    return {n: found[n] for n in names}


def scenarios(path: Path) -> list[dict[str, Any]]:
    """The scenarios of one file, each answer checked to name an item of its scenario."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        scenario = json.loads(line)
        items = {m["id"] for m in scenario["memories"]} | {d["id"] for d in scenario["documents"]}
        for question in scenario["questions"]:
            if question["answer"] not in items:
                sys.exit(f"{path.name}: {scenario['scenario']}: no item {question['answer']}")
        out.append(scenario)
    return out


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fill(palace: Palace, scenario: Mapping[str, Any]) -> tuple[dict[str, str], int]:
    """File a scenario's memories and documents; returns (item id → the id a hit carries,
    memories that ``remember`` did not keep current)."""
    ids: dict[str, str] = {}
    memories = sorted(scenario["memories"], key=lambda m: (m["date"], m["id"]))
    for memory in memories:
        done = palace.remember(memory["text"], user_id=USER, now=day(memory["date"]))
        ids[memory["id"]] = done.memory.id
    current = {m.id for m in palace.memories(user_id=USER, limit=10_000)}
    lost = sum(1 for m in memories if ids[m["id"]] not in current)
    documents = scenario["documents"]
    filed = palace.add_texts(
        [d["text"] for d in documents],
        metadatas=[{"source": d["source"], "content_date": d["date"]} for d in documents],
        user_id=USER,
    )
    ids.update((d["id"], drawer_id) for d, drawer_id in zip(documents, filed, strict=True))
    return ids, lost


def rank_of(palace: Palace, question: str, answer: str) -> tuple[int, list[str]]:
    """The answer's rank (from 1; 0 when absent) in the search's list, and that list."""
    hits = palace.search(question, k=K, user_id=USER)
    listed = [h.id for h in hits]
    return (listed.index(answer) + 1 if answer in listed else 0), listed


def run(
    files: Mapping[str, Path], extra: Mapping[str, Any], misses: bool
) -> dict[tuple[str, str, str], Tally]:
    """Ask every question of every writer under every system; (system, writer, kind) →
    tally (kind ``"all"`` too)."""
    tallies: dict[tuple[str, str, str], Tally] = {}
    for writer, path in files.items():
        lost_answers = 0
        for scenario in scenarios(path):
            kinds = {m["id"]: "memory" for m in scenario["memories"]}
            kinds.update((d["id"], "document") for d in scenario["documents"])
            texts = {m["id"]: m["text"] for m in scenario["memories"]}
            texts.update((d["id"], d["text"]) for d in scenario["documents"])
            with tempfile.TemporaryDirectory(prefix="palace-mq-") as folder:
                filled = Path(folder) / "filled"
                with Palace.open(filled, config=dict(extra)) as palace:
                    ids, _ = fill(palace, scenario)
                    current = {m.id for m in palace.memories(user_id=USER, limit=10_000)}
                    back = {v: k for k, v in ids.items()}
                for n, (system, overrides) in enumerate(SYSTEMS.items()):
                    # Each system asks a copy of the filled palace: a search counts the
                    # memories it returns as recalled (their heat), so one system's
                    # questions must not warm the memories another one ranks.
                    where = Path(folder) / f"system{n}"
                    shutil.copytree(filled, where)
                    config = merged(extra, overrides)
                    with Palace.open(where, config=config) as palace:
                        for question in scenario["questions"]:
                            answer = question["answer"]
                            kind = kinds[answer]
                            if system == "palace" and kind == "memory":
                                lost_answers += ids[answer] not in current
                            rank, listed = rank_of(palace, question["q"], ids[answer])
                            for key in (kind, "all"):
                                tallies.setdefault((system, writer, key), Tally()).ranks.append(
                                    rank
                                )
                            if misses and rank != 1:
                                top = back.get(listed[0], "?") if listed else "-"
                                print(
                                    f"  [{system}] {scenario['scenario']} {question['q']!r} -> "
                                    f"{answer} ({kind}) at {rank or '-'}; first {top}: "
                                    f"{texts.get(top, '')[:90]!r}"
                                )
        print(f"{writer}: memory answers remember did not keep current: {lost_answers}")
    return tallies


def merged(base: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """``palace.toml`` overrides ``base`` and ``more``, tables merged one level deep."""
    out: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    for key, value in more.items():
        if isinstance(value, dict):
            out[key] = {**out.get(key, {}), **value}
        else:
            out[key] = value
    return out


def overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``section.key=value`` pairs (values read as JSON when they parse) as a palace.toml
    mapping."""
    out: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        section, _, name = key.partition(".")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(section, {})[name] = value
    return out


def report(tallies: Mapping[tuple[str, str, str], Tally], files: Mapping[str, Path]) -> None:
    print()
    print("| writer | answer | n | system | hit@1 | hit@3 | MRR |")
    print("|---|---|---|---|---|---|---|")
    for writer in files:
        for kind in (*KINDS, "all"):
            for system in SYSTEMS:
                tally = tallies.get((system, writer, kind))
                if tally is None:
                    continue
                print(
                    f"| {writer} | {kind} | {len(tally.ranks)} | {system} | "
                    f"{tally.hit(1):.3f} | {tally.hit(3):.3f} | {tally.mrr():.3f} |"
                )


def sample_queries(path: Path) -> list[tuple[str, str]]:
    """(query, best answer file) of each row of ``QUERIES.md``'s table."""
    rows = [QUERY_ROW.match(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(m["query"], m["path"]) for m in rows if m is not None]


def sample_corpus(extra: Mapping[str, Any], misses: bool) -> None:
    """The mined sample corpus's queries under each system, and ``drawers only`` (see the
    module's documentation)."""
    queries = sample_queries(EXAMPLES / "QUERIES.md")
    systems: dict[str, tuple[dict[str, Any], bool]] = {
        name: (merged(extra, more), True) for name, more in SYSTEMS.items()
    }
    systems["drawers only"] = (dict(extra), False)
    print("| system | n | hit@1 | hit@3 | MRR | an extracted memory first |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="palace-mq-") as folder:
        filled = Path(folder) / "filled"
        with Palace.open(filled, config=dict(extra)) as palace:
            palace.mine(EXAMPLES / "sample-corpus", wing="larkspur", progress=False)
        for n, (system, (config, memories)) in enumerate(systems.items()):
            where = Path(folder) / f"system{n}"
            shutil.copytree(filled, where)
            tally, first = Tally(), 0
            with Palace.open(where, config=config) as palace:
                for query, path in queries:
                    hits = palace.search(query, k=K, wing="larkspur", memories=memories)
                    files = [file_of(palace, hit) for hit in hits]
                    rank = next((i + 1 for i, f in enumerate(files) if f.endswith(path)), 0)
                    tally.ranks.append(rank)
                    top = hits[0] if hits else None
                    first += top is not None and extracted(top)
                    if misses and rank != 1 and top is not None:
                        kind = "memory" if top.memory is not None else "drawer"
                        print(
                            f"  [{system}] {query!r} -> {path} at {rank or '-'}; first a {kind} "
                            f"of {files[0]}: {' '.join(top.text.split())[:80]!r}"
                        )
            print(
                f"| {system} | {len(queries)} | {tally.hit(1):.3f} | {tally.hit(3):.3f} | "
                f"{tally.mrr():.3f} | {first} |"
            )


def extracted(hit: Hit) -> bool:
    """Whether ``hit`` is a memory the extractor read from drawers."""
    return hit.memory is not None and hit.memory.origin == "extracted"


def file_of(palace: Palace, hit: Hit) -> str:
    """The source a hit comes from: a drawer's, or the first of a memory's source drawers
    (``""`` for a memory read from none)."""
    if hit.memory is None:
        return hit.source
    found = palace.ledger.get_drawers(list(hit.memory.source_ids)[:1])
    return found[0].source if found else ""


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--writer", action="append", default=[], help="only this writer's file (repeatable)"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="palace.toml override"
    )
    parser.add_argument("--misses", action="store_true", help="print each question not first")
    parser.add_argument(
        "--sample-corpus",
        action="store_true",
        help="the mined sample corpus's queries (examples/QUERIES.md) instead of the writers",
    )
    args = parser.parse_args(argv)
    if args.sample_corpus:
        started = time.perf_counter()
        sample_corpus(overrides(args.set), args.misses)
        print(f"\n{time.perf_counter() - started:.0f} s")
        return
    files = writers(args.writer)
    if not files:
        sys.exit(f"no {PREFIX}<writer>.jsonl in {DATA}")
    started = time.perf_counter()
    tallies = run(files, overrides(args.set), args.misses)
    report(tallies, files)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
