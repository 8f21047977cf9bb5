"""Fuzzing every built-in source adapter with hypothesis: malformed JSON and JSONL, odd
structures at every level, Slack folders, deep nesting, huge strings and numbers, NUL
bytes, invalid UTF-8, lone surrogates, odd file names and ``.gitignore`` patterns.

For each adapter an export is drawn from *good* records (each carrying a marker word),
*bad* records (malformed, not an object, too deep, no text...) and *odd* ones (valid JSON
of any shape where a field is expected). Then, for every example:

- reading it with the adapter alone (``scan`` and every ``read``) raises nothing but a
  :class:`SourceError`, and that only when the whole path is unusable;
- mining it into a real palace never crashes: every good record's marker is in a drawer,
  every bad record is reported with its file (and line), and what the palace held before
  is still there.

FAKE embedder and the exact ``sqlite`` backend (real SQLite): this is about robustness,
not meaning. ``HYPOTHESIS_EXAMPLES_FACTOR`` multiplies the example counts (``make
test-slow``).
"""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes import FAKE_PLUGIN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_retrievers import Palace, SourceError
from palace_retrievers.records import Filter
from palace_retrievers.sources import Skipped, SourceEntry


def fuzz(n: int) -> settings:
    """``n`` examples (times ``HYPOTHESIS_EXAMPLES_FACTOR``), no deadline."""
    return settings(
        max_examples=n * int(os.environ.get("HYPOTHESIS_EXAMPLES_FACTOR", "1")),
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )


_counter = itertools.count()


def marker() -> str:
    """A word found nowhere else: one good record's fingerprint."""
    return f"goodrec{next(_counter):06d}x"


# -- strategies -------------------------------------------------------------------------

