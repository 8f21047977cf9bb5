"""Closets: compact pointer lines ``topic|entities|→drawer_ids`` built at mine time.

A closet extractor plugin (``palace_register_closet_extractors``) registers a factory
that takes its options table and returns a :class:`ClosetExtractor`. The palace hands it
the drawers of one source, a few consecutive chunks at a time, and files each
:class:`ClosetEntry` it returns as a :class:`Closet`: one line, at most 1,500 characters,
embedded into the ``closets`` collection. At search time the best closets raise the rank
of the drawers they point to; they never hide a drawer (see :mod:`palace_retrievers.search`).

The palace hands an extractor all the runs of one source at once
(:meth:`ClosetExtractor.extract_runs`), so that one that asks a model can ask once per
source; by default each run is read on its own. A factory whose ``palace_settings``
names ``"cache"`` gets the palace's :class:`AnswerCache` as its ``cache`` option (unless
``palace.toml`` sets it to ``false``), where it keeps what it was told by content hash.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from palace_retrievers.errors import PluginError
from palace_retrievers.ids import digest
from palace_retrievers.records import Drawer

#: The longest closet line the ledger accepts.
MAX_CLOSET_CHARS = 1500
_ARROW = "→"

#: The palace's own things a closet extractor's factory can ask for (its
#: ``palace_settings``): ``"cache"``, the palace's :class:`AnswerCache`.
PALACE_SETTINGS = frozenset({"cache"})


@dataclass(frozen=True, slots=True)
class ClosetEntry:
    """What an extractor finds in some drawers: a topic and the entities named.

    Attributes:
        topic: A few words saying what the drawers are about (a header, key words).
        entities: Names, dates, quoted phrases, action phrases; most telling first.
        drawer_ids: The drawers the entry points to (a subset of those given).
    """

    topic: str
    entities: tuple[str, ...]
    drawer_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Closet:
    """A filed closet: its line, where it lives, and the drawers it points to.

    Attributes:
        id: Deterministic id from the wing, source, line and drawer ids.
        line: ``topic|entity; entity; ...|→id,id`` (at most :data:`MAX_CLOSET_CHARS`).
        text: The part that is embedded: ``topic|entities`` (no drawer ids).
        wing, room, source, user_id: As on its drawers.
        extractor: Name of the extractor plugin that made it.
        drawer_ids: The drawers it points to.
    """

    id: str
    line: str
    text: str
    wing: str
    room: str
    source: str
    user_id: str | None
    extractor: str
    drawer_ids: tuple[str, ...]


class ClosetExtractor(ABC):
    """Finds topics and entities in drawers. Deterministic: same drawers, same entries."""

    #: How many sources the palace hands over at once, from as many threads: more than
    #: one only for an extractor that waits on something else (a model over the network).
    concurrency: int = 1

    @abstractmethod
    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        """Entries for ``drawers`` (consecutive chunks of one source), in any number."""

    def extract_runs(self, *, runs: Sequence[Sequence[Drawer]]) -> list[list[ClosetEntry]]:
        """The entries of each run of one source (a list per run, in order): by default
        :meth:`extract` on each. Override it to read a source's runs together (one
        model call per source); each run's entries point only to that run's drawers."""
        return [self.extract(drawers=run) for run in runs]


class AnswerCache(Protocol):
    """Where an extractor keeps a model's answers by content hash, so that a re-mine asks
    nothing again. Kept per owner: :meth:`Palace.forget` forgets an owner's answers too.
    A cache that cannot be read answers nothing; one that cannot be written keeps nothing.
    """

    def get(self, namespace: str, user_id: str, keys: Sequence[str]) -> dict[str, str]:
        """The answers kept under those of ``keys`` that ``namespace`` holds for the owner."""
        ...

    def put(self, namespace: str, user_id: str, answers: Mapping[str, str]) -> None:
        """Keep ``answers`` (key to answer) under ``namespace`` for the owner."""
        ...


def render_line(entry: ClosetEntry, *, max_chars: int = MAX_CLOSET_CHARS) -> tuple[str, str]:
    """The closet line and its embedded text for ``entry``, cut to ``max_chars``.

    Entities are dropped from the end until the line fits; the topic is cut last. A line
    always keeps every drawer id: an entry pointing to more ids than fit is an error.

    Raises:
        PluginError: the drawer ids alone do not fit in ``max_chars``.
    """
    topic = " ".join(entry.topic.replace("|", " ").split())
    pointer = _ARROW + ",".join(entry.drawer_ids)
    room = max_chars - len(pointer) - 2
    if room < 0:
        raise PluginError(
            f"a closet pointing to {len(entry.drawer_ids)} drawers does not fit in "
            f"{max_chars} characters; lower closets.drawers_per_closet"
        )
    topic = topic[:room]
    entities: list[str] = []
    used = len(topic)
    for entity in entry.entities:
        clean = " ".join(entity.replace("|", " ").replace(";", ",").split())
        extra = len(clean) + (2 if entities else 0)
        if not clean or used + extra > room:
            continue
        entities.append(clean)
        used += extra
    text = f"{topic}|{'; '.join(entities)}"
    return f"{text}|{pointer}", text


def _pointer_groups(ids: Sequence[str], max_chars: int) -> Iterator[tuple[str, ...]]:
    """``ids`` cut into groups whose pointer takes at most half of ``max_chars``.

    An entry pointing to more drawers than one line can hold becomes several closets
    (same topic and entities, a share of the pointers each) instead of none, so that any
    ``drawers_per_closet`` works with any ``max_chars``. A group always holds one id at
    least; :func:`render_line` refuses an id too long for a line on its own.
    """
    budget = max_chars // 2
    group: list[str] = []
    used = len(_ARROW)
    for drawer_id in ids:
        extra = len(drawer_id) + (1 if group else 0)
        if group and used + extra > budget:
            yield tuple(group)
            group, used, extra = [], len(_ARROW), len(drawer_id)
        group.append(drawer_id)
        used += extra
    if group:
        yield tuple(group)


def _runs(drawers: Sequence[Drawer], size: int) -> Iterator[list[list[Drawer]]]:
    """Drawers grouped by (wing, source, owner), in chunk order, cut into runs of ``size``:
    the runs of each source together."""
    groups: dict[tuple[str, str, str], list[Drawer]] = {}
    for drawer in drawers:
        groups.setdefault((drawer.wing, drawer.source, drawer.user_id or ""), []).append(drawer)
    for group in groups.values():
        group.sort(key=lambda d: (d.chunk_index, d.id))
        yield [group[start : start + size] for start in range(0, len(group), size)]


def build_closets(
    drawers: Sequence[Drawer],
    *,
    extractor: ClosetExtractor,
    extractor_name: str,
    drawers_per_closet: int,
    max_chars: int = MAX_CLOSET_CHARS,
) -> list[Closet]:
    """The closets of ``drawers``: the extractor is given the runs of consecutive chunks
    of each source together (:meth:`ClosetExtractor.extract_runs`), from
    :attr:`ClosetExtractor.concurrency` threads at once; the closets are the same in any
    case, in the order of the sources.

    An entry whose drawer ids do not fit on one line is filed as several closets, each
    pointing to a share of them (see :func:`_pointer_groups`).

    Raises:
        PluginError: the extractor raised, or pointed to a drawer it was not given, or
            to a drawer whose id alone does not fit in ``max_chars``.
    """

    def read(runs: list[list[Drawer]]) -> list[list[ClosetEntry]]:
        try:
            found = extractor.extract_runs(runs=runs)
        except Exception as exc:
            raise PluginError(
                f"closet extractor {extractor_name!r} raised: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(found, list) or len(found) != len(runs):
            raise PluginError(
                f"closet extractor {extractor_name!r} did not give one list of entries per run"
            )
        return found

    sources = list(_runs(drawers, drawers_per_closet))
    workers = min(max(1, int(extractor.concurrency)), len(sources))
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(read, sources))
    else:
        results = [read(runs) for runs in sources]
    closets: dict[str, Closet] = {}
    for runs, found in zip(sources, results, strict=True):
        for run, entries in zip(runs, found, strict=True):
            _file_run(closets, run, entries, extractor_name=extractor_name, max_chars=max_chars)
    return list(closets.values())


def _file_run(
    closets: dict[str, Closet],
    run: Sequence[Drawer],
    entries: Sequence[ClosetEntry],
    *,
    extractor_name: str,
    max_chars: int,
) -> None:
    """Add the closets of one run's ``entries`` to ``closets`` (by id)."""
    given = {d.id for d in run}
    first = run[0]
    for entry in entries:
        if not entry.drawer_ids or not set(entry.drawer_ids) <= given:
            raise PluginError(
                f"closet extractor {extractor_name!r} pointed to drawers it was not given"
            )
        if not entry.topic.strip() and not entry.entities:
            continue
        pointers = entry.drawer_ids
        groups = (
            [pointers]
            if len(_ARROW + ",".join(pointers)) + 2 <= max_chars
            else list(_pointer_groups(pointers, max_chars))
        )
        for group in groups:
            part = ClosetEntry(entry.topic, entry.entities, group)
            line, text = render_line(part, max_chars=max_chars)
            closet_id = "c_" + digest(first.wing, first.source, first.user_id or "", line)
            closets[closet_id] = Closet(
                id=closet_id,
                line=line,
                text=text,
                wing=first.wing,
                room=first.room,
                source=first.source,
                user_id=first.user_id,
                extractor=extractor_name,
                drawer_ids=group,
            )
