"""The palace as an MCP server, on the official ``mcp`` SDK's ``MCPServer`` (ex-FastMCP).

One server serves one palace for one user: the ``user_id`` is fixed when the server
starts (``palace mcp --user U``), so no client can reach another user's records, and
every tool goes through the :class:`~palace_retrievers.palace.Palace` API.

Search discloses progressively, as claude-mem does: ``search`` returns a compact index
(id, date, first line, score) and ``get_drawer`` the full text of the ids worth reading.

Transports: stdio (the default; only protocol on stdout, logs on stderr) and streamable
HTTP (:func:`serve_http`), bound to 127.0.0.1 unless told otherwise, answering only to a
loopback ``Host`` or the one it listens on, and guarded by a bearer token, which is
required when the server listens beyond loopback.
"""

from palace_retrievers.mcp_server.tools import build_server
from palace_retrievers.mcp_server.transports import (
    DEFAULT_PORT,
    BearerToken,
    check_bind,
    http_app,
    is_loopback,
    serve_http,
    serve_stdio,
)

__all__ = [
    "DEFAULT_PORT",
    "BearerToken",
    "build_server",
    "check_bind",
    "http_app",
    "is_loopback",
    "serve_http",
    "serve_stdio",
]
