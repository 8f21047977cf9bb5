"""The memory page's guards: the Host check, an optional access token, a session cookie
and CSRF tokens. The Host check and the token rule guard the MCP HTTP server as well.

- **Host.** Every request must name, in its ``Host`` header, a loopback name
  (``localhost``, 127.0.0.0/8, ``[::1]``) or the address the server listens on, with or
  without a port (:class:`HostGuard`); any other gets 421. Without it, a page served from
  a domain that an attacker rebinds to 127.0.0.1 (DNS rebinding) would be same-origin
  with the memory page and could read and change it. A server bound to every address
  (``0.0.0.0``, ``::``) needs a token, and answers to any Host. An ``Origin`` header, when
  sent, must name an allowed host as well (403 otherwise).
- **Access token.** When the page is served with a token (it must be, beyond loopback),
  every request shows it: ``Authorization: Bearer <token>``, or the ``palace_token``
  cookie that a first visit to ``/?token=<token>`` sets (the page then redirects to the
  same address without the token, so it stays out of the history and of ``Referer``).
- **Session.** Every visitor gets a random ``palace_session`` cookie (HttpOnly,
  SameSite=Strict). Nothing is stored on the server.
- **CSRF.** Each session's token is an HMAC of its session id under a secret drawn when
  the app starts; every form carries it in a hidden ``csrf`` field, and every POST whose
  field does not match its cookie is refused with 403. A POST whose ``Origin`` is not the
  page's own (an allowed host) is refused as well.
- **Token rule.** An access token has at least :data:`MIN_TOKEN_CHARS` printable ASCII
  characters, no whitespace, and not only a few distinct ones (:func:`check_token`);
  a weaker one is refused with :class:`ConfigError` when the server starts.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode, urlsplit

from starlette.datastructures import Headers
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from palace_retrievers.errors import ConfigError

SESSION_COOKIE = "palace_session"
TOKEN_COOKIE = "palace_token"
CSRF_FIELD = "csrf"

#: Sent with every page: no inline script or style, no framing, no referrer to other sites
#: (same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on a form).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


#: The shortest access token accepted, and the fewest distinct characters it may have.
MIN_TOKEN_CHARS = 16
MIN_TOKEN_DISTINCT = 5
#: The token rule, as the CLI's --token help and :func:`check_token`'s errors say it.
TOKEN_RULE = (
    f"at least {MIN_TOKEN_CHARS} printable ASCII characters, no spaces "
    '(e.g. "$(openssl rand -hex 16)")'
)

#: The addresses that mean "every interface": a server bound to one answers to any Host.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})


def check_token(token: str | None, *, what: str = "access token") -> None:
    """Refuse a token that is too weak to guard a server; ``None`` (no token) passes.

    Raises:
        ConfigError: ``token`` is empty, blank, holds whitespace or characters beyond
            printable ASCII, is shorter than :data:`MIN_TOKEN_CHARS` or repeats fewer
            than :data:`MIN_TOKEN_DISTINCT` distinct characters. The message never
            repeats the token.
    """
    if token is None:
        return
    if not token.strip():
        problem = "is empty or blank"
    elif any(c.isspace() for c in token):
        problem = "contains whitespace"
    elif not all("!" <= c <= "~" for c in token):
        problem = "contains characters other than printable ASCII"
    elif len(token) < MIN_TOKEN_CHARS:
        problem = f"has {len(token)} characters, fewer than {MIN_TOKEN_CHARS}"
    elif len(set(token)) < MIN_TOKEN_DISTINCT:
        problem = f"has fewer than {MIN_TOKEN_DISTINCT} distinct characters"
    else:
        return
    raise ConfigError(f"the {what} {problem}: use {TOKEN_RULE}")


def is_loopback(host: str) -> bool:
    """True when ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    name = host.strip().lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header or URL authority, without its port, lower case.

    ``"LOCALHOST:8765"`` gives ``"localhost"``, ``"[::1]:80"`` gives ``"::1"``; a value
    that is not ``host[:port]`` gives ``None``.
    """
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        name, rest = text[1:end], text[end + 1 :]
        if end < 0 or not name:
            return None
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    name = name.rstrip(".")
    if not name or any(c.isspace() or c in "/@?#" for c in name):
        return None
    return name


class HostPolicy:
    """Which ``Host`` names a server bound to ``host`` answers to.

    Loopback names always; ``host`` itself too; any name when ``host`` is a wildcard
    address (such a server must have an access token: see ``check_host``/``check_bind``).
    """

    def __init__(self, host: str) -> None:
        self.host = host
        self.any_host = host.strip() in WILDCARD_HOSTS
        self._own = host_name(host) or host.strip().lower()

    def allows(self, value: str | None) -> bool:
        """True when the ``Host`` header ``value`` (or URL authority) is one to answer."""
        if self.any_host:
            return True
        name = host_name(value) if value else None
        if name is None:
            return False
        return is_loopback(name) or name == self._own

    def origin_ok(self, origin: str) -> bool:
        """True when the ``Origin`` header names an http(s) site on an allowed host."""
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or parts.path or parts.query:
            return False
        return self.allows(parts.netloc)


class HostGuard:
    """ASGI middleware: refuses a request whose ``Host`` or ``Origin`` is not allowed.

    A foreign ``Host`` gets 421 (Misdirected Request), a foreign ``Origin`` 403, each
    with a one-line message; a ``null`` Origin is left to the app (the memory page
    refuses it on a POST). Lifespan events pass through.
    """

    def __init__(self, app: ASGIApp, *, host: str) -> None:
        self.app = app
        self.policy = HostPolicy(host)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and message that refuse this request, or ``None`` to serve it."""
        headers = Headers(scope=scope)
        if not self.policy.allows(headers.get("host")):
            return 421, "refused: the Host header names a site this server does not serve"
        origin = headers.get("origin")
        if origin is not None and origin != "null" and not self.policy.origin_ok(origin):
            return 403, "refused: the Origin header names another site"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refused = self.refusal(scope)
            if refused is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                status, message = refused
                response = _with_headers(PlainTextResponse(message, status_code=status))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Guard:
    """The secrets of one app: its CSRF key, its optional access token, its host policy."""

    def __init__(self, *, token: str | None, host: str = "127.0.0.1") -> None:
        check_token(token)
        self.token = token
        self.hosts = HostPolicy(host)
        self._key = secrets.token_bytes(32)

    def csrf_token(self, session: str) -> str:
        """The CSRF token of ``session`` (stable for the app's lifetime)."""
        return hmac.new(self._key, session.encode("utf-8"), hashlib.sha256).hexdigest()

    def csrf_ok(self, session: str | None, supplied: object) -> bool:
        """True when ``supplied`` is the CSRF token of ``session``."""
        if not session or not isinstance(supplied, str) or not supplied:
            return False
        return hmac.compare_digest(self.csrf_token(session), supplied)

    def token_ok(self, request: Request) -> bool:
        """True when no token is required or ``request`` shows the right one."""
        if self.token is None:
            return True
        header = request.headers.get("authorization", "")
        shown = header[7:].strip() if header.lower().startswith("bearer ") else ""
        shown = shown or request.cookies.get(TOKEN_COOKIE, "")
        return bool(shown) and hmac.compare_digest(shown.encode(), self.token.encode())


