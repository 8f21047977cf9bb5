"""Full text for the PostgreSQL ledger: ``tsvector`` and ``tsquery`` values built here.

PostgreSQL's own parser depends on the server's locale and splits text its own way (it
reads ``PostgreSQL-15`` as ``postgresql`` and ``-15``, an e-mail address as one word, and
a run of Chinese as one word), and ``pg_trgm`` and ``unaccent`` are extensions a server
may not have. So the ledger cuts text itself, the way the SQLite ledger's FTS5 tables do,
and hands PostgreSQL finished values (``'word':1,4``), which it stores as given:

- **words**: runs of letters and digits (``[^\\W_]+``) with Chinese, Japanese and Korean
  characters taken out, case-folded, accents removed (``Zürich`` → ``zurich``), each with
  its positions; the FTS5 ``unicode61 remove_diacritics 2`` table's counterpart.
- **grams**: every three and every two consecutive characters of each Chinese, Japanese
  or Korean run, the counterparts of the FTS5 trigram and pair tables (a trigram and a
  pair never look alike: they differ in length).

A query becomes three ``tsquery`` values, each the OR of its distinct terms: its words
(over ``words``), its trigrams and its pairs (both over ``grams``), matched with ``@@``
through GIN indexes and ranked with ``ts_rank`` (a document naming more of the terms,
more often, ranks higher); a record found by several searches scores their sum.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

from palace_retrievers.ledger.sql.full_text import CJK, WORD, pairs, trigrams

#: The version of the cutting below; the ledger recomputes its full text when it changes
#: (2: the character pairs joined the trigrams in ``grams``).
VERSION = 2

#: PostgreSQL keeps positions up to 16,383 and at most 256 positions per lexeme.
_MAX_POSITION = 16_383
_MAX_POSITIONS = 256
#: Longer "words" (hex blobs, base64) are left out: a lexeme is at most 2,046 bytes.
_MAX_LEXEME_BYTES = 1_000
#: A tsvector is at most 1 MB; the lexemes of a drawer stop well before.
_MAX_TOTAL_BYTES = 600_000


def clean(text: str) -> str:
    """``text`` with each NUL character, which PostgreSQL text cannot hold, as U+FFFD."""
    return text.replace("\x00", "\ufffd")


def fold(word: str) -> str:
    """``word`` case-folded, with its accents removed (NFKD, combining marks dropped)."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def words(text: str) -> list[str]:
    """The folded words of ``text`` in order (Chinese, Japanese and Korean left out)."""
    out: list[str] = []
    for match in WORD.finditer(text):
        for part in CJK.split(match.group()):
            if part:
                out.extend(WORD.findall(fold(part)))
    return out


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def tsvector(lexemes: Iterable[str]) -> str:
    """A ``tsvector`` literal of ``lexemes`` in order, with their positions."""
    positions: dict[str, list[int]] = {}
    total = 0
    for position, lexeme in enumerate(lexemes, start=1):
        size = len(lexeme.encode("utf-8"))
        if size > _MAX_LEXEME_BYTES:
            continue
        seen = positions.get(lexeme)
        if seen is None:
            if total + size > _MAX_TOTAL_BYTES:
                continue
            total += size
            positions[lexeme] = seen = []
        if len(seen) < _MAX_POSITIONS:
            seen.append(min(position, _MAX_POSITION))
    return " ".join(
        _quote(lexeme) + ":" + ",".join(map(str, sorted(set(at))))
        for lexeme, at in positions.items()
    )


def document(text: str) -> tuple[str, str]:
    """The ``words`` and ``grams`` tsvector literals of a drawer's or memory's text."""
    return tsvector(words(text)), tsvector([*trigrams(text), *pairs(text)])


#: The column each of a query's searches reads (:func:`query`'s order).
SEARCHED = ("words", "grams", "grams")


def query(text: str) -> tuple[str | None, str | None, str | None]:
    """The ``tsquery`` literals (OR of the distinct terms) of the query's words, trigrams
    and pairs, searched in the :data:`SEARCHED` columns; ``None`` where it has none."""
    out: list[str | None] = []
    for terms in (words(text), trigrams(text), pairs(text)):
        unique = [t for t in dict.fromkeys(terms) if len(t.encode("utf-8")) <= _MAX_LEXEME_BYTES]
        out.append(" | ".join(_quote(t) for t in unique) if unique else None)
    return out[0], out[1], out[2]
