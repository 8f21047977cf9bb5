"""The ``claude-code`` source: Claude Code session logs, noise stripped, tools as notes.

Fixtures: ``tests/fixtures/sources/claude-code/projects/`` (shaped like
``~/.claude/projects/``; see ``docs/sources.md``). The palace uses the FAKE embedder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from palace_plugins.builtin.sources.claude_code import (
    ClaudeCodeSource,
    clean,
    tool_call,
    tool_result,
)
from palace_retrievers import Filter, Palace
from palace_retrievers.records import Drawer
from palace_retrievers.sources import SourceEntry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources" / "claude-code"
LARKSPUR = "6f1c2d9e-4b7a-4c1e-9a55-2f0e8d7c3b21"
NOTES = "0b8e7f52-93d1-4f0a-b6c4-77a1e2d5c960"


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    target = tmp_path / ".claude" / "projects"
    shutil.copytree(FIXTURES / "projects", target)
    return target


def drawers(palace: Palace, wing: str) -> list[Drawer]:
    found = palace.get(palace.ledger.drawer_ids(Filter(wing=wing)))
    return sorted(found, key=lambda d: (d.source, d.chunk_index))


def test_mining_the_projects_folder(fake_palace: Palace, projects: Path) -> None:
    report = fake_palace.mine(projects, source="claude-code", wing="code")
    assert (report.seen, report.mined) == (2, 2)
    (bad,) = report.skipped
    assert bad.location == f"{projects}/-home-dev-larkspur/{LARKSPUR}.jsonl:14"
    assert bad.reason.startswith("malformed JSON line")

    found = drawers(fake_palace, "code")
    larkspur = [d for d in found if d.metadata["session"] == LARKSPUR]
    assert len(larkspur) == 2
    first, second = larkspur
    assert first.room == "larkspur"
    assert first.text == (
        "user: The test_invoice_rounding test fails about one run in ten. "
        "Can you find out why?\n\n"
        "assistant: I'll start by finding the test and running it a few times.\n"
        "[Grep] def test_invoice_rounding\n"
        "[Grep result] tests/test_billing.py:88:def test_invoice_rounding(random_invoice):\n"
        "[Bash] for i in $(seq 1 20); do pytest -q tests/test_billing.py::test_invoice_rounding"
        " -p no:randomly || break; done\n"
        "[Bash error] 1 failed in 0.31s (+3 lines)\n"
        "Found it: `random_invoice` draws line amounts as floats, and `round_invoice` converts"
        " them with `Decimal(float)`, so 10.005 sometimes becomes 10.0049999. The fix is to"
        " build the Decimal from a string and round with ROUND_HALF_UP."
    )
    assert first.metadata["speakers"] == ["user", "assistant"]
    assert first.metadata["format"] == "claude-code"
    assert first.metadata["time_start"] == "2025-07-14T09:12:03.512000+00:00"
    assert first.content_date is not None
    assert first.content_date.isoformat() == "2025-07-14T09:12:03.512000+00:00"
    # The uuids of the prompt, the assistant's records and the tool results, in order.
    ids = first.metadata["message_ids"]
    assert len(ids) == 7
    assert ids[0] == "00000004-1111-4aaa-8bbb-000000000004"
    assert second.text.startswith("user: Yes, do that, and keep the fixture random.")
    assert second.text.endswith("20 runs in a row pass.")

    notes = [d for d in found if d.metadata["session"] == NOTES]
    assert [d.room for d in notes] == ["notes"]
    assert "[Read] /home/dev/notes/2025-07-meeting.md" in notes[0].text
    assert "[Read result] 1 # July planning meeting (+3 lines)" in notes[0].text


def test_noise_is_stripped(fake_palace: Palace, projects: Path) -> None:
    fake_palace.mine(projects, source="claude-code", wing="code")
    everything = "\n".join(d.text for d in drawers(fake_palace, "code"))
    for noise in (
        "system-reminder",
        "claudeMd",
        "Caveat:",
        "/clear",
        "local-command-stdout",
        "Let me grep for it",  # a thinking block
        "Request interrupted",
        "No response requested",  # a synthetic reply
        "Auto-compact",  # a system record
        "other uses of Decimal(float)",  # a sub-agent's record
        "Fix flaky invoice rounding test",  # the summary record
    ):
        assert noise not in everything, noise


def test_a_single_session_file(fake_palace: Palace, projects: Path) -> None:
    session = projects / "-home-dev-notes" / f"{NOTES}.jsonl"
    report = fake_palace.mine(session, source="claude-code", wing="one")
    assert (report.mined, report.skipped) == (1, [])
    (drawer,) = drawers(fake_palace, "one")
    assert drawer.source == str(session)
    assert (drawer.line_start, drawer.line_end) == (1, 4)


def test_keys_are_session_ids_wherever_the_logs_lie(projects: Path, tmp_path: Path) -> None:
    moved = tmp_path / "backup"
    shutil.copytree(projects / "-home-dev-larkspur", moved / "some-other-slug")

    def keys(root: Path) -> list[str]:
        return [e.key for e in ClaudeCodeSource({}).scan(root) if isinstance(e, SourceEntry)]

    assert keys(projects) == [f"claude-code:{LARKSPUR}", f"claude-code:{NOTES}"]
    assert keys(moved) == [f"claude-code:{LARKSPUR}"]


def test_a_folder_without_sessions_is_a_clear_note(fake_palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    report = fake_palace.mine(tmp_path / "empty", source="claude-code", wing="w")
    assert report.seen == 0
    assert [s.reason for s in report.skipped] == ["no Claude Code session logs (*.jsonl) here"]


def test_bad_bytes_are_replaced_and_the_rest_is_read(fake_palace: Palace, tmp_path: Path) -> None:
    record = {
        "type": "user",
        "sessionId": "s-1",
        "uuid": "u-1",
        "timestamp": "2025-07-14T09:00:00Z",
        "message": {"role": "user", "content": "Le caf\u00e9 est pr\u00eat ?"},
    }
    line = json.dumps(record, ensure_ascii=False).encode("utf-8").replace(b"\xc3\xa9", b"\xe9")
    log = tmp_path / "s-1.jsonl"
    log.write_bytes(line + b"\n\x00\x01garbage\n")
    report = fake_palace.mine(log, source="claude-code", wing="w")
    assert [s.location for s in report.skipped] == [f"{log}:2"]
    (drawer,) = drawers(fake_palace, "w")
    assert drawer.text == "user: Le caf\ufffd est pr\u00eat ?"
    assert drawer.metadata["session"] == "s-1"
    assert drawer.room == "claude-code"  # no cwd in the log


def test_a_resumed_session_keeps_its_own_id(fake_palace: Palace, tmp_path: Path) -> None:
    def record(session: str, uuid: str, text: str) -> str:
        message = {"role": "user", "content": text}
        return json.dumps({"type": "user", "sessionId": session, "uuid": uuid, "message": message})

    log = tmp_path / "new-session.jsonl"
    log.write_text(
        record("old-session", "u-1", "first, in the old session")
        + "\n"
        + record("new-session", "u-2", "then, resumed")
        + "\n"
    )
    fake_palace.mine(log, source="claude-code", wing="w")
    assert {d.metadata["session"] for d in drawers(fake_palace, "w")} == {"new-session"}


def test_clean() -> None:
    assert clean("  <system-reminder>x\ny</system-reminder>\nFix it ") == "Fix it"
    assert clean("[Request interrupted by user for tool use]") == ""
    assert clean("<command-name>/cost</command-name>") == ""


def test_tool_notes() -> None:
    assert tool_call({"name": "WebFetch", "input": {"url": "https://x.dev", "prompt": "p"}}) == (
        "[WebFetch] https://x.dev"
    )
    assert tool_call({"name": "TodoWrite", "input": {"todos": []}}) == '[TodoWrite] {"todos": []}'
    assert tool_call({"name": "Task", "input": {"description": "Find\n  callers"}}) == (
        "[Task] Find callers"
    )
    assert tool_result({"content": ""}, "Bash") == "[Bash result] (empty)"
    assert tool_result({"content": [{"type": "text", "text": "a\nb"}]}, "Read") == (
        "[Read result] a (+1 lines)"
    )
    assert tool_result(
        {"content": "Traceback\n  ...\nValueError: x", "is_error": True}, "Bash"
    ) == ("[Bash error] ValueError: x (+2 lines)")