def session_of(request: Request) -> str:
    """The session id of ``request`` (a new one, set by :class:`GuardMiddleware`, if none)."""
    session: str = request.state.session
    return session


class GuardMiddleware(BaseHTTPMiddleware):
    """Checks the access token, issues the session cookie and sets the security headers."""

    def __init__(self, app: ASGIApp, *, guard: Guard) -> None:
        super().__init__(app)
        self.guard = guard

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        guard = self.guard
        given = request.query_params.get("token")
        if guard.token is not None and given is not None and request.method == "GET":
            if not hmac.compare_digest(given.encode(), guard.token.encode()):
                return _refused(401, "wrong access token")
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
            return _with_headers(redirect)
        if not guard.token_ok(request):
            return _refused(
                401,
                "this memory page needs its access token: open it once as /?token=<token> "
                "or send 'Authorization: Bearer <token>'",
            )
        session = request.cookies.get(SESSION_COOKIE)
        fresh = not session or len(session) < 32
        if fresh:
            session = secrets.token_urlsafe(32)
        request.state.session = session
        if request.method == "POST" and not _same_origin(request, guard.hosts):
            return _refused(403, "a form from another site was refused")
        response = await call_next(request)
        if fresh:
            response.set_cookie(SESSION_COOKIE, session or "", httponly=True, samesite="strict")
        return _with_headers(response)


def _same_origin(request: Request, hosts: HostPolicy) -> bool:
    """True when the request has no ``Origin``, or the page's own on an allowed host."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    if not hosts.allows(host) or not hosts.origin_ok(origin):
        return False
    return origin.lower() in (f"http://{host}".lower(), f"https://{host}".lower())


def _refused(status: int, message: str) -> Response:
    return _with_headers(PlainTextResponse(message, status_code=status))


def _with_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
