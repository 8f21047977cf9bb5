"""The Palace with the real model, real Chroma and real SQLite: mine, search, change."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sample_corpus import SAMPLE_WING

from palace_retrievers import Hit, InvalidQueryError, Palace

pytestmark = pytest.mark.slow


def relative(hit: Hit) -> str:
    return hit.source.split("corpus/", 1)[1]


def chroma_ids(palace_dir: Path, collection: str = "palace_drawers") -> set[str]:
    """Ids in the Chroma index on disk, read with a client of our own."""
    import chromadb
    from chromadb.config import Settings

    from palace_plugins.builtin.backends.chroma import active_collection

    client = chromadb.PersistentClient(
        path=str(palace_dir / "index" / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    try:
        name = active_collection(client, collection)  # the collection a reindex swapped in
        return set(client.get_collection(name).get(include=[])["ids"])
    finally:
        client.close()


def test_finds_who_owns_the_ios_release(sample_palace: Palace) -> None:
    hits = sample_palace.search("who owns the iOS release?", k=3)
    assert len(hits) == 3
    # Mining extracted memories too ("Chen Wei owns the Android release"); on the drawers'
    # scale such a memory may share the list (palace_retrievers.memory.scale).
    drawers = [h for h in hits if not h.is_memory]
    assert "docs/onboarding.md" in [relative(h) for h in drawers]
    best = next(h for h in drawers if relative(h) == "docs/onboarding.md")
    assert "Bashir Rahimi" in best.text
    source_text = Path(best.source).read_text(encoding="utf-8")
    assert best.text in source_text  # verbatim
    assert set(best.scores) >= {"vector"}
    assert best.score == pytest.approx(best.scores.get("final", best.score))
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("中国用户的数据存储在哪里？", "meetings/shanghai-partner-notes.md"),
        ("what do volunteers need when there is no signal in the field?", "meetings/"),
    ],
)
def test_other_sample_queries(sample_palace: Palace, query: str, expected: str) -> None:
    hits = sample_palace.search(query, k=3)
    # A memory mined from the corpus may share the list (see the test above).
    assert any(relative(h).startswith(expected) for h in hits if not h.is_memory)


def test_drawers_carry_their_origin(sample_palace: Palace) -> None:
    (hit,) = sample_palace.search("who owns the iOS release?", k=1)
    drawer = hit.drawer
    assert drawer.wing == SAMPLE_WING
    assert drawer.room == relative(hit).split("/")[0]
    assert drawer.line_start is not None
    assert drawer.line_end is not None
    lines = Path(hit.source).read_text(encoding="utf-8").splitlines(keepends=True)
    assert "".join(lines[drawer.line_start - 1 : drawer.line_end]).find(drawer.text.strip()) >= 0
    assert drawer.filed_at.tzinfo is not None
    assert drawer.metadata["file_name"] == Path(hit.source).name


def test_mine_twice_is_idempotent(sample_palace: Palace, sample_copy: tuple[Path, Path]) -> None:
    _, corpus = sample_copy
    before = sample_palace.stats()
    report = sample_palace.mine(corpus, wing=SAMPLE_WING)
    assert report.mined == 0
    assert report.drawers_added == 0
    assert report.unchanged == report.seen == before.ledger.sources
    after = sample_palace.stats()
    assert after.ledger == before.ledger
    assert [s.count for s in after.indexes] == [s.count for s in before.indexes]


def test_a_modified_file_is_the_only_one_mined_again(
    sample_copy: tuple[Path, Path], open_palace: Callable[..., Palace]
) -> None:
    palace_dir, corpus = sample_copy
    palace = open_palace(palace_dir, fake=False)
    onboarding = corpus / "docs" / "onboarding.md"
    old_ids = set(palace.ledger.drawer_ids())
    old_onboarding = {
        d.id for d in palace.get(list(old_ids)) if d.source.endswith("docs/onboarding.md")
    }
    assert len(old_onboarding) > 2
    text = onboarding.read_text(encoding="utf-8")
    onboarding.write_text(text[:700] + "\nNew last line: Farid now owns the web app.\n")
    mtime = onboarding.stat().st_mtime + 60
    os.utime(onboarding, (mtime, mtime))
    # A file touched but not changed is read, found unchanged and not re-filed.
    glossary = corpus / "docs" / "glossary.txt"
    os.utime(glossary, (mtime, mtime))

    report = palace.mine(corpus, wing=SAMPLE_WING)
    assert report.mined == 1
    assert report.unchanged == report.seen - 1
    assert report.drawers_removed > 0

    new_ids = set(palace.ledger.drawer_ids())
    removed = old_ids - new_ids
    assert removed
    assert removed <= old_onboarding
    assert palace.get(list(removed)) == []
    status = {s.collection: s for s in palace.stats().indexes}["drawers"]
    assert status.ok
    assert status.count == status.ledger_count == len(new_ids)
    hits = palace.search("who owns the web app?", k=3)
    assert any("Farid now owns the web app" in h.text for h in hits)
    palace.close()
    on_disk = chroma_ids(palace_dir)
    assert on_disk == new_ids
    assert not (removed & on_disk)

    again = open_palace(palace_dir, fake=False)
    assert again.mine(corpus, wing=SAMPLE_WING).mined == 0  # the touch was recorded


@pytest.mark.parametrize("backend", ["chroma", "sqlite"])
def test_add_texts_get_delete(
    open_palace: Callable[..., Palace], tmp_path: Path, backend: str
) -> None:
    palace = open_palace(tmp_path / "p", fake=False, backend=backend)
    ids = palace.add_texts(
        ["Alice adopted a grey cat called Miso.", "The deploy runs every Tuesday at noon."],
        metadatas=[{"wing": "pets", "mood": "happy"}, {"wing": "ops", "room": "deploys"}],
        ids=["t1", "t2"],
    )
    assert ids == ["t1", "t2"]
    (hit,) = palace.search("what pet does Alice have?", k=1)
    assert (hit.id, hit.wing, hit.room, hit.metadata) == (
        "t1",
        "pets",
        "general",
        {"mood": "happy"},
    )
    # Same id again: an upsert, not a second drawer.
    palace.add_texts(
        ["Alice adopted a small dog called Pip."], metadatas=[{"wing": "pets"}], ids=["t1"]
    )
    assert palace.stats().ledger.drawers == 2
    (drawer,) = palace.get(["t1"])
    assert drawer.text == "Alice adopted a small dog called Pip."
    assert palace.search("which dog did Alice adopt?", k=1)[0].id == "t1"
    assert {s.collection: s.count for s in palace.stats().indexes}["drawers"] == 2

    assert [d.id for d in palace.get(["t2", "missing", "t1"])] == ["t2", "t1"]
    assert palace.delete(["t1", "missing"]) == 1
    assert palace.get(["t1"]) == []
    assert [h.id for h in palace.search("Alice adopted a dog", k=5)] == ["t2"]
    assert palace.delete(["t1"]) == 0
    status = {s.collection: s for s in palace.stats().indexes}["drawers"]
    assert status.ok
    assert status.count == status.ledger_count == 1


def test_add_texts_without_ids_is_idempotent(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "p", fake=False)
    first = palace.add_texts(["We moved to PostgreSQL 15."], wing="work")
    second = palace.add_texts(["We moved to PostgreSQL 15."], wing="work")
    assert first == second
    assert palace.stats().ledger.drawers == 1


def test_user_isolation(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    palace = open_palace(tmp_path / "p", fake=False)
    text = "My bank PIN is 4321 and my passport number is X123."
    u1 = palace.add_texts([text], user_id="u1")
    u2 = palace.add_texts([text.replace("4321", "9999")], user_id="u2")
    shared = palace.add_texts(["The office opens at nine."])
    assert len({*u1, *u2, *shared}) == 3
    query = "what is my bank PIN?"
    assert [h.id for h in palace.search(query, k=10, user_id="u1")] == u1
    assert [h.id for h in palace.search(query, k=10, user_id="u2")] == u2
    assert [h.id for h in palace.search(query, k=10)] == shared
    assert palace.search(query, k=10, user_id="u3") == []
    assert palace.get(u1, user_id="u2") == []
    assert palace.get(u1) == []
    assert [d.user_id for d in palace.get(u1, user_id="u1")] == ["u1"]
    assert palace.delete(u1, user_id="u2") == 0
    assert palace.delete(u1) == 0
    assert len(palace.get(u1, user_id="u1")) == 1
    # Owner given in the metadata works the same way.
    palace.add_texts(["u4 keeps bees"], metadatas=[{"user_id": "u4"}])
    assert [h.text for h in palace.search("bees", k=5, user_id="u4")] == ["u4 keeps bees"]
    assert "u4 keeps bees" not in [h.text for h in palace.search("bees", k=5)]


def test_an_id_never_changes_hands(fake_palace: Palace) -> None:
    """add_texts is an upsert, but never over another owner's drawer (fake embedder)."""
    (mine,) = fake_palace.add_texts(["u1's secret recipe"], ids=["x"], user_id="u1")
    for intruder in ("u2", None):
        with pytest.raises(InvalidQueryError, match="another owner"):
            fake_palace.add_texts(["overwritten"], ids=[mine], user_id=intruder)
    assert [d.text for d in fake_palace.get([mine], user_id="u1")] == ["u1's secret recipe"]
    fake_palace.add_texts(["u1's better recipe"], ids=[mine], user_id="u1")  # owner may
    assert [d.text for d in fake_palace.get([mine], user_id="u1")] == ["u1's better recipe"]