#: Text as exports hold it: words, NUL, control and CJK characters, emoji, quotes, SQL,
#: HTML, lone surrogates (written as JSON escapes), and now and then a very long run.
filler = st.one_of(
    st.lists(
        st.sampled_from(
            [*"ab ,.\n\t\r\x00\x1f\x7f中文🦜'\"<>&;", "\ud800", "\udfff", "DROP TABLE x"]
        ),
        max_size=40,
    ).map("".join),
    st.just("long " * 4_000),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
#: Lines that are not a readable JSON object: each must be reported.
bad_lines = st.sampled_from(
    [
        '{"text": "cut in half',
        "not json at all",
        "[1, 2, 3]",
        '"a string"',
        "42",
        "[" * 3000 + "]" * 3000,  # deeper than Python's parser goes
        '{"text": ' + "9" * 5000 + "}",  # a number too long to convert
        '{"text": "x"} trailing',
    ]
)
#: Bytes that are not UTF-8, inside an otherwise good line.
bad_bytes = st.sampled_from([b"", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x80abc"])


def dumps(value: Any) -> str:
    """JSON with NaN and the like allowed (Python's exports have them)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


# -- running an adapter -----------------------------------------------------------------


@dataclass
class Read:
    """What an adapter gave for a path, read the way the miner reads it."""

    texts: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    refused: SourceError | None = None


def read_alone(palace: Palace, source: str, path: Path) -> Read:
    """Scan ``path`` with the source and read every entry; only SourceError may escape."""
    out = Read()
    try:
        for entry in palace._selected.source(source).scan(path):
            if isinstance(entry, Skipped):
                out.skipped.append(entry)
                continue
            assert isinstance(entry, SourceEntry)
            try:
                document = entry.read()
            except SourceError as exc:
                out.skipped.append(Skipped(entry.location, str(exc)))
                continue
            if document.segments is None:
                out.texts.append(document.text)
            else:
                out.texts.extend(s.text for s in document.segments)
    except SourceError as exc:
        out.refused = exc
    return out


@pytest.fixture(scope="module")
def palace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Palace]:
    """One palace for the module, holding a sentinel wing that must never change."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "kept").mkdir()
    (root / "kept" / "note.md").write_text("The copper lantern hangs by the harbour.\n")
    with Palace.open(
        root / "palace", backend="sqlite", embedder="fake", plugins=[FAKE_PLUGIN]
    ) as p:
        p.mine(root / "kept", wing="kept", progress=False)
        yield p
        assert p.stats().ledger.wings["kept"] == {"general": 1}
        assert all(status.ok for status in p.stats().indexes)


def mine(
    palace: Palace, source: str, path: Path, wing: str | None = None
) -> tuple[list[str], list[Skipped]]:
    """Mine ``path`` into a new wing; the drawer texts filed there and the skipped notes."""
    wing = wing or f"w{uuid.uuid4().hex[:12]}"
    report = palace.mine(path, source=source, wing=wing, progress=False)
    drawers = palace.get(palace.ledger.drawer_ids(Filter(wing=wing)))
    assert len(drawers) == report.drawers_added
    for drawer in drawers:
        drawer.text.encode("utf-8")  # storable: no lone surrogate got through
    return [d.text for d in drawers], report.skipped


def at(note: Skipped, where: str) -> bool:
    """Whether ``note`` is about ``where`` (a file, ``file:line`` or ``file:line:column``)."""
    return note.location == where or note.location.startswith(where + ":")


def check(
    palace: Palace, source: str, path: Path, good: list[str], bad: list[str], wing: str = ""
) -> None:
    """Good markers mined, bad locations reported, alone and through a palace."""
    alone = read_alone(palace, source, path)
    assert alone.refused is None, alone.refused
    texts, skipped = mine(palace, source, path, wing)
    joined = "\n".join(texts)
    for word in good:
        assert word in joined, f"a good record was lost: {word}"
    for where in bad:
        assert any(at(s, where) for s in skipped), (where, skipped)
        assert any(at(s, where) for s in alone.skipped), where
    for note in skipped:
        assert note.reason.strip()
        assert "\n" not in note.reason


def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("export")


# -- text: generic chat JSONL -----------------------------------------------------------


@fuzz(25)
@given(
    rows=st.lists(
        st.one_of(
            st.tuples(st.just("good"), st.sampled_from(["user", "assistant", "Alice"]), filler),
            st.tuples(st.just("bad"), bad_lines, st.none()),
            st.tuples(st.just("odd"), json_values, st.none()),
            st.tuples(st.just("bytes"), bad_bytes, filler),
        ),
        min_size=1,
        max_size=10,
    ),
    session=st.sampled_from(["s1", None, 7, "\ud83d"]),
    time=json_values | st.sampled_from(["2026-03-01T09:00:00Z", 1.7e9, 1.7e12, "garbage"]),
)
def test_chat_jsonl(
    palace: Palace,
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[Any, ...]],
    session: Any,
    time: Any,
) -> None:
    path = workdir(tmp_path_factory) / "chat.jsonl"
    lines: list[bytes] = []
    good: list[str] = []
    bad: list[str] = []
    for number, (kind, first, text) in enumerate(rows, start=1):
        if kind == "good":
            word = marker()
            good.append(word)
            record = {"session": session, "speaker": first, "text": f"{word} {text}", "time": time}
            lines.append(dumps(record).encode())
        elif kind == "bad":
            bad.append(f"{path}:{number}")
            lines.append(first.encode())
        elif kind == "odd":  # valid JSON of any shape: reported when it holds no text
            lines.append(dumps(first).encode())
            record = first if isinstance(first, dict) else {}
            if not any(isinstance(record.get(k), str) for k in ("text", "content")):
                bad.append(f"{path}:{number}")
        else:
            word = marker()
            good.append(word)
            lines.append(b'{"speaker": "user", "text": "' + word.encode() + b" " + first + b'"}')
    path.write_bytes(b"\n".join(lines) + b"\n")
    check(palace, "text", path, good, bad)


# -- claude-code ------------------------------------------------------------------------


@fuzz(20)
@given(
    rows=st.lists(
        st.one_of(
            st.tuples(st.just("user"), filler),
            st.tuples(st.just("assistant"), filler),
            st.tuples(st.just("bad"), bad_lines),
            st.tuples(st.just("odd"), json_values),
            st.tuples(st.just("weird"), json_values),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_claude_code(
    palace: Palace, tmp_path_factory: pytest.TempPathFactory, rows: list[tuple[str, Any]]
) -> None:
    session = str(uuid.uuid4())
    path = workdir(tmp_path_factory) / f"{session}.jsonl"
    lines: list[str] = []
    good: list[str] = []
    bad: list[str] = []
    for number, (kind, value) in enumerate(rows, start=1):
        base = {"sessionId": session, "uuid": str(uuid.uuid4()), "timestamp": "2026-03-01T09:00Z"}
        if kind == "user":
            word = marker()
            good.append(word)
            lines.append(dumps({**base, "type": "user", "message": {"content": f"{word} {value}"}}))
        elif kind == "assistant":
            word = marker()
            good.append(word)
            content = [
                {"type": "text", "text": f"{word} {value}"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": value}},
                {"type": "thinking", "thinking": value},
            ]
            lines.append(dumps({**base, "type": "assistant", "message": {"content": content}}))
        elif kind == "bad":
            bad.append(f"{path}:{number}")
            lines.append(value)
        elif kind == "odd":
            lines.append(dumps({**base, "type": "user", "message": value}))
        else:  # every field of a record of any shape
            message = {
                "content": [value, {"type": "tool_result", "content": value}],
                "model": value,
            }
            lines.append(dumps({**base, "type": "assistant", "message": message, "cwd": value}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    check(palace, "claude-code", path, good, bad)


# -- chatgpt ----------------------------------------------------------------------------


def conversation(
    word: str, text: str, *, ident: Any = None, current: bool = True
) -> dict[str, Any]:
    """A conversation with one exchange whose user turn carries ``word``."""
    nodes = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["u"]},
        "u": {
            "id": "u",
            "parent": "root",
            "children": ["a"],
            "message": {
                "id": "u",
                "author": {"role": "user"},
                "content": {"content_type": "text", "parts": [f"{word} {text}"]},
                "create_time": 1.7e9,
            },
        },
        "a": {
            "id": "a",
            "parent": "u",
            "children": [],
            "message": {
                "id": "a",
                "author": {"role": "assistant"},
                "content": {"content_type": "text", "parts": ["a reply", {"x": 1}, 3]},
            },
        },
    }
    out: dict[str, Any] = {"id": ident or str(uuid.uuid4()), "title": text, "mapping": nodes}
    if current:
        out["current_node"] = "a"
    return out


@fuzz(20)
@given(
    items=st.lists(
        st.one_of(
            st.tuples(st.just("good"), filler, st.booleans()),
            st.tuples(
                st.just("nonobject"),
                json_values.filter(lambda v: not isinstance(v, dict)),
                st.none(),
            ),
            st.tuples(st.just("noid"), json_values, st.none()),
            st.tuples(
                st.just("nomapping"),
                json_values.filter(lambda v: not isinstance(v, dict)),
                st.none(),
            ),
            st.tuples(
                st.just("deep"), st.sampled_from(["[" * 3000 + "]" * 3000, "9" * 5000]), st.none()
            ),
            st.tuples(st.just("oddnodes"), json_values, json_values),
        ),
        max_size=8,
    ),
    truncated=st.booleans(),
)
def test_chatgpt(
    palace: Palace,
    tmp_path_factory: pytest.TempPathFactory,
    items: list[tuple[str, Any, Any]],
    truncated: bool,
) -> None:
    path = workdir(tmp_path_factory) / "conversations.json"
    rendered: list[str] = []
    good: list[str] = []
    bad: list[str] = []
    for index, (kind, value, extra) in enumerate(items):
        line = f"{path}:{index + 2}"  # one item a line, after the opening "["
        if kind == "good":
            word = marker()
            good.append(word)
            rendered.append(dumps(conversation(word, value, current=extra)))
        elif kind == "nonobject":
            bad.append(line)
            rendered.append(dumps(value))
        elif kind == "noid":
            bad.append(line)
            rendered.append(dumps({"title": "x", "mapping": {}, "id": value if value else None}))
            if isinstance(value, str) and value:  # that is an id after all
                bad.pop()
                rendered[-1] = dumps({"title": "x", "mapping": {}, "id": f"noid{uuid.uuid4()}"})
        elif kind == "nomapping":
            bad.append(line)
            rendered.append(dumps({"id": str(uuid.uuid4()), "mapping": value}))
        elif kind == "deep":
            bad.append(line)
            rendered.append(value)
        else:  # nodes, links and messages of any shape
            mapping = {"n": {"message": value, "parent": extra, "children": value}, "m": value}
            rendered.append(
                dumps({"id": str(uuid.uuid4()), "mapping": mapping, "current_node": extra})
            )
    text = "[\n" + ",\n".join(rendered) + "\n]\n"
    if truncated:  # an interrupted download: the tail is lost, everything before is kept
        text = text[: len(text) - 3] + ',\n{"id": "cut", "mapping": {"x'
        bad.append(str(path))
    path.write_text(text, encoding="utf-8")
    check(palace, "chatgpt", path, good, bad)


# -- slack ------------------------------------------------------------------------------


@fuzz(15)
@given(
    days=st.lists(
        st.lists(
            st.one_of(
                st.tuples(st.just("good"), filler),
                st.tuples(
                    st.just("nonobject"), json_values.filter(lambda v: not isinstance(v, dict))
                ),
                st.tuples(st.just("odd"), json_values),
            ),
            max_size=6,
        ),
        min_size=1,
        max_size=3,
    ),
    broken_day=st.booleans(),
    users=st.one_of(json_values, st.just([{"id": "U1", "real_name": "Ann"}])),
)
def test_slack(
    palace: Palace,
    tmp_path_factory: pytest.TempPathFactory,
    days: list[list[tuple[str, Any]]],
    broken_day: bool,
    users: Any,
) -> None:
    root = workdir(tmp_path_factory) / "export"
    (root / "general").mkdir(parents=True)
    (root / "users.json").write_text(dumps(users))
    (root / "channels.json").write_text(dumps([{"id": "C1", "name": "general"}]))
    good: list[str] = []
    bad: list[str] = []
    for number, messages in enumerate(days, start=1):
        day = root / "general" / f"2026-03-{number:02d}.json"
        rendered = []
        for index, (kind, value) in enumerate(messages):
            ts = f"{1_772_000_000 + index * 60}.000100"
            if kind == "good":
                word = marker()
                good.append(word)
                rendered.append(
                    dumps({"type": "message", "user": "U1", "text": f"{word} {value}", "ts": ts})
                )
            elif kind == "nonobject":
                bad.append(f"{day}:{index + 2}")
                rendered.append(dumps(value))
            else:  # every field of a message of any shape
                rendered.append(
                    dumps(
                        {
                            "type": "message",
                            "subtype": value,
                            "user": value,
                            "text": value,
                            "ts": value,
                            "thread_ts": value,
                            "files": value,
                            "user_profile": value,
                        }
                    )
                )
        day.write_text("[\n" + ",\n".join(rendered) + "\n]\n", encoding="utf-8")
    if broken_day:
        damaged = root / "general" / "2026-04-01.json"
        damaged.write_bytes(b"\xff\xfe{ not an array")
        bad.append(str(damaged))
    check(palace, "slack", root, good, bad)


# -- files and auto: bytes and names ----------------------------------------------------

names = st.binary(min_size=1, max_size=12).filter(
    lambda n: b"/" not in n and b"\x00" not in n and not n.startswith(b".")
)


@fuzz(20)
@given(
    files=st.dictionaries(
        names,
        st.binary(max_size=400) | filler.map(lambda t: t.encode("utf-8", "surrogatepass")),
        max_size=6,
    ),
    gitignore=st.sampled_from([None, "!\n*.log\n", "\\\n[\n**\n!keep\n", "*\n"]),
    deep=st.integers(0, 40),
)
def test_files_tree_of_any_bytes_and_names(
    palace: Palace,
    tmp_path_factory: pytest.TempPathFactory,
    files: dict[bytes, bytes],
    gitignore: str | None,
    deep: int,
) -> None:
    root = workdir(tmp_path_factory) / "tree"
    folder = root.joinpath(*["d"] * deep)
    folder.mkdir(parents=True)
    good: list[str] = []
    ignored = gitignore in ("\\\n[\n**\n!keep\n", "*\n")  # every .md file ignored
    for name, body in files.items():
        word = marker()
        text_like = b"\x00" not in body
        data = (word.encode() + b" " + body) if text_like else body
        with open(os.path.join(os.fsencode(folder), name + b".md"), "wb") as stream:
            stream.write(data)
        if text_like and not ignored:
            good.append(word)
    if gitignore is not None:
        (root / ".gitignore").write_text(gitignore)
    wing = f"w{uuid.uuid4().hex[:12]}"
    check(palace, "files", root, good, [], wing)
    # A second mine of the same tree files nothing new (odd names are recorded as they
    # are listed), and a sync finds nothing gone.
    again = palace.mine(root, wing=wing, progress=False)
    assert (again.mined, again.drawers_added) == (0, 0)
    assert palace.sync(root, dry_run=True).sources_removed == 0


@fuzz(25)
@given(
    name=st.sampled_from(
        ["conversations.json", "x.json", "x.jsonl", "x.ndjson", "x.txt", "x.md", "x.log", "x.zip"]
    ),
    body=st.one_of(
        st.binary(max_size=300),
        st.sampled_from(
            [b"[" * 3000, b"[" + b"9" * 5000, b'{"sessionId": ' + b"[" * 3000, b"\xef\xbb\xbf{"]
        ),
        json_values.map(lambda v: dumps(v).encode()),
    ),
)
def test_auto_on_any_single_file(
    palace: Palace, tmp_path_factory: pytest.TempPathFactory, name: str, body: bytes
) -> None:
    """Whatever one file holds, ``auto`` picks a source and either mines it or refuses it
    with a SourceError; nothing else escapes."""
    path = workdir(tmp_path_factory) / name
    path.write_bytes(body)
    alone = read_alone(palace, "auto", path)
    refused: SourceError | None = None
    try:
        mine(palace, "auto", path)
    except SourceError as exc:
        refused = exc
    assert (refused is None) == (alone.refused is None)
    if refused is not None:
        assert str(refused).strip()
        assert "\n" not in str(refused)


def test_huge_strings_are_mined_or_cut_short(
    palace: Palace, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A 600,000-character message is filed whole (in chunks); a 5 MB tool output becomes
    a short note; a record between them with a 5,000-digit number is reported."""
    folder = workdir(tmp_path_factory)
    word, tail = marker(), marker()
    chat = folder / "huge.jsonl"
    chat.write_text(
        json.dumps({"speaker": "user", "text": f"{word} " + "lorem ipsum " * 50_000 + tail})
        + '\n{"speaker": "user", "text": ' + "7" * 5000 + "}\n"
        + json.dumps({"speaker": "assistant", "text": "short reply"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    texts, skipped = mine(palace, "text", chat)
    joined = "".join(texts)
    assert word in joined
    assert tail in joined
    assert joined.count("lorem ipsum") >= 50_000
    assert [s.location for s in skipped] == [f"{chat}:2"]

    session = str(uuid.uuid4())
    log = folder / f"{session}.jsonl"
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "x" * 5_000_000}
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cat big"}}
    records = [
        {"type": "user", "sessionId": session, "message": {"content": f"{word} run it"}},
        {"type": "assistant", "sessionId": session, "message": {"content": [call]}},
        {"type": "user", "sessionId": session, "message": {"content": [result]}},
    ]
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    texts, skipped = mine(palace, "claude-code", log)
    assert not skipped
    assert sum(len(t) for t in texts) < 2_000
    assert any(word in t and "[Bash] cat big" in t and "[Bash result]" in t for t in texts)
