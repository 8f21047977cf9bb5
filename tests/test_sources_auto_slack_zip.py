"""The ``auto`` source recognises a Slack export's ``.zip`` (the ``slack`` source reads it
in place): one holding ``users.json`` or a channel list and at least one
``<channel>/YYYY-MM-DD.json``, at its top or in its one top folder. A zip with only one
of the two, or its parts in different folders, stays ``files``.

The zips are built in the test from the Slack fixture export; the FAKE embedder mines
them (this is about which source reads the zip, not meaning).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from palace_plugins.builtin.sources.auto import detect
from palace_retrievers import Filter, Palace

EXPORT = Path(__file__).resolve().parent / "fixtures" / "sources" / "slack" / "export"


def _zip(path: Path, keep: Callable[[str], bool] = lambda name: True, *, top: str = "") -> Path:
    """The fixture export zipped at ``path`` (its members under ``top``), with only the
    members ``keep`` says yes to."""
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(EXPORT.rglob("*")):
            name = file.relative_to(EXPORT).as_posix()
            if file.is_file() and keep(name):
                archive.write(file, top + name)
    return path


def _is_list(name: str) -> bool:
    return name in ("users.json", "channels.json", "groups.json", "dms.json", "mpims.json")


@pytest.mark.parametrize("top", ["", "Acme Slack export Jun 1 2024 - Jun 30 2024/"])
def test_a_zipped_slack_export_is_slack(tmp_path: Path, top: str) -> None:
    assert detect(_zip(tmp_path / "export.zip", top=top)) == "slack"
    only_users = _zip(tmp_path / "users.zip", lambda n: n == "users.json" or "/" in n, top=top)
    assert detect(only_users) == "slack"


@pytest.mark.parametrize(
    ("name", "keep"),
    [
        ("lists-only.zip", _is_list),  # no channel folder of days
        ("days-only.zip", lambda n: "/" in n),  # no users.json nor channel list
        ("no-days.zip", lambda n: not n.endswith("-28.json") and not n.endswith("-27.json")),
    ],
)
def test_a_zip_with_only_part_of_an_export_is_files(
    tmp_path: Path, name: str, keep: Callable[[str], bool]
) -> None:
    assert detect(_zip(tmp_path / name, keep)) == "files"


def test_parts_in_two_folders_are_not_an_export(tmp_path: Path) -> None:
    archive = tmp_path / "split.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(EXPORT / "users.json", "a/users.json")
        zipped.write(EXPORT / "general" / "2024-06-27.json", "b/general/2024-06-27.json")
    assert detect(archive) == "files"


def test_auto_mines_a_slack_zip_like_the_slack_source(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    archive = _zip(tmp_path / "export.zip")
    auto = palace.mine(archive, source="auto", wing="auto")
    direct = palace.mine(archive, source="slack", wing="direct")
    assert (auto.seen, auto.mined) == (direct.seen, direct.mined) == (5, 5)
    texts = [
        sorted(d.text for d in palace.get(palace.ledger.drawer_ids(Filter(wing=w))))
        for w in ("auto", "direct")
    ]
    assert texts[0] == texts[1]
