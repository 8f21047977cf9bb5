"""Sample documents, written once per session, and a private copy of them for each test.

Every test runs with its own ``$HOME`` and without ``PALACE_*`` variables, so neither the
developer's palace nor their environment can leak in.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.samples import write_library


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    for name in list(os.environ):
        if name.startswith("PALACE_"):
            monkeypatch.delenv(name)
    return home


@pytest.fixture(scope="session")
def library_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample tree (see :func:`tests.samples.write_library`); never modify it."""
    return write_library(tmp_path_factory.mktemp("master") / "library")


@pytest.fixture
def library(library_master: Path, tmp_path: Path) -> Path:
    """A private copy of the sample tree, which a test may change."""
    return Path(shutil.copytree(library_master, tmp_path / "sample" / "library"))
