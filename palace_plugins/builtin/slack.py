"""The ``slack`` source: an unzipped Slack workspace export.

An export is a folder with ``users.json``, ``channels.json`` (and, in exports that hold
them, ``groups.json``, ``dms.json``, ``mpims.json``) and one folder per conversation
(named after the channel, or the id of a direct message) holding one JSON array of
messages per day, ``YYYY-MM-DD.json``. Each day file is one entry, keyed
``slack:<channel>/<day>.json``; its drawers go to the room named after the channel.

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
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from palace_plugins.builtin.conversations import Chunking, Turn, packed, segments, utc
from palace_plugins.builtin.reading import Problems, array_items, decode, read_bytes, reported
from palace_plugins.hookspecs import Register, hookimpl
from palace_retrievers.errors import SourceError
from palace_retrievers.ids import content_hash, digest
from palace_retrievers.sources import Skipped, Source, SourceDocument, SourceEntry

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


def _load_list(file: Path, problems: Problems) -> list[Any]:
    if file.is_symlink():
        problems.add(str(file), NOT_FOLLOWED)
        return []
    if not file.is_file():
        return []
    try:
        return [item.value for item in array_items(decode(read_bytes(file)), str(file), problems)]
    except SourceError as exc:
        problems.add(str(file), str(exc))
        return []


def directory(root: Path, problems: Problems) -> Directory:
    """The users and channels an export lists (empty when its lists are missing)."""
    users = {
        str(u["id"]): name
        for u in _load_list(root / "users.json", problems)
        if isinstance(u, dict) and u.get("id") and (name := _user_name(u))
    }
    channels = {
        str(c["id"]): str(c.get("name") or c["id"])
        for listing in CHANNEL_LISTS
        for c in _load_list(root / listing, problems)
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
    file: Path, *, channel: str, names: Directory, chunking: Chunking, problems: Problems
) -> SourceDocument:
    """The segments of one channel's day file."""
    data = read_bytes(file)
    items = list(array_items(decode(data), str(file), problems))
    names = names.with_profiles([item.value for item in items])
    messages: list[tuple[Mapping[str, Any], Turn]] = []
    for item in items:
        if not isinstance(item.value, dict):
            problems.add(f"{file}:{item.line_start}", f"message {item.index} is not a JSON object")
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
        session=f"{channel}/{file.stem}",
        chunking=chunking,
        extra=extra,
    )
    speakers = sorted({t.speaker for _, t in messages})
    channel_id = next((k for k, v in names.channels.items() if v == channel), channel)
    return SourceDocument(
        text="\n\n".join(s.text for s in cut),
        content_hash=digest(content_hash(data), json.dumps(speakers), length=64),
        room=channel,
        content_date=utc(f"{file.stem}T00:00:00"),
        metadata={"format": "slack", "channel": channel, "channel_id": channel_id},
        segments=cut,
    )


class SlackSource(Source):
    """Slack export folders. Options: ``chunk_size``, ``chunk_overlap``."""

    palace_settings = frozenset({"chunk_size", "chunk_overlap"})

    name = "slack"

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._chunking = Chunking.from_options(self.name, options)

    def scan(self, path: Path) -> Iterator[SourceEntry | Skipped]:
        path = path.expanduser()
        if not path.exists():
            raise SourceError(f"nothing to mine at {path}: no such file or directory")
        path = path.resolve()
        if not path.is_dir():
            raise SourceError(f"{path} is not a folder: unzip the Slack export and mine its folder")
        problems = Problems()
        days: list[tuple[Path, Path]] = []
        for folder in sorted(path.iterdir()):
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            if folder.is_symlink():
                problems.add(str(folder), NOT_FOLLOWED)
                continue
            for file in sorted(folder.iterdir()):
                if not _DAY.fullmatch(file.name):
                    continue
                if file.is_symlink() or not file.is_file():
                    problems.add(str(file), NOT_FOLLOWED if file.is_symlink() else "not a file")
                else:
                    days.append((folder, file))
        listed = [name for name in ("users.json", *CHANNEL_LISTS) if (path / name).is_file()]
        if not days and not listed:
            raise SourceError(
                f"{path} is not a Slack export: no users.json, channels.json or "
                "channel folders of YYYY-MM-DD.json files"
            )
        names = directory(path, problems)
        if not days:
            problems.add(str(path), "empty Slack export: no channel messages")
        yield from reported(self._entries(days, names, problems), problems)

    def _entries(
        self, days: list[tuple[Path, Path]], names: Directory, problems: Problems
    ) -> Iterator[SourceEntry]:
        chunking = self._chunking
        for folder, file in days:
            channel = folder.name

            def read(file: Path = file, channel: str = channel) -> SourceDocument:
                return read_day(
                    file, channel=channel, names=names, chunking=chunking, problems=problems
                )

            yield SourceEntry(
                key=f"slack:{channel}/{file.name}",
                location=str(file),
                mtime=file.stat().st_mtime,
                read=read,
            )


@hookimpl(trylast=True)
def palace_register_sources(register: Register) -> None:
    register("slack", SlackSource)
