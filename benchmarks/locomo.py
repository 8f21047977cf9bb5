"""Retrieval recall on LoCoMo (Maharana et al. 2024): the palace, through each of its
doors, against plain baselines.

Each conversation is its own wing; each door files the same conversations into a palace of
its own, the way a user coming through that door would:

- ``turns``: each turn one drawer, ``"[<session date>] <speaker>: <text>"``, with
  ``source`` (the session), ``chunk_index`` (its position) and ``speaker`` set, through
  ``langchain_palace.PalaceVectorStore.add_texts``;
- ``mined``: the conversation exported as the generic chat JSONL (one record a turn:
  ``session``, ``speaker``, ``text``, ``time``, ``id``) and mined with
  ``Palace.mine(path, source="text")``, what ``palace mine --source text`` runs; a hit's
  ``message_ids`` (the turns it holds: one turn since 13d75bd, which files a session with
  no user in it turn by turn; an exchange's two before) are flattened in rank order and
  cut at the same budget of turns as the other doors;
- ``plain``: the same turn texts through ``PalaceVectorStore.add_texts``, one call a
  conversation, with ordinary metadata only (LoCoMo's ``dia_id``; no ``source``,
  ``chunk_index`` or ``speaker``).

Every question (categories 1-4) is asked against its own conversation only through the
public retriever, ``langchain_palace.PalaceRetriever.invoke`` (which runs
``Palace.search``, the pipeline every entry point shares). In the same run, on the same
turns: plain vector search (cosine over the same MiniLM vectors, exact) and plain BM25
(rank-bm25 over lower-cased words, no stop words or stemming).

Results are printed, never asserted. The data set is CC BY-NC 4.0: it is read from
``--data`` and never copied into the project (the mined door's JSONL export is written to a
temporary directory).

    .venv/bin/python benchmarks/locomo.py --data ../shared/data/locomo/locomo_dev.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from langchain_core.documents import Document
from langchain_palace import PalaceRetriever, PalaceVectorStore
from rank_bm25 import BM25Okapi

from palace_retrievers import Palace

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo_dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10)
CURVE_K = 50
DOORS = ("turns", "mined", "plain")
DATE_FORMAT = "%I:%M %p on %d %B, %Y"  # LoCoMo's "1:56 pm on 8 May, 2023"
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_WORD = re.compile(r"\w+")


@dataclass
class Question:
    wing: str
    text: str
    category: int
    gold: set[str]  # drawer ids


@dataclass
class System:
    name: str
    rankings: list[list[str]] = field(default_factory=list)  # per question, CURVE_K ids
    latencies: list[float] = field(default_factory=list)


def turn_id(wing: str, session: int, turn: int) -> str:
    return f"{wing}:D{session}:{turn}"


def session_of(drawer_id: str) -> str:
    return drawer_id.rsplit(":", 1)[0]


Turn = tuple[str, str, int, str]  # id, drawer text, position in its session, speaker


@dataclass(frozen=True)
class Spoken:
    """One turn of a LoCoMo conversation as the data set gives it."""

    id: str  # turn_id(wing, session, turn)
    session: int
    date: str  # the session's date as LoCoMo writes it
    position: int  # in its session
    speaker: str
    text: str


def spoken(sample: dict[str, Any]) -> Iterator[Spoken]:
    """The turns of one conversation, session by session, those with a readable ``dia_id``."""
    wing = sample["sample_id"]
    conv = sample["conversation"]
    sessions = sorted(
        int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k]
    )
    for number in sessions:
        date = conv.get(f"session_{number}_date_time", "")
        for position, turn in enumerate(conv[f"session_{number}"]):
            match = _EVIDENCE.fullmatch(turn["dia_id"])
            if match is not None:
                ident = turn_id(wing, number, int(match.group(2)))
                yield Spoken(ident, number, date, position, turn["speaker"], turn["text"])


def load(path: Path) -> tuple[dict[str, list[Turn]], list[Question]]:
    """Turns per wing ``(id, text, position, speaker)`` and the questions of categories 1-4."""
    data = json.loads(path.read_text(encoding="utf-8"))
    wings: dict[str, list[Turn]] = {}
    questions: list[Question] = []
    for sample in data:
        wing = sample["sample_id"]
        turns: list[Turn] = [
            (t.id, f"[{t.date}] {t.speaker}: {t.text}", t.position, t.speaker)
            for t in spoken(sample)
        ]
        wings[wing] = turns
        known = {t[0] for t in turns}
        for qa in sample["qa"]:
            if qa.get("category") not in CATEGORIES:
                continue
            gold = {
                turn_id(wing, int(s), int(t))
                for e in qa.get("evidence", [])
                for s, t in _EVIDENCE.findall(e)
            } & known
            if gold:
                questions.append(Question(wing, str(qa["question"]), qa["category"], gold))
    return wings, questions


def iso_time(date: str) -> str | None:
    """LoCoMo's session date as ISO-8601 (taken as UTC), ``None`` when unreadable."""
    try:
        return datetime.strptime(date, DATE_FORMAT).replace(tzinfo=UTC).isoformat()
    except ValueError:
        return None


