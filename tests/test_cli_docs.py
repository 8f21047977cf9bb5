"""docs/cli.md against the commands' --help, shell completion, and --help everywhere."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from palace_retrievers.cli import cli
from palace_retrievers.cli.docs import render

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def test_docs_cli_md_is_generated_from_the_help() -> None:
    assert DOCS.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is out of date: run `python -m palace_retrievers.cli.docs docs/cli.md`"
    )


def _paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, command in group.commands.items():
        out.append((*prefix, name))
        if isinstance(command, click.Group):
            out.extend(_paths(command, (*prefix, name)))
    return out


def test_every_command_is_documented_with_its_help() -> None:
    text = DOCS.read_text(encoding="utf-8")
    paths = _paths(cli)
    for required in [
        "init",
        "mine",
        "sync",
        "search",
        "remember",
        "forget",
        "memories",
        "kg",
        "context",
        "gc",
        "restore",
        "status",
        "plugins",
        "reindex",
        "export",
        "import",
        "mcp",
    ]:
        assert (required,) in paths, required
    for path in paths:
        result = CliRunner().invoke(cli, [*path, "--help"], prog_name="palace")
        assert result.exit_code == 0, path
        assert f"## `palace {' '.join(path)}`" in text
        assert result.stdout.splitlines()[0].startswith(f"Usage: palace {' '.join(path)}")


def test_bash_completion_script_and_completions() -> None:
    script = CliRunner().invoke(
        cli, [], prog_name="palace", env={"_PALACE_COMPLETE": "bash_source"}
    )
    assert script.exit_code == 0
    assert "_palace_completion" in script.stdout
    assert "complete -o nosort -F _palace_completion palace" in script.stdout

    words = CliRunner().invoke(
        cli,
        [],
        prog_name="palace",
        env={"_PALACE_COMPLETE": "bash_complete", "COMP_WORDS": "palace mem", "COMP_CWORD": "1"},
    )
    assert words.exit_code == 0
    assert "plain,memories" in words.stdout.splitlines()

    sub = CliRunner().invoke(
        cli,
        [],
        prog_name="palace",
        env={
            "_PALACE_COMPLETE": "bash_complete",
            "COMP_WORDS": "palace memories list --status ",
            "COMP_CWORD": "4",
        },
    )
    assert {"plain,active", "plain,archived", "plain,all"} <= set(sub.stdout.splitlines())


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_other_shells_get_a_script(shell: str) -> None:
    script = CliRunner().invoke(
        cli, [], prog_name="palace", env={"_PALACE_COMPLETE": f"{shell}_source"}
    )
    assert script.exit_code == 0
    assert "palace" in script.stdout
