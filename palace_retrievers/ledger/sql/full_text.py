"""What both dialects' full text does alike: cut Chinese, Japanese and Korean runs into
trigrams and character pairs, and add up the scores of a text's several searches.

Those scripts are written without spaces, so neither dialect's word search reads them.
Most Chinese words are two characters long (数据, 体重, 芒果): a trigram index alone
finds a text sharing only such words with the query never, which is why each run is cut
into its character pairs as well (:func:`pairs`), beside its trigrams (:func:`trigrams`:
longer names and phrases, and a closer match counts more).

A word written against such a run (``PMP`` in ``在学PMP``) is a word of its own
(:func:`apart`). Each dialect searches its own way (SQLite: FTS5 tables of words, of
trigrams and of pairs, the words written against a run in the pair table, since FTS5
reads ``在学PMP`` as one word; PostgreSQL: ``words`` and ``grams`` ``tsvector`` columns,
the trigrams and the pairs in ``grams``), three searches a query, one for its words, one
for its trigrams and one for its pairs; a record found by several scores their sum.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A word: a run of letters and digits.
WORD = re.compile(r"[^\W_]+")
#: A run of Chinese, Japanese or Korean characters (written without spaces).
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def grams(text: str, size: int) -> list[str]:
    """Every ``size`` consecutive characters of each Chinese, Japanese or Korean run (a
    shorter run has none)."""
    return [run[i : i + size] for run in CJK.findall(text) for i in range(len(run) - size + 1)]


def trigrams(text: str) -> list[str]:
    """Every three consecutive characters of each Chinese, Japanese or Korean run."""
    return grams(text, 3)


def pairs(text: str) -> list[str]:
    """Every two consecutive characters of each Chinese, Japanese or Korean run."""
    return grams(text, 2)


def apart(text: str) -> tuple[list[str], list[str]]:
    """The words of ``text`` with its Chinese, Japanese and Korean runs taken out, in
    two lists: those standing alone, and those written against a run (``PMP`` in
    ``在学PMP``, ``502`` in ``我住6栋502``), which a tokenizer reading letters of every
    script as one word never sees apart."""
    alone: list[str] = []
    against: list[str] = []
    for word in WORD.findall(text):
        parts = [part for part in CJK.split(word) if part]
        (alone if len(parts) == 1 and parts[0] == word else against).extend(parts)
    return alone, against


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
