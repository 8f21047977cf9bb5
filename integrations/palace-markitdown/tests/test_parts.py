"""Pages, slides and sheets found in markitdown's output."""

from __future__ import annotations

from palace_markitdown.parts import split


def pieces(kind: str, markdown: str) -> list[tuple[dict[str, int | str], str]]:
    text, parts = split(kind, markdown)
    return [(p.label, text[p.start : p.end]) for p in parts]


def test_pdf_pages_are_cut_at_form_feeds_and_offsets_kept() -> None:
    markdown = "one\n\n\fpage two\n\fthree\n\n\f\n"
    text, _ = split("pdf", markdown)
    assert len(text) == len(markdown)
    assert "\f" not in text
    assert pieces("pdf", markdown) == [
        ({"page": 1}, "one\n\n\n"),
        ({"page": 2}, "page two\n\n"),
        ({"page": 3}, "three\n\n\n"),
    ]  # the empty page after the last form feed is left out


def test_a_pdf_without_form_feeds_is_one_unlabelled_part() -> None:
    assert pieces("pdf", "forms and tables\n") == [({}, "forms and tables\n")]


def test_slides() -> None:
    markdown = "<!-- Slide number: 1 -->\n# A\nx\n\n<!-- Slide number: 2 -->\n# B\n"
    assert [(label, body.split("\n")[1]) for label, body in pieces("pptx", markdown)] == [
        ({"slide": 1}, "# A"),
        ({"slide": 2}, "# B"),
    ]


def test_sheets_and_text_before_the_first_mark() -> None:
    markdown = "preface\n## Budget\n| a |\n## Staff 2026\n| b |\n"
    assert pieces("xlsx", markdown) == [
        ({}, "preface\n"),
        ({"sheet": "Budget"}, "## Budget\n| a |\n"),
        ({"sheet": "Staff 2026"}, "## Staff 2026\n| b |\n"),
    ]


def test_other_formats_are_one_part_whatever_their_headings() -> None:
    markdown = "## Not a sheet\ntext\n<!-- Slide number: 1 -->\n"
    assert pieces("docx", markdown) == [({}, markdown)]
    assert pieces("html", "   \n") == []
