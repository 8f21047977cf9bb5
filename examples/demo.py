"""`make demo`: mine the sample corpus into a throwaway palace and run a few searches.

Run it again and the mine does nothing (the corpus did not change).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

from palace_retrievers import Palace

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "sample-corpus"
PALACE = HERE.parent / ".palace-demo"
QUERIES = [
    "who owns the iOS release?",
    "how do we deploy to production?",
    "why did sync fail?",
    "which database do we use?",
    "中国用户的数据存储在哪里？",
]


def main() -> None:
    if "--fresh" in sys.argv:
        shutil.rmtree(PALACE, ignore_errors=True)
    started = time.perf_counter()
    with Palace.open(PALACE) as palace:
        report = palace.mine(CORPUS, wing="larkspur")
        print(
            f"mined {report.mined} of {report.seen} files from {CORPUS.name} "
            f"({report.drawers_added} drawers filed, {report.unchanged} unchanged) "
            f"in {time.perf_counter() - started:.1f} s into {PALACE}"
        )
        for query in QUERIES:
            began = time.perf_counter()
            hits = palace.search(query, k=3, wing="larkspur")
            print(f"\n? {query}   ({(time.perf_counter() - began) * 1000:.0f} ms)")
            for rank, hit in enumerate(hits, 1):
                where = Path(hit.source).relative_to(CORPUS)
                lines = f":{hit.drawer.line_start}-{hit.drawer.line_end}"
                parts = ", ".join(f"{k} {v:.3f}" for k, v in hit.scores.items())
                snippet = " ".join(hit.text.split())[:160]
                print(f"  {rank}. {where}{lines}  [{parts}]\n     {snippet}…")


if __name__ == "__main__":
    main()
