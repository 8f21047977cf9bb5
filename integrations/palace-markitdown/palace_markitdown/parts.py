"""Where each page, slide or sheet starts in a document converted to markdown.

markitdown marks the parts of a document in its output: a form feed between the pages
of a PDF (when it extracts prose), an ``<!-- Slide number: N -->`` comment before each
slide of a deck, and a ``## <sheet name>`` heading before each sheet of a workbook.
:func:`split` finds those marks so that every drawer can say which page, slide or sheet
it comes from, and so that no drawer straddles two of them. A document without marks
(Word, HTML, a PDF read as forms) is one part with no label.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SLIDE = re.compile(r"^<!-- Slide number: (\d+) -->[ \t]*$", re.MULTILINE)
_SHEET = re.compile(r"^## (.+?)[ \t]*$", re.MULTILINE)
_FORM_FEED = "\f"


@dataclass(frozen=True, slots=True)
class Part:
    """A slice ``text[start:end]`` of the converted text, and what it is.

    Attributes:
        start: Offset of the part's first character.
        end: Offset just past its last character.
        label: Metadata for its drawers, e.g. ``{"page": 3}``; empty when unknown.
    """

    start: int
    end: int
    label: dict[str, int | str]


def split(kind: str, markdown: str) -> tuple[str, list[Part]]:
    """The text to file for a document of ``kind``, and its parts in order.

    The text is ``markdown`` with form feeds turned into line ends (one character for
    one, so offsets do not move). Text before the first mark is a part with no label.

    Args:
        kind: ``"pdf"``, ``"pptx"``, ``"xlsx"``, ``"docx"`` or ``"html"``.
        markdown: What markitdown made of the document.
    """
    text = markdown.replace(_FORM_FEED, "\n")
    if kind == "pdf" and _FORM_FEED in markdown:
        starts = [0] + [i + 1 for i, c in enumerate(markdown) if c == _FORM_FEED]
        labels: list[tuple[int, dict[str, int | str]]] = [
            (start, {"page": n}) for n, start in enumerate(starts, 1)
        ]
    elif kind == "pptx":
        labels = [(m.start(), {"slide": int(m.group(1))}) for m in _SLIDE.finditer(text)]
    elif kind == "xlsx":
        labels = [(m.start(), {"sheet": m.group(1)}) for m in _SHEET.finditer(text)]
    else:
        labels = []
    if not labels or labels[0][0] > 0:
        labels.insert(0, (0, {}))
    ends = [start for start, _ in labels[1:]] + [len(text)]
    parts = [Part(start, end, label) for (start, label), end in zip(labels, ends, strict=True)]
    return text, [p for p in parts if text[p.start : p.end].strip()]
