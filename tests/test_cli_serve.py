"""``palace serve``: the command hands the palace, address and token to the memory page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from palace_retrievers import web
from palace_retrievers.cli import cli


def test_serve_passes_its_options_to_the_memory_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Path, dict[str, Any]]] = []
    monkeypatch.setattr(web, "serve", lambda path, **kwargs: calls.append((path, kwargs)))
    result = CliRunner().invoke(
        cli, ["--palace", str(tmp_path / "p"), "serve", "--port", "9123", "--token", "t0k"]
    )
    assert result.exit_code == 0, result.stderr
    assert calls == [(tmp_path / "p", {"host": "127.0.0.1", "port": 9123, "token": "t0k"})]
    assert "http://127.0.0.1:9123/" in result.stderr
    assert result.stdout == ""


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--palace", str(tmp_path / "p"), "serve", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: refusing to serve the memory page on '0.0.0.0'")
    assert result.stderr.count("\n") == 1
