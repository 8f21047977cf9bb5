"""``palace serve``: the command hands the palace, address, token and user to the memory page.

These tests replace :func:`palace_retrievers.web.serve` with a recorder (or refuse before
any palace exists): they are about the command line, not about what the page shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from palace_retrievers import web
from palace_retrievers.cli import cli

TOKEN = "9f86d081884c7d659a2feaa0c55ad015"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, dict[str, Any]]]:
    """What ``palace serve`` passes to the memory page (which is not started)."""
    recorded: list[tuple[Path, dict[str, Any]]] = []
    monkeypatch.setattr(web, "serve", lambda path, **kwargs: recorded.append((path, kwargs)))
    return recorded


def test_serve_passes_its_options_to_the_memory_page(
    tmp_path: Path, calls: list[tuple[Path, dict[str, Any]]]
) -> None:
    result = CliRunner().invoke(
        cli, ["--palace", str(tmp_path / "p"), "serve", "--port", "9123", "--token", TOKEN]
    )
    assert result.exit_code == 0, result.stderr
    expected = {"host": "127.0.0.1", "port": 9123, "token": TOKEN, "user": None}
    assert calls == [(tmp_path / "p", expected)]
    assert "http://127.0.0.1:9123/" in result.stderr
    assert "every user's records" in result.stderr
    assert result.stdout == ""


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--palace", str(tmp_path / "p"), "serve", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: refusing to serve the memory page on '0.0.0.0'")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--token", "x"], {}),
        (["--token", "   "], {}),
        (["--token", "fifteen-chars-x"], {}),
        (["--host", "0.0.0.0", "--token", "a b c d e f g h i"], {}),
        ([], {"PALACE_WEB_TOKEN": " " * 20}),
        ([], {"PALACE_WEB_TOKEN": "1"}),
    ],
)
def test_serve_refuses_a_weak_token_in_one_line(
    tmp_path: Path, calls: list[tuple[Path, dict[str, Any]]], args: list[str], env: dict[str, str]
) -> None:
    """A one-character or blank token (flag or $PALACE_WEB_TOKEN) stops the command with
    one line naming the rule and exit code 1; the page is never started."""
    result = CliRunner(env=env).invoke(cli, ["--palace", str(tmp_path / "p"), "serve", *args])
    assert result.exit_code == 1, result.stderr
    assert result.stderr.startswith("error: the access token ")
    assert "at least 16 printable ASCII characters" in result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert calls == []


def test_serve_user_binds_the_page_to_one_user(
    tmp_path: Path, calls: list[tuple[Path, dict[str, Any]]]
) -> None:
    result = CliRunner().invoke(cli, ["--palace", str(tmp_path / "p"), "serve", "--user", "u1"])
    assert result.exit_code == 0, result.stderr
    assert calls == [
        (tmp_path / "p", {"host": "127.0.0.1", "port": 8765, "token": None, "user": "u1"})
    ]
    assert "user 'u1' only" in result.stderr


@pytest.mark.parametrize("user", ["", "   ", "u" * 201])
def test_serve_refuses_a_blank_user_in_one_line(
    tmp_path: Path, calls: list[tuple[Path, dict[str, Any]]], user: str
) -> None:
    result = CliRunner().invoke(cli, ["--palace", str(tmp_path / "p"), "serve", "--user", user])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1
    assert calls == []


def test_serve_help_warns_that_without_user_every_record_is_shown() -> None:
    """The help says plainly who sees what, and the token rule."""
    result = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200)
    text = " ".join(result.stdout.split())
    assert (
        "Without --user, whoever can open the page reads and changes every user's records" in text
    )
    assert "--user USER" in text
    assert "at least 16 printable ASCII characters, no spaces" in text
