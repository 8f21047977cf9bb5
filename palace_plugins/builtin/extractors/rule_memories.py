"""The ``rules`` memory extractor: memories found by patterns, no model (the default).

It reads only what the user wrote (:func:`~palace_retrievers.memory.extraction.user_texts`: the
user's turns of a conversation, the prose of a document, never code), cuts it into
sentences, and keeps a sentence when one of these patterns opens it, in English or
Chinese:

============================  =========================================  ==========  ====
pattern                       examples                                   kind        imp.
============================  =========================================  ==========  ====
explicit                      "remember that …", "note that …", 记住…      (by text)   1.0
decision                      "we decided …", "let's go with …", 我们决定…  decision    0.9
preference                    "I prefer …", "I like X better", "my        preference  0.8
                              favourite X is Y", 我更喜欢…, 我喜欢…
tools                         "we use X (for Y)", "we switched to X",     fact        0.7
                              我们用X做Y
where one lives / works       "I live in …", "I moved to …", "I work at   fact        0.7
                              …/as …", "I joined …", 我住在…, 我在…工作
my X is Y                     "my manager is Ana", 我的经理是安娜            fact        0.7
dates and deadlines           "… by Friday", "… on 2026-03-01", "due …",  event       0.7
                              "the deadline is …", 截止…, …之前
============================  =========================================  ==========  ====

Questions, conditionals ("if …", "如果…"), hedges ("maybe", "I think", "可能") and
sentences over ``max_chars`` are skipped: precision comes before recall. When a sentence
sets a single-valued slot (:mod:`palace_retrievers.memory.slots`), the candidate carries it and a
triple for the knowledge graph (predicates single-valued under the graph's defaults:
``lives_in``, ``works_at``, ``works_as``, ``favourite_*``, ``uses_tool``, ``current_*`` …),
valid from the drawer's date; a negated one ("I don't live in Lisbon anymore") carries
the slot but no triple.

Options (``[memory_extractors.rules]``): ``users`` (speaker names that are the user, in
addition to user/human/me), ``documents`` (extract from non-conversation prose, default
true), ``max_chars`` (longest sentence kept, default 240).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.extraction import (
    USER_NAMES,
    Candidate,
    MemoryExtractor,
    TripleSpec,
    user_texts,
)
from palace_retrievers.memory.slots import Statement, parse
from palace_retrievers.memory.wording import read, tokens
from palace_retrievers.records import Drawer

OPTIONS = {"users", "documents", "max_chars"}

_CLAUSE = re.compile(
    r"(?:,\s*|\s+)(?:and|but|also|plus)\s+(?=(?:honestly\s+|also\s+)?(?:i|we|my|our)\b)"
    r"|[，,]\s*(?:而且|并且|另外|还有|但是|不过)?(?=我)",
    re.IGNORECASE,
)
_CUE_ONLY = re.compile(r"^(?:请)?(?:记住|记一下|记得|别忘了|注意)(?:一下)?$")
_SENTENCE = re.compile(r"[^.!?。！？；;\n]+(?:[.!?。！？；;]+|$)", re.MULTILINE)
_EXPLICIT = re.compile(
    r"^(?:please\s+)?(?:remember|note|don'?t forget|do not forget|keep in mind|for the record)"
    r"(?:\s+that)?\s*[:,]?\s+(?P<rest>.+)$"
    r"|^(?:请)?(?:记住|记一下|记得|别忘了|注意)(?:一下)?[：:，,]?\s*(?P<zh>.+)$",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"^(?:.{0,40}?\s)?(?:we(?:'ve| have)?|i(?:'ve| have)?|the team(?: has)?)\s+"
    r"(?:finally\s+)?(?:decided|agreed|settled)\b"
    r"|^(?:so\s+|ok(?:ay)?,?\s+)?let'?s\s+(?:go with|use|stick with|do)\b"
    r"|^we(?:'ll| will| are going to|'re going to|'re| are)\s+go(?:ing)?\s+with\b"
    r"|^the decision is\b|^decision\s*:"
    r"|^(?:我们|我)?(?:决定|定了|商定|最终决定)",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"^i(?:'d| would)?\s+(?:really\s+)?(?:prefer|rather)\b"
    r"|^i\s+(?:really\s+)?(?:like|love|enjoy)\s+.+\s+(?:better|more)\b"
    r"|^my\s+(?:favou?rite|preferred)\s+"
    r"|^.{1,40}\s+is\s+my\s+(?:favou?rite|preferred)\s+"
    r"|^(?:比起.{1,12})?我(?:更|最|比较)?(?:喜欢|偏好|爱)"
    r"|^我最喜欢的",
    re.IGNORECASE,
)
_FACT = re.compile(
    r"^(?:we|i)(?:'re| are|'m| am)?\s+(?:now\s+|currently\s+)?"
    r"(?:use|using|switched to|moved to|migrated to|live|living|based|reside|moved|relocated|"
    r"work|working|joined|started (?:a new job |working )?at|drive|driving)\b"
    r"|^(?:my|our)\s+[\w ]{1,30}?\s+(?:is|are)\s+"
    r"|^(?:our|the)\s+[\w ]{1,30}?\s+(?:runs on|is built (?:on|with)|is hosted on|is written in)\b"
    r"|^我们?(?:现在|目前)?(?:用|使用|改用|采用|住在|住|搬到|在.{1,12}(?:工作|上班)|加入了?)"
    r"|^我(?:们)?的.{1,8}是",
    re.IGNORECASE,
)
_DEADLINE = re.compile(
    r"\b(?:by|before|until|due|deadline|on|at|scheduled for|planned for|is set for)\b"
    r"|截止|之前|以前|到期|前交|前完成|安排在|定在",
    re.IGNORECASE,
)
_SKIP = re.compile(
    r"\?\s*$|？\s*$|吗\s*[。!！]?$"
    r"|^(?:do|does|did|can|could|would|should|will|is|are|was|were|what|when|where|who|why|how|"
    r"which)\b"
    r"|^(?:if|when|unless|once|whether)\b|^(?:如果|要是|假如|是否)"
    r"|\b(?:maybe|perhaps|probably|might|i think|i guess|not sure|i wonder|hypothetically|"
    r"he said|she said|they said)\b|可能|也许|大概|或许|好像",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"^(?:i|we|my|our|let'?s|the)\b|^我", re.IGNORECASE)
_STRONG_DEADLINE = re.compile(
    r"\b(?:due|deadline)\b|截止|之前|以前|到期|前交|前完成", re.IGNORECASE
)
_OPENER = re.compile(
    r"^(?:(?:also|and|so|but|btw|oh|ok|okay|well|anyway|actually|honestly|by the way|fyi|"
    r"one more thing)\b[,:]?\s*)+|^(?:另外|还有|对了|然后|顺便说一下|顺便)[，,]?",
    re.IGNORECASE,
)
_DECIDED = re.compile(
    r"^(?:.{0,40}?\s)?(?P<who>we|i)(?:'ve| have)?\s+(?:finally\s+)?(?:decided|agreed)\s+"
    r"(?:to\s+|that\s+|on\s+)?"
    r"|^let'?s\s+(?=go with|use|stick with)"
    r"|^(?:我们|我)?(?:最终)?(?:决定|商定)了?",
    re.IGNORECASE,
)


def _slot_kind(predicate: str) -> str:
    """The memory kind of a statement by its predicate: a favourite is a preference, ..."""
    if predicate.startswith(("favourite_", "default_", "prefers:")):
        return "preference"
    return "event" if predicate in ("time", "date") else "fact"


def _sentences(text: str) -> Iterator[str]:
    """Sentences, and the clauses of a sentence that each have their own subject."""
    for match in _SENTENCE.finditer(text):
        sentence = " ".join(match.group().split()).strip(" -*•")
        held = ""
        for clause in _CLAUSE.split(sentence):
            clause = clause.strip(" ,")
            if _CUE_ONLY.match(clause):
                held = clause + "，"  # "记住，我的…": the cue belongs to what follows
            elif clause:
                yield held + clause
                held = ""


def _strip_end(sentence: str) -> str:
    return sentence.rstrip(" .!。！；;,，")


def _has_date(sentence: str) -> bool:
    return any(t.kind in ("date", "time") for t in tokens(sentence))


def _statement(text: str) -> Statement | None:
    """The slot a sentence sets; a decision sets what was decided ("we decided to use X")."""
    decided = _DECIDED.match(text)
    if decided:
        rest = text[decided.end() :]
        who = decided.group("who") or ("" if re.match(r"[\u4e00-\u9fff]", rest) else "we")
        text = f"{who} {rest}" if who and not re.match(r"(?:we|i)\b", rest, re.I) else rest
    statement = parse(text)
    if statement is None or statement.span is None:
        return statement
    ready, _ = read(text)
    return replace(statement, value=ready[statement.span[0] : statement.span[1]].strip())


def triple_of(statement: Statement, valid_from: datetime | None) -> TripleSpec | None:
    """The knowledge-graph triple of a statement, with a predicate the graph keeps single-valued.

    The user (``i``) is ``user``; ``we`` stays ``we``. Predicates: ``lives_in``,
    ``works_at``, ``works_as``, ``age``, ``favourite_<x>``, ``primary_<x>`` (a default),
    ``prefers_<a>_or_<b>``, ``uses_tool`` (what a thing runs on), ``current_time`` and
    ``current_date`` (of an event), ``current_holder`` (of a role), ``current_<x>`` (of
    "my X is Y"). A negated statement has none.
    """
    if statement.negated:
        return None
    subject = {"i": "user"}.get(statement.subject, statement.subject)
    predicate = statement.predicate
    if predicate.startswith("prefers:"):
        options = [o.replace(" ", "_") for o in predicate[len("prefers:") :].split("/")]
        predicate = "prefers_" + "_or_".join(options)
    elif predicate.startswith("default_"):
        predicate = "primary_" + predicate[len("default_") :]
    elif predicate == "uses":
        predicate = "uses_tool"
    elif predicate in ("time", "date"):
        predicate = f"current_{predicate}"
    elif predicate == "holder":
        predicate = "current_holder"
    elif predicate == "is":
        predicate = "current_value"
    elif predicate == "name":
        predicate = "current_name"
    elif predicate == "drives":
        predicate = "current_car"
    elif predicate not in ("lives_in", "works_at", "works_as", "age") and not (
        predicate.startswith("favourite_")
    ):
        predicate = "current_" + predicate
    return (subject, predicate, statement.value, valid_from)


class RuleMemoryExtractor(MemoryExtractor):
    """Pattern-based memories, English and Chinese (see the module docstring)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options_check("memory extractor", "rules", options, OPTIONS)
        users = options.get("users", [])
        if isinstance(users, str) or not all(isinstance(u, str) for u in users):
            raise ConfigError("memory extractor 'rules': users must be a list of names")
        self._users = USER_NAMES | {u.casefold() for u in users}
        self._documents = bool(options.get("documents", True))
        self._max_chars = int(options.get("max_chars", 240))
        if self._max_chars < 10:
            raise ConfigError("memory extractor 'rules': max_chars must be at least 10")

    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        out: list[Candidate] = []
        for drawer in drawers:
            for text in user_texts(drawer, users=self._users, documents=self._documents):
                for sentence in _sentences(text):
                    candidate = self.candidate(sentence, drawer)
                    if candidate is not None:
                        out.append(candidate)
        return out

    def candidate(self, sentence: str, drawer: Drawer) -> Candidate | None:
        """The candidate one sentence of ``drawer`` makes, or ``None``."""
        if len(sentence) > self._max_chars:
            return None
        importance = 0.0
        kind = "fact"
        text = _OPENER.sub("", _strip_end(sentence))
        if not text:
            return None
        text = text[0].upper() + text[1:]
        explicit = _EXPLICIT.match(text)
        if explicit:
            text = _strip_end(explicit.group("rest") or explicit.group("zh") or "")
            if not text or _SKIP.search(text):
                return None
            text = text[0].upper() + text[1:]
            importance = 1.0
        elif _SKIP.search(text):
            return None
        if _DECISION.match(text):
            kind, importance = "decision", max(importance, 0.9)
        elif _PREFERENCE.match(text):
            kind, importance = "preference", max(importance, 0.8)
        elif (
            _has_date(text)
            and _DEADLINE.search(text)
            and (_FIRST_PERSON.match(text) or _STRONG_DEADLINE.search(text))
        ):
            kind, importance = "event", max(importance, 0.7)
        elif _FACT.match(text):
            importance = max(importance, 0.7)
        statement = _statement(text)
        if importance == 0.0 and statement is not None and statement.predicate != "is":
            # Any other single-valued statement the slot patterns recognise ("Standup
            # moved to 10am", "Rui is my manager now", "周会改到周二上午10点了").
            kind, importance = _slot_kind(statement.predicate), 0.7
        if importance == 0.0:
            return None
        if not explicit and len(tokens(text)) < 3:
            return None  # "I use it", "we decided": nothing to carry to another session
        date = drawer.content_date
        triple = triple_of(statement, date) if statement else None
        return Candidate(
            text=text,
            kind=kind,
            importance=importance,
            source_ids=(drawer.id,),
            slot=statement.slot if statement else None,
            content_date=date,
            triples=(triple,) if triple else (),
        )
