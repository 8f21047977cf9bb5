"""The memory page's guards: an optional access token, a session cookie and CSRF tokens.

- **Access token.** When the page is served with a token (it must be, beyond loopback),
  every request shows it: ``Authorization: Bearer <token>``, or the ``palace_token``
  cookie that a first visit to ``/?token=<token>`` sets (the page then redirects to the
  same address without the token, so it stays out of the history and of ``Referer``).
- **Session.** Every visitor gets a random ``palace_session`` cookie (HttpOnly,
  SameSite=Strict). Nothing is stored on the server.
- **CSRF.** Each session's token is an HMAC of its session id under a secret drawn when
  the app starts; every form carries it in a hidden ``csrf`` field, and every POST whose
  field does not match its cookie is refused with 403. A POST whose ``Origin`` names
  another site is refused as well.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp

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


class Guard:
    """The secrets of one app: its CSRF key and its optional access token."""

    def __init__(self, *, token: str | None) -> None:
        self.token = token or None
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
        if request.method == "POST" and not _same_origin(request):
            return _refused(403, "a form from another site was refused")
        response = await call_next(request)
        if fresh:
            response.set_cookie(SESSION_COOKIE, session or "", httponly=True, samesite="strict")
        return _with_headers(response)


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def _refused(status: int, message: str) -> Response:
    return _with_headers(PlainTextResponse(message, status_code=status))


def _with_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response
