"""The README's examples run as written: its Python blocks, then its `palace` commands.

The blocks run in order, in this process, in the test's own ``$HOME`` (so the README's
``~/.palace/default`` is a fresh palace), from the repository root (the README mines
``examples/sample-corpus``), with the real model: this is a newcomer's first run. The
install commands are checked by ``tests/test_doc_claims.py`` instead of being run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from palace_retrievers.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def fenced(text: str, *languages: str) -> list[str]:
    """The bodies of the fenced blocks of ``text`` in one of ``languages``, in order."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    return [body for language, body in blocks if language in languages]


def palace_commands(text: str) -> list[list[str]]:
    """The `palace …` lines of the shell blocks of ``text``, as argument lists."""
    return [
        shlex.split(line, comments=True)[1:]
        for block in fenced(text, "sh", "bash", "shell")
        for line in block.splitlines()
        if line.startswith("palace ")
    ]


def test_the_blocks_are_found() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(fenced(text, "python")) >= 2
    assert palace_commands(text)[0][0] == "mine"


@pytest.mark.slow
def test_the_readme_examples_run_on_a_first_run(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not (isolated_env / ".palace").exists()
    monkeypatch.chdir(ROOT)
    text = README.read_text(encoding="utf-8")
    namespace: dict[str, Any] = {"__name__": "readme"}
    try:
        exec(compile("\n".join(fenced(text, "python")), str(README), "exec"), namespace)
    finally:
        if "palace" in namespace:
            namespace["palace"].close()
    out = capsys.readouterr().out
    # The chain ran, and the retriever found the mined files (the same user: none).
    assert "PostgreSQL 15" in out
    assert "examples/sample-corpus/docs/" in out
    # The second memory replaced the first, and the recall tool answers with it.
    assert "updated" in out
    assert "I live in Porto now" in out

    said = {}
    for args in palace_commands(text):
        result = CliRunner().invoke(cli, args, prog_name="palace", catch_exceptions=False)
        assert result.exit_code == 0, (args, result.output)
        said[args[0]] = result.output
    assert "deployment-runbook.md" in said["search"]
    assert "French" in said["context"]
