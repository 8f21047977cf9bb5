"""The built-in sources pass the conformance suite third-party sources subclass."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from palace_plugins.builtin.sources.auto import AutoSource
from palace_plugins.builtin.sources.chatgpt import ChatGPTSource
from palace_plugins.builtin.sources.claude_code import ClaudeCodeSource
from palace_plugins.builtin.sources.files import FilesSource
from palace_plugins.builtin.sources.slack import SlackSource
from palace_plugins.builtin.sources.text import TextSource
from palace_plugins.testing import SourceTests
from palace_retrievers.sources import Source

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources"
Factory = Callable[[Mapping[str, Any]], Source]


def copied(relative: str, tmp_path: Path) -> Path:
    """A private copy of a fixture, so no test depends on the checkout's path."""
    source = FIXTURES / relative
    target = tmp_path / "sample" / source.name
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        target.parent.mkdir(parents=True)
        shutil.copy2(source, target)
    return target


class TestFilesSource(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return FilesSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("text", tmp_path)


class TestClaudeCodeSource(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return ClaudeCodeSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("claude-code/projects", tmp_path)


class TestChatGPTSource(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return ChatGPTSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("chatgpt/export", tmp_path)


class TestSlackSource(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return SlackSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("slack/export", tmp_path)


class TestTextSource(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return TextSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("text", tmp_path)


class TestTextSourceOnOneJsonlFile(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return TextSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("text/chats/locomo-sample.jsonl", tmp_path)


class TestAutoSource(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return AutoSource

    @pytest.fixture
    def sample_path(self, tmp_path: Path) -> Path:
        return copied("chatgpt/export/conversations.json", tmp_path)
