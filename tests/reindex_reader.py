"""A reader in a child process, searching a palace while another process reindexes it
(``tests/test_reindex_swap.py``; not a test file).

    python reindex_reader.py '{"path": ..., "backend": ..., "calls": 1000, ...}'

It opens the palace (its own folder on a PostgreSQL ledger when ``url`` and ``schema`` are
given, else the folder itself) with the FAKE embedder, notes the answer to each probe
while nobody rebuilds anything, prints ``ready``, waits for a line on stdin, then makes
``calls`` searches in turn (the vector floor with and without a filter, the whole search
pipeline, the memories' index) and compares each answer with the one it noted
(:func:`same`). It prints
one JSON line: the calls made, how many answers differed, the first few of them, and
the collections its palace ended up calling degraded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fakes import FAKE_PLUGIN, HashingEmbedder
from pg_palace import open_as_child

from palace_retrievers import Palace
from palace_retrievers.records import Filter

#: What each probe asks, in turn: most calls are ``search_by_vector``, as in the finding.
KINDS = ("vector", "vector", "vector", "vector", "vector", "wing", "vector", "search", "memories")


def open_palace(arguments: dict[str, Any]) -> Palace:
    if arguments.get("url"):
        return open_as_child(arguments)
    return Palace.open(
        Path(arguments["path"]),
        backend=arguments["backend"],
        embedder=HashingEmbedder(),
        plugins=[FAKE_PLUGIN],
        config=arguments.get("config"),
    )


def ask(palace: Palace, kind: str, text: str) -> list[str]:
    if kind == "search":
        return [h.id for h in palace.search(text, k=5, memories=False)]
    vector = palace.embedder.embed_query(text)
    if kind == "memories":
        found = palace.indexes.query("memories", vector=vector, k=3, where=Filter())
        return [m.id for m in found]
    wing = "odd" if kind == "wing" else None
    return [h.id for h in palace.search_by_vector(vector, k=5, wing=wing)]


def same(kind: str, got: list[str], expected: list[str]) -> bool:
    """Whether an answer is the one noted: the same ids in the same order; for the whole
    search pipeline, the same top hit and as many hits. (Its fused scores of the lower
    ranks tie to the last bits: a freshly rebuilt Chroma collection, answered by its HNSW
    graph until the reader's exact copy of it is rebuilt, gives similarities that differ
    from the copy's in the last bits, and near-tied hits below the top then trade places
    or swap with the sixth; the first was seen in a single process with no reader.)"""
    if kind == "search":
        return got[:1] == expected[:1] and len(got) == len(expected)
    return got == expected


def main(arguments: dict[str, Any]) -> None:
    probes: list[str] = arguments["probes"]
    with open_palace(arguments) as palace:
        plan = [(kind, text) for text in probes for kind in KINDS]
        expected = {(kind, text): ask(palace, kind, text) for kind, text in plan}
        empty = [key for key, ids in expected.items() if not ids]
        print("ready", flush=True)
        sys.stdin.readline()
        wrong: list[dict[str, Any]] = []
        calls = 0
        started = time.monotonic()
        while calls < arguments["calls"]:
            kind, text = plan[calls % len(plan)]
            got = ask(palace, kind, text)
            if not same(kind, got, expected[(kind, text)]):
                wrong.append(
                    {"kind": kind, "probe": text, "got": got, "expected": expected[(kind, text)]}
                )
            calls += 1
        print(
            json.dumps(
                {
                    "calls": calls,
                    "seconds": round(time.monotonic() - started, 2),
                    "wrong": len(wrong),
                    "first_wrong": wrong[:5],
                    "empty_before": [list(k) for k in empty],
                    "degraded": palace.indexes.degraded,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
