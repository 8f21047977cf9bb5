"""The ``slack`` source: a Slack export folder, channels by day, threads kept together.

Fixtures: ``tests/fixtures/sources/slack/export/`` (shaped like an unzipped Slack
workspace export; see ``docs/sources.md``). The palace uses the FAKE embedder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from palace_plugins.builtin.sources.slack import Directory, SlackSource, resolve
from palace_retrievers import Filter, Palace, SourceError
from palace_retrievers.records import Drawer
from palace_retrievers.sources import SourceEntry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sources" / "slack"
THREAD = "1719477000.000400"


@pytest.fixture
def export(tmp_path: Path) -> Path:
    target = tmp_path / "Larkspur Slack export Jun 27 2024 - Jun 28 2024"
    shutil.copytree(FIXTURES / "export", target)
    return target


def drawers(palace: Palace, wing: str) -> dict[str, list[Drawer]]:
    """The wing's drawers by session (``channel/day``), in order."""
    found = palace.get(palace.ledger.drawer_ids(Filter(wing=wing)))
    out: dict[str, list[Drawer]] = {}
    for drawer in sorted(found, key=lambda d: d.chunk_index):
        out.setdefault(drawer.metadata["session"], []).append(drawer)
    return out


def test_mining_an_export(fake_palace: Palace, export: Path) -> None:
    report = fake_palace.mine(export, source="slack", wing="slack")
    assert (report.seen, report.mined) == (5, 5)
    (damage,) = report.skipped
    assert damage.location == f"{export}/engineering/2024-06-28.json:27:17"
    assert "item 1 and everything after it skipped" in damage.reason

    found = drawers(fake_palace, "slack")
    assert sorted(found) == [
        "D05DIRECT01/2024-06-28",
        "engineering/2024-06-27",
        "engineering/2024-06-28",
        "general/2024-06-27",
        "general/2024-06-28",
    ]
    general = found["general/2024-06-27"]
    # Loose messages, the thread, and loose messages again after a long pause.
    assert [d.metadata.get("thread_ts") for d in general] == [None, THREAD, None]
    welcome, thread, notes = general
    assert welcome.text == (
        "Dana Whitfield: Welcome @Priya Nair! Priya joins the platform team on Monday :tada:"
        "\n\nPriya Nair: Thanks Dana, happy to be here. Where do I find the on-call rota?"
    )
    assert "has joined the channel" not in welcome.text
    assert thread.text == (
        "Dana Whitfield: It's pinned in #engineering, and the runbook is at the on-call wiki "
        "(https://wiki.example.com/oncall).\n\n"
        "Priya Nair: Found it. Is the rota in UTC or Berlin time?\n\n"
        "marco: Berlin time & it switches on Mondays at 10:00 <sharp>."
    )
    assert thread.room == "general"
    assert thread.metadata["channel"] == "general"
    assert thread.metadata["channel_id"] == "C01GENERAL1"
    assert thread.metadata["speakers"] == ["Dana Whitfield", "Priya Nair", "marco"]
    assert thread.metadata["message_ids"] == [THREAD, "1719477300.000500", "1719477400.000600"]
    assert thread.metadata["time_start"] == "2024-06-27T08:30:00.000400+00:00"
    assert thread.content_date is not None
    assert thread.content_date.isoformat() == "2024-06-27T08:30:00.000400+00:00"
    assert thread.source == str(export / "general" / "2024-06-27.json")
    assert notes.text.endswith("[file] onboarding-notes.pdf")
    assert "This message was deleted" not in "".join(d.text for d in general)

    # A reply posted the next day is filed with that day, under the same thread.
    late, loose = found["general/2024-06-28"]
    assert late.metadata["thread_ts"] == THREAD
    assert late.text == "Dana Whitfield: Update: from July the rota switches to UTC, @channel."
    assert "thread_ts" not in loose.metadata


def test_bots_guests_and_direct_messages(fake_palace: Palace, export: Path) -> None:
    fake_palace.mine(export, source="slack", wing="slack")
    found = drawers(fake_palace, "slack")
    loose, incident = found["engineering/2024-06-27"]
    assert loose.text.startswith("deploybot: Deploy *api v2.14.0* to production")
    assert "Lena Ortiz: I'm the contractor" in loose.text  # named by her message's profile
    assert incident.text.endswith("open an incident. cc @Lena Ortiz")
    (dm,) = found["D05DIRECT01/2024-06-28"]
    assert dm.room == "D05DIRECT01"
    assert dm.metadata["speakers"] == ["Priya Nair", "Dana Whitfield"]
    (cut,) = found["engineering/2024-06-28"]
    assert cut.text == "Dana Whitfield: Postmortem for the checkout latency is on Friday at 15:00."