def export_chats(path: Path, directory: Path) -> dict[str, Path]:
    """Each conversation as a generic chat JSONL file in ``directory``; wing -> file.

    One record a turn, ``{"session", "speaker", "text", "time", "id"}``, as the ``text``
    source reads it; ``id`` is the turn's id in this benchmark.
    """
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        records = []
        for t in spoken(sample):
            record = {"session": f"session_{t.session}", "speaker": t.speaker, "text": t.text}
            when = iso_time(t.date)
            if when is not None:
                record["time"] = when
            records.append(record | {"id": t.id})
        file = directory / f"{sample['sample_id']}.jsonl"
        file.write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
        )
        files[sample["sample_id"]] = file
    return files


def index_turns(palace: Palace, wings: dict[str, list[Turn]]) -> None:
    """The ``turns`` door: every turn a drawer with ``source``, ``chunk_index``, ``speaker``."""
    for wing, turns in wings.items():
        PalaceVectorStore(palace, wing=wing).add_texts(
            [text for _, text, _, _ in turns],
            metadatas=[
                {"source": session_of(i), "chunk_index": position, "speaker": speaker}
                for i, _, position, speaker in turns
            ],
            ids=[i for i, _, _, _ in turns],
        )


def index_plain(palace: Palace, wings: dict[str, list[Turn]]) -> None:
    """The ``plain`` door: the same texts in one ``add_texts`` call a conversation, with
    ordinary metadata only (LoCoMo's own ``dia_id``)."""
    for wing, turns in wings.items():
        PalaceVectorStore(palace, wing=wing).add_texts(
            [text for _, text, _, _ in turns],
            metadatas=[{"dia_id": i.split(":", 1)[1]} for i, _, _, _ in turns],
            ids=[i for i, _, _, _ in turns],
        )


def index_mined(palace: Palace, files: dict[str, Path]) -> None:
    """The ``mined`` door: each conversation's chat JSONL mined by the ``text`` source."""
    for wing, file in files.items():
        palace.mine(file, wing=wing, source="text", progress=False)


T = TypeVar("T")


def hit_turns(door: str) -> Callable[[Document], list[str]]:
    """The turn ids a hit of ``door`` stands for: a mined hit's ``message_ids``, else its id."""
    if door == "mined":
        return lambda doc: [str(i) for i in doc.metadata.get("message_ids", [])]
    return lambda doc: [str(doc.id)]


def ranked(docs: Sequence[T], turns_of: Callable[[T], list[str]]) -> list[str]:
    """The turns of ``docs`` (documents, or the pipeline's hits) in rank order, each once."""
    return list(dict.fromkeys(i for doc in docs for i in turns_of(doc)))


