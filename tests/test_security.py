"""Hostile input cannot reach outside what was mined, cannot inject SQL, and stored data
is never unpickled or evaluated.

- **Paths.** Every built-in source is given a folder whose symlinks (files and folders)
  point outside it, and exports whose ids, session and channel names are ``../`` paths or
  absolute paths: nothing outside the mined root is opened or filed, and every drawer's
  source lies inside the root. A ``.zip`` whose member is named ``../../…`` is read in
  memory and writes nothing anywhere.
- **SQL.** Text, names and filters full of quotes, SQL and FTS syntax are mined and
  searched: every query answers, finds the text verbatim, and no filter value widens
  what a query sees.
- **No pickle, no eval.** The package's source never unpickles, evaluates or executes
  anything (checked on its tokens); a pickle planted in the Chroma folder of a palace is
  not executed when the palace is opened and searched.

FAKE embedder (meaning does not matter here) with real SQLite, and real Chroma for the
planted pickle.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import tokenize
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import palace_plugins
import palace_retrievers
from palace_retrievers import Filter, Palace, SourceError

SECRET = "zebrasecretword"


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite")


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The real paths of every file opened (by ``open``, ``Path.open``, ``os.open``)."""
    seen: list[str] = []
    real_open, real_os_open = io.open, os.open

    def note(file: Any) -> None:
        if isinstance(file, str | bytes | os.PathLike):
            seen.append(os.path.realpath(os.fsdecode(file)))

    def watching_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        note(file)
        return real_open(file, *args, **kwargs)

    def watching_os_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        note(path)
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(io, "open", watching_open)
    monkeypatch.setattr(builtins, "open", watching_open)
    monkeypatch.setattr(os, "open", watching_os_open)
    return seen


# -- exports pointing outside -----------------------------------------------------------


def _session(text: str) -> str:
    return json.dumps(
        {"type": "user", "sessionId": "s", "uuid": str(uuid.uuid4()), "message": {"content": text}}
    )


def _conversations(ident: str, text: str) -> str:
    nodes = {
        "u": {
            "parent": None,
            "children": [],
            "message": {"id": "u", "author": {"role": "user"}, "content": {"parts": [text]}},
        }
    }
    return json.dumps([{"id": ident, "title": ident, "mapping": nodes, "current_node": "u"}])


def _day(text: str) -> str:
    return json.dumps([{"type": "message", "user": "U1", "text": text, "ts": "1772000000.0001"}])


def _outside(tmp: Path) -> Path:
    """A folder outside every mined root, holding the secret in every format."""
    out = tmp / "outside"
    out.mkdir()
    (out / "secret.md").write_text(f"The {SECRET} is here.\n")
    (out / "secret.txt").write_text(f"User: what is it?\nAssistant: {SECRET}\n")
    (out / "00000000-secret.jsonl").write_text(_session(SECRET) + "\n")
    (out / "conversations.json").write_text(_conversations("secret", SECRET))
    (out / "2026-01-01.json").write_text(_day(SECRET))
    (out / "users.json").write_text(json.dumps([{"id": "U1", "real_name": SECRET}]))
    (out / "channel").mkdir()
    (out / "channel" / "2026-01-02.json").write_text(_day(SECRET))
    return out


def _files_tree(root: Path, out: Path) -> None:
    root.mkdir()
    (root / "note.md").write_text("An ordinary note about the harbour.\n")
    (root / "linked.md").symlink_to(out / "secret.md")
    (root / "linked.txt").symlink_to(out / "secret.txt")
    (root / "folder").symlink_to(out)
    (root / "deep").mkdir()
    (root / "deep" / "up.md").symlink_to(Path("..") / ".." / "outside" / "secret.md")


def _claude_tree(root: Path, out: Path) -> None:
    root.mkdir()
    (root / "11111111-real.jsonl").write_text(_session("an ordinary question") + "\n")
    (root / "22222222-link.jsonl").symlink_to(out / "00000000-secret.jsonl")
    (root / "project").symlink_to(out)


