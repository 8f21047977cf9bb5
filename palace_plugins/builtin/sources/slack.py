"""The ``slack`` source: a Slack workspace export, unzipped or as its ``.zip``.

An export is a folder (or a zip holding it, at its top or in one folder) with
``users.json``, ``channels.json`` (and, in exports that hold them, ``groups.json``,
``dms.json``, ``mpims.json``) and one folder per conversation (named after the channel,
or the id of a direct message) holding one JSON array of messages per day,
``YYYY-MM-DD.json``. Each day file is one entry, keyed
``slack:<channel>/<day>.json``; its drawers go to the room named after the channel. The
keys are taken as ids (``keys_are_ids``): a fresh export of the workspace mined from
another path updates the same days instead of adding copies, so two workspaces belong in
two wings (a channel of the same name would share its days' keys).

Inside a day, a thread (a parent message and the replies that share its ``thread_ts``)
is one group, with ``thread_ts`` in its drawers' metadata; the other messages are packed
in order into groups of up to ``chunk_size`` characters, a pause of more than an hour
starting a new group. A reply whose parent was posted
on an earlier day stays in its own day's file, in a group with that ``thread_ts``. A
group longer than ``chunk_size`` is cut into parts like any exchange.

Speakers are resolved through ``users.json`` (real name, else display name, else user
name; for a user it does not list, the message's own ``user_profile``; a bot's
``username``), mentions ``<@U…>`` become ``@Name``, channel links
``#name``, links ``label (url)``, and Slack's ``&lt; &gt; &amp;`` are unescaped. A shared
file is a note ``[file] name``. Joins, leaves, pins and deleted-message stubs are dropped.
Times come from each message's ``ts`` (epoch seconds, stored as UTC); the ``ts`` is the
message id. A day file damaged part-way keeps the messages before the damage. Symlinks
inside the export (a channel folder, a day file, ``users.json``) are not followed: they are
noted and skipped, so that mining an export never reads outside it.

A ``.zip`` is read in place with :mod:`zipfile`, never extracted: its day files give the
same entries, keys and drawers as the unzipped folder, located at ``<zip>/<channel>/<day>``
and dated by the zip's own mtime (a new zip is read again; only what changed is
re-filed). A member whose name could point outside the export (absolute, ``..``,
backslashes, control characters), a symlink member, a name given twice, an encrypted or
oversized member (over :data:`MAX_MEMBER_BYTES`) is noted and skipped.
"""

from __future__ import annotations

import json
import re
import stat
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from palace_plugins.builtin.sources.conversations import (
    Chunking,
    ConversationSource,
    Turn,
    mining_root,
    packed,
    segments,
    utc,
)
from palace_plugins.builtin.sources.reading import (
    Problems,
    array_items,
    decode,
    read_bytes,
    reported,
)
from palace_retrievers.errors import SourceError
from palace_retrievers.ids import content_hash, digest
from palace_retrievers.sources import Skipped, SourceDocument, SourceEntry

CHANNEL_LISTS = ("channels.json", "groups.json", "dms.json", "mpims.json")
NOISE_SUBTYPES = frozenset(
    {
        "channel_join",
        "channel_leave",
        "group_join",
        "group_leave",
        "channel_archive",
        "channel_unarchive",
        "pinned_item",
        "unpinned_item",
        "bot_add",
        "bot_remove",
        "tombstone",
    }
)
NOT_FOLLOWED = "a symlink: not followed, so that nothing outside the export is read"
PAUSE = timedelta(hours=1)
"""A longer pause between two messages outside threads starts a new group."""
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\.json")
MAX_MEMBER_BYTES = 512 * 1024 * 1024
"""A zip member larger than this, uncompressed, is skipped (a zip bomb is not read)."""
_HOSTILE = re.compile(r"[\x00-\x1f\x7f\\]|^/|^[A-Za-z]:|(^|/)\.\.?(/|$)|//")
_ANGLED = re.compile(r"<([^<>]+)>")


