"""A one-shot ``palace search`` answers as the palace does in process.

The command line scans a small palace's vectors exactly from the ledger instead of
opening its index (``Palace.open(exact_below=...)``); the hits must be the ones
``Palace.search`` gives with the index open.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.cli.drawers import ONE_SHOT_EXACT_BELOW, one_shot_exact_below

pytestmark = pytest.mark.slow

QUERIES: list[tuple[str, dict[str, str]]] = [
    ("Which database did we move to?", {}),
    ("who is on call for the deploy", {"k": "8"}),
    ("kiwi sensors shipping date", {"wing": "larkspur"}),
    ("budget for the servers", {"k": "3", "wing": "larkspur"}),
    ("what did we decide about the region", {"k": "10"}),
]


@pytest.fixture
def two_copies(mined_sample: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the mined sample palace: a search counts the memories it recalls,
    so each way of searching gets its own."""
    palace_dir, _ = mined_sample
    shutil.copytree(palace_dir, tmp_path / "in-process")
    shutil.copytree(palace_dir, tmp_path / "one-shot")
    return tmp_path / "in-process", tmp_path / "one-shot"


def test_one_shot_search_gives_the_hits_of_palace_search(two_copies: tuple[Path, Path]) -> None:
    in_process, one_shot = two_copies
    with Palace.open(in_process, create=False) as palace:
        assert palace.indexes.backend == "chroma"
        expected = [
            [h.as_dict() for h in palace.search(query, k=int(o.get("k", 5)), wing=o.get("wing"))]
            for query, o in QUERIES
        ]
    got = []
    for query, options in QUERIES:
        args = [arg for name, value in options.items() for arg in (f"--{name}", value)]
        result = CliRunner().invoke(
            cli, ["--palace", str(one_shot), "search", query, *args, "--json"]
        )
        assert result.exit_code == 0, result.output
        got.append(json.loads(result.stdout))
    for want, have in zip(expected, got, strict=True):
        assert [h["id"] for h in have] == [h["id"] for h in want]
        for a, b in zip(have, want, strict=True):
            assert a["scores"] == pytest.approx(b["scores"], abs=1e-5)


def test_exact_below_leaves_the_index_unopened_until_written(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    path = tmp_path / "palace"
    open_palace(path, backend="chroma").add_texts(["a cat called Miso", "a dog called Rex"])
    palace = open_palace(path, backend="chroma", exact_below=1_000)
    assert palace.indexes._indexes == {}  # nothing opened: the exact scan answers
    assert [h.text for h in palace.search("Miso the cat", k=1)] == ["a cat called Miso"]
    assert palace.indexes._indexes == {}
    palace.add_texts(["a parrot called Kiwi"])  # a write opens the index and writes it
    assert {"drawers", "closets"} <= set(palace.indexes._indexes)
    assert all(status.ok for status in palace.stats().indexes)
    reopened = open_palace(path, backend="chroma")
    assert all(status.ok for status in reopened.stats().indexes)
    assert [h.text for h in reopened.search("Kiwi the parrot", k=1)] == ["a parrot called Kiwi"]


def test_a_status_reads_embedded_chroma_from_its_files(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    path = tmp_path / "palace"
    open_palace(path, backend="chroma").add_texts(["a cat called Miso", "a dog called Rex"])
    opened = open_palace(path, backend="chroma").stats().indexes
    palace = open_palace(path, backend="chroma", exact_below=1_000)
    assert palace.stats().indexes == opened
    assert palace.indexes._indexes == {}  # told by Chroma's files, not by Chroma
    assert [s.count for s in opened] == [2, 1, 0]  # two drawers, their closet


def test_only_a_sqlite_ledger_is_scanned_by_a_one_shot_command(tmp_path: Path) -> None:
    """With PostgreSQL the vectors would cross the network at every command."""
    local, shared = tmp_path / "local", tmp_path / "shared"
    local.mkdir()
    shared.mkdir()
    (shared / "palace.toml").write_text(
        'ledger = "postgres"\n\n[ledgers.postgres]\nurl = "postgresql://db/palace"\n',
        encoding="utf-8",
    )
    for path, expected in ((local, ONE_SHOT_EXACT_BELOW), (shared, 0)):
        with click.Context(cli, obj={"path": path}) as ctx:
            assert one_shot_exact_below(ctx) == expected