def test_filters_wing_room_kind(sample_palace: Palace) -> None:
    sample_palace.add_texts(["Bashir owns the iOS release, says the other wing."], wing="other")
    query = "who owns the iOS release?"
    assert {h.wing for h in sample_palace.search(query, k=10)} == {SAMPLE_WING, "other"}
    assert {h.wing for h in sample_palace.search(query, k=10, wing="other")} == {"other"}
    in_room = sample_palace.search(query, k=10, wing=SAMPLE_WING, room="meetings")
    assert len(in_room) == 10
    assert {h.room for h in in_room} == {"meetings"}
    assert all(relative(h).startswith("meetings/") for h in in_room)
    assert sample_palace.search(query, k=10, room="nowhere") == []
    assert len(sample_palace.search(query, k=3, kind="drawer")) == 3
    assert sample_palace.search(query, k=3, kind="memory") == []


def test_filters_since_until(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    palace = open_palace(tmp_path / "p", fake=False)
    texts = {
        "jan": ("The January standup discussed the sync bug.", "2026-01-15"),
        "feb": ("The February standup discussed the sync bug.", "2026-02-15T10:00:00+01:00"),
        "mar": ("The March standup discussed the sync bug.", datetime(2026, 3, 15, tzinfo=UTC)),
    }
    palace.add_texts(
        [t for t, _ in texts.values()],
        metadatas=[{"content_date": d} for _, d in texts.values()],
        ids=list(texts),
    )
    query = "standup about the sync bug"
    assert {h.id for h in palace.search(query, k=5, since="2026-02-01")} == {"feb", "mar"}
    assert {h.id for h in palace.search(query, k=5, until="2026-02-01")} == {"jan"}
    got = palace.search(query, k=5, since="2026-02-01", until=datetime(2026, 2, 28, tzinfo=UTC))
    assert {h.id for h in got} == {"feb"}
    assert {h.id for h in palace.search(query, k=5, since="2026-02-15T09:00:00Z")} == {
        "feb",
        "mar",
    }
    assert palace.search(query, k=5, since="2027-01-01") == []


def test_stats(sample_palace: Palace) -> None:
    stats = sample_palace.stats()
    assert stats.schema_version >= 1
    assert stats.backend == "chroma"
    assert stats.embedder == "sentence-transformers"
    assert stats.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert stats.dimension == 384
    ledger = stats.ledger
    assert ledger.sources == 15
    assert ledger.drawers == ledger.embedded > ledger.sources
    assert set(ledger.wings) == {SAMPLE_WING}
    assert set(ledger.wings[SAMPLE_WING]) == {"docs", "meetings", "engineering"}
    assert sum(ledger.wings[SAMPLE_WING].values()) == ledger.drawers
    indexes = {s.collection: s for s in stats.indexes}
    assert indexes["drawers"].ok
    assert indexes["drawers"].count == indexes["drawers"].ledger_count == ledger.drawers
    assert stats.plugin_failures == []


def test_palace_toml_is_written_and_reused(
    tmp_path: Path, open_palace: Callable[..., Palace]
) -> None:
    palace = open_palace(tmp_path / "p", fake=False, backend="sqlite")
    palace.close()
    text = (tmp_path / "p" / "palace.toml").read_text(encoding="utf-8")
    assert 'backend = "sqlite"' in text
    again = open_palace(tmp_path / "p", fake=False)
    assert again.stats().backend == "sqlite"


def test_default_path_is_under_home(isolated_env: Path, open_palace: Callable[..., Palace]) -> None:
    palace = open_palace(None, backend="sqlite")
    assert palace.path == isolated_env / ".palace" / "default"
    assert (isolated_env / ".palace" / "default" / "ledger.sqlite3").exists()


def test_palace_path_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, open_palace: Callable[..., Palace]
) -> None:
    monkeypatch.setenv("PALACE_PATH", str(tmp_path / "from-env"))
    palace = open_palace(None, backend="sqlite")
    assert palace.path == tmp_path / "from-env"


