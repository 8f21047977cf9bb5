"""Chunking: every character kept, verbatim, in order, with the right line numbers."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_retrievers.ingest.chunking import Chunk, chunk_text


def line_of(text: str, offset: int) -> int:
    """1-based line of the character at ``offset``, counted independently of chunking."""
    line = 1
    for char in text[:offset]:
        if char == "\n":
            line += 1
    return line


def check_chunks(text: str, chunks: list[Chunk], size: int) -> None:
    """Every invariant the chunker promises."""
    covered = [False] * len(text)
    previous: Chunk | None = None
    for position, chunk in enumerate(chunks):
        assert chunk.index == position
        assert chunk.text == text[chunk.start : chunk.end], "a chunk is not a verbatim slice"
        assert 0 < len(chunk.text) <= size, "a chunk exceeds the size"
        assert chunk.text.strip(), "a whitespace-only chunk was kept"
        assert chunk.line_start == line_of(text, chunk.start)
        last = chunk.start + len(chunk.text.rstrip("\n")) - 1
        assert chunk.line_end == line_of(text, last)
        assert chunk.line_start <= chunk.line_end
        if previous is not None:
            assert chunk.start > previous.start, "chunks are out of order"
            assert chunk.end > previous.end, "a chunk adds nothing new"
        for i in range(chunk.start, chunk.end):
            covered[i] = True
        previous = chunk
    missed = "".join(c for c, seen in zip(text, covered, strict=True) if not seen)
    assert not missed.strip(), f"characters dropped: {missed!r}"


MARKDOWN = (
    """# Larkspur onboarding

Welcome! This page says who owns what.

## Who owns what

| Area | Owner |
|------|-------|
| iOS release | Bashir Rahimi |
| Android | Chen Wei |

In plain words: Bashir Rahimi owns the iOS release. Dana Okafor is his backup.

## Tools

Install Xcode 16 if you will touch iOS. 安装 Android Studio。然后运行测试！
"""
    * 6
)


@pytest.mark.parametrize(("size", "overlap"), [(800, 100), (200, 40), (120, 0), (50, 10)])
def test_markdown_invariants(size: int, overlap: int) -> None:
    chunks = chunk_text(MARKDOWN, size=size, overlap=overlap)
    assert len(chunks) > 1
    check_chunks(MARKDOWN, chunks, size)


def test_consecutive_chunks_overlap() -> None:
    chunks = chunk_text(MARKDOWN, size=300, overlap=60)
    for a, b in itertools.pairwise(chunks):
        assert b.start < a.end, "no overlap between neighbours"
        assert a.end - b.start <= 60


def test_no_overlap_means_adjacent_chunks() -> None:
    chunks = chunk_text(MARKDOWN, size=300, overlap=0)
    for a, b in itertools.pairwise(chunks):
        assert MARKDOWN[a.end : b.start].strip() == ""


def test_prefers_a_markdown_heading() -> None:
    text = "intro line\n" + "x " * 60 + "\n## Heading\n" + "y " * 200
    first = chunk_text(text, size=200, overlap=0)[0]
    assert text[first.end :].startswith("## Heading")


def test_prefers_a_blank_line_to_a_sentence_end() -> None:
    text = "First sentence. " * 7 + "\n\n" + "Second paragraph goes on. " * 20
    first = chunk_text(text, size=200, overlap=0)[0]
    assert first.text.endswith("\n\n")


def test_text_without_any_boundary_is_cut_hard() -> None:
    text = "x" * 1000
    chunks = chunk_text(text, size=300, overlap=50)
    check_chunks(text, chunks, 300)
    assert [len(c.text) for c in chunks[:3]] == [300, 300, 300]


def test_chinese_sentences() -> None:
    text = "勺嘴鹬是一种极危的鸟类。" * 60
    chunks = chunk_text(text, size=100, overlap=20)
    check_chunks(text, chunks, 100)
    assert all(c.text.endswith("。") for c in chunks[:-1])


def test_short_text_is_one_chunk() -> None:
    (chunk,) = chunk_text("Alice adopted a cat.\n")
    assert chunk.text == "Alice adopted a cat.\n"
    assert (chunk.start, chunk.end, chunk.line_start, chunk.line_end) == (0, 21, 1, 1)


@pytest.mark.parametrize("text", ["", " ", "\n\n\n", " \t\n  \n"])
def test_empty_or_blank_text_has_no_chunks(text: str) -> None:
    assert chunk_text(text) == []


def test_line_ranges_after_leading_blank_lines() -> None:
    text = "\n\n\nfirst real line\nsecond\n"
    (chunk,) = chunk_text(text, size=800, overlap=100)
    assert text[chunk.start : chunk.end] == chunk.text
    assert chunk.line_start == 1
    assert chunk.line_end == 5


def test_deterministic() -> None:
    assert chunk_text(MARKDOWN, size=150, overlap=30) == chunk_text(MARKDOWN, size=150, overlap=30)


@pytest.mark.parametrize(("size", "overlap"), [(1, 0), (0, 0), (100, 50), (100, -1), (10, 7)])
def test_invalid_settings(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunk"):
        chunk_text("some text", size=size, overlap=overlap)


ALPHABET = "ab cd.!?\n\n\t#。，中文é🦜"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(alphabet=ALPHABET, max_size=2000),
    size=st.integers(min_value=2, max_value=300),
    data=st.data(),
)
def test_property_every_character_kept_in_order(text: str, size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(min_value=0, max_value=max(size // 2 - 1, 0)))
    check_chunks(text, chunk_text(text, size=size, overlap=overlap), size)


@pytest.mark.parametrize("seed", range(40))
def test_random_texts_every_character_kept_in_order(seed: int) -> None:
    """The same property over seeded random documents shaped like real ones."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "数据", "存储", "ünïcode", "x" * 30, "🦜"]
    pieces = []
    for _ in range(rng.randint(0, 400)):
        roll = rng.random()
        if roll < 0.05:
            pieces.append("\n\n# Heading " + rng.choice(words) + "\n")
        elif roll < 0.15:
            pieces.append(rng.choice([". ", "! ", "? ", "。", "\n", "\n\n", "\t"]))
        else:
            pieces.append(rng.choice(words) + " ")
    text = "".join(pieces)
    size = rng.randint(2, 900)
    overlap = rng.randint(0, max(size // 2 - 1, 0))
    check_chunks(text, chunk_text(text, size=size, overlap=overlap), size)