def _text_tree(root: Path, out: Path) -> None:
    root.mkdir()
    (root / "chat.txt").write_text("User: where is the harbour?\nAssistant: west.\n")
    (root / "linked.txt").symlink_to(out / "secret.txt")
    lines = [
        {"session": "../../outside/secret.txt", "speaker": "user", "text": "a path as session"},
        {"session": str(out / "secret.txt"), "speaker": "user", "text": "an absolute one"},
    ]
    (root / "log.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def _slack_tree(root: Path, out: Path) -> None:
    (root / "general").mkdir(parents=True)
    (root / "channels.json").write_text(json.dumps([{"id": "C1", "name": "../../outside"}]))
    (root / "users.json").symlink_to(out / "users.json")
    (root / "general" / "2026-01-03.json").write_text(_day("an ordinary message"))
    (root / "general" / "2026-01-01.json").symlink_to(out / "2026-01-01.json")
    (root / "linkedchannel").symlink_to(out / "channel")


def _chatgpt_tree(root: Path, out: Path) -> None:
    root.mkdir()
    conversations = json.loads(_conversations("../../outside/secret.md", "an ordinary chat"))
    conversations += json.loads(_conversations(str(out / "secret.md"), "another chat"))
    (root / "conversations.json").write_text(json.dumps(conversations))


BUILDERS: dict[str, tuple[str, Callable[[Path, Path], None]]] = {
    "files": ("files", _files_tree),
    "auto-files": ("auto", _files_tree),
    "claude-code": ("claude-code", _claude_tree),
    "text": ("text", _text_tree),
    "slack": ("slack", _slack_tree),
    "chatgpt": ("chatgpt", _chatgpt_tree),
}


@pytest.mark.parametrize("case", list(BUILDERS))
def test_nothing_outside_the_mined_root_is_read_or_filed(
    palace: Palace, tmp_path: Path, opened: list[str], case: str
) -> None:
    source, build = BUILDERS[case]
    out = _outside(tmp_path)
    root = tmp_path / "root"
    build(root, out)
    opened.clear()  # only what the mine opens
    report = palace.mine(root, source=source, wing="w", progress=False)

    assert report.drawers_added > 0  # the ordinary records were mined
    drawers = palace.get(palace.ledger.drawer_ids(Filter(wing="w")))
    assert drawers
    for drawer in drawers:
        assert SECRET not in drawer.text
        assert SECRET not in json.dumps(dict(drawer.metadata))
        location = Path(drawer.source.split("#", 1)[0])
        assert location.resolve().is_relative_to(root.resolve()), drawer.source
    secrets = {str(p.resolve()) for p in out.rglob("*") if p.is_file()}
    assert not secrets & set(opened), sorted(secrets & set(opened))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "palace", "root"]


def test_a_symlinked_chatgpt_export_inside_a_folder_is_refused(
    palace: Palace, tmp_path: Path, opened: list[str]
) -> None:
    out = _outside(tmp_path)
    root = tmp_path / "export"
    root.mkdir()
    (root / "conversations.json").symlink_to(out / "conversations.json")
    opened.clear()
    with pytest.raises(SourceError, match="symlink"):
        palace.mine(root, source="chatgpt", wing="w", progress=False)
    assert str((out / "conversations.json").resolve()) not in opened


def test_a_zip_member_named_like_a_path_out_is_read_in_memory(
    palace: Palace, tmp_path: Path
) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("../../../escape/conversations.json", _conversations("c1", "zip chat"))
        zipped.writestr("/abs/evil.txt", "x")
    before = set(tmp_path.parent.rglob("*"))
    report = palace.mine(archive, source="chatgpt", wing="w", progress=False)
    assert report.drawers_added == 1
    assert set(tmp_path.parent.rglob("*")) - before <= set((tmp_path / "palace").rglob("*"))
    assert not Path("/abs/evil.txt").exists()


# -- SQL --------------------------------------------------------------------------------

HOSTILE = [
    "Robert'); DROP TABLE drawers;--",
    '" OR 1=1 -- and "quoted" words',
    "'; DELETE FROM sources WHERE '1'='1",
    "NEAR(a b) AND NOT c OR d* ^e {text}: f",
    "drawers_fts MATCH '*' UNION SELECT id, text FROM drawers",
    "%_% LIKE '%' ESCAPE '\\' ; PRAGMA writable_schema = 1;",
    "‮ right-to-left override and \\x00 a backslash escape",
]


