"""Two folders mined into one wing: each keeps its own sources, drawers and sync.

The first root an owner mines into a wing keeps the keys its source gives; a different
tree mined into that wing after it has its keys start with its own label
(``b-1a2b3c4d/todo.md``); a copy or a move of the first tree takes its records over, as
a mine of a moved folder always did. A source whose keys are ids (a conversation export)
never gets a label: a fresh export saved at a new path updates the conversations filed
from the old one, however much they grew. Real SQLite ledger, exact ``sqlite`` backend;
the FAKE hashing embedder (this is bookkeeping: which drawers exist, under which keys,
and what is embedded again), counted to show what a mine embeds.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes import HashingEmbedder
from helpers_tree import write_tree

from palace_plugins.builtin.sources.auto import AutoSource
from palace_plugins.builtin.sources.chatgpt import ChatGPTSource
from palace_plugins.builtin.sources.claude_code import ClaudeCodeSource
from palace_plugins.builtin.sources.files import FilesSource
from palace_plugins.builtin.sources.slack import SlackSource
from palace_plugins.builtin.sources.text import TextSource
from palace_retrievers import Palace
from palace_retrievers.embedder import Vectors
from palace_retrievers.ids import root_label, root_prefix, split_source_key
from palace_retrievers.records import Filter
from palace_retrievers.sources import Skipped, Source, SourceEntry

WING = "notes"
FIRST = {
    "todo.md": "# Todo\n\nRenew the harbour lantern licence before May.\n",
    "alpha/one.md": "# One\n\nThe harbour lantern burns whale oil.\n",
    "alpha/two.md": "# Two\n\nThe lighthouse keeper counts gulls at noon.\n",
}
SECOND = {
    "todo.md": "# Todo\n\nBuy saffron and cardamom for the winter bread.\n",
    "alpha/one.md": "# One\n\nThe blue heron fishes at dawn in the reeds.\n",
    "beta/three.md": "# Three\n\nThe orchard ladder leans on the pear tree.\n",
}


class CountingEmbedder(HashingEmbedder):
    """The FAKE embedder, counting the texts it embeds for documents."""

    def __init__(self) -> None:
        self.embedded = 0

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        self.embedded += len(texts)
        return super().embed_documents(texts)


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def palace(
    open_palace: Callable[..., Palace], tmp_path: Path, embedder: CountingEmbedder
) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite", embedder=embedder)


def keys(palace: Palace, wing: str = WING, user_id: str | None = None) -> dict[str, str]:
    """``{key as the source gave it, with any root prefix: root}`` of one owner's sources."""
    out = {}
    for recorded, state in palace.ledger.source_states(wing).items():
        owner, key = split_source_key(recorded)
        if owner == user_id:
            assert state.root is not None
            out[key] = state.root
    return out


def texts(palace: Palace, wing: str = WING) -> dict[str, str]:
    """``{drawer id: text}`` of a wing."""
    ids = palace.ledger.drawer_ids(Filter(wing=wing))
    return {d.id: d.text for d in palace.get(list(ids))}


def found(palace: Palace, query: str) -> set[str]:
    """The sources (absolute paths) of what a search of the wing finds for ``query``."""
    return {h.source for h in palace.search(query, k=10, wing=WING)}


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    return write_tree(tmp_path / "a", FIRST), write_tree(tmp_path / "b", SECOND)


