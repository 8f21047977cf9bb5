"""How the MCP server is reached: stdio, or streamable HTTP behind a bearer token."""

from __future__ import annotations

import hmac
import ipaddress

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from palace_retrievers.errors import ConfigError

DEFAULT_PORT = 8766


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerToken:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
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
    """Refuse to listen beyond loopback without a bearer token.

    Raises:
        ConfigError: ``host`` is not a loopback address and ``token`` is empty.
    """
    if not token and not is_loopback(host):
        raise ConfigError(
            f"the MCP server would listen on {host}, beyond this machine: give a bearer token "
            "with --token or PALACE_MCP_TOKEN (or bind to 127.0.0.1)"
        )


def serve_stdio(server: MCPServer) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    server.run("stdio")


def serve_http(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted.

    Raises:
        ConfigError: ``host`` is not a loopback address and no ``token`` is given.
    """
    check_bind(host, token)
    import anyio
    import uvicorn

    app: ASGIApp = server.streamable_http_app(host=host)
    if token:
        app = BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)
