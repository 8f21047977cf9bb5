"""A real palace (Chroma, MiniLM) in a temporary directory for every test, and a store on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from palace_retrievers import Palace

from langgraph.store.palace import PalaceStore

#: Two statements the palace's memory judge reads as one value replacing the other.
OLD = "We use MySQL for the orders database"
NEW = "We use PostgreSQL for the orders database"


@pytest.fixture
def palace(tmp_path: Path) -> Iterator[Palace]:
    with Palace.open(tmp_path / "palace") as palace:
        yield palace


@pytest.fixture
def store(palace: Palace) -> PalaceStore:
    return PalaceStore(palace)
