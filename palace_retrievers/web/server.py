"""Serving the memory page with uvicorn: :func:`serve`, and :func:`running` for tests.

The page binds to 127.0.0.1 by default. It refuses any other address unless it is
given an access token (of :data:`~palace_retrievers.web.security.TOKEN_RULE`'s strength),
since whoever reaches the page can read and change its records: every user's, unless the
page is bound to one user (``user=``). It answers only to a loopback ``Host`` or the
address it listens on (see :class:`~palace_retrievers.web.security.HostGuard`).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from palace_retrievers.errors import UnsafeBindError
from palace_retrievers.palace import Palace
from palace_retrievers.web.app import create_app
from palace_retrievers.web.pages import bound_user
from palace_retrievers.web.security import check_token, is_loopback

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "UnsafeBindError", "check_host", "is_loopback"]


def check_host(host: str, token: str | None) -> None:
    """Refuse to listen on ``host`` beyond loopback without a token, or with a weak one.

    Raises:
        UnsafeBindError: ``host`` is not a loopback address and ``token`` is empty.
        ConfigError: ``token`` is given but too weak (see
            :func:`~palace_retrievers.web.security.check_token`).
    """
    if not is_loopback(host) and not token:
        raise UnsafeBindError(
            f"refusing to serve the memory page on {host!r} without an access token: "
            "anyone who reaches it can read and change every memory. Pass a token "
            '(e.g. --token "$(openssl rand -hex 16)") or serve on 127.0.0.1'
        )
    check_token(token)


def serve(
    palace_path: Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    user: str | None = None,
) -> None:
    """Serve the memory page of the palace at ``palace_path`` until interrupted.

    Args:
        palace_path: The palace's directory (it must exist).
        host: The address to listen on (loopback unless a ``token`` is given); the page
            answers to it and to loopback names only.
        port: The port to listen on.
        token: The access token every request must show (required beyond loopback).
        user: The one user whose records the page reads and writes; ``None`` lets the
            ``user`` URL parameter choose any user's.

    Raises:
        UnsafeBindError: ``host`` is not loopback and there is no token.
        ConfigError: ``token`` is too weak, or ``user`` is blank or too long.
        PalaceNotFoundError: there is no palace at ``palace_path``.
    """
    check_host(host, token)
    bound_user(user)
    with Palace.open(palace_path, create=False) as palace:
        app = create_app(palace, token=token, host=host, user=user)
        log.info("memory page of %s at http://%s:%d/", palace.path, host, port)
        uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)


@contextmanager
def running(app: ASGIApp, *, host: str = DEFAULT_HOST, timeout: float = 10.0) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free port of ``host`` in a thread; yields its base URL.

    For tests and the screenshot script. The server stops when the block ends.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError(f"the memory page did not start on {host}:{port}")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
