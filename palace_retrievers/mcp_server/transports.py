"""How the MCP server is reached: stdio, or streamable HTTP behind a bearer token.

Over HTTP every request must name, in its ``Host`` header, a loopback name or the
address the server listens on, whatever that address is (:class:`HostGuard`, shared with
the memory page): the SDK's own DNS-rebinding check covers only a server bound to
127.0.0.1, ``localhost`` or ``::1``. A bearer token, when given, must follow the memory
page's token rule (:data:`~palace_retrievers.web.security.TOKEN_RULE`); the
``Authorization`` scheme is matched in any case (RFC 7235) and the token in constant time.
"""

from __future__ import annotations

import hmac

from mcp.server.mcpserver import MCPServer
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from palace_retrievers.errors import ConfigError
from palace_retrievers.web.security import HostGuard, check_token, is_loopback

DEFAULT_PORT = 8766

__all__ = [
    "DEFAULT_PORT",
    "BearerToken",
    "check_bind",
    "http_app",
    "is_loopback",
    "serve_http",
    "serve_stdio",
]


class BearerToken:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``.

    Raises:
        ConfigError: ``token`` is too weak (see :func:`check_token`).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        check_token(token, what="bearer token")
        self.app = app
        self._expected = token.encode()

    def _shown(self, scope: Scope) -> bool:
        scheme, _, credentials = Headers(scope=scope).get("authorization", "").partition(" ")
        given = credentials.strip().encode()
        return hmac.compare_digest(given, self._expected) and scheme.lower() == "bearer"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._shown(scope):
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="palace"'),
                    ],
                }
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b'{"error": "a valid bearer token is required"}',
                }
            )
            return
        await self.app(scope, receive, send)


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a bearer token, or with a weak one.

    Raises:
        ConfigError: ``host`` is not a loopback address and ``token`` is empty, or
            ``token`` is too weak (see :func:`check_token`).
    """
    if not token and not is_loopback(host):
        raise ConfigError(
            f"the MCP server would listen on {host}, beyond this machine: give a bearer token "
            "with --token or PALACE_MCP_TOKEN (or bind to 127.0.0.1)"
        )
    check_token(token, what="bearer token")


def serve_stdio(server: MCPServer) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    server.run("stdio")


def http_app(server: MCPServer, *, host: str = "127.0.0.1", token: str | None = None) -> ASGIApp:
    """The streamable HTTP app of ``server`` bound to ``host``, with its guards.

    The Host guard (loopback names and ``host`` only) comes first, then the bearer token
    when one is given; both wrap the SDK's app, whose lifespan they pass through.

    Raises:
        ConfigError: ``host`` is not a loopback address and no ``token`` is given, or
            ``token`` is too weak.
    """
    check_bind(host, token)
    app: ASGIApp = server.streamable_http_app(host=host)
    if token is not None:
        app = BearerToken(app, token)
    return HostGuard(app, host=host)


def serve_http(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted.

    Raises:
        ConfigError: ``host`` is not a loopback address and no ``token`` is given, or
            ``token`` is too weak.
    """
    app = http_app(server, host=host, token=token)
    import anyio
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)
