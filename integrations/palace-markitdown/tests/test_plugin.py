"""The plugin as users meet it: installed, listed by ``palace plugins``, used by a palace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from palace_plugins.manager import PluginManager
from palace_retrievers import Palace

from palace_markitdown import DocumentsSource
from palace_markitdown import plugin as plugin_module


def test_the_entry_point_names_the_plugin_module() -> None:
    (ep,) = [e for e in metadata.entry_points(group="palace") if e.name == "documents"]
    assert ep.dist is not None
    assert ep.dist.name == "palace-markitdown"
    assert ep.load() is plugin_module


def test_the_plugin_manager_finds_the_source() -> None:
    manager = PluginManager()
    assert manager.source("documents") is DocumentsSource
    (info,) = [p for p in manager.plugins() if p.name == "documents"]
    assert info.distribution == "palace-markitdown"
    assert info.hooks == ("palace_register_sources",)
    assert not info.builtin
    assert info.error is None


def test_markitdown_is_imported_only_when_the_source_is_used() -> None:
    """Loading the plugins (as every palace does when it opens) imports the small plugin
    module only; markitdown comes with the first lookup of ``documents``."""
    code = (
        "import sys\n"
        "from palace_plugins.manager import PluginManager\n"
        "manager = PluginManager()\n"
        "assert 'documents' in manager.registry('source').names()\n"
        "print(sorted(m for m in sys.modules if 'markitdown' in m))\n"
        "manager.source('documents')\n"
        "print('markitdown' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "['palace_markitdown', 'palace_markitdown.plugin']"
    assert after == "True"


def test_palace_plugins_lists_it(tmp_path: Path) -> None:
    """The console script, as a user runs it after ``pip install palace-markitdown``."""
    script = Path(sys.executable).with_name("palace")
    result = subprocess.run(
        [str(script), "plugins", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    listed = [p for p in json.loads(result.stdout) if p["name"] == "documents"]
    assert listed == [
        {
            "name": "documents",
            "distribution": "palace-markitdown",
            "version": metadata.version("palace-markitdown"),
            "hooks": ["palace_register_sources"],
            "builtin": False,
            "error": None,
        }
    ]


@pytest.fixture(scope="module")
def mined(library_master: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Palace]:
    """A real palace (default embedder and backend) with the sample tree mined into it."""
    with Palace.open(tmp_path_factory.mktemp("palace") / "palace") as palace:
        report = palace.mine(library_master, source="documents", wing="library")
        assert report.mined == 5
        assert report.skipped == []
        yield palace


@pytest.mark.slow
def test_mine_then_search_finds_each_format(mined: Palace) -> None:
    expected = {
        "Which database did we move to?": ("notes.docx", {}),
        "When do the kiwi sensors ship?": ("roadmap.pptx", {"slide": 1}),
        "How much do the servers cost?": ("budget.xlsx", {"sheet": "Budget"}),
        "Which region did the Larkspur cluster move to?": ("report.pdf", {"page": 2}),
        "What to run after the health checks pass?": ("runbook.html", {}),
    }
    for query, (file_name, where) in expected.items():
        # the first drawer: a memory extracted from the file may rank above it (memories
        # and drawers share one scale), e.g. "We moved the main database to PostgreSQL 15"
        top = next(h for h in mined.search(query, k=3, wing="library") if not h.is_memory)
        assert top.metadata["file_name"] == file_name, query
        for key, value in where.items():
            assert top.metadata[key] == value, query
        assert Path(top.source).name == file_name


@pytest.mark.slow
def test_a_second_mine_changes_nothing(mined: Palace, library_master: Path) -> None:
    again = mined.mine(library_master, source="documents", wing="library")
    assert (again.seen, again.mined, again.unchanged, again.drawers_added) == (5, 0, 5, 0)