def test_add_texts_with_the_callers_vectors(
    fake_palace: Palace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vectors the caller made with the palace's embedder are stored, not made again."""
    texts = ["alice adopted a grey cat", "the database is postgres"]
    vectors = fake_palace.embedder.embed_documents(texts) * 3.0  # stored normalised

    embedded: list[str] = []
    embed = fake_palace.embedder.embed_documents

    def recorded(batch: list[str]) -> Any:
        embedded.extend(batch)
        return embed(batch)

    monkeypatch.setattr(fake_palace.embedder, "embed_documents", recorded)
    fake_palace.add_texts(texts, ids=["cat", "db"], vectors=vectors.tolist())
    assert not set(texts) & set(embedded)  # (the closets built from them are embedded)
    (hit,) = fake_palace.search_by_vector(vectors[0], k=1)
    assert (hit.id, round(hit.score, 5)) == ("cat", 1.0)
    for wrong in (vectors[:1], vectors[:, :3], [[float("nan")] * vectors.shape[1]] * 2):
        with pytest.raises(InvalidQueryError, match="vectors must be 2 rows"):
            fake_palace.add_texts(texts, ids=["x", "y"], vectors=wrong)
    assert fake_palace.get(["x", "y"]) == []


def test_drawer_ids_and_source_drawers_keep_to_one_owner(fake_palace: Palace) -> None:
    chunks = [{"source": "notes/a.md", "chunk_index": i} for i in (1, 0, 2)]
    fake_palace.add_texts(["second", "first", "third"], chunks, ids=["a1", "a0", "a2"], wing="w")
    fake_palace.add_texts(["u1's first"], chunks[1:2], ids=["u"], wing="w", user_id="u1")
    fake_palace.add_texts(["elsewhere"], ids=["e"], wing="other", room="r")
    assert sorted(fake_palace.drawer_ids()) == ["a0", "a1", "a2", "e"]
    assert sorted(fake_palace.drawer_ids(wing="w")) == ["a0", "a1", "a2"]
    assert fake_palace.drawer_ids(wing="other", room="r") == ["e"]
    assert fake_palace.drawer_ids(user_id="u1") == ["u"]
    assert fake_palace.drawer_ids(user_id="u2") == []
    in_order = fake_palace.source_drawers("notes/a.md", wing="w")
    assert [d.id for d in in_order] == ["a0", "a1", "a2"]
    assert [d.id for d in fake_palace.source_drawers("notes/a.md", wing="w", user_id="u1")] == ["u"]
    assert fake_palace.source_drawers("notes/a.md", wing="other") == []