@dataclass(frozen=True, slots=True)
class Directory:
    """Names from the export's lists: user id → name, channel id ↔ folder name."""

    users: Mapping[str, str]
    channels: Mapping[str, str]  # channel id → name

    def user(self, ident: str) -> str:
        return self.users.get(ident, ident)

    def with_profiles(self, messages: Sequence[Any]) -> Directory:
        """Also the users the export does not list but whose messages carry a profile."""
        extra = {
            str(m["user"]): name
            for m in messages
            if isinstance(m, dict)
            and isinstance(m.get("user"), str)
            and m["user"] not in self.users
            and isinstance(m.get("user_profile"), dict)
            and (name := _user_name(m["user_profile"]))
        }
        return Directory({**self.users, **extra}, self.channels) if extra else self


def _user_name(user: Mapping[str, Any]) -> str | None:
    profile = user.get("profile")
    profile = profile if isinstance(profile, dict) else {}
    for name in (
        profile.get("real_name"),
        user.get("real_name"),
        profile.get("display_name"),
        user.get("name"),
    ):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return None


@dataclass(frozen=True, slots=True)
class Day:
    """One channel's day file in an export (a folder's file or a zip's member)."""

    channel: str
    name: str
    location: str
    mtime: float
    read: Callable[[], bytes]


