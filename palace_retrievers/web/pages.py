"""The memory page's handlers: each reads or writes through the :class:`Palace` API.

Every page is rendered on the server from a Jinja2 template with autoescaping on, so
stored text (a drawer holding ``<script>``) is shown as text. Every page belongs to one
user, and every palace call is made for that user only. On a page bound to a user
(``palace serve --user U``) that user is the only one: a request whose ``user``
parameter names another is refused with 403. Otherwise the ``user`` URL parameter (a
form's hidden field on a POST; empty for the palace's unowned records) chooses, so
whoever can open the page can read and change every user's records.
Writes are POST forms that carry the session's CSRF token (see :mod:`.security`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlencode

from jinja2 import Environment
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from palace_retrievers.errors import (
    ConfigError,
    InvalidQueryError,
    MemoryNotFoundError,
    PageError,
    PalaceBusyError,
    PalaceError,
)
from palace_retrievers.palace import Palace
from palace_retrievers.records.memories import MEMORY_KINDS, MEMORY_STATUSES
from palace_retrievers.web.security import CSRF_FIELD, Guard, session_of

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

#: The most hits a search may ask for, and the rows a list shows at a time.
MAX_K = 50
PAGE_SIZE = 50
MAX_USER_CHARS = 200

#: The notice a page shows after a write (``?done=<key>``); unknown keys show nothing.
NOTICES = {
    "edited": "Saved.",
    "pinned": "Pinned: importance 1.0.",
    "deleted": "Deleted: the memory is in the archive, and can be restored.",
    "restored": "Restored from the archive.",
    "remembered": "Remembered.",
}


class Pages:
    """The handlers of one app, around one open palace.

    Palace calls run in Starlette's thread pool, one at a time (the lock), so that a
    slow search never blocks the event loop and two writes never interleave.
    """

    def __init__(
        self,
        palace: Palace,
        *,
        templates: Environment,
        guard: Guard,
        user: str | None = None,
    ) -> None:
        self.palace = palace
        self.templates = templates
        self.guard = guard
        self.bound = user
        self._lock = threading.Lock()

    # -- plumbing -----------------------------------------------------------------------

    async def call(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a palace call in the thread pool, one at a time."""

        def locked() -> T:
            with self._lock:
                return function(*args, **kwargs)

        return await run_in_threadpool(locked)

    def render(
        self,
        request: Request,
        template: str,
        *,
        user: str,
        http_status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        """Render ``template`` for ``user`` with the session's CSRF token."""

        def link(path: str, **params: Any) -> str:
            return _link(path, user, **params)

        page = self.templates.get_template(template).render(
            user=user,
            bound=self.bound is not None,
            csrf=self.guard.csrf_token(session_of(request)),
            csrf_field=CSRF_FIELD,
            link=link,
            path=request.url.path,
            notice=NOTICES.get(request.query_params.get("done", "")),
            **context,
        )
        return HTMLResponse(page, status_code=http_status)

    def error(self, request: Request, user: str, status: int, message: str) -> HTMLResponse:
        return self.render(
            request,
            "error.html",
            user=user,
            http_status=status,
            status_code=status,
            message=message,
        )

    async def form(self, request: Request) -> FormData:
        """The POSTed form, once its CSRF token is checked.

        Raises:
            PageError: the form has no CSRF token, or not this session's.
        """
        form = await request.form()
        if not self.guard.csrf_ok(request.cookies.get("palace_session"), form.get(CSRF_FIELD)):
            raise PageError(403, "this form is stale or did not come from this page; reload it")
        return form

    def user_of(self, value: object) -> str:
        """The user a request is for: its ``user`` parameter, or the page's bound user.

        Raises:
            PageError: the parameter is too long, or names another user than the bound one.
        """
        user = _user(value)
        if self.bound is None:
            return user
        if user and user != self.bound:
            raise PageError(
                403,
                f"this memory page serves only the records of user {self.bound!r} "
                "(it was started with --user)",
            )
        return self.bound

    async def handle(self, request: Request, page: Callable[[Request, str], Any]) -> Response:
        """Run ``page`` for the request's user, turning palace errors into error pages."""
        user = self.bound or ""
        try:
            if request.method == "POST":
                form = await self.form(request)
                user = self.user_of(form.get("user"))
                response: Response = await page(request, user)
            else:
                user = self.user_of(request.query_params.get("user"))
                response = await page(request, user)
        except PageError as exc:
            return self.error(request, user, exc.status, exc.message)
        except MemoryNotFoundError as exc:
            return self.error(request, user, 404, str(exc))
        except PalaceBusyError as exc:
            return self.error(request, user, 503, str(exc))
        except PalaceError as exc:
            return self.error(request, user, 400, str(exc))
        return response

    # -- reading ------------------------------------------------------------------------

    async def search(self, request: Request, user: str) -> Response:
        params = request.query_params
        query = params.get("q", "").strip()
        k = _int(params.get("k"), default=10, low=1, high=MAX_K, name="k")
        wing = params.get("wing", "").strip() or None
        room = params.get("room", "").strip() or None
        history = params.get("history") == "1"
        hits = []
        if query:
            hits = await self.call(
                self.palace.search,
                query,
                k,
                wing=wing,
                room=room,
                user_id=user or None,
                include_history=history,
            )
        return self.render(
            request,
            "search.html",
            user=user,
            query=query,
            k=k,
            wing=wing or "",
            room=room or "",
            history=history,
            hits=[_hit_view(hit) for hit in hits],
        )

    async def wings(self, request: Request, user: str) -> Response:
        wings = await self.call(self.palace.wings, user_id=user or None)
        return self.render(request, "wings.html", user=user, wings=sorted(wings.items()))

    async def room(self, request: Request, user: str) -> Response:
        params = request.query_params
        wing = params.get("wing", "")
        room = params.get("room", "") or None
        offset = _int(params.get("offset"), default=0, low=0, high=10**9, name="offset")
        ids = await self.call(self.palace.drawer_ids, wing=wing, room=room, user_id=user or None)
        page_ids = ids[offset : offset + PAGE_SIZE]
        drawers = await self.call(self.palace.get, page_ids, user_id=user or None)
        drawers.sort(key=lambda d: (d.room, d.source, d.chunk_index, d.id))
        return self.render(
            request,
            "room.html",
            user=user,
            wing=wing,
            room=room or "",
            drawers=drawers,
            total=len(ids),
            offset=offset,
            page_size=PAGE_SIZE,
        )

    async def drawer(self, request: Request, user: str) -> Response:
        drawer_id = request.path_params["drawer_id"]
        found = await self.call(self.palace.get, [drawer_id], user_id=user or None)
        if not found:
            raise PageError(404, f"no drawer {drawer_id!r} for this user")
        return self.render(request, "drawer.html", user=user, drawer=found[0])

    async def memories(self, request: Request, user: str) -> Response:
        params = request.query_params
        kind = params.get("kind", "") or None
        status = params.get("status", "active")
        if kind is not None and kind not in MEMORY_KINDS:
            raise PageError(400, f"unknown kind {kind!r}; kinds are: {', '.join(MEMORY_KINDS)}")
        if status not in (*MEMORY_STATUSES, "all"):
            raise PageError(400, f"unknown status {status!r}")
        offset = _int(params.get("offset"), default=0, low=0, high=10**9, name="offset")
        rows = await self.call(
            self.palace.memories,
            user_id=user or None,
            kind=kind,
            status=None if status == "all" else status,
            limit=PAGE_SIZE + 1,
            offset=offset,
        )
        return self.render(
            request,
            "memories.html",
            user=user,
            memories=rows[:PAGE_SIZE],
            more=len(rows) > PAGE_SIZE,
            kind=kind or "",
            status=status,
            kinds=MEMORY_KINDS,
            statuses=(*MEMORY_STATUSES, "all"),
            offset=offset,
            page_size=PAGE_SIZE,
        )

    async def memory(self, request: Request, user: str) -> Response:
        memory_id = request.path_params["memory_id"]
        owner = user or None
        memory = await self.call(self.palace.memory, memory_id, user_id=owner)
        history = await self.call(self.palace.history, memory_id, user_id=owner)
        chain = await self.call(self.palace.chain, memory_id, user_id=owner)
        sources = await self.call(self.palace.get, list(memory.source_ids), user_id=owner)
        return self.render(
            request,
            "memory.html",
            user=user,
            memory=memory,
            history=history,
            chain=chain,
            sources=sources,
            kinds=MEMORY_KINDS,
        )

    async def timeline(self, request: Request, user: str) -> Response:
        entity = request.query_params.get("entity", "").strip()
        triples = []
        if entity:
            triples = await self.call(self.palace.kg.timeline, entity, user_id=user or None)
        stats = await self.call(self.palace.kg.stats, user_id=user or None)
        return self.render(
            request, "timeline.html", user=user, entity=entity, triples=triples, stats=stats
        )

    # -- writing ------------------------------------------------------------------------

    async def remember(self, request: Request, user: str) -> Response:
        form = await request.form()
        text = str(form.get("text", "")).strip()
        kind = str(form.get("kind", "fact"))
        if not text:
            raise PageError(400, "a memory needs some text")
        remembered = await self.call(
            self.palace.remember,
            text,
            kind=kind,
            importance=_importance(form.get("importance"), default=1.0),
            tags=_tags(form.get("tags")),
            user_id=user or None,
        )
        return _back(f"/memories/{remembered.memory.id}", user, "remembered")

    async def edit(self, request: Request, user: str) -> Response:
        memory_id = request.path_params["memory_id"]
        form = await request.form()
        current = await self.call(self.palace.memory, memory_id, user_id=user or None)
        changes: dict[str, Any] = {}
        text = str(form.get("text", current.text))
        if text.strip() and text != current.text:
            changes["text"] = text
        elif not text.strip():
            raise PageError(400, "a memory needs some text; delete it instead")
        importance = _importance(form.get("importance"), default=current.importance)
        if importance != current.importance:
            changes["importance"] = importance
        tags = _tags(form.get("tags"))
        if tuple(tags) != tuple(current.tags):
            changes["tags"] = tags
        kind = str(form.get("kind", current.kind))
        if kind != current.kind:
            changes["kind"] = kind
        if changes:
            await self.call(self.palace.edit_memory, memory_id, user_id=user or None, **changes)
        return _back(f"/memories/{memory_id}", user, "edited")

    async def pin(self, request: Request, user: str) -> Response:
        memory_id = request.path_params["memory_id"]
        await self.call(self.palace.pin, memory_id, user_id=user or None)
        return _back(f"/memories/{memory_id}", user, "pinned")

    async def delete(self, request: Request, user: str) -> Response:
        memory_id = request.path_params["memory_id"]
        await self.call(self.palace.archive_memory, memory_id, user_id=user or None)
        return _back(f"/memories/{memory_id}", user, "deleted")

    async def restore(self, request: Request, user: str) -> Response:
        memory_id = request.path_params["memory_id"]
        await self.call(self.palace.restore, memory_id, user_id=user or None)
        return _back(f"/memories/{memory_id}", user, "restored")


# -- small parsers ------------------------------------------------------------------------


def _link(path: str, user: str, **params: Any) -> str:
    """``path`` with ``params`` (and the user, when there is one) as its query string."""
    query = {k: v for k, v in params.items() if v not in (None, "", False)}
    if user:
        query["user"] = user
    return f"{path}?{urlencode(query)}" if query else path


def _back(path: str, user: str, done: str) -> RedirectResponse:
    """Post/redirect/get: back to ``path`` with a notice."""
    return RedirectResponse(_link(path, user, done=done), status_code=303)


def bound_user(user: str | None) -> str | None:
    """Check the user a page is bound to (``palace serve --user``); ``None`` for none.

    Raises:
        ConfigError: ``user`` is blank or longer than :data:`MAX_USER_CHARS`.
    """
    if user is None:
        return None
    if not user.strip() or user != user.strip():
        raise ConfigError("--user needs a user id without surrounding spaces")
    if len(user) > MAX_USER_CHARS:
        raise ConfigError(f"a user id has at most {MAX_USER_CHARS} characters")
    return user


def _user(value: object) -> str:
    user = value.strip() if isinstance(value, str) else ""
    if len(user) > MAX_USER_CHARS:
        raise PageError(400, f"a user id has at most {MAX_USER_CHARS} characters")
    return user


def _int(value: str | None, *, default: int, low: int, high: int, name: str) -> int:
    if value is None or not value.strip():
        return default
    try:
        number = int(value)
    except ValueError:
        raise PageError(400, f"{name} must be a whole number, not {value!r}") from None
    if not low <= number <= high:
        raise PageError(400, f"{name} must be between {low} and {high}, not {number}")
    return number


def _importance(value: object, *, default: float) -> float:
    if not isinstance(value, str) or not value.strip():
        return default
    try:
        number = float(value)
    except ValueError:
        raise InvalidQueryError(f"importance must be a number from 0 to 1, not {value!r}") from None
    if not 0.0 <= number <= 1.0:
        raise InvalidQueryError(f"importance must be from 0 to 1, not {number}")
    return number


def _tags(value: object) -> list[str]:
    if not isinstance(value, str):
        return []
    return [tag.strip() for tag in value.split(",") if tag.strip()]


def _hit_view(hit: Any) -> Mapping[str, Any]:
    """What the search page shows of a hit: the record, its score and each part of it."""
    parts = sorted((k, v) for k, v in hit.scores.items() if k != "final")
    if "final" in hit.scores:
        parts.append(("final", hit.scores["final"]))
    return {"hit": hit, "memory": hit.memory, "drawer": hit.drawer, "parts": parts}
