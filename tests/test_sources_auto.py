"""The ``auto`` source: each fixture is recognised, and mixed folders fall back to ``files``."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from palace_plugins.builtin.sources.auto import AutoSource, detect
from palace_retrievers import ConfigError, Filter, Palace, SourceError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources"
CLAUDE_SESSION = "projects/-home-dev-notes/0b8e7f52-93d1-4f0a-b6c4-77a1e2d5c960.jsonl"


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("chatgpt/export", "chatgpt"),
        ("chatgpt/export/conversations.json", "chatgpt"),
        ("chatgpt/truncated-conversations.json", "chatgpt"),
        ("slack/export", "slack"),
        ("claude-code/projects", "claude-code"),
        (f"claude-code/{CLAUDE_SESSION}", "claude-code"),
        ("text/chats/locomo-sample.jsonl", "text"),
        ("text/chats/pricing-call.txt", "text"),
        ("text/chats/deploy-help.md", "text"),
        ("text/chats/reading-list.md", "files"),
        ("text", "files"),  # a folder that mixes transcripts, JSONL and notes
        ("slack/export/users.json", "files"),
        ("", "files"),
    ],
)
def test_detect(relative: str, expected: str) -> None:
    assert detect(FIXTURES / relative) == expected


def test_a_zipped_chatgpt_export(tmp_path: Path) -> None:
    archive = tmp_path / "a1b2c3-2024-07-01-10-00-00.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(FIXTURES / "chatgpt/export/conversations.json", "conversations.json")
    assert detect(archive) == "chatgpt"
    (tmp_path / "other.zip").write_bytes(b"PK not really")
    assert detect(tmp_path / "other.zip") == "files"


def test_auto_mines_like_the_source_it_picks(fake_palace: Palace, tmp_path: Path) -> None:
    export = tmp_path / "slack-export"
    shutil.copytree(FIXTURES / "slack/export", export)
    auto = fake_palace.mine(export, source="auto", wing="auto")
    direct = fake_palace.mine(export, source="slack", wing="direct")
    assert (auto.seen, auto.mined) == (direct.seen, direct.mined) == (5, 5)
    texts = [
        sorted(d.text for d in fake_palace.get(fake_palace.ledger.drawer_ids(Filter(wing=w))))
        for w in ("auto", "direct")
    ]
    assert texts[0] == texts[1]


def test_options_are_passed_to_the_source_picked(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text("x" * 50)
    entries = list(AutoSource({"max_file_bytes": 10, "chunk_size": 200}).scan(tmp_path))
    with pytest.raises(SourceError, match="limit"):
        entries[0].read()  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="'colour'"):
        AutoSource({"colour": "red"})


def test_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file or directory"):
        list(AutoSource({}).scan(tmp_path / "nope"))
