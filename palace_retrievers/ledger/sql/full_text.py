"""What both dialects' full text does alike: cut Chinese, Japanese and Korean runs into
trigrams, and add up the scores of a text's several searches.

Each dialect searches its own way (SQLite: FTS5 tables of words and of trigrams;
PostgreSQL: ``words`` and ``grams`` ``tsvector`` columns), two searches a query, one for
its words and one for its trigrams; a record found by both scores their sum.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A word: a run of letters and digits.
WORD = re.compile(r"[^\W_]+")
#: A run of Chinese, Japanese or Korean characters (written without spaces).
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def trigrams(text: str) -> list[str]:
    """Every three consecutive characters of each Chinese, Japanese or Korean run (a
    shorter run has none)."""
    return [run[i : i + 3] for run in CJK.findall(text) for i in range(len(run) - 2)]


def added_up(
    searches: Iterable[Iterable[tuple[str, float]]], limit: int
) -> list[tuple[str, float]]:
    """The ids the searches found, each with its scores added up, best first (ties by
    id), at most ``limit``."""
    scores: dict[str, float] = {}
    for found in searches:
        for record_id, score in found:
            scores[record_id] = scores.get(record_id, 0.0) + float(score)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
