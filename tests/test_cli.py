"""The ``palace`` command line: commands, exit codes and error messages.

These run the real model, real Chroma and real SQLite through click's test runner, plus
two real subprocesses to check exit codes and stderr as a shell sees them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from palace_retrievers.cli import cli

pytestmark = pytest.mark.slow


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "ops").mkdir(parents=True)
    (root / "ops" / "deploy.md").write_text(
        "# Deploying\n\nWe deploy to production with a blue/green switch on lk-prod-blue.\n",
        encoding="utf-8",
    )
    (root / "pets.txt").write_text("Alice adopted a grey cat called Miso in May.\n")
    return root


def run(palace: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--palace", str(palace), *args])
    return result.exit_code, result.stdout, result.stderr


def test_init_mine_search_status(tmp_path: Path, corpus: Path) -> None:
    palace = tmp_path / "palace"
    code, out, _ = run(palace, "init")
    assert code == 0, out
    assert (palace / "palace.toml").exists()

    code, out, _ = run(palace, "mine", str(corpus), "--wing", "notes")
    assert code == 0, out
    assert "mined 2 of 2 sources into wing 'notes'" in out

    code, out, _ = run(palace, "search", "who adopted a cat?", "--k", "1", "--json")
    assert code == 0, out
    hits = json.loads(out)
    assert len(hits) == 1
    assert hits[0]["source"].endswith("pets.txt")
    assert set(hits[0]["scores"]) >= {"vector", "final"}

    code, out, _ = run(palace, "search", "how do we deploy?", "--wing", "notes", "--room", "ops")
    assert code == 0, out
    assert "deploy.md:1-3" in out
    assert "pets.txt" not in out

    code, out, _ = run(palace, "status", "--json")
    assert code == 0, out
    stats = json.loads(out)
    assert stats["ledger"]["drawers"] == 2
    assert stats["ledger"]["wings"] == {"notes": {"general": 1, "ops": 1}}
    assert all(index["ok"] for index in stats["indexes"])

    code, out, _ = run(palace, "mine", str(corpus), "--wing", "notes")
    assert "mined 0 of 2 sources" in out
    assert "2 unchanged" in out


def test_reindex_brings_back_a_deleted_chroma_index(tmp_path: Path, corpus: Path) -> None:
    palace = tmp_path / "palace"
    assert run(palace, "mine", str(corpus), "--wing", "notes")[0] == 0
    import shutil

    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient.clear_system_cache()  # as a new process would see the disk
    shutil.rmtree(palace / "index" / "chroma")

    code, out, _ = run(palace, "status")
    assert code == 0
    assert "DEGRADED" in out
    code, out, _ = run(palace, "search", "grey cat", "--json")
    assert json.loads(out)[0]["source"].endswith("pets.txt")  # exact fallback answers

    code, out, _ = run(palace, "reindex")
    assert code == 0, out
    assert "reindexed 4 vectors into chroma" in out  # 2 drawers and their 2 closets
    code, out, _ = run(palace, "status", "--json")
    assert all(index["ok"] for index in json.loads(out)["indexes"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", ""], "the query is empty"),
        (["search", "   "], "the query is empty"),
        (["search", "cats", "--k", "0"], "k must be a positive integer"),
        (["search", "cats", "--since", "yesterday"], "not an ISO-8601 time"),
        (["mine", "/no/such/path"], "nothing to mine at /no/such/path"),
    ],
)
def test_user_errors_exit_1_with_one_line(
    tmp_path: Path, corpus: Path, args: list[str], message: str
) -> None:
    palace = tmp_path / "palace"
    assert run(palace, "mine", str(corpus))[0] == 0
    code, _, err = run(palace, *args)
    assert code == 1
    assert err.startswith("error: ")
    assert message in err
    assert err.count("\n") == 1
    assert run(palace, "status", "--json")[0] == 0  # nothing lost
    stats = json.loads(run(palace, "status", "--json")[1])
    assert stats["ledger"]["drawers"] == 2


def test_unknown_backend_is_a_user_error(tmp_path: Path) -> None:
    code, _, err = run(tmp_path / "palace", "init", "--backend", "nope")
    assert code == 1
    assert "no backend named 'nope'" in err
    assert "chroma" in err
    assert "sqlite" in err


def test_plugins_json_lists_the_builtins() -> None:
    result = CliRunner().invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    for name, hook in [
        ("chroma", "palace_register_backends"),
        ("sqlite", "palace_register_backends"),
        ("sentence-transformers", "palace_register_embedders"),
        ("files", "palace_register_sources"),
    ]:
        assert plugins[name]["distribution"] == "palace-retrievers"
        assert plugins[name]["version"]
        assert hook in plugins[name]["hooks"]
        assert plugins[name]["builtin"] is True


def _shell(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "palace_retrievers.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_exit_codes_as_a_shell_sees_them(tmp_path: Path) -> None:
    env = {**os.environ, "PALACE_PATH": str(tmp_path / "missing")}
    missing = _shell("search", "cats", env=env)
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: no palace at ")
    assert "Traceback" not in missing.stderr
    assert missing.stderr.count("\n") == 1

    usage = _shell("search", env=env)
    assert usage.returncode == 2
    assert "Missing argument" in usage.stderr
