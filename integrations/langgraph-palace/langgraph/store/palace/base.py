"""``PalaceStore``: a LangGraph ``BaseStore`` over a palace."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from palace_retrievers import Drawer, Hit, Memory, Palace

from langgraph.store.palace.namespaces import (
    DRAWERS,
    MEMORIES,
    Place,
    item_place,
    matches,
    namespace_of,
    prefix_place,
    users_of,
)
from langgraph.store.palace.values import (
    as_json,
    check_filter,
    check_value,
    passes,
    text_of,
    unknown_keys,
)

#: The tag that files a store key on a memory (a memory may carry several).
KEY_TAG = "store-key:"
#: Metadata keys of what the store files: the key, the value (JSON) and its times.
STORE_KEY = "store_key"
STORE_VALUE = "store_value"
STORE_CREATED = "store_created_at"
STORE_UPDATED = "store_updated_at"
#: How many hits a search asks the palace for at most, while filters drop some.
MAX_FETCH = 1000
PAGE = 100


def open_palace(palace: Palace | str | os.PathLike[str]) -> tuple[Palace, bool]:
    """The palace, and whether the store opened it (a path, which must hold a palace)."""
    if isinstance(palace, str | os.PathLike):
        return Palace.open(palace, create=False), True
    return palace, False


def drawer_id(place: Place, key: str) -> str:
    """The id of the drawer that holds ``key`` in ``place``: stable, one per user,
    wing, room and key."""
    name = json.dumps([place.user_id, place.wing, place.room, key])
    return "lg-" + hashlib.sha256(name.encode()).hexdigest()[:32]


def memory_keys(memory: Memory) -> list[str]:
    """The store keys a memory is filed under (its id when the store never filed it)."""
    keys = [tag[len(KEY_TAG) :] for tag in memory.tags if tag.startswith(KEY_TAG)]
    return keys or [memory.id]


class PalaceStore(BaseStore):
    """A LangGraph store whose items are a palace's memories and drawers.

    **Namespaces** (:mod:`langgraph.store.palace.namespaces`): ``("memories", user_id)``
    is the user's memories (``("memories", user_id, wing[, room])`` those filed in a wing
    and room); ``("drawers", user_id, wing, room)`` the user's drawers of that wing and
    room. Any other namespace raises ``InvalidNamespaceError``. Every operation reads and
    writes only the records of the user its namespace names, so one user never sees
    another's.

    **Memories.** ``put`` of a value files its text (``"content"`` or ``"text"``, see
    :mod:`langgraph.store.palace.values`) through :meth:`Palace.remember`, so the palace's
    dedupe and supersede apply: a repeat of a current memory files nothing (the key is
    added to the repeated memory), a new value of something remembered supersedes the old
    memory. The key is kept on the memory as the tag ``store-key:<key>``, the value as
    JSON in its metadata (``store_value``), with the key (``store_key``). A ``"kind"`` in
    the value is the memory's kind. A put to a key that already holds a memory retires
    the old one unless the palace has superseded it: the key's tag is taken off, and a
    memory left with no key is archived (history: ``delete``; ``palace restore`` brings it
    back). ``delete`` retires the same way; nothing is deleted for good. Only current
    (active, unexpired) memories are items; a memory filed outside the store reads under
    its id as key, with the value ``{"content": text, "kind": kind}``, as does a key added
    to a memory by a repeat.

    **Drawers.** ``put`` files the value's text as one drawer, with the id
    ``lg-<digest of user, wing, room, key>`` (stable), and the key and the value as JSON
    in its metadata; ``delete`` deletes it. Drawers filed otherwise (mined) are items
    too, under their ids, with the value ``{"text": text, "source": source}``.

    **Search** with a ``query`` runs :meth:`Palace.search` (the full pipeline) for the
    user and wing/room of the prefix; each item's ``score`` is the hit's. Without a query,
    items come newest first with no score. ``filter`` applies to the values (LangGraph's
    operators); a key that no item under the prefix has raises ``ValueError``.

    **TTL**: a memory's ``ttl`` (minutes) is the palace's memory TTL (``palace gc``
    archives it when it expires; an expired memory is no item). The palace does not
    refresh it on reads (``refresh_ttl`` is ignored). Drawers have no TTL: a put with a
    ``ttl`` there raises ``ValueError``. ``index=False`` still files the item (the
    palace indexes all it keeps); a list of fields names the text.

    Args:
        palace: An open ``Palace``, or the path of one (opened, and closed by
            :meth:`close`).
        user_id: Serve this user only: namespaces naming another user are refused, and
            a prefix may leave the user out.
        fields: The value's fields that make an item's text (LangGraph's path syntax),
            unless a put's ``index`` names others.
    """

    supports_ttl = True

    def __init__(
        self,
        palace: Palace | str | os.PathLike[str],
        *,
        user_id: str | None = None,
        fields: Sequence[str] | None = None,
    ) -> None:
        self.palace, self._owned = open_palace(palace)
        self._running = threading.Lock()
        self.user_id = user_id
        self.fields = list(fields) if fields else None

    def close(self) -> None:
        """Close the palace when the store opened it from a path."""
        if self._owned:
            self.palace.close()

    def __enter__(self) -> PalaceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the two batch methods ------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order. Every op is checked before any runs, so a batch with a
        namespace that cannot be mapped or a value that is not a dict stores nothing.
        Batches run one at a time (a graph's tool calls may run in parallel threads), so
        a put reads the key's current memory and replaces it with no other put between."""
        runs = [self._plan(op) for op in ops]
        with self._running:
            return [run() for run in runs]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the palace's calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _plan(self, op: Op) -> Callable[[], Result]:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            place = item_place(op.namespace, self.user_id)
            return lambda: self._get(place, op.key)
        if isinstance(op, PutOp):
            place = item_place(op.namespace, self.user_id)
            if op.value is None:
                return lambda: self._delete(place, op.key)
            value = dict(check_value(op.value))
            text = text_of(value, op.index or self.fields)
            if not text.strip():
                raise ValueError(f"the value of {op.key!r} has no text to file: {value!r}")
            if place.root == DRAWERS:
                if op.ttl is not None:
                    raise ValueError("drawers have no TTL in a palace: give ttl to memories")
                return lambda: self._put_drawer(place, op.key, value, text)
            return lambda: self._put_memory(place, op.key, value, text, op.ttl)
        if isinstance(op, SearchOp):
            place = prefix_place(op.namespace_prefix, self.user_id)
            check_filter(op.filter)
            return lambda: self._search(place, op)
        if isinstance(op, ListNamespacesOp):
            user = users_of(op.match_conditions or (), self.user_id)
            return lambda: self._namespaces(user, op)
        raise TypeError(f"unknown store operation: {op!r}")

    # -- memories -------------------------------------------------------------------

    def _memories(self, place: Place) -> Iterator[Memory]:
        now = datetime.now(UTC)
        offset = 0
        while True:
            page = self.palace.memories(user_id=place.user_id, limit=PAGE, offset=offset)
            for memory in page:
                if not memory.expired(now) and place.holds(memory.wing, memory.room):
                    yield memory
            if len(page) < PAGE:
                return
            offset += PAGE

    def _memory_item(self, memory: Memory, key: str, score: float | None = None) -> SearchItem:
        stored = memory.metadata.get(STORE_VALUE)
        if memory.metadata.get(STORE_KEY) == key and isinstance(stored, str):
            value = json.loads(stored)
        else:
            value = {"content": memory.text, "kind": memory.kind}
        return SearchItem(
            namespace=namespace_of(MEMORIES, str(memory.user_id), memory.wing, memory.room),
            key=key,
            value=value,
            created_at=memory.created_at,
            updated_at=memory.updated_at,
            score=score,
        )

    def _find_memory(self, place: Place, key: str) -> Memory | None:
        return next((m for m in self._memories(place) if key in memory_keys(m)), None)

    def _put_memory(
        self, place: Place, key: str, value: dict[str, Any], text: str, ttl: float | None
    ) -> None:
        old = self._find_memory(place, key)
        kind = value.get("kind")
        remembered = self.palace.remember(
            text,
            kind=kind if isinstance(kind, str) else "fact",
            tags=[KEY_TAG + key],
            ttl=timedelta(minutes=ttl) if ttl is not None else None,
            user_id=place.user_id,
            wing=place.wing or "",
            room=place.room or "",
            metadata={STORE_KEY: key, STORE_VALUE: as_json(value)},
        )
        if old is not None and old.id != remembered.memory.id:
            self._release(place, old.id, key)

    def _release(self, place: Place, memory_id: str, key: str) -> None:
        """Take ``key`` off a memory; archive the memory when no key is left on it."""
        memory = self.palace.memory(memory_id, user_id=place.user_id)
        if memory.status != "active":
            return
        tags = [tag for tag in memory.tags if tag != KEY_TAG + key]
        if any(tag.startswith(KEY_TAG) for tag in tags):
            self.palace.edit_memory(memory_id, user_id=place.user_id, tags=tags)
        else:
            self.palace.archive_memory(memory_id, user_id=place.user_id)

    # -- drawers --------------------------------------------------------------------

    def _drawer_item(self, drawer: Drawer, score: float | None = None) -> SearchItem:
        meta = drawer.metadata
        stored = meta.get(STORE_VALUE)
        if isinstance(stored, str) and isinstance(meta.get(STORE_KEY), str):
            key, value = str(meta[STORE_KEY]), json.loads(stored)
            created = datetime.fromisoformat(str(meta.get(STORE_CREATED, drawer.filed_at)))
            updated = datetime.fromisoformat(str(meta.get(STORE_UPDATED, drawer.filed_at)))
        else:
            key, value = drawer.id, {"text": drawer.text, "source": drawer.source}
            created = updated = drawer.filed_at
        return SearchItem(
            namespace=namespace_of(DRAWERS, str(drawer.user_id), drawer.wing, drawer.room),
            key=key,
            value=value,
            created_at=created,
            updated_at=updated,
            score=score,
        )

    def _find_drawer(self, place: Place, key: str) -> Drawer | None:
        for drawer in self.palace.get([drawer_id(place, key), key], user_id=place.user_id):
            if not place.holds(drawer.wing, drawer.room):
                continue
            if drawer.id == key and STORE_KEY in drawer.metadata:
                continue
            return drawer
        return None

    def _put_drawer(self, place: Place, key: str, value: dict[str, Any], text: str) -> None:
        old = self._find_drawer(place, key)
        now = datetime.now(UTC).isoformat()
        created = old.metadata.get(STORE_CREATED, now) if old is not None else now
        self.palace.add_texts(
            [text],
            metadatas=[
                {
                    STORE_KEY: key,
                    STORE_VALUE: as_json(value),
                    STORE_CREATED: created,
                    STORE_UPDATED: now,
                }
            ],
            ids=[old.id if old is not None else drawer_id(place, key)],
            wing=str(place.wing),
            room=str(place.room),
            user_id=place.user_id,
        )

    def _drawers(self, place: Place) -> list[SearchItem]:
        ids = self.palace.drawer_ids(user_id=place.user_id, wing=place.wing, room=place.room)
        drawers = self.palace.get(ids, user_id=place.user_id)
        items = [self._drawer_item(drawer) for drawer in drawers]
        return sorted(items, key=lambda item: item.updated_at, reverse=True)

    # -- the operations ---------------------------------------------------------------

    def _get(self, place: Place, key: str) -> Item | None:
        if place.root == MEMORIES:
            memory = self._find_memory(place, key)
            return None if memory is None else _plain(self._memory_item(memory, key))
        drawer = self._find_drawer(place, key)
        return None if drawer is None else _plain(self._drawer_item(drawer))

    def _delete(self, place: Place, key: str) -> None:
        if place.root == MEMORIES:
            memory = self._find_memory(place, key)
            if memory is not None:
                self._release(place, memory.id, key)
            return
        drawer = self._find_drawer(place, key)
        if drawer is not None:
            self.palace.delete_drawers([drawer.id], user_id=place.user_id)

    def _listed(self, place: Place) -> list[SearchItem]:
        if place.root == DRAWERS:
            return self._drawers(place)
        return [
            self._memory_item(memory, key)
            for memory in self._memories(place)
            for key in memory_keys(memory)
        ]

    def _hit_items(self, place: Place, hit: Hit) -> list[SearchItem]:
        if place.root == DRAWERS:
            return [] if hit.is_memory else [self._drawer_item(hit.drawer, hit.score)]
        memory = hit.memory
        if memory is None or memory.status != "active":
            return []
        if not place.holds(memory.wing, memory.room):
            return []
        return [self._memory_item(memory, key, hit.score) for key in memory_keys(memory)]

    def _ranked(self, place: Place, op: SearchOp, query: str) -> list[SearchItem]:
        want = op.offset + op.limit
        k = max(2 * want, 10)
        while True:
            hits = self.palace.search(
                query,
                k=k,
                user_id=place.user_id,
                wing=place.wing or None,
                room=place.room or None,
                memories=place.root == MEMORIES,
            )
            items = [item for hit in hits for item in self._hit_items(place, hit)]
            passed = [item for item in items if passes(item.value, op.filter)]
            if len(passed) >= want or len(hits) < k or k >= MAX_FETCH:
                return passed
            k = min(4 * k, MAX_FETCH)

    def _search(self, place: Place, op: SearchOp) -> list[SearchItem]:
        if op.query:
            items = self._ranked(place, op, op.query)
            if op.filter and not items:
                self._check_keys(place, op.filter, self._listed(place))
        else:
            listed = self._listed(place)
            self._check_keys(place, op.filter, listed)
            items = [item for item in listed if passes(item.value, op.filter)]
        return items[op.offset : op.offset + op.limit]

    @staticmethod
    def _check_keys(
        place: Place, filter: Mapping[str, Any] | None, items: list[SearchItem]
    ) -> None:
        unknown = unknown_keys(filter, (item.value for item in items))
        if unknown:
            known = sorted({key for item in items for key in item.value})
            raise ValueError(
                f"filter on unknown key {', '.join(map(repr, unknown))}: the {place.root} of "
                f"{place.user_id!r} here have only {', '.join(known)}"
            )

    def _namespaces(self, user: str, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = {
            namespace_of(MEMORIES, user, memory.wing, memory.room)
            for memory in self._memories(Place(MEMORIES, user))
        }
        for wing, rooms in self.palace.wings(user_id=user).items():
            found.update(namespace_of(DRAWERS, user, wing, room) for room in rooms)
        conditions = op.match_conditions or ()
        chosen = {ns for ns in found if matches(ns, conditions)}
        if op.max_depth is not None:
            chosen = {ns[: op.max_depth] for ns in chosen}
        return sorted(chosen)[op.offset : op.offset + op.limit]


def _plain(item: SearchItem) -> Item:
    return Item(
        value=item.value,
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


__all__ = ["InvalidNamespaceError", "PalaceStore"]
