"""The ``chatgpt`` source: a ChatGPT export, the current branch of each conversation.

Fixtures: ``tests/fixtures/sources/chatgpt/`` (shaped like the ``conversations.json`` of a
ChatGPT data export; see ``docs/sources.md``). The palace uses the FAKE embedder.
"""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from palace_plugins.builtin.sources.chatgpt import ChatGPTSource, current_branch
from palace_plugins.builtin.sources.reading import Problems
from palace_retrievers import Filter, Palace, SourceError
from palace_retrievers.records import Drawer
from palace_retrievers.sources import SourceEntry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources" / "chatgpt"
SOURDOUGH = "6632a1f0-5e1c-8005-9a3e-1b2c3d4e5f60"
SALES = "665ae210-77b0-8005-b1c2-d3e4f5a6b7c8"
PYTHON = "66827a30-1234-8005-aaaa-0123456789ab"
TYRES = "6592a3b0-0000-8005-cccc-00000000abcd"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    target = tmp_path / "chatgpt-export-2024-07"
    shutil.copytree(FIXTURES / "export", target)
    return target


def drawers(palace: Palace, wing: str) -> dict[str, list[Drawer]]:
    found = palace.get(palace.ledger.drawer_ids(Filter(wing=wing)))
    out: dict[str, list[Drawer]] = {}
    for drawer in sorted(found, key=lambda d: d.chunk_index):
        out.setdefault(drawer.metadata["session"], []).append(drawer)
    return out


def test_mining_an_export_folder(fake_palace: Palace, export: Path) -> None:
    report = fake_palace.mine(export, source="chatgpt", wing="gpt")
    assert (report.seen, report.mined) == (4, 4)
    file = export / "conversations.json"
    assert [(s.location, s.reason) for s in report.skipped] == [
        (f"{file}:3", "conversation 2 is not a JSON object"),
        (f"{file}:5", "conversation 66000000-dead-8005-beef-000000000000 has no message mapping"),
        (f"{file}:6", "no current_node; the newest branch is mined"),
    ]
    found = drawers(fake_palace, "gpt")
    assert set(found) == {SOURDOUGH, SALES, PYTHON, TYRES}

    # The edited prompt's branch, not the first one; hidden context and system gone.
    sourdough = found[SOURDOUGH]
    assert [d.text for d in sourdough] == [
        "user: What hydration should I use for a first sourdough loaf with whole wheat flour?"
        "\n\nassistant: Whole wheat absorbs more water, so start at 75–78% hydration and "
        "autolyse for 45 minutes.",
        "user: And the bulk ferment at 24 °C?\n\n"
        "assistant: About 5 hours at 24 °C, until the dough has risen by half.",
    ]
    first = sourdough[0]
    assert first.room == "chatgpt"
    assert first.source == f"{file}#{SOURDOUGH}"
    assert first.metadata["title"] == "Sourdough hydration"
    assert first.metadata["message_ids"] == ["aaa2-u1b", "a2-r1b"]
    assert first.metadata["speakers"] == ["user", "assistant"]
    assert first.metadata["time_start"] == "2024-05-01T10:41:00+00:00"
    assert first.content_date is not None
    assert first.content_date.isoformat() == "2024-05-01T10:41:00+00:00"


def test_tools_become_notes_and_reasoning_is_dropped(fake_palace: Palace, export: Path) -> None:
    fake_palace.mine(export, source="chatgpt", wing="gpt")
    found = drawers(fake_palace, "gpt")
    (sales,) = found[SALES]
    assert sales.text == (
        "user: [image]\nHere is our sales table. Which month had the highest revenue?\n\n"
        "assistant: [python] import pandas as pd df = pd.read_csv('/mnt/data/sales.csv') "
        "df.groupby('month').revenue.sum().idxmax()\n"
        "[python result] 'March'\n"
        "March had the highest revenue, at $182,400."
    )
    assert "Thought for" not in sales.text
    assert sales.metadata["message_ids"] == ["u1", "c1", "o1", "a1"]
    (python,) = found[PYTHON]
    assert '[browser] search("Python 3.13 release date")' in python.text
    assert "[quote] PEP 719 – Python 3.13 Release Schedule https://peps.python.org/pep-0719/" in (
        python.text
    )
    (tyres,) = found[TYRES]
    assert tyres.text.endswith("About 70 psi front and 73 psi rear for 28 mm tyres at 75 kg.")


