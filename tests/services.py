"""Real servers for the backend tests: PostgreSQL with pgvector, and a ``chroma run`` server.

A pytest plugin: a test module loads it with ``pytest_plugins = ["services"]`` and asks
for the session-scoped fixtures ``postgres`` and ``chroma_server``. Each server starts on
first use, in a temporary folder, on this machine only (a Unix socket for PostgreSQL, a
free loopback port for Chroma), and is stopped (and its folder deleted) when the session
ends.

- PostgreSQL comes from the PyPI package ``pgserver``: PostgreSQL 16 binaries with the
  ``vector`` extension, run from a data folder (as root too: it runs the server as a
  ``pgserver`` system user).
- Chroma's server is the ``chroma`` command that ``chromadb`` installs.

A test that needs a server which is not installed is skipped, unless the ``CI``
environment variable is set (``.ci/run`` sets it): in CI a missing service fails the test,
so CI can never skip these tests silently. A server that is installed but fails to start
is an error everywhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def in_ci() -> bool:
    """Whether the tests run in CI (``CI`` set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def service_absent(what: str) -> None:
    """Skip the test because ``what`` is not installed, or fail it in CI."""
    message = f"{what} is not installed"
    if in_ci():
        pytest.fail(f"{message}, and CI must run every backend test (`make install-dev`)")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- PostgreSQL ---------------------------------------------------------------------------


@dataclass
class PostgresService:
    """A running PostgreSQL 16 with pgvector, reached over a Unix socket.

    Attributes:
        url: The libpq URL of its ``postgres`` database (superuser, trust auth).
    """

    server: Any
    url: str

    def stop(self) -> None:
        """Stop the server (``pg_ctl stop -m fast``); :meth:`start` brings it back."""
        import pgserver

        pgserver.pg_ctl(
            ["-w", "-m", "fast", "stop"], pgdata=self.server.pgdata, user=self.server.system_user
        )

    def start(self) -> None:
        """Start the server again after :meth:`stop`, on the same socket."""
        self.server.ensure_postgres_running()
        self.url = self.server.get_uri()

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        """Run one statement on its own connection; the rows it returns."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresService]:
    """A PostgreSQL server with pgvector for the session (pgserver), stopped at the end."""
    try:
        import pgserver
        import psycopg  # noqa: F401 - the backend's own dependency
    except ImportError:
        service_absent("PostgreSQL with pgvector (the `pgserver` and `psycopg` packages)")
    root = Path(tempfile.mkdtemp(prefix="palace-pg-"))
    server = pgserver.get_server(root / "data", cleanup_mode="delete")
    try:
        service = PostgresService(server=server, url=server.get_uri())
        service.sql("CREATE EXTENSION IF NOT EXISTS vector")
        yield service
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


# -- Chroma -------------------------------------------------------------------------------


@dataclass
class ChromaServer:
    """A ``chroma run`` server on a loopback port.

    Attributes:
        host, port: Where it listens.
        path: Its persistence folder.
    """

    host: str
    port: int
    path: Path
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, *, timeout: float = 60.0) -> None:
        """Start the server and wait until it answers its heartbeat."""
        executable = Path(sys.executable).with_name("chroma")
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    str(executable),
                    "run",
                    "--path",
                    str(self.path),
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    if self._heartbeat():
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the chroma server did not start on {self.url}:\n{tail}")

    def _heartbeat(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="session")
def chroma_server() -> Iterator[ChromaServer]:
    """A ``chroma run`` server on a free loopback port for the session, stopped at the end."""
    if not Path(sys.executable).with_name("chroma").exists():
        service_absent("the `chroma` server command (from `chromadb`)")
    root = Path(tempfile.mkdtemp(prefix="palace-chroma-"))
    server = ChromaServer(
        host="127.0.0.1", port=free_port(), path=root / "db", log=root / "server.log"
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
