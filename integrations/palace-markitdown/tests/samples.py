"""Sample documents, written by the tests themselves: one of each format, and some noise.

Word, PowerPoint and Excel files are made with python-docx, python-pptx and openpyxl; the
PDF is written by hand (:func:`pdf_bytes`: one Helvetica text stream per page), so the
tests depend on no PDF library to make it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: What each sample holds: text that must come out of it.
PDF_PAGES = (
    ("Quarterly report", "The sync queue retries failed uploads with backoff."),
    ("Page two: the Larkspur cluster moved to the Oslo region.",),
)
DOCX_HEADING = "Design notes"
DOCX_PARAGRAPHS = (
    "We moved the main database to PostgreSQL 15 in March.",
    "Redis caches the session tokens for twelve hours.",
)
SLIDES = (
    ("Roadmap", "Kiwi sensors ship in the spring"),
    ("Hiring", "Two engineers join the Tromsø office"),
)
SHEETS = {
    "Budget": [("item", "cost"), ("servers", 1200), ("licences", 300)],
    "Staff": [("name", "role"), ("Alice", "engineer"), ("Bob", "designer")],
}
HTML_TITLE = "Runbook"
HTML = (
    "<!doctype html><html><head><meta charset='utf-8'><title>Runbook</title></head>"
    "<body><h1>Deploy</h1><p>Run <code>larkspur-ctl switch</code> after the health "
    "checks pass.</p><ul><li>Check the dashboards</li><li>Tell the on-call</li></ul>"
    "</body></html>"
)


def pdf_bytes(pages: Sequence[Sequence[str]]) -> bytes:
    """A minimal PDF 1.4 file: each page shows its lines in Helvetica (ASCII text)."""
    bodies: list[bytes] = [b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    contents = []
    for lines in pages:
        ops = ["BT", "/F1 12 Tf", "16 TL", "72 720 Td"]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({escaped}) Tj T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("ascii")
        bodies.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        contents.append(len(bodies))
    tree = len(bodies) + len(pages) + 1  # the object number the page tree will get
    kids = []
    for content in contents:
        bodies.append(
            b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 1 0 R >> >> >>" % (tree, content)
        )
        kids.append(b"%d 0 R" % len(bodies))
    bodies.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids)))
    assert len(bodies) == tree
    bodies.append(b"<< /Type /Catalog /Pages %d 0 R >>" % tree)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(bodies, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\n" % (len(bodies) + 1, len(bodies))
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def write_docx(path: Path, heading: str, paragraphs: Sequence[str]) -> Path:
    import docx

    document = docx.Document()
    document.add_heading(heading, level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    document.save(str(path))
    return path


def write_pptx(path: Path, slides: Sequence[tuple[str, str]]) -> Path:
    import pptx

    deck = pptx.Presentation()
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    deck.save(str(path))
    return path


def write_xlsx(path: Path, sheets: dict[str, list[tuple[object, ...]]]) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    workbook.save(str(path))
    return path


def write_library(root: Path) -> Path:
    """One document of each format in a small tree, with files the source must leave out.

    ::

        report.pdf              finance/budget.xlsx     web/runbook.html
        handbook/notes.docx     decks/roadmap.pptx
        (left out: readme.txt, .hidden/secret.pdf, handbook/~$notes.docx)
    """
    for folder in ("handbook", "decks", "finance", "web", ".hidden"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "report.pdf").write_bytes(pdf_bytes(PDF_PAGES))
    write_docx(root / "handbook" / "notes.docx", DOCX_HEADING, DOCX_PARAGRAPHS)
    write_pptx(root / "decks" / "roadmap.pptx", SLIDES)
    write_xlsx(root / "finance" / "budget.xlsx", SHEETS)
    (root / "web" / "runbook.html").write_text(HTML, encoding="utf-8")
    (root / "readme.txt").write_text("Plain text is for the files source.\n")
    (root / ".hidden" / "secret.pdf").write_bytes(pdf_bytes([["hidden"]]))
    (root / "handbook" / "~$notes.docx").write_bytes(b"\x00lock")
    return root