def test_keys_and_mining_again(fake_palace: Palace, export: Path) -> None:
    keys = [e.key for e in SlackSource({}).scan(export) if isinstance(e, SourceEntry)]
    assert keys[0] == "slack:D05DIRECT01/2024-06-28.json"
    assert "slack:general/2024-06-27.json" in keys
    fake_palace.mine(export, source="slack", wing="slack")
    again = fake_palace.mine(export, source="slack", wing="slack")
    assert (again.mined, again.unchanged) == (0, 5)


def test_a_renamed_user_refreshes_the_days_they_speak_in(fake_palace: Palace, export: Path) -> None:
    fake_palace.mine(export, source="slack", wing="slack")
    users = json.loads((export / "users.json").read_text())
    users[2]["real_name"] = "Marco Rossi"  # marco, who speaks only in #general on the 27th
    (export / "users.json").write_text(json.dumps(users))
    for day in export.glob("*/*.json"):
        day.touch()  # the miner reads only what looks changed
    report = fake_palace.mine(export, source="slack", wing="slack")
    assert (report.mined, report.unchanged) == (1, 4)
    thread = drawers(fake_palace, "slack")["general/2024-06-27"][1]
    assert thread.text.endswith(
        "Marco Rossi: Berlin time & it switches on Mondays at 10:00 <sharp>."
    )


def test_an_empty_export_is_a_clear_note(fake_palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "users.json").write_text("[]")
    (tmp_path / "channels.json").write_text("[]")
    report = fake_palace.mine(tmp_path, source="slack", wing="w")
    assert (report.seen, report.mined) == (0, 0)
    assert [(s.location, s.reason) for s in report.skipped] == [
        (str(tmp_path), "empty Slack export: no channel messages")
    ]


def test_not_an_export(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello")
    with pytest.raises(SourceError, match="is not a Slack export"):
        list(SlackSource({}).scan(tmp_path))
    with pytest.raises(SourceError, match=r"neither a folder nor a \.zip"):
        list(SlackSource({}).scan(tmp_path / "notes.md"))
    with zipfile.ZipFile(tmp_path / "notes.zip", "w") as archive:
        archive.writestr("notes.md", "hello")
    with pytest.raises(SourceError, match="is not a Slack export"):
        list(SlackSource({}).scan(tmp_path / "notes.zip"))
    (tmp_path / "broken.zip").write_bytes(b"PK\x05\x06" + b"\0" * 10)
    with pytest.raises(SourceError):
        list(SlackSource({}).scan(tmp_path / "broken.zip"))


def test_broken_lists_and_messages_are_reported(fake_palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "users.json").write_bytes(b'[{"id": "U1", "real_name": "Ana"}, {"id": ')
    (tmp_path / "random").mkdir()
    messages = [
        {"type": "message", "user": "U1", "text": "caf\u00e9 time?", "ts": "1719500000.000100"},
        "not a message",
        {"type": "message", "user": "U2", "text": "sure", "ts": "1719500060.000200"},
    ]
    raw = json.dumps(messages, indent=4).encode().replace(b"caf\\u00e9", b"caf\xe9")
    (tmp_path / "random" / "2024-06-27.json").write_bytes(raw)
    report = fake_palace.mine(tmp_path, source="slack", wing="w")
    assert report.mined == 1
    reasons = {s.location.removeprefix(str(tmp_path) + "/"): s.reason for s in report.skipped}
    assert "malformed JSON" in reasons["users.json:1:43"]
    assert reasons["random/2024-06-27.json:8"] == "message 1 is not a JSON object"
    ((drawer,),) = drawers(fake_palace, "w").values()
    assert drawer.text == "Ana: caf\ufffd time?\n\nU2: sure"


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ("hi <@U1>", "hi @Ana"),
        ("hi <@U9>", "hi @U9"),
        ("hi <@U1|ana.b>", "hi @ana.b"),
        ("see <#C1|general> and <#C1>", "see #general and #general"),
        ("<!here> <!channel> <!subteam^S1|@oncall>", "@here @channel @oncall"),
        ("<!date^1719500000^{date}|June 27th>", "June 27th"),
        ("<https://x.dev>", "https://x.dev"),
        ("<https://x.dev|docs>", "docs (https://x.dev)"),
        ("<mailto:a@b.io|a@b.io>", "a@b.io"),
        ("a &lt;b&gt; &amp;amp;", "a <b> &amp;"),
    ],
)
def test_markup(markup: str, text: str) -> None:
    assert resolve(markup, Directory({"U1": "Ana"}, {"C1": "general"})) == text


# -- the export's .zip, read in place --------------------------------------------------


