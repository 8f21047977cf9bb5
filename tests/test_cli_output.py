"""What the command line prints of stored text: shown as text, never obeyed.

A memory, a triple, a wing or a file name may hold rich markup (``[/bold]``,
``[link=URL]label[/link]``) or terminal control sequences (OSC 52 writes the clipboard,
CSI moves the cursor, U+202E reverses what follows). Every command prints such text as
the characters it is, on a terminal (rich tables) and piped (plain lines), and ``--json``
keeps it exact.

These test the command line's printing, not the quality of memory decisions, so they run
on the FAKE hashing embedder (registered into the CLI's ``Palace.open``, as in
``test_cli_memory.py``) and the exact sqlite backend.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN

from palace_retrievers import Palace
from palace_retrievers.cli import cli, output

Run = Callable[..., tuple[int, str, str]]

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: sets the clipboard to "rm -rf ~"
RED = "\x1b[31m"  # CSI: colours what follows
C1_CSI = "\x9b2J"  # the 8-bit CSI: clears the screen on terminals that obey C1
REVERSED = "\u202e"  # RIGHT-TO-LEFT OVERRIDE
MARKUP = "tea [/bold] then [link=https://evil.example]docs[/link]"
NASTY = f"{MARKUP} {CLIPBOARD}{RED}{C1_CSI}{REVERSED}end"
#: What must never reach the output from stored text.
OBEYED = ("\x1b]", "\x07", "\x9b", "\u202e", "\x1b[31m")
#: The escape sequences rich itself writes on a colour terminal (styles), taken out
#: before looking at the text.
_SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """``run(*args)``: the CLI on a fresh FAKE-embedder palace, rich at 400 columns."""
    original = Palace.open.__func__  # type: ignore[attr-defined]

    def open_with_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
        kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
        palace: Palace = original(cls, path, **kwargs)
        return palace

    monkeypatch.setattr(Palace, "open", classmethod(open_with_fake))
    monkeypatch.setenv("COLUMNS", "400")  # rich folds nothing at this width
    palace = tmp_path / "palace"

    def run_(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(cli, ["--palace", str(palace), *args])
        return result.exit_code, result.stdout, result.stderr

    code, _, err = run_("init", "--embedder", "fake", "--backend", "sqlite")
    assert code == 0, err
    return run_


def ok(run: Run, *args: str) -> str:
    code, out, err = run(*args)
    assert code == 0, f"{args}: {err or out}"
    return out


def _nothing_obeyed(out: str) -> str:
    """``out`` without rich's own styles, after checking no stored control got through."""
    text = _SGR.sub("", out)
    for sequence in OBEYED:
        assert sequence not in text, (sequence, out)
    assert "\x1b" not in text, out
    return text


def _stored(run: Run, tmp_path: Path) -> str:
    """A memory, a triple and a mined file, each holding markup and control sequences."""
    memory_id: str = json.loads(ok(run, "remember", NASTY, "--tag", MARKUP, "--json"))["memory"][
        "id"
    ]
    ok(run, "kg", "add", "Alice [/bold]", "likes", NASTY)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / f"notes{RED}{REVERSED}txt.md").write_text(f"zebra {NASTY}\n", encoding="utf-8")
    ok(run, "mine", str(corpus), "--wing", f"w{CLIPBOARD}")
    return memory_id


COMMANDS = (
    ("memories", "list"),
    ("search", "tea then docs zebra"),
    ("kg", "query", "Alice [/bold]"),
    ("kg", "timeline", "Alice [/bold]"),
    ("status",),
    ("context", "tea docs"),
)


@pytest.mark.parametrize("colour", [False, True], ids=["terminal", "colour-terminal"])
def test_stored_markup_and_controls_print_as_text_on_a_terminal(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, colour: bool
) -> None:
    """On a terminal (rich tables; with ``FORCE_COLOR`` rich writes styles as a real
    terminal gets them): no crash on ``[/bold]``, the markup shows verbatim, no link is
    drawn (no OSC 8) and no control sequence of the stored text is written."""
    memory_id = _stored(run, tmp_path)
    monkeypatch.setattr(output, "is_terminal", lambda: True)
    if colour:
        monkeypatch.setenv("FORCE_COLOR", "1")
    for args in (*COMMANDS, ("memories", "show", memory_id)):
        text = _nothing_obeyed(ok(run, *args))
        if args[0] != "status":
            assert "[/bold]" in text, (args, text)
    for args in (("memories", "list"), ("memories", "show", memory_id), ("context", "tea")):
        text = _nothing_obeyed(ok(run, *args))
        assert MARKUP in text, (args, text)
        assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in text, (args, text)  # shown, not obeyed
        assert "\\u202eend" in text, (args, text)
    assert "[link=https://evil.example]docs[/link]" in _nothing_obeyed(
        ok(run, "kg", "query", "Alice [/bold]")
    )
    assert "\\x1b[31m" in _nothing_obeyed(ok(run, "search", "zebra"))  # the file's name
    if colour:
        assert "\x1b[" in ok(run, "memories", "list")  # the terminal path was really taken


def test_stored_controls_never_reach_a_pipe(run: Run, tmp_path: Path) -> None:
    """Piped (plain lines): the same text, each control shown as an escape, one record
    a line (a newline in a stored string shows as ``\\n``)."""
    memory_id = _stored(run, tmp_path)
    two_lines = json.loads(ok(run, "remember", "first line\nsecond line", "--json"))["memory"]
    for args in (*COMMANDS, ("memories", "show", memory_id), ("kg", "stats")):
        text = _nothing_obeyed(ok(run, *args))
        if args[0] not in ("status", "kg"):
            assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in text, (args, text)
    listed = ok(run, "memories", "list")
    assert f"{memory_id}  " in listed
    assert MARKUP in listed
    shown = ok(run, "memories", "show", two_lines["id"])
    assert "first line\\nsecond line" in shown
    status = _nothing_obeyed(ok(run, "status"))
    assert "w\\x1b]52;c;cm0gLXJmIH4=\\x07" in status  # the wing's name
    assert "notes\\x1b[31m\\u202etxt.md" in _nothing_obeyed(ok(run, "search", "zebra"))


