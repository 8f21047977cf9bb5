"""The temporal knowledge graph: ``(subject, predicate, object)`` triples that hold for a time.

A triple is valid from ``valid_from`` (``None``: since always, as far as anyone knows) up to,
not including, ``valid_to`` (``None``: still open). ``query(entity, as_of=t)`` returns what
held at ``t``; ``timeline(entity)`` returns everything, oldest first.

Some predicates take one value at a time (``lives_in``, ``works_at``): a new triple on such a
predicate closes the open one of the same subject at the new ``valid_from``, so the graph
never holds two current truths and still knows the old one. Others (``likes``, ``knows``)
take many values, and each new object simply joins the others.

Entities are keyed by a normalised form of their name (NFKC, case-folded, whitespace
collapsed), so ``"Alice"`` and ``" alice "`` are one entity; predicates are normalised to
snake_case (``"works at"``, ``"worksAt"`` and ``"Works-At"`` are all ``works_at``).

Every call is scoped to one owner exactly like drawers: ``user_id=None`` sees only the
unowned graph, ``user_id="u1"`` only u1's. The graph lives in the ledger
(:class:`~palace_retrievers.ledger.graph_store.GraphStore`); its records are
:mod:`palace_retrievers.records.triples`; search uses it as a signal,
never as a gate (:meth:`KnowledgeGraph.drawer_boosts`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.records.drawers import utc
from palace_retrievers.records.triples import (
    DEFAULT_SINGLE_VALUED,
    GraphStats,
    Triple,
    When,
    entity_key,
    entity_name,
    predicate_name,
    predicate_pattern,
)
from palace_retrievers.terms import CHINESE_STOP_CHARS, ENGLISH_STOP_WORDS

if TYPE_CHECKING:
    from palace_retrievers.ledger.graph_store import GraphStore

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _confidence(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidQueryError(f"confidence must be a number in [0, 1], not {value!r}")
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidQueryError(f"confidence must be in [0, 1], not {value!r}")
    return float(value)


def _time(value: When | None) -> datetime | None:
    return None if value is None else utc(value)


def _matchable(key: str) -> bool:
    """Whether a key may be looked for in a query: not a stop word, not one Latin letter."""
    if _CJK.search(key):
        return not all(ch in CHINESE_STOP_CHARS for ch in key)
    return len(key) > 1 and key not in ENGLISH_STOP_WORDS


def _mentions(text: str, key: str) -> bool:
    """``key`` occurs in ``text`` as whole words (any substring for Chinese and the like)."""
    if _CJK.search(key):
        return key in text
    pattern = r"(?<!\w)" + re.escape(key) + r"(?!\w)"
    return re.search(pattern, text) is not None


class KnowledgeGraph:
    """The palace's temporal knowledge graph (``palace.kg``).

    Args:
        store: Where triples live (the palace's ledger).
        single_valued: Predicates that hold one value at a time; ``*`` is a wildcard.
            Defaults to :data:`DEFAULT_SINGLE_VALUED`.
    """

    def __init__(self, store: GraphStore, *, single_valued: Iterable[str] | None = None) -> None:
        if isinstance(single_valued, str):
            raise InvalidQueryError("single_valued must be a list of predicates, not a string")
        self._store = store
        names = DEFAULT_SINGLE_VALUED if single_valued is None else tuple(single_valued)
        self.single_valued: tuple[str, ...] = tuple(
            dict.fromkeys(predicate_pattern(name) for name in names)
        )

    def is_single_valued(self, predicate: str) -> bool:
        """True when ``predicate`` holds one value at a time for a subject."""
        name = predicate_name(predicate)
        return any(fnmatchcase(name, pattern) for pattern in self.single_valued)

    def add(
        self,
        subject: str,
        predicate: str,
        object: str,
        *,
        valid_from: When | None = None,
        valid_to: When | None = None,
        confidence: float = 1.0,
        source_drawer: str | None = None,
        source_memory: str | None = None,
        user_id: str | None = None,
        origin: str = "explicit",
    ) -> Triple:
        """File a fact; return the triple that now holds it.

        On a single-valued predicate the subject's values form one sequence ordered by
        ``valid_from``, in whatever order they are filed: the value holding at the new
        start is closed there (``ended_reason="superseded"``), and a value filed before a
        later one the graph already knows is closed where that one starts. With no
        ``valid_from``, a new value starts at the time of the call. The same value
        already holding at the new start is a restatement: no second triple is filed,
        the one holding keeps its interval and takes the higher confidence and any
        source it lacked. On other predicates each object holds on its own; the same
        fact already open is returned with the higher confidence and the earlier start.

        Args:
            subject: Who or what the fact is about.
            predicate: The relation (normalised to snake_case).
            object: The other entity, or a value.
            valid_from: When the fact started to hold; ``None`` when unknown.
            valid_to: When it stopped holding, to file a fact of the past (closed).
            confidence: In [0, 1].
            source_drawer: The drawer it was read from (search boosts it).
            source_memory: The memory it was read from.
            user_id: Owner (``None``: the unowned graph).
            origin: ``"explicit"``, or the name of the extractor that found it.

        Raises:
            InvalidQueryError: an empty subject, predicate or object, a confidence
                outside [0, 1], a time that is not one, or ``valid_to`` not after
                ``valid_from``.
        """
        start, end = _time(valid_from), _time(valid_to)
        if start is not None and end is not None and end <= start:
            raise InvalidQueryError(
                f"valid_to ({end.isoformat()}) must be after valid_from ({start.isoformat()})"
            )
        name = predicate_name(predicate)
        triple = Triple(
            id="",
            subject=entity_name(subject),
            predicate=name,
            object=entity_name(object),
            valid_from=start,
            valid_to=end,
            confidence=_confidence(confidence),
            source_drawer=source_drawer or None,
            source_memory=source_memory or None,
            user_id=_owner(user_id),
            origin=origin or "explicit",
            subject_key=entity_key(subject),
            object_key=entity_key(object),
        )
        return self._store.add_triple(triple, single_valued=self.is_single_valued(name))

    def invalidate(
        self,
        subject: str,
        predicate: str,
        object: str | None = None,
        *,
        ended: When | None = None,
        user_id: str | None = None,
    ) -> int:
        """Close the open triples of ``subject`` and ``predicate`` (and ``object``, if given).

        Args:
            subject: Whose fact ended.
            predicate: Which relation.
            object: Only the triple with this object; ``None``: every open one.
            ended: When it stopped holding (default: now).
            user_id: Owner (``None``: the unowned graph).

        Returns:
            How many triples were closed (0 when none was open).

        Raises:
            InvalidQueryError: an empty name, or ``ended`` before a matching triple's
                ``valid_from`` (then nothing is closed).
        """
        return self._store.close_triples(
            user_id=_owner(user_id),
            subject_key=entity_key(subject),
            predicate=predicate_name(predicate),
            object_key=None if object is None else entity_key(object),
            at=_time(ended) or datetime.now(UTC),
            reason="invalidated",
        )

    def query(
        self,
        entity: str,
        *,
        as_of: When | None = None,
        predicate: str | None = None,
        user_id: str | None = None,
    ) -> list[Triple]:
        """The triples about ``entity`` (as subject or object) that held at ``as_of``.

        A triple holds at ``t`` when ``valid_from <= t < valid_to``; a missing
        ``valid_from`` is the distant past and a missing ``valid_to`` the open future.

        Args:
            entity: The entity's name (any case and spacing).
            as_of: The moment asked about (default: now, i.e. what is currently true).
            predicate: Only this relation.
            user_id: Owner (``None``: the unowned graph).

        Returns:
            The triples, oldest ``valid_from`` first (unknown starts first).
        """
        return self._store.triples_about(
            entity_key(entity),
            user_id=_owner(user_id),
            as_of=_time(as_of) or datetime.now(UTC),
            predicate=None if predicate is None else predicate_name(predicate),
        )

    def timeline(self, entity: str, *, user_id: str | None = None) -> list[Triple]:
        """Every triple about ``entity``, open or closed, by ``valid_from`` (unknown first)."""
        return self._store.triples_about(entity_key(entity), user_id=_owner(user_id), as_of=None)

    def stats(self, *, user_id: str | None = None) -> GraphStats:
        """Counts of the owner's graph: entities, triples, open, closed, per predicate."""
        return self._store.graph_stats(user_id=_owner(user_id))

    def drawer_boosts(
        self, query: str, *, user_id: str | None = None, boost: float = 0.05
    ) -> dict[str, float]:
        """Drawers to raise for ``query``: the sources of what the graph knows of its entities.

        An entity is named in the query when its key occurs there as whole words
        (case-folded; Chinese, which has no spaces, as a substring). Each currently valid
        triple of such an entity that came from a drawer raises that drawer by ``boost``,
        once per entity named. A signal only: the caller adds it to scores it already
        has, and a drawer not returned here is not filtered out.

        Returns:
            ``{drawer_id: boost}``, empty when the query names no known entity.
        """
        if not isinstance(query, str) or not query.strip():
            return {}
        text = " ".join(unicodedata.normalize("NFKC", query).casefold().split())
        pairs = self._store.entity_drawers(text, user_id=_owner(user_id), at=datetime.now(UTC))
        named: dict[str, set[str]] = {}
        for key, drawer_id in pairs:
            if _matchable(key) and _mentions(text, key):
                named.setdefault(drawer_id, set()).add(key)
        return {drawer_id: boost * len(keys) for drawer_id, keys in sorted(named.items())}


def _owner(user_id: str | None) -> str | None:
    if user_id is not None and not isinstance(user_id, str):
        raise InvalidQueryError(f"user_id must be a string, not {user_id!r}")
    return user_id or None