def ranking(ten: Sequence[str], curve: Sequence[str]) -> list[str]:
    """A question's ranking as :class:`System` keeps it: the k = 10 answer (what a user
    gets), then the longer list's other ids, which only extend the recall curve."""
    return [*ten, *(i for i in curve[:CURVE_K] if i not in ten)]


def run_palace(palace: Palace, questions: Sequence[Question], door: str = "turns") -> System:
    system = System(f"palace {door}")
    turns_of = hit_turns(door)
    retriever = PalaceRetriever(palace=palace, k=10)
    for q in questions:
        start = time.perf_counter()
        top = retriever.invoke(q.text, wing=q.wing)
        system.latencies.append(time.perf_counter() - start)
        curve = ranked(retriever.invoke(q.text, k=CURVE_K, wing=q.wing), turns_of)[:CURVE_K]
        system.rankings.append(ranking(ranked(top, turns_of)[:10], curve))
    return system


def run_vector(
    palace: Palace, wings: dict[str, list[Turn]], questions: Sequence[Question]
) -> System:
    system = System("vector (MiniLM)")
    tables = {}
    for wing, turns in wings.items():
        ids = [i for i, _, _, _ in turns]
        stored = palace.ledger.drawer_vectors(ids)
        if len(stored) == len(ids):
            matrix = np.stack([stored[i] for i in ids])
        else:  # the mined door's drawers have other ids (and once held exchanges): embed here
            matrix = np.asarray(palace.embedder.embed_documents([t for _, t, _, _ in turns]))
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        tables[wing] = (ids, matrix)
    for q in questions:
        start = time.perf_counter()
        ids, matrix = tables[q.wing]
        sims = matrix @ palace.embedder.embed_query(q.text)
        order = np.argsort(-sims, kind="stable")[:CURVE_K]
        system.rankings.append([ids[i] for i in order])
        system.latencies.append(time.perf_counter() - start)
    return system


def run_bm25(wings: dict[str, list[Turn]], questions: Sequence[Question]) -> System:
    system = System("BM25")
    models = {
        wing: (
            [i for i, _, _, _ in turns],
            BM25Okapi([_WORD.findall(t.lower()) for _, t, _, _ in turns]),
        )
        for wing, turns in wings.items()
    }
    for q in questions:
        start = time.perf_counter()
        ids, model = models[q.wing]
        scores = model.get_scores(_WORD.findall(q.text.lower()))
        order = np.argsort(-scores, kind="stable")[:CURVE_K]
        system.rankings.append([ids[i] for i in order])
        system.latencies.append(time.perf_counter() - start)
    return system


def sessions(ranking: Sequence[str]) -> list[str]:
    """Sessions ranked by their best turn."""
    return list(dict.fromkeys(session_of(i) for i in ranking))


def metrics(system: System, questions: Sequence[Question], k: int) -> dict[str, float]:
    turn, every, session = [], [], []
    for q, ranking in zip(questions, system.rankings, strict=True):
        top = set(ranking[:k])
        found = len(q.gold & top)
        turn.append(found / len(q.gold))
        every.append(float(found == len(q.gold)))
        gold_sessions = {session_of(i) for i in q.gold}
        ranked = set(sessions(ranking)[:k])
        session.append(len(gold_sessions & ranked) / len(gold_sessions))
    n = max(len(questions), 1)
    return {"turn": sum(turn) / n, "all": sum(every) / n, "session": sum(session) / n}


