"""The generated drawers of ``benchmarks/backends.py``: varied text, real MiniLM vectors.

Texts come from a seeded generator (people, teams, topics, places, dates, numbers and
sentence shapes drawn at random), so the same ``--seed`` always gives the same corpus and
every text is distinct, and the first ``n`` texts of a larger corpus are the corpus of size
``n``. Each text is embedded by the real all-MiniLM-L6-v2, once: the vectors are cached
under the cache folder in chunks of 2,048 (``float32`` ``.npy`` files named by the hash of
their texts), and later runs read them back instead of embedding again.

    .venv/bin/python benchmarks/backend_corpus.py --size 100000   # embed and cache only
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

DEFAULT_CACHE = Path.home() / ".cache" / "palace-retrievers" / "benchmarks"

# Given and family names, drawn one word at a time.
_PEOPLE = (  # noqa: SIM905 - a word list reads better as text
    "Alice Moreau Bashir Rahimi Chen Wei Dana Kowalski Emeka Obi Fatima Zahra Greta Lind "
    "Hiro Tanaka Ines Duarte Jonas Berg Kavya Iyer Lars Nilsen Mei Lin Nadia Petrova "
    "Omar Haddad Priya Nair Quentin Roux Rosa Alvarez Sven Olsen Tariq Aziz Uma Desai "
    "Viktor Sokolov Wanjiru Kamau Xavier Blanc Yusuf Demir Zoe Carter"
).split()
_TOPICS: dict[str, tuple[str, ...]] = {
    "database": ("PostgreSQL", "index", "replica", "vacuum", "query plan", "migration"),
    "mobile": ("iOS release", "Android build", "push token", "app review", "crash report"),
    "garden": ("tomato seedlings", "compost", "greenhouse", "drip line", "aphids"),
    "travel": ("flight to Lisbon", "train pass", "hotel booking", "visa", "layover"),
    "cooking": ("sourdough starter", "risotto", "spice rack", "oven", "dumplings"),
    "finance": ("quarterly budget", "invoice", "tax return", "expense report", "payroll"),
    "health": ("physio session", "blood test", "running plan", "sleep tracker", "dentist"),
    "music": ("piano lesson", "choir rehearsal", "guitar strings", "concert tickets"),
    "security": ("TLS certificate", "API key rotation", "audit log", "phishing drill"),
    "infra": ("Kubernetes node", "load balancer", "DNS record", "backup job", "disk quota"),
    "family": ("school pickup", "birthday party", "grandmother's visit", "family dinner"),
    "reading": ("book club", "novel", "library card", "poetry reading", "reading list"),
    "pets": ("cat adoption", "vet appointment", "dog walker", "aquarium filter"),
    "home": ("boiler repair", "roof leak", "kitchen renovation", "electricity bill"),
    "research": ("ablation study", "dataset license", "paper deadline", "reviewer comment"),
    "sales": ("renewal call", "pricing page", "enterprise lead", "churn report"),
    "design": ("colour palette", "onboarding flow", "icon set", "usability test"),
    "legal": ("contract draft", "privacy notice", "trademark filing", "NDA"),
    "support": ("ticket backlog", "refund request", "outage apology", "status page"),
    "sport": ("football match", "climbing gym", "swim lesson", "marathon training"),
}
_VERBS = (
    "moved",
    "postponed",
    "fixed",
    "asked about",
    "paid for",
    "reviewed",
    "cancelled",
    "booked",
    "broke",
    "finished",
    "forgot",
    "approved",
    "rewrote",
    "measured",
    "complained about",
    "celebrated",
    "tested",
    "planned",
)
_PLACES = (
    "Berlin",
    "Nairobi",
    "Osaka",
    "the office",
    "home",
    "Porto",
    "Montreal",
    "the lab",
    "Reykjavik",
    "the warehouse",
    "Lagos",
    "Chengdu",
    "the cabin",
    "Valparaíso",
)
_WHEN = (
    "on Monday",
    "last week",
    "before the holidays",
    "at 7 am",
    "after lunch",
    "in March",
    "tomorrow",
    "two days ago",
    "at the weekend",
    "next quarter",
    "on the 14th",
)
_REASONS = (
    "because the budget ran out",
    "since the weather turned",
    "after a long discussion",
    "so that the team could rest",
    "to hit the deadline",
    "as the doctor advised",
    "because nobody else would",
    "without telling anyone",
    "to save money",
    "for the second time",
)
_SHAPES = (
    "{who} {verb} the {thing} in {place} {when} {why}.",
    "[{day}] {who}: I {verb} the {thing} {when}; {other} thinks it was {adj}.",
    "Note on {topic}: {thing} {verb2} by {who} ({n} {unit}), {place}, {when}.",
    "{who} and {other} {verb} the {thing} {why}. Cost: {n} {unit}.",
    "Decision ({topic}): keep the {thing} at {n} {unit} until {when2}, says {who}.",
    "Reminder for {other}: the {thing} in {place} needs {n} more {unit} {when}.",
    "{who} wrote: the {adj} {thing} is {verb2} again, {why}; ask {other}.",
    "Q: did {who} {verb_base} the {thing}? A: yes, {when}, in {place}.",
)
_ADJS = ("fine", "too slow", "a mistake", "brilliant", "late", "noisy", "expensive", "fragile")
_UNITS = ("euros", "hours", "minutes", "kg", "tickets", "GB", "pages", "steps")
_VERB2 = ("handled", "reported", "paused", "scheduled", "broken", "delayed", "approved")
_VERB_BASE = ("move", "fix", "book", "review", "pay for", "test", "cancel")


def texts(size: int, *, seed: int = 0) -> list[str]:
    """``size`` distinct generated texts, the same for the same ``size`` and ``seed``."""
    rng = random.Random(seed)
    topics = list(_TOPICS)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < size:
        topic = rng.choice(topics)
        fields = {
            "who": " ".join(rng.sample(_PEOPLE, 2)),
            "other": rng.choice(_PEOPLE),
            "verb": rng.choice(_VERBS),
            "verb2": rng.choice(_VERB2),
            "verb_base": rng.choice(_VERB_BASE),
            "thing": rng.choice(_TOPICS[topic]),
            "topic": topic,
            "place": rng.choice(_PLACES),
            "when": rng.choice(_WHEN),
            "when2": rng.choice(_WHEN),
            "why": rng.choice(_REASONS),
            "adj": rng.choice(_ADJS),
            "n": rng.randint(1, 9999),
            "unit": rng.choice(_UNITS),
            "day": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        }
        text = rng.choice(_SHAPES).format(**fields)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


#: Texts a cache file holds: the corpus is embedded and cached chunk by chunk, so that an
#: interrupted run keeps what it embedded and any prefix of the corpus can be read back.
CHUNK = 2048


def _chunk_path(cache: Path, label: str, chunk: list[str], number: int) -> Path:
    digest = hashlib.sha256("\n".join(chunk).encode()).hexdigest()[:12]
    return cache / label / f"{number:05d}-{len(chunk)}-{digest}.npy"


def embedded_prefix(corpus: list[str], *, cache: Path, label: str) -> int:
    """How many texts from the start of ``corpus`` have cached vectors already."""
    done = 0
    for number, start in enumerate(range(0, len(corpus), CHUNK)):
        chunk = corpus[start : start + CHUNK]
        if not _chunk_path(cache, label, chunk, number).exists():
            break
        done += len(chunk)
    return done


def cached_vectors(
    corpus: list[str], *, cache: Path, label: str, limit: int | None = None
) -> npt.NDArray[np.float32]:
    """The MiniLM vectors of ``corpus`` (of its first ``limit`` texts when given),
    embedding only the chunks not cached yet under ``cache / label``. Chunks are cut from
    the whole ``corpus``, so a limit reads the chunks of the larger corpus (embedding the
    rest of the last one it needs)."""
    needed = len(corpus) if limit is None else min(limit, len(corpus))
    parts: list[npt.NDArray[np.float32]] = []
    embedder: Any = None
    start_time = time.perf_counter()
    embedded = 0
    for number, start in enumerate(range(0, needed, CHUNK)):
        chunk = corpus[start : start + CHUNK]
        path = _chunk_path(cache, label, chunk, number)
        if path.exists():
            parts.append(np.load(path))
            continue
        if embedder is None:
            from palace_plugins.builtin.embedders.sentence_transformers import (
                SentenceTransformerEmbedder,
            )

            embedder = SentenceTransformerEmbedder(options={"batch_size": 64})
        vectors = embedder.embed_documents(chunk).astype(np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.stem + ".partial.npy")
        np.save(partial, vectors)
        partial.rename(path)
        parts.append(vectors)
        embedded += len(chunk)
        rate = embedded / (time.perf_counter() - start_time)
        print(f"  embedded {label}: {start + len(chunk):,}/{len(corpus):,} ({rate:.0f}/s)")
        sys.stdout.flush()
    if not parts:
        return np.zeros((0, 384), dtype=np.float32)
    return np.concatenate(parts)[:needed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    cached_vectors(query_texts(args.queries, seed=args.seed), cache=args.cache, label="queries")
    cached_vectors(texts(args.size, seed=args.seed), cache=args.cache, label="drawers")


def query_texts(count: int, *, seed: int = 0) -> list[str]:
    """The query texts: drawn like the corpus, from another seed."""
    return texts(count, seed=seed + 1_000_003)


if __name__ == "__main__":
    main()
