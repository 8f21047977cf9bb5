"""The conformance suite of source adapters: :class:`SourceTests`.

It checks a source against a sample the author provides: keys unique, stable and
independent of where the data lies, whether they are ids said with a bool, documents well
formed, times timezone-aware, bad paths and options refused with the palace's errors,
several readers at once agreeing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest

from palace_retrievers.errors import ConfigError, SourceError
from palace_retrievers.sources import Segment, Skipped, Source, SourceDocument, SourceEntry

__all__ = ["SourceTests"]


class SourceTests:
    """The contract of a source adapter (:class:`~palace_retrievers.sources.Source`).

    Subclass it and provide two fixtures: ``source_factory``, the callable the plugin
    registers (``factory(options) -> Source``), and ``sample_path``, a file or folder the
    source mines into at least one entry. The sample is copied elsewhere by one test, to
    check that keys and content hashes do not depend on where the data lies.
    """

    #: How many threads scan and read at once in the concurrent-readers test.
    readers: ClassVar[int] = 3

    @pytest.fixture
    def source_factory(self) -> Callable[[Mapping[str, Any]], Source]:
        """Override: return the factory the plugin registers."""
        raise NotImplementedError("a SourceTests subclass must provide `source_factory`")

    @pytest.fixture
    def sample_path(self) -> Path:
        """Override: return a path the source mines into at least one entry."""
        raise NotImplementedError("a SourceTests subclass must provide `sample_path`")

    @staticmethod
    def entries(source: Source, path: Path) -> list[SourceEntry]:
        found = list(source.scan(path))
        assert all(isinstance(e, SourceEntry | Skipped) for e in found)
        return [e for e in found if isinstance(e, SourceEntry)]

    def test_is_a_source(self, source_factory: Callable[[Mapping[str, Any]], Source]) -> None:
        assert isinstance(source_factory({}), Source)

    def test_scan_finds_entries(
        self, source_factory: Callable[[Mapping[str, Any]], Source], sample_path: Path
    ) -> None:
        entries = self.entries(source_factory({}), sample_path)
        assert entries
        for entry in entries:
            assert isinstance(entry.key, str)
            assert entry.key
            assert isinstance(entry.location, str)
            assert entry.mtime is None or isinstance(entry.mtime, float)

    def test_keys_are_unique_stable_and_machine_independent(
        self, source_factory: Callable[[Mapping[str, Any]], Source], sample_path: Path
    ) -> None:
        keys = [e.key for e in self.entries(source_factory({}), sample_path)]
        assert len(keys) == len(set(keys))
        assert keys == [e.key for e in self.entries(source_factory({}), sample_path)]
        root = str(sample_path.resolve().parent)
        assert not any(root in key or key.startswith("/") for key in keys)

    def test_it_says_whether_its_keys_are_ids(
        self, source_factory: Callable[[Mapping[str, Any]], Source], sample_path: Path
    ) -> None:
        """``keys_are_ids`` is a bool, and so is the answer for the sample (which a source
        that picks another per path, like ``auto``, gives for the one it picks)."""
        source = source_factory({})
        assert isinstance(type(source).keys_are_ids, bool)
        answer = source.keys_are_ids_for(sample_path)
        assert isinstance(answer, bool)
        assert source.keys_are_ids_for(sample_path) == answer

    def test_read_gives_a_document(
        self, source_factory: Callable[[Mapping[str, Any]], Source], sample_path: Path
    ) -> None:
        for entry in self.entries(source_factory({}), sample_path):
            try:
                document = entry.read()
            except SourceError:
                continue  # an entry may turn out unreadable; the miner notes it
            assert isinstance(document, SourceDocument)
            assert isinstance(document.text, str)
            assert isinstance(document.content_hash, str)
            assert document.content_hash
            assert entry.read().content_hash == document.content_hash
            json.dumps(dict(document.metadata))
            dates = [document.content_date]
            for segment in document.segments or ():
                assert isinstance(segment, Segment)
                assert segment.text.strip()
                json.dumps(dict(segment.metadata))
                dates.append(segment.content_date)
                if segment.line_start is not None:
                    assert segment.line_end is not None
                    assert 1 <= segment.line_start <= segment.line_end
            for moment in dates:
                assert moment is None or moment.utcoffset() is not None

    def test_a_copy_elsewhere_gives_the_same_keys_and_content(
        self,
        source_factory: Callable[[Mapping[str, Any]], Source],
        sample_path: Path,
        tmp_path: Path,
    ) -> None:
        copy = tmp_path / "elsewhere" / "deeper" / sample_path.name
        copy.parent.mkdir(parents=True)
        if sample_path.is_dir():
            shutil.copytree(sample_path, copy)
        else:
            shutil.copy2(sample_path, copy)

        def contents(path: Path) -> dict[str, str | None]:
            out: dict[str, str | None] = {}
            for entry in self.entries(source_factory({}), path):
                try:
                    out[entry.key] = entry.read().content_hash
                except SourceError:
                    out[entry.key] = None
            return out

        assert contents(copy) == contents(sample_path)

    def test_a_missing_path_is_a_source_error(
        self, source_factory: Callable[[Mapping[str, Any]], Source], tmp_path: Path
    ) -> None:
        with pytest.raises(SourceError):
            list(source_factory({}).scan(tmp_path / "no-such-path"))

    def test_an_unknown_option_is_a_config_error(
        self, source_factory: Callable[[Mapping[str, Any]], Source]
    ) -> None:
        with pytest.raises(ConfigError):
            source_factory({"no_such_option": 1})

    def test_a_unicode_path_gives_the_same_keys_and_content(
        self,
        source_factory: Callable[[Mapping[str, Any]], Source],
        sample_path: Path,
        tmp_path: Path,
    ) -> None:
        copy = tmp_path / "données" / "会议 ☕ notes" / sample_path.name
        copy.parent.mkdir(parents=True)
        if sample_path.is_dir():
            shutil.copytree(sample_path, copy)
        else:
            shutil.copy2(sample_path, copy)
        original = self.entries(source_factory({}), sample_path)
        moved = self.entries(source_factory({}), copy)
        assert [e.key for e in moved] == [e.key for e in original]
        for entry in moved:
            assert isinstance(entry.location, str)
            entry.location.encode("utf-8")

    def test_an_empty_folder_gives_nothing(
        self, source_factory: Callable[[Mapping[str, Any]], Source], tmp_path: Path
    ) -> None:
        """An empty folder gives no entry, or a ``SourceError`` saying there is nothing."""
        empty = tmp_path / "empty"
        empty.mkdir()
        try:
            found = list(source_factory({}).scan(empty))
        except SourceError:
            return
        assert not [e for e in found if isinstance(e, SourceEntry)]

    def test_concurrent_readers(
        self, source_factory: Callable[[Mapping[str, Any]], Source], sample_path: Path
    ) -> None:
        """One source instance scanned and read from several threads at once agrees
        with itself (the palace may serve several readers in one process)."""
        source = source_factory({})

        def contents(_: int) -> dict[str, str | None]:
            out: dict[str, str | None] = {}
            for entry in self.entries(source, sample_path):
                try:
                    out[entry.key] = entry.read().content_hash
                except SourceError:
                    out[entry.key] = None
            return out

        alone = contents(0)
        with ThreadPoolExecutor(max_workers=self.readers) as pool:
            together = list(pool.map(contents, range(self.readers)))
        assert together == [alone] * self.readers