def report(
    systems: Sequence[System], questions: Sequence[Question], index_seconds: dict[str, float]
) -> None:
    times = ", ".join(f"{door} {seconds:.1f} s" for door, seconds in index_seconds.items())
    print(f"\n{len(questions)} questions (categories 1-4), index time: {times}")
    header = f"{'system':<18}" + "".join(
        f"{f'{m}@{k}':>11}" for k in KS for m in ("turn R", "all", "sess R")
    )
    print(header + f"{'median ms':>11}{'p95 ms':>9}")
    for system in systems:
        row = f"{system.name:<18}"
        for k in KS:
            m = metrics(system, questions, k)
            row += f"{m['turn']:>11.3f}{m['all']:>11.3f}{m['session']:>11.3f}"
        lat = sorted(system.latencies)
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else 0.0
        print(row + f"{1000 * statistics.median(lat):>11.1f}{1000 * p95:>9.1f}")
    print("\nper category, turn R@10 / all@10 / session R@10:")
    for category, name in CATEGORIES.items():
        picked = [i for i, q in enumerate(questions) if q.category == category]
        subset = [questions[i] for i in picked]
        cells = []
        for system in systems:
            view = System(system.name, [system.rankings[i] for i in picked])
            m = metrics(view, subset, 10)
            cells.append(f"{system.name}: {m['turn']:.3f}/{m['all']:.3f}/{m['session']:.3f}")
        print(f"  {category} {name:<12} n={len(subset):<4} " + "   ".join(cells))


def plot(systems: Sequence[System], questions: Sequence[Question], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot written to {path}")
        return
    ks = list(range(1, CURVE_K + 1))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system in systems:
        ax.plot(ks, [metrics(system, questions, k)["turn"] for k in ks], label=system.name)
    ax.set_xlabel("k")
    ax.set_ylabel("turn recall@k")
    ax.set_title(f"LoCoMo dev, {len(questions)} questions (categories 1-4)")
    ax.grid(alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """``section.key=value`` pairs (values as TOML literals) as a palace.toml mapping."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, raw = pair.partition("=")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def add_overrides_argument(parser: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE``, repeatable: the pairs :func:`overrides` turns into palace.toml."""
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="palace.toml override"
    )


def data_missing(path: Path) -> bool:
    """Whether the LoCoMo file ``path`` is missing (then said on stderr)."""
    if path.exists():
        return False
    print(f"no data at {path}; pass --data PATH", file=sys.stderr)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo JSON file")
    parser.add_argument(
        "--door",
        action="append",
        choices=(*DOORS, "all"),
        help="how the conversations are filed, repeatable (default: all three, one table)",
    )
    parser.add_argument("--backend", default="chroma", help="vector backend (default chroma)")
    parser.add_argument(
        "--palace", type=Path, help="keep the palaces here, one folder a door (default: temp)"
    )
    parser.add_argument("--plot", type=Path, help="write the recall@k curve PNG here")
    parser.add_argument("--no-baselines", action="store_true", help="only the palace")
    parser.add_argument(
        "--limit", type=int, help="only the first N questions (a quick latency check)"
    )
    add_overrides_argument(parser)
    args = parser.parse_args(argv)
    if data_missing(args.data):
        return 2
    picked = set(args.door or ["all"])
    doors = [d for d in DOORS if d in picked or "all" in picked]
    wings, questions = load(args.data)
    if args.limit:
        questions = questions[: args.limit]
    systems: list[System] = []
    baselines: list[System] = []
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.palace or Path(tmp)
        for door in doors:
            with Palace.open(
                root / door, backend=args.backend, config=overrides(args.set)
            ) as palace:
                palace.embedder.embed_query("warm up")  # load the model before timing anything
                if palace.ledger.stats().drawers == 0:  # --palace again: search only
                    start = time.perf_counter()
                    if door == "turns":
                        index_turns(palace, wings)
                    elif door == "plain":
                        index_plain(palace, wings)
                    else:
                        index_mined(palace, export_chats(args.data, Path(tmp) / "chats"))
                    seconds[door] = time.perf_counter() - start
                systems.append(run_palace(palace, questions, door))
                if not args.no_baselines and not baselines:
                    baselines = [run_vector(palace, wings, questions), run_bm25(wings, questions)]
        systems += baselines
        print(f"palace: backend {args.backend}, overrides {args.set or 'none'}")
        report(systems, questions, seconds)
        if args.plot:
            plot(systems, questions, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