def test_the_file_the_folder_and_the_zip_give_the_same_drawers(
    fake_palace: Palace, export: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(export / "conversations.json", "conversations.json")
        zipped.write(export / "user.json", "user.json")
    ids = []
    for wing, path in [("a", export), ("b", export / "conversations.json"), ("c", archive)]:
        fake_palace.mine(path, source="chatgpt", wing=wing)
        ids.append(
            sorted(
                d.text for d in fake_palace.get(fake_palace.ledger.drawer_ids(Filter(wing=wing)))
            )
        )
    assert ids[0] == ids[1] == ids[2]


def test_a_new_export_updates_the_same_conversations(fake_palace: Palace, tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(FIXTURES / "export", old)
    fake_palace.mine(old, source="chatgpt", wing="gpt")
    before = set(fake_palace.ledger.drawer_ids(Filter(wing="gpt")))
    # A later export: the same conversations, one of them continued.
    conversations = json.loads((old / "conversations.json").read_text())
    tyres = next(c for c in conversations if isinstance(c, dict) and c.get("id") == TYRES)
    tyres["mapping"]["new"]["children"] = ["u2"]
    tyres["mapping"]["u2"] = {
        "id": "u2",
        "parent": "new",
        "children": [],
        "message": {
            "id": "u2",
            "author": {"role": "user"},
            "create_time": 1704200000.0,
            "content": {"content_type": "text", "parts": ["And for 32 mm?"]},
        },
    }
    tyres["current_node"] = "u2"
    new = tmp_path / "new"
    new.mkdir()
    (new / "conversations.json").write_text(json.dumps(conversations))
    report = fake_palace.mine(new, source="chatgpt", wing="gpt")
    assert (report.seen, report.mined, report.unchanged) == (4, 1, 3)
    after = set(fake_palace.ledger.drawer_ids(Filter(wing="gpt")))
    assert len(after) == len(before) + 1  # no copies, one exchange more


def test_a_truncated_export_keeps_every_whole_conversation(fake_palace: Palace) -> None:
    file = FIXTURES / "truncated-conversations.json"
    report = fake_palace.mine(file, source="chatgpt", wing="cut")
    assert report.mined == 2
    damage = report.skipped[-1]
    assert damage.location == f"{file}:4:310"
    assert "malformed JSON" in damage.reason
    assert "item 3 and everything after it skipped" in damage.reason
    assert set(drawers(fake_palace, "cut")) == {SOURDOUGH, SALES}


def test_an_empty_export_is_a_clear_note(fake_palace: Palace) -> None:
    file = FIXTURES / "empty-conversations.json"
    report = fake_palace.mine(file, source="chatgpt", wing="w")
    assert (report.seen, report.mined) == (0, 0)
    assert [(s.location, s.reason) for s in report.skipped] == [
        (str(file), "empty ChatGPT export: no conversations")
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"not": "an array"}', "is not a JSON array ('{' at the start)"),
        ("", "is not a JSON array (an empty file)"),
    ],
)
def test_not_an_export(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "conversations.json"
    file.write_text(content)
    with pytest.raises(SourceError, match=re.escape(message)):
        list(ChatGPTSource({}).scan(file))


def test_a_folder_without_conversations_json(tmp_path: Path) -> None:
    (tmp_path / "chat.html").write_text("<html></html>")
    with pytest.raises(SourceError, match=r"no conversations\.json in .*not a ChatGPT export"):
        list(ChatGPTSource({}).scan(tmp_path))


def test_bad_bytes_are_replaced(fake_palace: Palace, tmp_path: Path) -> None:
    conversation = {
        "id": "c-1",
        "title": "t",
        "current_node": "m",
        "mapping": {
            "m": {
                "id": "m",
                "parent": None,
                "children": [],
                "message": {
                    "id": "m",
                    "author": {"role": "user"},
                    "content": {"content_type": "text", "parts": ["CAFE_BYTE ok"]},
                },
            }
        },
    }
    raw = json.dumps([conversation]).encode().replace(b"CAFE_BYTE", b"caf\xe9")
    (tmp_path / "conversations.json").write_bytes(raw)
    fake_palace.mine(tmp_path / "conversations.json", source="chatgpt", wing="w")
    ((drawer,),) = drawers(fake_palace, "w").values()
    assert drawer.text == "user: caf\ufffd ok"


def test_current_branch_survives_a_cycle_and_a_missing_parent() -> None:
    mapping = {
        "a": {"parent": "b", "message": None},
        "b": {"parent": "a", "message": None},
        "c": {"parent": "gone", "message": None},
    }
    assert len(current_branch(mapping, "a", "w", Problems())) == 2
    assert len(current_branch(mapping, "c", "w", Problems())) == 1


def test_keys_are_conversation_ids(export: Path) -> None:
    keys = [e.key for e in ChatGPTSource({}).scan(export) if isinstance(e, SourceEntry)]
    assert keys == [f"chatgpt:{c}" for c in (SOURDOUGH, SALES, PYTHON, TYRES)]
