"""Triples: the facts of the temporal knowledge graph, and how names become keys.

A :class:`Triple` holds from ``valid_from`` up to, not including, ``valid_to``.
Entities are keyed by a normalised form of their name (:func:`entity_key`: NFKC,
case-folded, whitespace collapsed) and predicates are snake_case
(:func:`predicate_name`). The graph that files and queries them is
:class:`~palace_retrievers.graph.knowledge_graph.KnowledgeGraph`; the ledger stores them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.records.drawers import utc

#: What a time argument may be: a datetime, a date, an ISO-8601 string or epoch seconds.
When = datetime | date | str | float | int

#: Predicates that hold one value at a time unless configured otherwise
#: (``[graph] single_valued`` in ``palace.toml``). ``*`` matches any run of characters.
DEFAULT_SINGLE_VALUED: tuple[str, ...] = (
    "lives_in",
    "located_in",
    "based_in",
    "works_at",
    "works_for",
    "works_as",
    "job_title",
    "role",
    "employer",
    "married_to",
    "age",
    "status",
    "current_*",
    "favourite_*",
    "favorite_*",
    "primary_*",
    "uses_*",
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_WORD = re.compile(r"[\W_]+")
_EDGE_PUNCTUATION = " .,;:!?\"'“”‘’「」『』。，；：！？、"


@dataclass(frozen=True, slots=True)
class Triple:
    """One fact of the graph and the time it held.

    Attributes:
        id: Stable id of the triple.
        subject: The subject's name as first given (whitespace collapsed).
        predicate: The relation, in snake_case.
        object: The object's name or value as given (whitespace collapsed).
        valid_from: When the fact started to hold (UTC); ``None`` when unknown.
        valid_to: When it stopped holding (UTC, exclusive); ``None`` while it holds.
        confidence: How sure the source was, in [0, 1].
        source_drawer: The drawer the fact was read from, if any.
        source_memory: The memory the fact was read from, if any.
        user_id: Owner; ``None`` for the unowned graph.
        origin: ``"explicit"`` for a direct call, or the extractor's name.
        created_at: When the triple was filed.
        ended_reason: Why it was closed: ``"superseded"`` or ``"invalidated"``.
        subject_key: The subject's normalised key (see :func:`entity_key`).
        object_key: The object's normalised key.
    """

    id: str
    subject: str
    predicate: str
    object: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    confidence: float = 1.0
    source_drawer: str | None = None
    source_memory: str | None = None
    user_id: str | None = None
    origin: str = "explicit"
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    ended_reason: str | None = None
    subject_key: str = ""
    object_key: str = ""

    @property
    def is_open(self) -> bool:
        """True while the triple has no end (``valid_to`` is ``None``)."""
        return self.valid_to is None

    def valid_at(self, when: When) -> bool:
        """True when the triple held at ``when``: ``valid_from <= when < valid_to``."""
        at = utc(when)
        if self.valid_from is not None and self.valid_from > at:
            return False
        return self.valid_to is None or at < self.valid_to

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO-8601 strings in UTC, ``None`` kept)."""
        return {
            "id": self.id,
            "subject": self.subject,
            "predicate": self.predicate,
            "object": self.object,
            "valid_from": _iso(self.valid_from),
            "valid_to": _iso(self.valid_to),
            "confidence": self.confidence,
            "source_drawer": self.source_drawer,
            "source_memory": self.source_memory,
            "user_id": self.user_id,
            "origin": self.origin,
            "created_at": _iso(self.created_at),
            "ended_reason": self.ended_reason,
        }


@dataclass(frozen=True, slots=True)
class GraphStats:
    """Counts of one owner's graph.

    Attributes:
        entities: Distinct entities (subjects and objects).
        triples: All triples, open and closed.
        open: Triples with no end yet.
        closed: Triples that ended (superseded or invalidated).
        predicates: Number of triples per predicate.
    """

    entities: int = 0
    triples: int = 0
    open: int = 0
    closed: int = 0
    predicates: Mapping[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "entities": self.entities,
            "triples": self.triples,
            "open": self.open,
            "closed": self.closed,
            "predicates": dict(self.predicates),
        }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def entity_name(name: str) -> str:
    """The display form of an entity name: NFKC, surrounding punctuation off, one space.

    Raises:
        InvalidQueryError: ``name`` is not a string or is empty once trimmed.
    """
    if not isinstance(name, str):
        raise InvalidQueryError(f"an entity must be a string, not {name!r}")
    text = " ".join(unicodedata.normalize("NFKC", name).split()).strip(_EDGE_PUNCTUATION)
    if not text:
        raise InvalidQueryError(f"an entity name must not be empty (got {name!r})")
    return text


def entity_key(name: str) -> str:
    """The key an entity is stored under: its display form, case-folded.

    ``entity_key("  ALICE\\n Smith ") == entity_key("alice smith")``.

    Raises:
        InvalidQueryError: ``name`` is empty once normalised.
    """
    return " ".join(entity_name(name).casefold().split())


def predicate_name(predicate: str) -> str:
    """A predicate in snake_case: ``"Works At"``, ``"worksAt"``, ``"works-at"`` → ``works_at``.

    Raises:
        InvalidQueryError: ``predicate`` is not a string or has no word characters.
    """
    if not isinstance(predicate, str):
        raise InvalidQueryError(f"a predicate must be a string, not {predicate!r}")
    return _snake(predicate, what="predicate")


def predicate_pattern(name: str) -> str:
    """A predicate pattern in snake_case, ``*`` kept: ``"Favourite *"`` → ``favourite_*``.

    Raises:
        InvalidQueryError: ``name`` has no word characters.
    """
    return _snake(name, what="predicate", wildcard=True)


def _snake(text: str, *, what: str, wildcard: bool = False) -> str:
    text = _CAMEL.sub("_", unicodedata.normalize("NFKC", text).strip())
    parts = text.casefold().split("*") if wildcard else [text.casefold()]
    out = "*".join(_NOT_WORD.sub("_", part) for part in parts).strip("_")
    if not out.replace("*", "").strip("_"):
        raise InvalidQueryError(f"a {what} must have a word in it (got {text!r})")
    return out