def zip_export(
    folder: Path, target: Path, *, top: str = "", extra: dict[str, bytes] | None = None
) -> Path:
    """``folder`` zipped as Slack does (``top``: inside one folder), with ``extra`` members."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, top + file.relative_to(folder).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return target


def _by_session(palace: Palace, wing: str) -> dict[str, list[tuple[object, ...]]]:
    return {
        session: [
            (d.text, d.room, d.chunk_index, d.line_start, d.line_end, d.content_date,
             {k: v for k, v in d.metadata.items()})
            for d in found
        ]
        for session, found in drawers(palace, wing).items()
    }  # fmt: skip


@pytest.mark.parametrize("top", ["", "Larkspur Slack export Jun 27 2024 - Jun 28 2024/"])
def test_a_zip_gives_what_its_folder_gives(
    fake_palace: Palace, export: Path, tmp_path: Path, top: str
) -> None:
    archive = zip_export(export, tmp_path / "export.zip", top=top)
    before = sorted(p.name for p in tmp_path.iterdir())
    from_folder = fake_palace.mine(export, source="slack", wing="folder")
    from_zip = fake_palace.mine(archive, source="slack", wing="zip")
    assert (from_zip.seen, from_zip.mined) == (from_folder.seen, from_folder.mined) == (5, 5)
    assert _by_session(fake_palace, "zip") == _by_session(fake_palace, "folder")
    assert sorted(fake_palace.ledger.source_states("zip")) == sorted(
        fake_palace.ledger.source_states("folder")
    )
    # The damage is noted at the same place, inside the zip.
    (damage,) = from_zip.skipped
    assert damage.location == f"{archive}/engineering/2024-06-28.json:27:17"
    thread = drawers(fake_palace, "zip")["general/2024-06-27"][1]
    assert thread.source == f"{archive}/general/2024-06-27.json"
    # Nothing was extracted anywhere, and an unchanged zip is not read again.
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    again = fake_palace.mine(archive, source="slack", wing="zip")
    assert (again.mined, again.unchanged) == (0, 5)
    # A new zip is read again, and only what changed is re-filed.
    os.utime(archive, (1, 1))
    touched = fake_palace.mine(archive, source="slack", wing="zip")
    assert (touched.seen, touched.drawers_added) == (5, 0)


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_hostile_zip_members_are_skipped_and_never_written(
    fake_palace: Palace, export: Path, tmp_path: Path
) -> None:
    day = (export / "general" / "2024-06-27.json").read_bytes()
    hostile = {
        "../outside/2024-06-27.json": day,
        "/etc/2024-06-27.json": day,
        "general/../../2024-06-27.json": day,
        "C:/evil/2024-06-27.json": day,
        "evil\\2024-06-27.json": day,
        "line\nbreak/2024-06-27.json": day,
    }
    archive = zip_export(export, tmp_path / "export.zip", extra=hostile)
    with zipfile.ZipFile(archive, "a") as zipped:
        link = zipfile.ZipInfo("linked/2024-06-27.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zipped.writestr(link, "/etc/passwd")
        zipped.writestr("general/2024-06-27.json", b"[]")  # the same name again
    work = tmp_path / "work"
    work.mkdir()
    os.chdir(work)
    report = fake_palace.mine(archive, source="slack", wing="zip")
    assert report.seen == 5
    reasons = {s.location.removeprefix(f"{archive}/"): s.reason for s in report.skipped}
    for name in hostile:
        assert "could point outside the export" in reasons[name], name
    assert "not followed" in reasons["linked/2024-06-27.json"]
    assert "twice" in reasons["general/2024-06-27.json"]
    assert sorted(drawers(fake_palace, "zip")) == [
        "D05DIRECT01/2024-06-28",
        "engineering/2024-06-27",
        "engineering/2024-06-28",
        "general/2024-06-27",
        "general/2024-06-28",
    ]
    assert len(drawers(fake_palace, "zip")["general/2024-06-27"]) == 3  # the first copy read
    assert list(work.iterdir()) == []
    assert not (tmp_path / "outside").exists()


def test_an_oversized_or_encrypted_member_costs_only_itself(
    fake_palace: Palace, export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import palace_plugins.builtin.sources.slack as slack

    archive = zip_export(export, tmp_path / "export.zip")
    with zipfile.ZipFile(archive, "a") as zipped:
        zipped.writestr("random/2024-06-27.json", b"[]")
    # Mark that member encrypted in the central directory (zipfile cannot write one).
    data = bytearray(archive.read_bytes())
    at = data.rindex(b"PK\x01\x02")  # the last central entry is the member just added
    assert data[at + 46 : at + 46 + 22] == b"random/2024-06-27.json"
    data[at + 8] |= 0x1
    archive.write_bytes(bytes(data))
    monkeypatch.setattr(slack, "MAX_MEMBER_BYTES", 1500)
    report = fake_palace.mine(archive, source="slack", wing="zip")
    reasons = {s.location.removeprefix(f"{archive}/"): s.reason for s in report.skipped}
    assert "over 1500: not read" in reasons["users.json"]
    assert "over 1500: not read" in reasons["general/2024-06-28.json"]
    assert "encrypted: not read" in reasons["random/2024-06-27.json"]
    too_big = [n for n, r in reasons.items() if "/20" in n and "over 1500" in r]
    assert report.seen == 6
    assert report.mined == 6 - len(too_big) - 1
    assert "D05DIRECT01/2024-06-28" in drawers(fake_palace, "zip")  # small enough