class _Folder:
    """An unzipped export: its day files, and its lists by name."""

    def __init__(self, root: Path, problems: Problems) -> None:
        self.root = root
        self._problems = problems

    def days(self) -> list[Day]:
        days: list[Day] = []
        for folder in sorted(self.root.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            if folder.is_symlink():
                self._problems.add(str(folder), NOT_FOLLOWED)
                continue
            for file in sorted(folder.iterdir()):
                if not _DAY.fullmatch(file.name):
                    continue
                if file.is_symlink() or not file.is_file():
                    reason = NOT_FOLLOWED if file.is_symlink() else "not a file"
                    self._problems.add(str(file), reason)
                else:
                    days.append(
                        Day(
                            folder.name,
                            file.name,
                            str(file),
                            file.stat().st_mtime,
                            read=partial(read_bytes, file),
                        )
                    )
        return days

    def has_list(self, name: str) -> bool:
        return (self.root / name).is_file()

    def list_bytes(self, name: str) -> tuple[str, bytes] | None:
        file = self.root / name
        if file.is_symlink():
            self._problems.add(str(file), NOT_FOLLOWED)
            return None
        if not file.is_file():
            return None
        return str(file), read_bytes(file)


class _Zip:
    """An export's ``.zip``, read in place: the same days and lists as its folder."""

    def __init__(self, path: Path, archive: zipfile.ZipFile, problems: Problems) -> None:
        self.root = path
        self._archive = archive
        self._problems = problems
        self._mtime = path.stat().st_mtime
        members: dict[str, zipfile.ZipInfo] = {}
        for info in archive.infolist():
            name = info.filename
            if info.is_dir():
                continue
            where = f"{path}/{name}"
            if _HOSTILE.search(name):
                problems.add(where, "a name that could point outside the export: not read")
            elif stat.S_ISLNK(info.external_attr >> 16):
                problems.add(where, NOT_FOLLOWED)
            elif name in members:
                problems.add(where, "in the zip twice: the first one is read")
            else:
                members[name] = info
        self._prefix = _export_prefix(members)
        self._members = {
            name.removeprefix(self._prefix): info
            for name, info in members.items()
            if name.startswith(self._prefix)
        }

    def _read(self, name: str) -> bytes:
        info = self._members[name]
        where = f"{self.root}/{name}"
        if info.file_size > MAX_MEMBER_BYTES:
            raise SourceError(
                f"{where} is {info.file_size} bytes uncompressed, over {MAX_MEMBER_BYTES}: not read"
            )
        if info.flag_bits & 0x1:
            raise SourceError(f"{where} is encrypted: not read")
        try:
            return self._archive.read(info)
        except (OSError, ValueError, RuntimeError, EOFError, zipfile.BadZipFile) as exc:
            raise SourceError(f"cannot read {where}: {exc}") from None

    def days(self) -> list[Day]:
        days: list[Day] = []
        for name in sorted(self._members):
            channel, slash, day = name.partition("/")
            if not slash or channel.startswith(".") or not _DAY.fullmatch(day):
                continue
            days.append(
                Day(
                    channel,
                    day,
                    f"{self.root}/{name}",
                    self._mtime,
                    read=partial(self._read, name),
                )
            )
        return days

    def has_list(self, name: str) -> bool:
        return name in self._members

    def list_bytes(self, name: str) -> tuple[str, bytes] | None:
        if name not in self._members:
            return None
        return f"{self.root}/{name}", self._read(name)


def _export_prefix(members: Mapping[str, zipfile.ZipInfo]) -> str:
    """Where the export starts inside a zip: at its top, or in its one top folder."""

    def looks_like_export(prefix: str) -> bool:
        return any(
            name.startswith(prefix)
            and (
                name.removeprefix(prefix) in ("users.json", *CHANNEL_LISTS)
                or (
                    name.removeprefix(prefix).count("/") == 1
                    and bool(_DAY.fullmatch(name.rsplit("/", 1)[1]))
                )
            )
            for name in members
        )

    if looks_like_export(""):
        return ""
    tops = {name.split("/", 1)[0] for name in members if "/" in name}
    if len(tops) == 1 and looks_like_export(prefix := f"{tops.pop()}/"):
        return prefix
    return ""


def _load_list(export: _Folder | _Zip, name: str, problems: Problems) -> list[Any]:
    try:
        found = export.list_bytes(name)
        if found is None:
            return []
        where, data = found
        return [item.value for item in array_items(decode(data), where, problems)]
    except SourceError as exc:
        problems.add(f"{export.root}/{name}", str(exc))
        return []


def directory(export: _Folder | _Zip, problems: Problems) -> Directory:
    """The users and channels an export lists (empty when its lists are missing)."""
    users = {
        str(u["id"]): name
        for u in _load_list(export, "users.json", problems)
        if isinstance(u, dict) and u.get("id") and (name := _user_name(u))
    }
    channels = {
        str(c["id"]): str(c.get("name") or c["id"])
        for listing in CHANNEL_LISTS
        for c in _load_list(export, listing, problems)
        if isinstance(c, dict) and c.get("id")
    }
    return Directory(users, channels)


def resolve(text: str, names: Directory) -> str:
    """Slack's markup made readable: mentions, channel links, links, escapes."""

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):
            return "@" + (label or names.user(target[1:]))
        if target.startswith("#"):
            return "#" + (label or names.channels.get(target[1:], target[1:]))
        if target.startswith("!"):
            return label or "@" + target[1:].split("^")[0]
        if target.startswith("mailto:"):
            return label or target.removeprefix("mailto:")
        return f"{label} ({target})" if label and label != target else target

    text = _ANGLED.sub(one, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def speaker(message: Mapping[str, Any], names: Directory) -> str:
    """Who posted ``message``: the user's name, a bot's name, or the raw id."""
    user = message.get("user")
    if isinstance(user, str) and user in names.users:
        return names.users[user]
    profile = message.get("user_profile")
    if isinstance(profile, dict) and (name := _user_name(profile)):
        return name
    bot = message.get("bot_profile")
    for name in (
        message.get("username"),
        bot.get("name") if isinstance(bot, dict) else None,
        user,
    ):
        if isinstance(name, str) and name.strip():
            return name.strip()
    return "unknown"


def message_turn(
    message: Mapping[str, Any], names: Directory, lines: tuple[int, int]
) -> Turn | None:
    """The turn of one message, or ``None`` for noise and empty messages."""
    subtype = message.get("subtype")
    if message.get("type", "message") != "message" or (
        isinstance(subtype, str) and subtype in NOISE_SUBTYPES
    ):
        return None
    text = resolve(str(message.get("text") or ""), names).strip()
    files = message.get("files")
    files = files if isinstance(files, list) else []
    notes = [
        f"[file] {f.get('name') or f.get('title')}"
        for f in files
        if isinstance(f, dict) and (f.get("name") or f.get("title"))
    ]
    text = "\n".join(([text] if text else []) + notes)
    if not text:
        return None
    ts = message.get("ts")
    return Turn(
        speaker=speaker(message, names),
        text=text,
        time=utc(ts),
        id=str(ts) if ts is not None else None,
        line_start=lines[0],
        line_end=lines[1],
    )


def _thread(message: Mapping[str, Any]) -> str | None:
    """The ``thread_ts`` of a message that belongs to a thread, else ``None``."""
    thread = message.get("thread_ts")
    if not isinstance(thread, str):
        return None
    starts_one = message.get("reply_count") or message.get("replies")
    return thread if thread != message.get("ts") or starts_one else None


def day_groups(
    messages: Sequence[tuple[Mapping[str, Any], Turn]], size: int
) -> list[tuple[str | None, list[Turn]]]:
    """A day's turns grouped: each thread whole, the rest packed; by first message time."""
    threads: dict[str, list[Turn]] = {}
    loose: list[Turn] = []
    for message, turn in messages:
        thread = _thread(message)
        if thread is None:
            loose.append(turn)
        else:
            threads.setdefault(thread, []).append(turn)
    groups: list[tuple[str | None, list[Turn]]] = [(None, g) for g in packed(loose, size, PAUSE)]
    groups += list(threads.items())
    return sorted(groups, key=lambda g: g[1][0].line_start or 0)


def read_day(
    day: Day, *, names: Directory, chunking: Chunking, problems: Problems
) -> SourceDocument:
    """The segments of one channel's day file."""
    data = day.read()
    channel, stem = day.channel, day.name.removesuffix(".json")
    items = list(array_items(decode(data), day.location, problems))
    names = names.with_profiles([item.value for item in items])
    messages: list[tuple[Mapping[str, Any], Turn]] = []
    for item in items:
        if not isinstance(item.value, dict):
            problems.add(
                f"{day.location}:{item.line_start}", f"message {item.index} is not a JSON object"
            )
            continue
        turn = message_turn(item.value, names, (item.line_start, item.line_end))
        if turn is not None:
            messages.append((item.value, turn))
    groups = day_groups(messages, chunking.size)
    threads = {turns[0].id: thread for thread, turns in groups if thread}  # by first ts

    def extra(turns: Sequence[Turn]) -> dict[str, Any]:
        thread = threads.get(turns[0].id)
        return {"thread_ts": thread} if thread else {}

    cut = segments(
        [turns for _, turns in groups],
        session=f"{channel}/{stem}",
        chunking=chunking,
        extra=extra,
    )
    speakers = sorted({t.speaker for _, t in messages})
    channel_id = next((k for k, v in names.channels.items() if v == channel), channel)
    return SourceDocument(
        text="\n\n".join(s.text for s in cut),
        content_hash=digest(content_hash(data), json.dumps(speakers), length=64),
        room=channel,
        content_date=utc(f"{stem}T00:00:00"),
        metadata={"format": "slack", "channel": channel, "channel_id": channel_id},
        segments=cut,
    )


class SlackSource(ConversationSource):
    """Slack export folders and zips. Options: ``chunk_size``, ``chunk_overlap``."""

    keys_are_ids = True

    name = "slack"

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        path = mining_root(path)
        problems = Problems()
        if path.is_dir():
            yield from self._scan(_Folder(path, problems), problems)
            return
        if not zipfile.is_zipfile(path):
            raise SourceError(
                f"{path} is neither a folder nor a .zip: mine a Slack export's folder or its zip"
            )
        try:
            archive = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise SourceError(f"cannot read {path}: {exc}") from None
        with archive:  # open while the miner reads the entries
            yield from self._scan(_Zip(path, archive, problems), problems)

    def _scan(self, export: _Folder | _Zip, problems: Problems) -> Iterator[SourceEntry | Skipped]:
        days = export.days()
        listed = [name for name in ("users.json", *CHANNEL_LISTS) if export.has_list(name)]
        if not days and not listed:
            raise SourceError(
                f"{export.root} is not a Slack export: no users.json, channels.json or "
                "channel folders of YYYY-MM-DD.json files"
            )
        names = directory(export, problems)
        if not days:
            problems.add(str(export.root), "empty Slack export: no channel messages")
        yield from reported(self._entries(days, names, problems), problems)

    def _entries(
        self, days: list[Day], names: Directory, problems: Problems
    ) -> Iterator[SourceEntry]:
        chunking = self._chunking
        for day in days:

            def read(day: Day = day) -> SourceDocument:
                return read_day(day, names=names, chunking=chunking, problems=problems)

            yield SourceEntry(
                key=f"slack:{day.channel}/{day.name}",
                location=day.location,
                mtime=day.mtime,
                read=read,
            )
