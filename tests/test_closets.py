"""The ``regex`` closet extractor (English and Chinese) and closet bookkeeping.

The bookkeeping tests use the FAKE hashing embedder: they check which closets are filed
and removed, not what a search finds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from palace_plugins.builtin.extractors.regex_closets import RegexClosetExtractor
from palace_retrievers import Palace
from palace_retrievers.closets import MAX_CLOSET_CHARS, build_closets
from palace_retrievers.records import Drawer

ENGLISH = (
    "## Release planning\n"
    "On 8 May, 2023 Caroline went to the LGBTQ support group in New York City. Melanie said "
    '"Charlotte\'s Web" was great, and they adopted a puppy for $300.'
)
CHINESE = "2023年5月7日，我们在北京参加了《人工智能》大会。张伟说「数据库迁移」很顺利。"


def test_english_entities() -> None:
    extractor = RegexClosetExtractor()
    found = extractor.entities(ENGLISH)
    for expected in (
        "Release planning",  # header
        "Charlotte's Web",  # quoted phrase
        "8 May, 2023",  # date
        "Caroline",
        "Melanie",
        "New York City",  # proper nouns
        "LGBTQ",  # acronym
        "$300",  # amount
        "adopted puppy",  # action phrase
    ):
        assert expected in found, expected
    lowered = {e.lower() for e in found}
    assert not lowered & {"the", "on", "they", "may"}  # stop words and a bare month
    assert extractor.topic(ENGLISH) == "Release planning"


def test_chinese_entities() -> None:
    extractor = RegexClosetExtractor()
    found = extractor.entities(CHINESE)
    for expected in ("2023年5月7日", "人工智能", "数据库迁移", "大会"):
        assert expected in found, expected
    assert not any(e in {"我们", "的", "了"} for e in found)
    assert "人工智能" in extractor.topic(CHINESE)


def drawer(i: int, text: str, source: str = "chat") -> Drawer:
    return Drawer(id=f"d{i}", text=text, wing="w", room="r", source=source, chunk_index=i)


def test_build_closets_groups_consecutive_chunks_of_one_source() -> None:
    drawers = [drawer(i, f"Alice met Bob number {i} in Paris.") for i in range(5)]
    drawers.append(drawer(9, "张伟在北京。", source="other"))
    closets = build_closets(
        drawers, extractor=RegexClosetExtractor(), extractor_name="regex", drawers_per_closet=2
    )
    pointers = sorted(c.drawer_ids for c in closets)
    assert pointers == [("d0", "d1"), ("d2", "d3"), ("d4",), ("d9",)]
    for closet in closets:
        assert len(closet.line) <= MAX_CLOSET_CHARS
        assert closet.line == f"{closet.text}|→{','.join(closet.drawer_ids)}"
        assert closet.line.count("|") == 2
    again = build_closets(
        drawers, extractor=RegexClosetExtractor(), extractor_name="regex", drawers_per_closet=2
    )
    assert [c.id for c in again] == [c.id for c in closets]  # deterministic


def test_closets_are_filed_replaced_and_pruned(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "p", backend="sqlite")
    ids = palace.add_texts(
        ["Alice adopted a cat in Paris.", "Bob sold his bike in Rome.", "Carol moved to Oslo."],
        metadatas=[{"source": "s", "chunk_index": i} for i in range(3)],
        ids=["a", "b", "c"],
    )
    assert ids == ["a", "b", "c"]
    assert palace.stats().ledger.closets == 1  # three chunks of one source: one closet
    (closet,) = [c for batch in palace.ledger.iter_closets() for c in batch]
    assert closet.drawer_ids == ("a", "b", "c")
    assert "Alice" in closet.line

    palace.add_texts(["Alice adopted a dog in Lyon."], metadatas=[{"source": "s"}], ids=["a"])
    lines = [c.line for batch in palace.ledger.iter_closets() for c in batch]
    assert len(lines) == 1  # the closet naming the old "a" is gone, a new one points to it
    assert "Lyon" in lines[0]
    assert "Paris" not in lines[0]

    assert palace.delete(["a"]) == 1
    assert palace.stats().ledger.closets == 0
    status = {s.collection: s for s in palace.stats().indexes}["closets"]
    assert status.ok
    assert status.count == status.ledger_count == 0


def test_no_extractor_builds_no_closets(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    palace = open_palace(tmp_path / "p", backend="sqlite", config={"closets": {"extractor": ""}})
    palace.add_texts(["Alice adopted a cat in Paris."])
    assert palace.stats().ledger.closets == 0
    assert palace.search("Alice", k=1)[0].scores["closet"] == 0.0