def test_two_folders_with_the_same_paths_keep_both_sets_of_drawers(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    assert palace.mine(first, wing=WING).mined == 3
    kept = texts(palace)
    report = palace.mine(second, wing=WING)
    assert (report.mined, report.unchanged, report.skipped, report.gone) == (3, 0, [], 0)
    assert set(kept.items()) <= set(texts(palace).items())  # nothing of the first replaced
    label = root_label(str(second.resolve()))
    assert label.startswith("b-")
    assert len(label) == len("b-") + 8
    assert keys(palace) == {
        "todo.md": str(first.resolve()),
        "alpha/one.md": str(first.resolve()),
        "alpha/two.md": str(first.resolve()),
        f"{label}/todo.md": str(second.resolve()),
        f"{label}/alpha/one.md": str(second.resolve()),
        f"{label}/beta/three.md": str(second.resolve()),
    }
    assert len(texts(palace)) == 6
    # Both todo.md files are found, each by its own words.
    assert str(first.resolve() / "todo.md") in found(palace, "lantern licence")
    assert str(second.resolve() / "todo.md") in found(palace, "saffron cardamom")
    assert str(first.resolve() / "alpha/one.md") in found(palace, "whale oil")
    assert str(second.resolve() / "alpha/one.md") in found(palace, "heron reeds")


def test_a_file_of_the_tree_mined_on_its_own_replaces_its_drawers(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, _ = trees
    palace.mine(first, wing=WING)
    (first / "todo.md").write_text("# Todo\n\nRepaint the harbour lantern red.\n", "utf-8")
    report = palace.mine(first / "todo.md", wing=WING)
    assert report.mined == 1
    filed = texts(palace)
    assert len(filed) == 3
    assert any("Repaint" in text for text in filed.values())
    assert not any("licence" in text for text in filed.values())  # the old version is gone
    assert not any("/" in key and key.split("/")[0].startswith("todo") for key in keys(palace))


def test_mining_each_root_again_is_incremental(
    palace: Palace, trees: tuple[Path, Path], embedder: CountingEmbedder
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    before, recorded = texts(palace), keys(palace)
    embedder.embedded = 0
    for root in (first, second, first, second):
        report = palace.mine(root, wing=WING)
        assert (report.seen, report.mined, report.unchanged, report.gone) == (3, 0, 3, 0)
        assert report.drawers_added == report.drawers_removed == 0
    assert embedder.embedded == 0
    assert texts(palace) == before
    assert keys(palace) == recorded
    # A touched but unchanged file is read again and only its mtime recorded.
    os.utime(second / "todo.md", (1_800_000_000, 1_800_000_000))
    report = palace.mine(second, wing=WING)
    assert (report.mined, report.unchanged) == (0, 3)
    assert embedder.embedded == 0


def test_a_changed_file_of_the_second_root_replaces_only_its_own_drawers(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    before = texts(palace)
    todo = second / "todo.md"
    todo.write_text("# Todo\n\nBake the rye loaf on Sunday.\n", encoding="utf-8")
    os.utime(todo, (1_800_000_000, 1_800_000_000))
    report = palace.mine(second, wing=WING)
    assert (report.mined, report.unchanged, report.drawers_removed) == (1, 2, 1)
    after = texts(palace)
    gone = set(before) - set(after)
    assert [before[i] for i in gone] == [SECOND["todo.md"]]
    assert all("saffron" not in text for text in after.values())
    assert any("lantern licence" in text for text in after.values())  # the first's todo.md
    assert str(second.resolve() / "todo.md") in found(palace, "rye loaf Sunday")
    assert palace.mine(first, wing=WING).mined == 0  # the first root did not change


def test_a_file_deleted_from_one_root_is_synced_away_from_that_root_only(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    label = root_label(str(second.resolve()))
    assert palace.sync(dry_run=True).sources_removed == 0  # both roots checked, all there
    (first / "todo.md").unlink()
    assert palace.mine(first, wing=WING).gone == 1
    assert palace.mine(second, wing=WING).gone == 0
    report = palace.sync()
    assert [(r.root, sorted(r.gone)) for r in report.roots if r.gone] == [
        (str(first.resolve()), ["todo.md"])
    ]
    assert sorted(keys(palace)) == sorted(
        ["alpha/one.md", "alpha/two.md", *(f"{label}/{k}" for k in SECOND)]
    )
    remaining = texts(palace).values()
    assert not any("lantern licence" in text for text in remaining)
    assert any("saffron" in text for text in remaining)  # the second root's todo.md
    # And the other way round: the second root's file goes, the first's of that path stays.
    (second / "alpha" / "one.md").unlink()
    report = palace.sync(second)
    assert [sorted(r.gone) for r in report.roots] == [[f"{label}/alpha/one.md"]]
    assert "alpha/one.md" in keys(palace)
    assert any("whale oil" in text for text in texts(palace).values())
    assert not any("heron" in text for text in texts(palace).values())
    assert palace.sync().sources_removed == 0


def test_the_same_root_mined_twice_keeps_the_keys_and_ids_it_always_had(
    open_palace: Callable[..., Palace], tmp_path: Path, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    alone = open_palace(tmp_path / "alone", backend="sqlite")
    alone.mine(first, wing=WING)
    palace.mine(first, wing=WING)
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    palace.mine(first, wing=WING)
    assert set(keys(alone)) == set(FIRST)
    root = str(first.resolve())
    assert {k for k, r in keys(palace).items() if r == root} == set(FIRST)
    # The first root's drawers have the ids of a palace that holds it alone.
    assert set(texts(alone)) < set(texts(palace))
    assert len(texts(palace)) == len(texts(alone)) + len(SECOND)


def test_each_owner_has_a_first_root_of_their_own(palace: Palace, trees: tuple[Path, Path]) -> None:
    first, second = trees
    palace.mine(first, wing=WING, user_id="alice")
    palace.mine(second, wing=WING, user_id="alice")
    palace.mine(second, wing=WING, user_id="bob")  # bob's first root in this wing
    label = root_label(str(second.resolve()))
    assert set(keys(palace, user_id="alice")) == set(FIRST) | {f"{label}/{k}" for k in SECOND}
    assert set(keys(palace, user_id="bob")) == set(SECOND)
    (second / "beta" / "three.md").unlink()
    report = palace.sync(second, user_id="alice")
    gone = [split_source_key(k) for r in report.roots for k in r.gone]
    assert gone == [("alice", f"{label}/beta/three.md")]
    assert set(keys(palace, user_id="bob")) == set(SECOND)  # bob's copy not touched
    assert [split_source_key(k) for r in palace.sync().roots for k in r.gone] == [
        ("bob", "beta/three.md")
    ]


def test_a_copy_of_the_first_tree_takes_its_records_over(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """A copy (times kept), the original still there: the same tree, nothing embedded
    again but the file edited in the copy, and no key prefixed (as tests/test_palace.py's
    sample copies rely on)."""
    first, _ = trees
    palace.mine(first, wing=WING)
    before = texts(palace)
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    edited = copy / "alpha" / "two.md"
    edited.write_text("# Two\n\nThe lighthouse keeper counts terns at dusk.\n", encoding="utf-8")
    embedder.embedded = 0
    report = palace.mine(copy, wing=WING)
    assert (report.mined, report.unchanged, report.drawers_removed) == (1, 2, 1)
    assert embedder.embedded > 0  # the edited file's drawer
    assert len(texts(palace)) == len(before)
    assert keys(palace) == dict.fromkeys(FIRST, str(copy.resolve()))
    embedder.embedded = 0
    assert palace.mine(copy, wing=WING).unchanged == 3
    assert embedder.embedded == 0


def test_a_renamed_first_root_is_the_same_tree(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path, embedder: CountingEmbedder
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    before = texts(palace)
    moved = first.rename(tmp_path / "renamed")
    embedder.embedded = 0
    report = palace.mine(moved, wing=WING)
    assert (report.mined, report.unchanged) == (0, 3)
    assert embedder.embedded == 0
    assert texts(palace) == before
    assert {root for root in keys(palace).values()} == {
        str(moved.resolve()),
        str(second.resolve()),
    }
    assert palace.sync().sources_removed == 0


def test_a_renamed_second_root_is_a_new_root_until_the_old_one_is_synced(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = trees
    palace.mine(first, wing=WING)
    palace.mine(second, wing=WING)
    moved = second.rename(tmp_path / "elsewhere")
    report = palace.mine(moved, wing=WING)
    assert report.mined == 3  # its keys carry its new label
    new = root_label(str(moved.resolve()))
    assert {k for k, root in keys(palace).items() if root == str(moved.resolve())} == {
        f"{new}/{k}" for k in SECOND
    }
    assert len(texts(palace)) == 9
    kept = palace.sync()
    assert kept.sources_removed == 0  # the old folder is gone: kept until named
    assert any(r.note and "no longer exists" in r.note for r in kept.roots)
    assert palace.sync(second).sources_removed == 3
    assert len(texts(palace)) == 6
    assert set(keys(palace).values()) == {str(first.resolve()), str(moved.resolve())}


def test_a_third_root_and_single_files_get_labels_of_their_own(
    palace: Palace, trees: tuple[Path, Path], tmp_path: Path
) -> None:
    first, second = trees
    third = write_tree(tmp_path / "c", {"todo.md": "# Todo\n\nWater the fig tree.\n"})
    for root in (first, second, third):
        palace.mine(root, wing=WING)
    assert len({text for text in texts(palace).values() if text.startswith("# Todo")}) == 3
    labels = {root_label(str(r.resolve())) for r in (second, third)}
    assert {k.split("/")[0] for k in keys(palace) if k.endswith("todo.md") and "/" in k} == labels
    # One file mined beside another file of the same name, into another wing.
    palace.mine(first / "todo.md", wing="single")
    palace.mine(third / "todo.md", wing="single")
    assert len(texts(palace, "single")) == 2
    assert sorted(keys(palace, "single")) == sorted(
        ["todo.md", f"{root_label(str((third / 'todo.md').resolve()))}/todo.md"]
    )


def test_root_prefix_reads_back_what_a_root_was_given() -> None:
    label = root_label("/home/me/b")
    assert label == root_label("/home/me/b") != root_label("/srv/b")
    assert label.startswith("b-")
    assert "/" not in label
    assert root_label("/").startswith("root-")
    assert root_prefix("/home/me/b", [f"{label}/todo.md", f"{label}/x/y.md"]) == label + "/"
    assert root_prefix("/home/me/b", [f"{label}/todo.md", "todo.md"]) == ""
    assert root_prefix("/home/me/b", []) == ""
    assert root_prefix("/srv/b", [f"{label}/todo.md"]) == ""


# --- Sources whose keys are ids: a fresh conversation export saved at a new path ---

SOURCES = Path(__file__).resolve().parent / "fixtures" / "sources"
CHATGPT = SOURCES / "chatgpt" / "export"  # the fixture tests/test_sources_chatgpt.py mines
#: The fixture's conversations that have a ``current_node`` (grown in the later export).
GROWN = {
    "6632a1f0-5e1c-8005-9a3e-1b2c3d4e5f60": "Can I retard the dough overnight in the fridge?",
    "665ae210-77b0-8005-b1c2-d3e4f5a6b7c8": "Now split the chart by region, please.",
    "66827a30-1234-8005-aaaa-0123456789ab": "And when does 3.14 come out?",
}
TYRES = "6592a3b0-0000-8005-cccc-00000000abcd"  # the same in both exports
NEW = "67a0c000-0000-8005-dddd-000000000001"  # only in the later export
GPT = "me"


def _message(ident: str, role: str, text: str, when: float) -> dict[str, Any]:
    return {
        "id": ident,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": when,
        "content": {"content_type": "text", "parts": [text]},
        "status": "finished_successfully",
        "recipient": "all",
        "metadata": {},
    }


def _grow(conversation: dict[str, Any], question: str) -> None:
    """One more exchange at the end of ``conversation``'s current branch."""
    mapping, last = conversation["mapping"], conversation["current_node"]
    when = 1_790_000_000.0
    mapping[last]["children"].append("grown-u")
    mapping["grown-u"] = {
        "id": "grown-u",
        "message": _message("grown-u", "user", question, when),
        "parent": last,
        "children": ["grown-a"],
    }
    mapping["grown-a"] = {
        "id": "grown-a",
        "message": _message("grown-a", "assistant", f"Here is my answer to: {question}", when),
        "parent": "grown-u",
        "children": [],
    }
    conversation["current_node"] = "grown-a"
    conversation["update_time"] = when


def _new_conversation() -> dict[str, Any]:
    when = 1_790_100_000.0
    return {
        "id": NEW,
        "conversation_id": NEW,
        "title": "Bicycle chain wax",
        "create_time": when,
        "update_time": when,
        "current_node": "n-a",
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["n-u"]},
            "n-u": {
                "id": "n-u",
                "message": _message("n-u", "user", "How often should I wax a bike chain?", when),
                "parent": "root",
                "children": ["n-a"],
            },
            "n-a": {
                "id": "n-a",
                "message": _message("n-a", "assistant", "Every 300 km or so, dry.", when + 5),
                "parent": "n-u",
                "children": [],
            },
        },
    }


def _export(path: Path, conversations: list[Any]) -> Path:
    """A ChatGPT export at ``path``: its folder, or its ``.zip`` when ``path`` ends so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(conversations)
    if path.suffix == ".zip":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("conversations.json", text)
            archive.write(CHATGPT / "user.json", "user.json")
    else:
        path.mkdir()
        (path / "conversations.json").write_text(text, encoding="utf-8")
        shutil.copy2(CHATGPT / "user.json", path / "user.json")
    return path


@pytest.fixture(params=[("chatgpt", ""), ("chatgpt", ".zip"), ("auto", ".zip"), ("auto", "")])
def exports(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path, Path]:
    """``(source, older export, later export)``, at two paths of one downloads folder: in
    the later one three of the four conversations grew and one is new."""
    source, suffix = request.param
    older = json.loads((CHATGPT / "conversations.json").read_text(encoding="utf-8"))
    later = json.loads((CHATGPT / "conversations.json").read_text(encoding="utf-8"))
    for conversation in later:
        if isinstance(conversation, dict) and conversation.get("id") in GROWN:
            _grow(conversation, GROWN[conversation["id"]])
    later.append(_new_conversation())
    downloads = tmp_path / "Downloads"
    return (
        source,
        _export(downloads / f"chatgpt-2026-11{suffix}", older),
        _export(downloads / f"chatgpt-2026-12{suffix}", later),
    )


def test_a_fresh_export_at_a_new_path_updates_the_conversations_filed(
    palace: Palace,
    exports: tuple[str, Path, Path],
    embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Most shared conversations grew (a content comparison would call it another tree):
    the keys are conversation ids, so each conversation is filed once, under plain keys,
    grown ones updated and the new one added, exactly as the later export alone."""
    source, older, later = exports
    assert palace.mine(older, source=source, wing=GPT).mined == 4
    tyres = {d.text for d in palace.get(list(texts(palace, GPT))) if d.metadata["session"] == TYRES}
    assert tyres
    embedded: list[str] = []
    embed = embedder.embed_documents

    def recording(batch: Sequence[str]) -> Vectors:
        embedded.extend(batch)
        return embed(batch)

    monkeypatch.setattr(embedder, "embed_documents", recording)
    report = palace.mine(later, source=source, wing=GPT)
    assert (report.seen, report.mined, report.unchanged, report.gone) == (5, 4, 1, 0)
    assert embedded
    assert not tyres & set(embedded)  # the unchanged conversation is not embedded again
    ids = [*GROWN, TYRES, NEW]
    assert keys(palace, GPT) == {f"chatgpt:{i}": str(later.resolve()) for i in ids}
    filed = texts(palace, GPT)
    palace.mine(later, source=source, wing="alone")
    assert sorted(filed.values()) == sorted(texts(palace, "alone").values())
    for question in GROWN.values():
        assert sum(question in text for text in filed.values()) == 1
    assert sum("wax a bike chain" in text for text in filed.values()) == 1
    # Mined again, either export changes nothing; a sync finds nothing gone.
    assert palace.mine(later, source=source, wing=GPT).unchanged == 5
    assert palace.sync().sources_removed == 0
    assert texts(palace, GPT) == filed


def test_a_fresh_export_is_not_compared_with_what_was_filed(
    palace: Palace, exports: tuple[str, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same exports with the source's keys taken as paths are two trees (the later
    one labelled, every conversation filed twice); once the keys are ids again, a mine
    of the later export files its conversations under plain keys, and a sync removes
    the labelled copies."""
    source, older, later = exports
    monkeypatch.setattr(ChatGPTSource, "keys_are_ids", False)
    palace.mine(older, source=source, wing=GPT)
    palace.mine(later, source=source, wing=GPT)
    label = root_label(str(later.resolve()))
    assert {k for k, root in keys(palace, GPT).items() if root == str(later.resolve())} == {
        f"{label}/chatgpt:{i}" for i in [*GROWN, TYRES, NEW]
    }
    monkeypatch.undo()
    report = palace.mine(later, source=source, wing=GPT)
    assert (report.seen, report.gone) == (5, 5)  # the labelled records, left for sync
    assert palace.sync().sources_removed == 5
    assert set(keys(palace, GPT)) == {f"chatgpt:{i}" for i in [*GROWN, TYRES, NEW]}
    palace.mine(later, source=source, wing="alone")
    assert sorted(texts(palace, GPT).values()) == sorted(texts(palace, "alone").values())


def test_auto_picking_files_still_labels_another_tree(
    palace: Palace, trees: tuple[Path, Path]
) -> None:
    first, second = trees
    palace.mine(first, source="auto", wing=WING)
    palace.mine(second, source="auto", wing=WING)
    label = root_label(str(second.resolve()))
    assert set(keys(palace)) == set(FIRST) | {f"{label}/{k}" for k in SECOND}


def test_which_sources_say_their_keys_are_ids(tmp_path: Path, trees: tuple[Path, Path]) -> None:
    for ids in (ChatGPTSource, ClaudeCodeSource, SlackSource):
        assert ids.keys_are_ids is True
        assert ids({}).keys_are_ids_for(tmp_path) is True
    for paths in (FilesSource, TextSource):
        assert paths.keys_are_ids is False
        assert paths({}).keys_are_ids_for(tmp_path) is False

    class Plain(Source):  # a third-party source that does not say
        def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
            yield from ()

    assert Plain().keys_are_ids_for(tmp_path) is False
    auto = AutoSource({})
    for relative in ("chatgpt/export", "slack/export", "claude-code/projects"):
        assert auto.keys_are_ids_for(SOURCES / relative) is True
    assert auto.keys_are_ids_for(SOURCES / "text/chats/locomo-sample.jsonl") is False
    assert auto.keys_are_ids_for(trees[0]) is False
    assert auto.keys_are_ids_for(tmp_path / "no-such-path") is False