def test_a_file_name_in_a_mine_report_is_shown_not_obeyed(run: Run, tmp_path: Path) -> None:
    """The lines ``palace mine`` prints about skipped files name them safely: a newline
    in a file's name cannot forge a line of its own."""
    corpus = tmp_path / "binary"
    corpus.mkdir()
    (corpus / f"x{CLIPBOARD}\nforged line.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    out = _nothing_obeyed(ok(run, "mine", str(corpus)))
    assert "skipped" in out
    assert "x\\x1b]52;c;cm0gLXJmIH4=\\x07\\nforged line.png" in out
    assert not any(line.startswith("forged") for line in out.splitlines())


def test_log_lines_show_a_file_name_not_obey_it(tmp_path: Path) -> None:
    """``palace -v`` logs to stderr (here the skipped file, by the miner): log lines are
    cleaned as the output is. In a child process, where the CLI's logging is its own."""
    corpus = tmp_path / "binary"
    corpus.mkdir()
    (corpus / f"x{CLIPBOARD}.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    driver = Path(__file__).resolve().parent / "palace_driver.py"
    args = ["-v", "--palace", str(tmp_path / "p"), "mine", str(corpus)]
    done = subprocess.run(
        [sys.executable, str(driver), "cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "ANONYMIZED_TELEMETRY": "False",
            "PALACE_EMBEDDER": "fake",
            "PALACE_BACKEND": "sqlite",
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "INFO palace_retrievers.ingest.mining: skipped" in done.stderr
    assert "x\\x1b]52;c;cm0gLXJmIH4=\\x07.png" in done.stderr
    _nothing_obeyed(done.stderr)
    _nothing_obeyed(done.stdout)


def test_json_keeps_stored_text_exact_and_escaped(run: Run, tmp_path: Path) -> None:
    """``--json`` decodes to the stored strings exactly, yet writes none of their
    control characters raw (DEL, C1 and bidi overrides, which JSON leaves as they are,
    are written as ``\\uNNNN``)."""
    text = f"{NASTY}\x7f\u2066\u2069"
    made = json.loads(ok(run, "remember", text, "--json"))["memory"]
    assert made["text"] == text
    for args in (("memories", "list"), ("memories", "show", made["id"]), ("search", "tea")):
        raw = ok(run, *args, "--json")
        for character in ("\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u2066"):
            assert character not in raw, (args, character)
        found = json.loads(raw)
        found = found if isinstance(found, list) else [found]
        assert text in [item["text"] for item in found], args


def test_an_export_to_standard_output_obeys_nothing_and_imports_back_exactly(
    run: Run, tmp_path: Path
) -> None:
    """``palace export`` to standard output: JSONL writes no control character raw yet
    imports back to the exact text; Markdown shows them as escapes."""
    text = f"{NASTY}\x7f\u2066\u2069"
    ok(run, "remember", text)
    exported = ok(run, "export")
    for character in ("\x1b", "\x07", "\x9b", "\x7f", "\u202e", "\u2066"):
        assert character not in exported, character
    _nothing_obeyed(ok(run, "export", "--format", "markdown"))
    dump = tmp_path / "export.jsonl"
    dump.write_text(exported, encoding="utf-8")
    other = tmp_path / "other"
    made = CliRunner().invoke(
        cli, ["--palace", str(other), "init", "--embedder", "fake", "--backend", "sqlite"]
    )
    assert made.exit_code == 0, made.output
    result = CliRunner().invoke(cli, ["--palace", str(other), "import", str(dump), "--json"])
    assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(cli, ["--palace", str(other), "memories", "list", "--json"])
    assert [m["text"] for m in json.loads(listed.stdout)] == [text]


def test_an_error_naming_stored_text_is_one_line_without_controls(run: Run, tmp_path: Path) -> None:
    """An error message that names what it was given (a path, a memory id) stays one
    line on stderr, its control characters and newlines shown as escapes."""
    missing = tmp_path / f"gone{CLIPBOARD}\nsecond line"
    errors = []
    for args in (("mine", str(missing)), ("memories", "show", f"m_1\n{CLIPBOARD}x")):
        code, _, err = run(*args)
        assert code == 1, (args, err)
        assert err.count("\n") == 1, (args, err)
        assert err.startswith("error: ")
        errors.append(_nothing_obeyed(err))
    assert "gone\\x1b]52;c;cm0gLXJmIH4=\\x07\\nsecond line" in errors[0]


def test_clean_shows_what_a_terminal_would_obey() -> None:
    """:func:`output.clean` itself: controls as escapes, tabs kept, newlines by choice,
    a file name's undecodable byte as ``\\xNN``, printable text (CJK, emoji) untouched."""
    assert output.clean("a\x1bb\x07c\x9bd\u202ee\u2028f") == "a\\x1bb\\x07c\\x9bd\\u202ee\\u2028f"
    assert output.clean("a\tb\nc\r\nd") == "a\tb\\nc\\r\\nd"
    assert output.clean("a\tb\nc\r\nd", lines=True) == "a\tb\nc\nd"
    assert output.clean("caf\udce9") == "caf\\xe9"
    assert output.clean("東京 ✓ [/bold] é") == "東京 ✓ [/bold] é"
