"""The ``chroma`` backend in server mode, against a real ``chroma run`` server.

The server starts once for the session on a free loopback port (``tests/services.py``);
each test's palace has its own folder, hence its own collections on the server. Skipped
only when the ``chroma`` command is missing and ``CI`` is unset.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from degraded_palace import check_degrades_and_recovers, palace_config

from palace_plugins.builtin.backends.chroma import ChromaIndex, server_address
from palace_plugins.testing import BackendTests, IndexFactory, entry, synthetic_vectors
from palace_retrievers import Palace
from palace_retrievers.errors import ConfigError, IndexUnavailableError
from palace_retrievers.index import BackendContext
from palace_retrievers.ledger.sqlite import LEDGER_FILE, SQLiteLedger

if TYPE_CHECKING:
    from services import ChromaServer

pytest_plugins = ["services"]


class TestChromaServerBackend(BackendTests):
    batch_size = 1500  # every call crosses HTTP: half the default keeps the suite quick

    @pytest.fixture
    def index_factory(self, chroma_server: ChromaServer) -> IndexFactory:
        def factory(context: BackendContext) -> ChromaIndex:
            options = {"url": chroma_server.url, **context.options}
            return ChromaIndex(dataclasses.replace(context, options=options))

        return factory


_LEDGERS: list[SQLiteLedger] = []


@pytest.fixture(autouse=True)
def _close_ledgers() -> Iterator[None]:
    yield
    while _LEDGERS:
        _LEDGERS.pop().close()


def _context(palace_dir: Path, **options: Any) -> BackendContext:
    palace_dir.mkdir(parents=True, exist_ok=True)
    ledger = SQLiteLedger(palace_dir / LEDGER_FILE)
    _LEDGERS.append(ledger)
    return BackendContext(
        palace_dir=palace_dir, collection="drawers", dimension=8, ledger=ledger, options=options
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, None),
        ({"ef_search": 50}, None),
        (
            {"url": "http://127.0.0.1:8123"},
            {"host": "127.0.0.1", "port": 8123, "ssl": False, "headers": {}},
        ),
        (
            {"url": "https://chroma.example.org", "headers": {"Authorization": "Bearer t"}},
            {
                "host": "chroma.example.org",
                "port": 443,
                "ssl": True,
                "headers": {"Authorization": "Bearer t"},
            },
        ),
        (
            {"host": "db.internal", "port": 9000, "tenant": "team", "database": "notes"},
            {
                "host": "db.internal",
                "port": 9000,
                "ssl": False,
                "headers": {},
                "tenant": "team",
                "database": "notes",
            },
        ),
    ],
)
def test_server_address(options: dict[str, Any], expected: dict[str, Any] | None) -> None:
    assert server_address(options) == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"url": "ftp://x"}, "url must be http"),
        ({"url": "http://a:1", "host": "b"}, "either url or host and port"),
        ({"port": 70000}, "port must be a port number"),
        ({"namespace": "shared"}, "namespace applies to a server"),
        ({"url": "http://a:1", "headers": {"x": 1}}, "headers must be a table of strings"),
        ({"nope": 1}, "unknown option 'nope'"),
        ({"url": "http://127.0.0.1:1", "namespace": "Not OK"}, "namespace must be"),
    ],
)
def test_bad_options_are_config_errors(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ChromaIndex(_context(tmp_path, **options))


def test_an_unreachable_server_is_index_unavailable(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(IndexUnavailableError, match=r"Chroma server.*palace reindex"):
        ChromaIndex(_context(tmp_path, url=f"http://127.0.0.1:{port}"))


def test_palaces_on_one_server_are_separate_unless_they_share_a_namespace(
    chroma_server: ChromaServer, tmp_path: Path
) -> None:
    url = chroma_server.url
    one = ChromaIndex(_context(tmp_path / "one", url=url))
    two = ChromaIndex(_context(tmp_path / "two", url=url))
    shared_a = ChromaIndex(_context(tmp_path / "a", url=url, namespace="team_notes"))
    shared_b = ChromaIndex(_context(tmp_path / "b", url=url, namespace="team_notes"))
    try:
        one.upsert(
            entries=[entry(f"e{i}", v) for i, v in enumerate(synthetic_vectors(4, dimension=8))]
        )
        shared_a.upsert(entries=[entry("s", synthetic_vectors(1, dimension=8)[0])])
        assert (one.count(), two.count(), shared_b.count()) == (4, 0, 1)
        assert "Chroma server http://127.0.0.1" in one.health().detail
        assert not (tmp_path / "one" / "index" / "chroma").exists()  # nothing embedded
    finally:
        for index in (one, two, shared_a, shared_b):
            index.close()


def test_a_palace_on_a_chroma_server_falls_back_while_the_server_is_down(
    chroma_server: ChromaServer,
    tmp_path: Path,
    open_palace: Callable[..., Palace],
    caplog: pytest.LogCaptureFixture,
) -> None:
    palace_dir = tmp_path / "palace"
    palace_config(palace_dir, "chroma", url=chroma_server.url)
    check_degrades_and_recovers(
        palace_dir, open_palace, caplog, breaks=chroma_server.stop, repairs=chroma_server.start
    )
