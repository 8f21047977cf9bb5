"""The memory page as a Starlette app: :func:`create_app`.

Routes (every one takes ``?user=<user_id>``; POSTs carry it as a form field; on a page
bound to one user, any other user is refused with 403):

==========================  =====================================================
``GET /``, ``GET /search``  search, each hit with its score parts
``GET /wings``              wings and rooms with their drawer counts
``GET /browse``             the drawers of a wing (and room)
``GET /drawers/{id}``       one drawer, verbatim
``GET /memories``           memories by kind and status; a form to remember one
``GET /memories/{id}``      one memory: edit, pin, delete or restore; its history and
                            supersede chain
``GET /timeline``           an entity's timeline in the knowledge graph
``POST /memories``          remember
``POST /memories/{id}/…``   ``edit``, ``pin``, ``delete`` (soft), ``restore``
==========================  =====================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from importlib.resources import files
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from palace_retrievers.palace import Palace
from palace_retrievers.web.pages import Pages, bound_user
from palace_retrievers.web.security import Guard, GuardMiddleware, HostGuard

Page = Callable[[Request, str], Awaitable[Response]]


def create_app(
    palace: Palace,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    user: str | None = None,
) -> Starlette:
    """The memory page of ``palace``, as an ASGI app.

    The app does not own the palace: closing it is the caller's business.

    Args:
        palace: An open palace; every read and write goes through its API.
        token: An access token every request must show (see
            :mod:`palace_retrievers.web.security`); ``None`` for none.
        host: The address the app is served on: it answers to a ``Host`` header naming
            it or a loopback name, and refuses any other with 421 (DNS rebinding).
        user: The one user whose records every page reads and writes; a request that
            names another user is refused with 403. ``None``: the ``user`` parameter
            chooses, so whoever opens the page sees every user's records.

    Raises:
        ConfigError: ``token`` is too weak, or ``user`` is blank or too long.
    """
    templates = Environment(
        loader=PackageLoader("palace_retrievers.web", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["when"] = _when
    templates.filters["score"] = _score
    guard = Guard(token=token, host=host)
    pages = Pages(palace, templates=templates, guard=guard, user=bound_user(user))

    def route(path: str, page: Page, *, methods: tuple[str, ...] = ("GET",)) -> Route:
        async def endpoint(request: Request) -> Response:
            return await pages.handle(request, page)

        return Route(path, endpoint, methods=list(methods), name=page.__name__)

    static = Path(str(files("palace_retrievers.web") / "static"))
    app = Starlette(
        routes=[
            route("/", pages.search),
            route("/search", pages.search),
            route("/wings", pages.wings),
            route("/browse", pages.room),
            route("/drawers/{drawer_id:path}", pages.drawer),
            route("/memories", pages.memories),
            route("/memories", pages.remember, methods=("POST",)),
            route("/memories/{memory_id}", pages.memory),
            route("/memories/{memory_id}/edit", pages.edit, methods=("POST",)),
            route("/memories/{memory_id}/pin", pages.pin, methods=("POST",)),
            route("/memories/{memory_id}/delete", pages.delete, methods=("POST",)),
            route("/memories/{memory_id}/restore", pages.restore, methods=("POST",)),
            route("/timeline", pages.timeline),
            Mount("/static", app=StaticFiles(directory=static), name="static"),
        ],
        middleware=[
            Middleware(HostGuard, host=host),
            Middleware(GuardMiddleware, guard=guard),
        ],
    )
    app.state.palace = palace
    return app


def _when(value: object) -> str:
    """A time as ``YYYY-MM-DD HH:MM`` (UTC; the date alone at midnight), or a dash."""
    if value is None or value == "":
        return "—"
    if not isinstance(value, datetime):
        return str(value)
    if (value.hour, value.minute, value.second) == (0, 0, 0):
        return value.strftime("%Y-%m-%d")
    return value.strftime("%Y-%m-%d %H:%M")


def _score(value: float) -> str:
    return f"{value:.3f}"