def test_text_and_names_full_of_sql_are_stored_and_found_verbatim(
    palace: Palace, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    for n, text in enumerate(HOSTILE):
        (tree / f"it's {n}; DROP TABLE x.md").write_text(f"marker{n} {text}\n", encoding="utf-8")
    wing = "w' OR '1'='1"
    palace.add_texts(["the other user's private note"], user_id="u1", wing=wing)
    report = palace.mine(tree, wing=wing, user_id="o'brien", progress=False)
    assert report.mined == len(HOSTILE)

    for n, text in enumerate(HOSTILE):
        hits = palace.search(text, k=3, wing=wing, user_id="o'brien")
        assert any(h.text == f"marker{n} {text}\n" for h in hits), (text, hits)
    stats = palace.stats().ledger
    assert stats.drawers == len(HOSTILE) + 1
    assert stats.sources == len(HOSTILE)

    # Filter values are data, never SQL: none of them widens what a query sees.
    for value in ("' OR '1'='1", "o'brien' OR user_id != '", '" OR ""="', "%"):
        assert not palace.search("note", k=5, user_id=value)
        assert not palace.search("marker1", k=5, wing=value, user_id="o'brien")
        assert not palace.ledger.drawer_ids(Filter(wing=value, user_id="o'brien"))
    assert palace.search("private note", k=1, wing=wing, user_id="u1")


# -- no pickle, no eval -----------------------------------------------------------------

FORBIDDEN_NAMES = {"pickle", "cPickle", "dill", "shelve", "marshal", "jsonpickle", "cloudpickle"}
FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}


def _calls(root: Path) -> Iterator[tuple[Path, tokenize.TokenInfo, bool]]:
    """Every name in the code under ``root`` (not in comments or strings), and whether it
    is called as a plain name (``eval(...)``, not ``pattern.compile(...)``)."""
    for file in sorted(root.rglob("*.py")):
        with file.open("rb") as stream:
            tokens = [t for t in tokenize.tokenize(stream.readline) if t.type != tokenize.NL]
        for before, token, after in zip([None, *tokens], tokens, [*tokens[1:], None], strict=False):
            if token.type != tokenize.NAME:
                continue
            plain = before is None or before.string != "."
            yield file, token, plain and after is not None and after.string == "("


@pytest.mark.parametrize("package", [palace_retrievers, palace_plugins])
def test_the_package_never_unpickles_or_evaluates(package: Any) -> None:
    """Code, not comments or strings: a name like ``pickle`` or a call like ``eval(``."""
    root = Path(package.__file__).parent
    found = []
    for file, token, called in _calls(root):
        if token.string in FORBIDDEN_NAMES or (token.string in FORBIDDEN_CALLS and called):
            found.append(f"{file.relative_to(root.parent)}:{token.start[0]}: {token.line.strip()}")
        if token.string == "load" and "yaml" in token.line and "safe_load" not in token.line:
            found.append(f"{file.relative_to(root.parent)}:{token.start[0]}: {token.line.strip()}")
    assert not found, "\n".join(found)


def test_the_scan_would_see_a_forbidden_call(tmp_path: Path) -> None:
    """The scan above can fail: it finds what it looks for, and only in code."""
    (tmp_path / "bad.py").write_text(
        "import re\n# eval(x) in a comment is fine\ntext = 'pickle.loads'\n"
        "value = eval(text)\nword = re.compile(text)\n"
    )
    called = {(t.string, t.start[0]) for _, t, call in _calls(tmp_path) if call}
    names = {t.string for _, t, _ in _calls(tmp_path)}
    assert ("eval", 4) in called
    assert ("eval", 2) not in called
    assert ("compile", 5) not in called  # a method, not the built-in
    assert "pickle" not in names


class _Planted:
    def __init__(self, sentinel: Path) -> None:
        self.sentinel = sentinel

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.sentinel}",))


def test_a_pickle_planted_in_the_index_folder_is_never_executed(
    open_palace: Callable[..., Palace], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Chroma keeps an ``index_metadata.pickle`` per HNSW index; a planted one must not run
    (Chroma's reader refuses globals) and the palace still answers, from the ledger."""
    palace_dir = tmp_path / "palace"
    texts = [f"record {n} about word{n}" for n in range(1100)]  # enough for HNSW files
    with open_palace(palace_dir) as palace:
        palace.add_texts(texts, ids=[f"r{n}" for n in range(len(texts))])
    planted = list((palace_dir / "index" / "chroma").rglob("index_metadata.pickle"))
    assert planted
    sentinel = tmp_path / "executed"
    for file in planted:
        file.write_bytes(pickle.dumps(_Planted(sentinel)))
    with open_palace(palace_dir) as palace:
        hits = palace.search("record 7 about word7", k=1, memories=False)
        assert hits[0].id == "r7"
    assert not sentinel.exists()
