"""The ``regex`` closet extractor: topics and entities found by patterns, no model.

From a run of drawers it takes, in this order: markdown headers, quoted phrases, dates,
proper nouns and acronyms, numbers with their unit, and action phrases (a past-tense
verb and its object). Chinese text gives 《》「」“” quotes, dates such as 2023年5月7日,
and word runs between stop characters. Stop lists (English words, Chinese characters)
keep sentence openers and fillers out. The topic is the first header, else the most
frequent content words. One :class:`ClosetEntry` points to every drawer of the run.

Options: ``max_entities`` (default 24), ``topic_words`` (default 4).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from palace_retrievers.closets import ClosetEntry, ClosetExtractor
from palace_retrievers.embedder import options_check
from palace_retrievers.records import Drawer
from palace_retrievers.terms import CHINESE_STOP_CHARS, ENGLISH_STOP_WORDS, terms

OPTIONS = {"max_entities", "topic_words"}

_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_QUOTED = re.compile(r"[\"“]([^\"“”\n]{3,60})[\"”]|《([^》\n]{1,30})》|「([^」\n]{1,30})」")
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_DATE = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\.?(?:,?\s+\d{{4}})?\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b(?:{_MONTHS})\s+\d{{4}}\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\d{2,4}年(?:\d{1,2}月)?(?:\d{1,2}[日号])?|\d{1,2}月\d{1,2}[日号]"
    r"|\b(?:19|20)\d{2}\b"
)
_PROPER = re.compile(r"\b[A-Z][\w'’&-]*(?:[ \t]+(?:of|de|van|von|the)?[ \t]*[A-Z][\w'’&-]*)*")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,9}\b")
_NUMBER = re.compile(
    r"\b\d+(?:[.,]\d+)?\s*(?:%|percent|km|kg|miles?|hours?|days?|weeks?|months?|years?|"
    r"minutes?|dollars?|euros?|people|times|[kKmM]\b)|[$€£¥]\s?\d+(?:[.,]\d+)?"
)
_ACTION = re.compile(
    r"\b(\w{3,}ed|went|got|made|took|bought|saw|met|gave|won|began|ran|wrote|read|found|"
    r"left|lost|built|taught|started|joined|moved|adopted|visited|painted)\s+"
    r"(?:(?:the|a|an|to|my|our|her|his|their|some|at|in|on|for|into)\s+){0,2}"
    r"([a-z][\w'-]+(?:\s+[a-z][\w'-]+)?)",
    re.IGNORECASE,
)
_CALENDAR = frozenset(
    _MONTHS.split("|")
    + ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    + [m.lower() for m in _MONTHS.split("|")]
)
_CJK_RUN = re.compile(r"[\u4e00-\u9fff]{2,}")
_CJK_SPLIT = re.compile("[" + "".join(sorted(CHINESE_STOP_CHARS)) + "]")


def _proper_nouns(text: str) -> list[str]:
    out: list[str] = []
    for match in _PROPER.finditer(text):
        words = match.group().rstrip(".-'’").split()
        while words and words[0].lower() in ENGLISH_STOP_WORDS:
            words = words[1:]  # "The", "I", "Hey" open sentences, they name nothing
        while words and words[-1].lower() in ENGLISH_STOP_WORDS:
            words = words[:-1]
        if words and not (len(words) == 1 and (len(words[0]) < 2 or words[0] in _CALENDAR)):
            out.append(" ".join(words))
    return out


def _chinese_words(text: str) -> list[str]:
    out: list[str] = []
    for run in _CJK_RUN.findall(text):
        out.extend(piece for piece in _CJK_SPLIT.split(run) if 2 <= len(piece) <= 6)
    return out


def _actions(text: str) -> list[str]:
    out: list[str] = []
    for verb, obj in _ACTION.findall(text):
        words = [w for w in obj.split() if w.lower() not in ENGLISH_STOP_WORDS]
        if words:
            out.append(f"{verb.lower()} {' '.join(words).lower()}")
    return out


class RegexClosetExtractor(ClosetExtractor):
    """Pattern-based topics and entities, English and Chinese (see the module docstring)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options_check("closet extractor", "regex", options, OPTIONS)
        self._max_entities = int(options.get("max_entities", 24))
        self._topic_words = int(options.get("topic_words", 4))

    def entities(self, text: str) -> list[str]:
        """Entities of one text, most telling kinds first, each once (case-insensitive)."""
        found: list[str] = []
        found += [h.strip() for h in _HEADER.findall(text)]
        found += [next(g for g in groups if g) for groups in _QUOTED.findall(text)]
        found += [m.group().strip() for m in _DATE.finditer(text)]
        found += _proper_nouns(text)
        found += _ACRONYM.findall(text)
        found += [m.group().strip() for m in _NUMBER.finditer(text)]
        found += _chinese_words(text)
        found += _actions(text)
        seen: set[str] = set()
        out = []
        for entity in found:
            key = entity.lower()
            if key and key not in seen:
                seen.add(key)
                out.append(entity)
        return out

    def topic(self, text: str) -> str:
        """The first header, else the most frequent content words (ties: first seen)."""
        header = _HEADER.search(text)
        if header:
            return header.group(1).strip()
        latin = _CJK_RUN.sub(" ", text)
        words = [t for t in terms(latin, stemming=False) if len(t) > 2 and t.isascii()]
        words = [w for w in words if not w.isdigit() and w not in _CALENDAR]
        words += _chinese_words(text)
        counts = Counter(words)
        order = {w: i for i, w in reversed(list(enumerate(words)))}
        best = sorted(counts, key=lambda w: (-counts[w], order[w]))[: self._topic_words]
        return " ".join(best)

    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        text = "\n".join(d.text for d in drawers)
        entities = self.entities(text)[: self._max_entities]
        topic = self.topic(text)
        if not topic and not entities:
            return []
        return [ClosetEntry(topic=topic, entities=tuple(entities), drawer_ids=_ids(drawers))]


def _ids(drawers: Sequence[Drawer]) -> tuple[str, ...]:
    return tuple(d.id for d in drawers)
