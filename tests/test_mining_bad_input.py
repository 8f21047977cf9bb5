"""Bad input to a mine: each case gets a clear, one-line message (an error, or a skipped
note in the report), and nothing the palace already holds is lost.

FAKE embedder and the exact ``sqlite`` backend: this is about the write path's behaviour,
not about search quality. (``test_bad_input.py`` covers bad input elsewhere in the engine
with the real model.)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from palace_retrievers import Palace, PalaceError, PluginNotFoundError, SourceError

DRIVER = Path(__file__).resolve().parent / "palace_driver.py"
QUERY = "which lantern is by the harbour"


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Iterator[Palace]:
    """A palace with a few notes mined; after the test they must all still be there."""
    notes = tmp_path / "kept"
    notes.mkdir()
    for n in range(4):
        (notes / f"note{n}.md").write_text(
            f"Note {n}: the copper lantern by the harbour, entry {n}.\n", encoding="utf-8"
        )
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    palace.mine(notes, wing="kept", progress=False)
    before = palace.stats().ledger
    top = [h.id for h in palace.search(QUERY, k=3, wing="kept")]
    yield palace
    after = palace.stats().ledger
    assert after.wings["kept"] == before.wings["kept"]
    assert [h.id for h in palace.search(QUERY, k=3, wing="kept")] == top
    for status in palace.stats().indexes:
        assert status.ok, status


def one_line(error: BaseException) -> str:
    message = str(error)
    assert isinstance(error, PalaceError)
    assert message
    assert "\n" not in message
    return message


def test_a_symlink_loop_inside_a_tree_is_skipped(palace: Palace, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "docs").mkdir(parents=True)
    (tree / "docs" / "real.md").write_text("A real note about the harbour.\n")
    (tree / "docs" / "again").symlink_to(tree / "docs")  # a folder that contains itself
    (tree / "ping.md").symlink_to(tree / "pong.md")  # two links pointing at each other
    (tree / "pong.md").symlink_to(tree / "ping.md")
    started = time.monotonic()
    report = palace.mine(tree, wing="tree", progress=False)
    assert time.monotonic() - started < 10
    assert (report.seen, report.mined) == (1, 1)
    reasons = {Path(s.location).name: s.reason for s in report.skipped}
    assert {"ping.md", "pong.md"} <= set(reasons)
    assert all(r == "not a regular file" for r in reasons.values())


def test_a_symlink_loop_as_the_path_to_mine(palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "ping.md").symlink_to(tmp_path / "pong.md")
    (tmp_path / "pong.md").symlink_to(tmp_path / "ping.md")
    with pytest.raises(SourceError) as caught:
        palace.mine(tmp_path / "ping.md")
    message = one_line(caught.value)
    assert "ping.md" in message
    assert "symlink loop" in message


def test_a_2_gb_file_is_skipped_by_its_size_without_being_read(
    palace: Palace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    huge = tree / "huge.log"
    with huge.open("wb") as stream:
        stream.truncate(2 * 1024**3)  # sparse: 2 GB long, nothing on disk
    (tree / "small.md").write_text("A small note next to a huge one.\n")
    opened: list[str] = []
    real_open = Path.open

    def watching_open(self: Path, *args: object, **kwargs: object) -> object:
        opened.append(self.name)
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", watching_open)
    started = time.monotonic()
    report = palace.mine(tree, wing="tree", progress=False)
    assert time.monotonic() - started < 10
    assert "huge.log" not in opened
    assert report.mined == 1
    (skipped,) = report.skipped
    assert skipped.location == str(huge)
    assert "2147483648 bytes, over the 5000000-byte limit" in skipped.reason

    with pytest.raises(SourceError) as caught:  # the huge file alone: refused, clearly
        palace.mine(huge, wing="tree")
    assert "over the 5000000-byte limit" in one_line(caught.value)


def test_an_empty_folder_mines_nothing_and_says_so(palace: Palace, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    report = palace.mine(empty, wing="empty", progress=False)
    assert (report.seen, report.mined, report.drawers_added, report.skipped) == (0, 0, 0, [])
    assert "empty" not in palace.stats().ledger.wings


@pytest.mark.parametrize(
    ("source", "name", "content"),
    [
        ("chatgpt", "conversations.json", "[]"),
        ("chatgpt", "conversations.json", ""),
        ("text", "chat.jsonl", ""),
        ("claude-code", "session.jsonl", "\n\n"),
    ],
    ids=["chatgpt-empty-array", "chatgpt-empty-file", "text-empty-jsonl", "claude-blank-lines"],
)
def test_an_empty_export(
    palace: Palace, tmp_path: Path, source: str, name: str, content: str
) -> None:
    export = tmp_path / name
    export.write_text(content, encoding="utf-8")
    error: SourceError | None = None
    try:
        report = palace.mine(export, source=source, wing="empty")
    except SourceError as exc:
        error = exc
    if error is not None:  # refused, saying why
        assert name in one_line(error)
    else:  # or a note in the report saying why nothing was filed
        assert report.drawers_added == 0
        assert report.skipped
        for skipped in report.skipped:
            assert name in skipped.location
            assert skipped.reason
    assert "empty" not in palace.stats().ledger.wings


def test_a_file_emptied_since_the_last_mine_loses_its_drawers(
    palace: Palace, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    note = tree / "note.md"
    note.write_text("The brass key is under the mat.\n")
    palace.mine(tree, wing="tree", progress=False)
    assert palace.stats().ledger.wings["tree"]
    note.write_text("")
    os.utime(note, (note.stat().st_mtime + 10,) * 2)
    report = palace.mine(tree, wing="tree", progress=False)
    assert [s.reason for s in report.skipped] == ["no text to file: it is empty"]
    assert "tree" not in palace.stats().ledger.wings


def test_a_source_no_plugin_provides(palace: Palace, tmp_path: Path) -> None:
    with pytest.raises(PluginNotFoundError) as caught:
        palace.mine(tmp_path, source="evernote")
    message = one_line(caught.value)
    assert "no source named 'evernote' is installed" in message
    assert "files" in message  # it lists what is available


def test_malformed_jsonl_lines_are_reported_and_the_rest_mined(
    palace: Palace, tmp_path: Path
) -> None:
    export = tmp_path / "chat.jsonl"
    export.write_text(
        '{"session": "s1", "speaker": "user", "text": "Where is the copper kettle?"}\n'
        '{"session": "s1", "speaker": "assistant", "text": "On the top shelf."\n'
        "not json at all\n"
        '{"session": "s1", "speaker": "user", "text": "And the brass key?"}\n'
        '{"session": "s1", "speaker": "assistant", "text": "Under the mat."}\n',
        encoding="utf-8",
    )
    report = palace.mine(export, source="text", wing="chat", progress=False)
    assert report.drawers_added >= 1
    lines = sorted(s.location for s in report.skipped)
    assert lines == [f"{export}:2", f"{export}:3"]
    hits = palace.search("brass key", k=1, wing="chat")
    assert "Under the mat." in hits[0].text


def test_wrong_encodings_are_decoded_with_replacement(palace: Palace, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "latin1.md").write_bytes("Caf\xe9 cr\xe8me by the harbour.\n".encode("latin-1"))
    (tree / "utf16.txt").write_bytes("A UTF-16 note about the lighthouse.\n".encode("utf-16"))
    report = palace.mine(tree, wing="enc", progress=False)
    assert report.mined + len(report.skipped) == 2
    texts = [h.text for h in palace.search("harbour", k=5, wing="enc")]
    assert any("Caf\ufffd cr\ufffdme" in t for t in texts)


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(DRIVER), "cli", "--palace", str(tmp_path / "p"), *args],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "ANONYMIZED_TELEMETRY": "False",
                "PALACE_EMBEDDER": "fake",
                "PALACE_BACKEND": "sqlite",
            },
            timeout=120,
        )

    unknown = cli("mine", str(tmp_path), "--source", "evernote")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: no source named 'evernote' is installed")
    assert unknown.stderr.count("\n") == 1
    (tmp_path / "empty").mkdir()
    empty = cli("mine", str(tmp_path / "empty"))
    assert empty.returncode == 0, empty.stderr
    assert f"found nothing to mine in {tmp_path / 'empty'}" in empty.stdout
    missing = cli("mine", str(tmp_path / "nowhere"))
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1
    assert "nowhere" in missing.stderr
