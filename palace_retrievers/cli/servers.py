"""``palace serve`` (the memory page in a browser) and ``palace mcp`` (the MCP server)."""

from __future__ import annotations

import sys
from contextlib import ExitStack, redirect_stdout

import click

from palace_retrievers.cli.app import cli, opened

_TOKEN_RULE = "at least 16 printable ASCII characters, no spaces"


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--token",
    envvar="PALACE_WEB_TOKEN",
    help="Access token every request must show; required beyond 127.0.0.1; "
    f'{_TOKEN_RULE}, e.g. "$(openssl rand -hex 16)" (default: $PALACE_WEB_TOKEN).',
)
@click.option(
    "--user",
    "user_id",
    metavar="USER",
    help="Bind the page to this one user: every read and write is theirs, and a request "
    "naming another user is refused (403). Without it the page shows and changes every "
    "user's records, to whoever can open it.",
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, token: str | None, user_id: str | None) -> None:
    """Serve the memory page: search, browse, edit, pin, delete and restore memories.

    Without --user, whoever can open the page reads and changes every user's records
    (the page's user box only chooses which to show): pass --user to serve one user's.
    The page answers only to a loopback Host (localhost, 127.0.0.0/8, [::1]) or --host.
    """
    from palace_retrievers import web
    from palace_retrievers.web.pages import bound_user
    from palace_retrievers.web.server import check_host

    check_host(host, token)
    bound_user(user_id)
    path = ctx.find_root().obj["path"]
    whose = f"user {user_id!r} only" if user_id is not None else "every user's records"
    click.echo(
        f"memory page of {path} at http://{host}:{port}/ ({whose}; Ctrl-C stops it)", err=True
    )
    web.serve(path, host=host, port=port, token=token, user=user_id)


@cli.command()
@click.option("--user", "user_id", help="The one user whose records the server serves.")
@click.option("--http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to listen on.")
@click.option("--port", default=8766, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--token",
    envvar="PALACE_MCP_TOKEN",
    help="HTTP: the bearer token clients must send; required beyond 127.0.0.1; "
    f"{_TOKEN_RULE} (default: $PALACE_MCP_TOKEN).",
)
@click.pass_context
def mcp(
    ctx: click.Context,
    user_id: str | None,
    http: bool,
    host: str,
    port: int,
    token: str | None,
) -> None:
    """Serve the palace to MCP clients (stdio by default), as one user.

    \b
    Tools: search, get_drawer, list_wings, list_rooms, remember, forget, memories,
    kg_query, kg_add, kg_invalidate, kg_timeline, context, status.
    With stdio, stdout carries only the protocol; logs go to stderr.
    """
    from palace_retrievers import mcp_server

    if not http:
        with ExitStack() as stack:
            # stdout is the protocol's: what opening the palace might print goes to stderr.
            with redirect_stdout(sys.stderr):
                palace = stack.enter_context(opened(ctx))
                server = mcp_server.build_server(palace, user_id=user_id)
            mcp_server.serve_stdio(server)
        return
    mcp_server.check_bind(host, token)
    with opened(ctx) as palace:
        server = mcp_server.build_server(palace, user_id=user_id)
        click.echo(f"MCP server for {palace.path} at http://{host}:{port}/mcp", err=True)
        mcp_server.serve_http(server, host=host, port=port, token=token)
