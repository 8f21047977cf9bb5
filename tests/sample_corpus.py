"""Where the sample corpus that ships with the project lives, and the wing tests mine it into."""

from __future__ import annotations

from pathlib import Path

SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "examples" / "sample-corpus"
SAMPLE_WING = "larkspur"
