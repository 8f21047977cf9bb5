"""The ``documents`` source: the palace's conformance suite, then what each format gives."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from palace_plugins.testing import SourceTests
from palace_retrievers.errors import ConfigError, SourceError
from palace_retrievers.sources import Skipped, Source, SourceDocument, SourceEntry

from palace_markitdown import DocumentsSource
from tests.samples import (
    DOCX_HEADING,
    DOCX_PARAGRAPHS,
    HTML_TITLE,
    PDF_PAGES,
    SHEETS,
    SLIDES,
    pdf_bytes,
    write_docx,
)

Factory = Callable[[Mapping[str, Any]], Source]


class TestDocumentsSource(SourceTests):
    """The palace's own suite, unmodified, on a tree of every format."""

    @pytest.fixture
    def source_factory(self) -> Factory:
        return DocumentsSource

    @pytest.fixture
    def sample_path(self, library: Path) -> Path:
        return library


class TestDocumentsSourceOnOneFile(SourceTests):
    @pytest.fixture
    def source_factory(self) -> Factory:
        return DocumentsSource

    @pytest.fixture
    def sample_path(self, library: Path) -> Path:
        return library / "report.pdf"


def scan(path: Path, **options: Any) -> tuple[dict[str, SourceEntry], list[Skipped]]:
    found = list(DocumentsSource(options).scan(path))
    entries = {e.key: e for e in found if isinstance(e, SourceEntry)}
    return entries, [e for e in found if isinstance(e, Skipped)]


def read(library: Path, key: str, **options: Any) -> SourceDocument:
    return scan(library, **options)[0][key].read()


def test_finds_one_document_of_each_format_and_nothing_else(library: Path) -> None:
    entries, skipped = scan(library)
    assert list(entries) == [  # a folder's files, then its folders, each sorted
        "report.pdf",
        "decks/roadmap.pptx",
        "finance/budget.xlsx",
        "handbook/notes.docx",
        "web/runbook.html",
    ]
    assert skipped == []
    assert entries["report.pdf"].location == str(library / "report.pdf")


def test_rooms_are_first_folders(library: Path) -> None:
    assert read(library, "web/runbook.html").room == "web"
    assert read(library, "report.pdf").room == "general"


def test_pdf_pages(library: Path) -> None:
    document = read(library, "report.pdf")
    assert document.metadata == {"file_name": "report.pdf", "format": "pdf"}
    segments = document.segments or ()
    assert [s.metadata["page"] for s in segments] == [1, 2]
    for segment, lines in zip(segments, PDF_PAGES, strict=True):
        for line in lines:
            assert line in segment.text
    assert "\f" not in document.text


def test_docx_keeps_its_heading(library: Path) -> None:
    document = read(library, "handbook/notes.docx")
    assert document.metadata == {"file_name": "notes.docx", "format": "docx"}
    assert document.text.startswith(f"# {DOCX_HEADING}")
    for paragraph in DOCX_PARAGRAPHS:
        assert paragraph in document.text
    assert all(dict(s.metadata) == {} for s in document.segments or ())


def test_pptx_slides(library: Path) -> None:
    segments = read(library, "decks/roadmap.pptx").segments or ()
    assert [s.metadata["slide"] for s in segments] == [1, 2]
    for segment, (title, body) in zip(segments, SLIDES, strict=True):
        assert title in segment.text
        assert body in segment.text


def test_xlsx_sheets(library: Path) -> None:
    segments = read(library, "finance/budget.xlsx").segments or ()
    assert [s.metadata["sheet"] for s in segments] == list(SHEETS)
    for segment, rows in zip(segments, SHEETS.values(), strict=True):
        for row in rows:
            assert "| " + " | ".join(str(cell) for cell in row) + " |" in segment.text


def test_html_title_and_markdown(library: Path) -> None:
    document = read(library, "web/runbook.html")
    assert document.metadata == {
        "file_name": "runbook.html",
        "format": "html",
        "title": HTML_TITLE,
    }
    assert document.text.startswith("# Deploy")
    assert "larkspur-ctl switch" in document.text
    assert "<p>" not in document.text


def test_segments_follow_the_chunk_size_and_their_lines(tmp_path: Path) -> None:
    paragraphs = [
        f"Paragraph {n}: the backup of shard {n} runs at 0{n % 10}:00." for n in range(40)
    ]
    path = write_docx(tmp_path / "long.docx", "Backups", paragraphs)
    document = DocumentsSource({"chunk_size": 200, "chunk_overlap": 20}).read(path)
    segments = document.segments or ()
    assert len(segments) > 10
    assert all(len(s.text) <= 200 for s in segments)
    lines = document.text.split("\n")
    for segment in segments:
        assert segment.line_start is not None
        assert segment.line_end is not None
        first = segment.text.lstrip("\n").split("\n")[0]
        assert first in lines[segment.line_start - 1]
        assert segment.text.rstrip("\n").split("\n")[-1] in lines[segment.line_end - 1]
    for paragraph in paragraphs:
        assert any(paragraph in s.text for s in segments)


def test_a_corrupt_document_is_a_source_error(tmp_path: Path) -> None:
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "broken.xlsx").write_bytes(b"")
    entries, _ = scan(tmp_path)
    assert sorted(entries) == ["broken.docx", "broken.pdf", "broken.xlsx"]
    for key, entry in entries.items():
        with pytest.raises(SourceError, match=f"cannot convert .*{key}"):
            entry.read()


def test_a_pdf_without_text_is_a_source_error(tmp_path: Path) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdf_bytes([[]]))
    with pytest.raises(SourceError, match=r"no text found.*OCR"):
        DocumentsSource().read(path)


def test_a_document_over_the_limit_is_skipped_unread(library: Path) -> None:
    size = (library / "report.pdf").stat().st_size
    entries, skipped = scan(library, max_file_bytes=size)
    assert "report.pdf" in entries
    assert "decks/roadmap.pptx" not in entries  # a pptx is larger than this small PDF
    assert {Path(s.location).name for s in skipped} >= {"roadmap.pptx"}
    assert all("limit" in s.reason for s in skipped)


def test_one_file_of_another_type_is_a_source_error(library: Path) -> None:
    with pytest.raises(SourceError, match="'files' source"):
        list(DocumentsSource().scan(library / "readme.txt"))


@pytest.mark.parametrize(
    "options",
    [
        {"chunk_size": 10},
        {"chunk_size": 200, "chunk_overlap": 100},
        {"max_file_bytes": 0},
        {"max_file_bytes": "big"},
        {"chunk_size": True},
        {"colour": "blue"},
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="documents"):
        DocumentsSource(options)


def test_unicode_text_survives(tmp_path: Path) -> None:
    lines = ["会议纪要：王芳在上海。", "Zoë met Σωκράτης in Zürich ☕🦜."]
    write_docx(tmp_path / "会议.docx", "Ünïcødé", lines)
    (tmp_path / "page.html").write_text(
        "<html><head><title>Café ☕</title></head><body><p>" + lines[0] + "</p></body></html>",
        encoding="utf-8",
    )
    entries, _ = scan(tmp_path)
    word = entries["会议.docx"].read()
    assert word.text.startswith("# Ünïcødé")
    for line in lines:
        assert line in word.text
    page = entries["page.html"].read()
    assert page.metadata["title"] == "Café ☕"
    assert lines[0] in page.text
