"""Candidate features for the list-wise model, measured before any joins it.

``train_listwise.py --extra NAME ...`` appends these columns to
:data:`palace_retrievers.memory.learned.listwise.FEATURES` and trains and replays a model
with them beside the shipped one; a feature moves into ``listwise.py`` (and the shipped
model is retrained with it) only when it beats the shipped model on the selection rows
and on the spent blind sets, English and Chinese alike (benchmarks/README.md, "Same
entity or not"). Each is computed from the two texts alone, with no word list:

- ``covered``: the share of the old memory's :func:`listwise.grams` the new text has
  too (how much of the old memory it restates);
- ``new_marks``, ``old_marks``, ``shared_marks``: the :func:`marks` (names, ids, codes)
  only the new text has, only the old one has, and both have: a note about another
  client, person or ticket has names the old lacks and lacks its names;
- ``new_numbers``, ``old_numbers``: the numbers in digits only the new text has and only
  the old one has: a new value drops the old number, a detail added keeps it.

Counts are capped at :data:`CAP` and divided by it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

import numpy as np

from palace_retrievers.memory.learned import listwise

CAP = 3
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
#: A word with its inner hyphens, dots, slashes and @ (PO-2025-0317, dana.w@x.com).
_TOKEN = re.compile(r"[^\W_]+(?:[-./@][^\W_]+)*")
#: The text before a token that begins a sentence ends here.
_SENTENCE = re.compile(r"(?:^|[.!?。！？]\s*)$")
_KEY = (":", "：")
_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")


def marks(text: str) -> frozenset[str]:
    """The tokens of ``text`` that by their form name one thing -- a client, a person, a
    product, a ticket, an address -- rather than say something of it, case-folded: a
    token that begins with a letter and has a digit (P1, Q3, Net45, PO-2025-0317; not a
    value with its unit: 4h, 5pm, 45k), one with an @, one with a capital after its
    first letter (EU, iPad), or a capitalised one where no sentence begins (a sentence's
    first word counts only as a note's key, before a colon: "Acme: 120 seats").
    Chinese names, uncapitalised, are left to the character overlap."""
    text = unicodedata.normalize("NFKC", text)
    plain = _CJK.sub(lambda m: "。" if m.group()[-1] in "。！？" else " ", text)
    out: set[str] = set()
    for found in _TOKEN.finditer(plain):
        token = found.group()
        code = token[0].isalpha() and any(c.isdigit() for c in token)
        inner_capital = any(c.isupper() for c in token[1:]) and any(c.isalpha() for c in token)
        begins = bool(_SENTENCE.search(plain[: found.start()]))
        key = plain[found.end() : found.end() + 1] in _KEY
        if code or "@" in token or inner_capital or (token[0].isupper() and (not begins or key)):
            out.add(token.casefold())
    return frozenset(out)


def _words(text: str) -> frozenset[str]:
    """``text``'s case-folded tokens and grams (where a mark is looked up)."""
    plain = _CJK.sub(" ", unicodedata.normalize("NFKC", text)).casefold()
    return frozenset(_TOKEN.findall(plain)) | listwise.grams(text)


def numbers(text: str) -> frozenset[str]:
    """The numbers written in digits in ``text`` (NFKC; 1,200 read as 1200)."""
    text = unicodedata.normalize("NFKC", text)
    return frozenset(re.sub(r"(?<=\d),(?=\d{3})", "", n) for n in _NUMBER.findall(text))


def _capped(count: int) -> float:
    return min(count, CAP) / CAP


def covered(old: str, new: str) -> float:
    grams = listwise.grams(old)
    return len(grams & listwise.grams(new)) / len(grams) if grams else 0.0


def new_marks(old: str, new: str) -> float:
    return _capped(len(marks(new) - _words(old)))


def old_marks(old: str, new: str) -> float:
    return _capped(len(marks(old) - _words(new)))


def shared_marks(old: str, new: str) -> float:
    return _capped(len((marks(new) & _words(old)) | (marks(old) & _words(new))))


def new_numbers(old: str, new: str) -> float:
    return _capped(len(numbers(new) - numbers(old)))


def old_numbers(old: str, new: str) -> float:
    return _capped(len(numbers(old) - numbers(new)))


EXTRA: dict[str, Callable[[str, str], float]] = {
    "covered": covered,
    "new_marks": new_marks,
    "old_marks": old_marks,
    "shared_marks": shared_marks,
    "new_numbers": new_numbers,
    "old_numbers": old_numbers,
}


def columns(olds: Sequence[str], new: str, names: Sequence[str]) -> np.ndarray:
    """One row per old memory, one column per feature of ``names`` (of :data:`EXTRA`)."""
    return np.asarray([[EXTRA[name](old, new) for name in names] for old in olds]).reshape(
        len(olds), len(names)
    )
