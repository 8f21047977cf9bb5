"""What the conversation sources share: turns, exchanges, and the segments cut from them.

Every conversation source (``claude-code``, ``chatgpt``, ``slack``, ``text``) turns its
input into :class:`Turn` items and hands them to :func:`segments`, so that all of them
chunk, render and describe a conversation the same way:

- **Exchanges.** :func:`exchanges` groups turns into exchanges: a user turn with the
  replies that follow it, up to the next user turn. Consecutive user turns stay in one
  exchange (a question sent in two messages). When no turn has the ``user`` role (two
  people talking, as in LoCoMo), the speaker of the first turn plays the user.
  :func:`packed` instead packs turns into runs of bounded size, cut at long pauses (Slack
  chatter outside threads, where nobody is "the user").
- **Rendering.** :func:`render` writes a group as ``speaker: text`` blocks separated by
  blank lines; a speaker's follow-up turns and tool notes go on the next lines without
  repeating the label.
- **Segments.** Each exchange becomes one :class:`~palace_retrievers.sources.Segment`;
  one longer than ``chunk_size`` characters is cut with the palace's own chunker into
  parts that carry the same metadata plus ``part`` and ``parts``.
- **Turns between people.** When no turn has the ``user`` role (people talking, nobody
  asking an assistant), :func:`conversation_segments` makes each *turn* a segment
  instead (:func:`turn_segments`): the exchange there is only the first speaker's turns
  and the replies to them, and one drawer for two people's words blends them into one
  vector and hides whose they are. Each turn keeps its exchange's index (``exchange``),
  so the exchange is still the drawers of its session with that index, in order.
- **Metadata.** Every segment carries ``session``, ``speakers`` (in order of first word),
  ``message_ids`` (the source's own ids), ``exchange`` (its index in the session) and,
  when the source knows them, ``time_start`` and ``time_end`` as ISO-8601 strings in UTC;
  the segment's ``content_date`` is the time of its first timed turn. A turn's segment
  also names its ``speaker`` (what the search's speaker stage reads), and its text opens
  with the day it was said on a line of its own (``[8 May 2023]``), when known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from palace_retrievers.config import ChunkingConfig
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError, SourceError
from palace_retrievers.ingest.chunking import chunk_text
from palace_retrievers.sources import Segment, Source

USER = "user"
ASSISTANT = "assistant"
TOOL = "tool"
OTHER = "other"

#: Options every conversation source takes: how long an exchange may be before it is cut.
OPTIONS = {"chunk_size", "chunk_overlap"}
NOTE_CHARS = 200
"""Longest tool note, in characters (longer ones are cut and end with ``…``)."""

_MILLISECONDS = 1e11  # an epoch number above this is in milliseconds (year 5138 in s)


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a conversation.

    Attributes:
        speaker: Who spoke, as the source names them (``user``, ``assistant``, ``Alice``).
        text: What they said (already cleaned of the source's noise).
        role: ``user`` opens an exchange; ``assistant``, ``tool`` (a tool's note, shown
            without a label) and ``other`` continue one.
        time: When it was said, timezone-aware in UTC, if known.
        id: The source's own id of the message, if any.
        line_start: First line of the message in its file (1-based), if known.
        line_end: Last line of the message in its file, if known.
    """

    speaker: str
    text: str
    role: str = OTHER
    time: datetime | None = None
    id: str | None = None
    line_start: int | None = None
    line_end: int | None = None


@dataclass(frozen=True, slots=True)
class Chunking:
    """How long a rendered exchange may be, and the overlap of its parts when cut."""

    size: int
    overlap: int

    @classmethod
    def from_options(cls, name: str, options: Mapping[str, Any]) -> Chunking:
        """The ``chunk_size``/``chunk_overlap`` options, defaulting to the palace's chunking.

        Raises:
            ConfigError: an unknown option, or sizes the palace would refuse.
        """
        options_check("source", name, options, OPTIONS)
        defaults = ChunkingConfig()
        size = options.get("chunk_size", defaults.size)
        overlap = options.get("chunk_overlap", defaults.overlap)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (size, overlap)):
            raise ConfigError(
                f"source {name!r}: chunk_size and chunk_overlap must be integers, "
                f"not {size!r} and {overlap!r}"
            )
        checked = ChunkingConfig(size=size, overlap=overlap)
        return cls(checked.size, checked.overlap)


class ConversationSource(Source):
    """What the conversation sources share: their options, ``chunk_size`` and
    ``chunk_overlap`` (the palace's own chunking by default), as :attr:`_chunking`."""

    palace_settings = frozenset({"chunk_size", "chunk_overlap"})
    #: The name the source is registered as, for its messages.
    name: ClassVar[str]

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._chunking = Chunking.from_options(self.name, options)


def mining_root(path: Path) -> Path:
    """``path``, ``~`` expanded, resolved: where a scan starts.

    Raises:
        SourceError: there is nothing at ``path``.
    """
    path = path.expanduser()
    if not path.exists():
        raise SourceError(f"nothing to mine at {path}: no such file or directory")
    return path.resolve()


def exchanges(turns: Iterable[Turn]) -> list[list[Turn]]:
    """``turns`` grouped into exchanges (see the module docstring)."""
    turns = list(turns)
    if not turns:
        return []
    if any(t.role == USER for t in turns):

        def opens(turn: Turn) -> bool:
            return turn.role == USER
    else:
        first = turns[0].speaker

        def opens(turn: Turn) -> bool:
            return turn.speaker == first

    groups: list[list[Turn]] = []
    for turn in turns:
        if groups and not (opens(turn) and any(not opens(t) for t in groups[-1])):
            groups[-1].append(turn)
        else:
            groups.append([turn])
    return groups


def packed(turns: Iterable[Turn], size: int, gap: timedelta | None = None) -> list[list[Turn]]:
    """``turns`` in runs whose rendering stays within ``size`` characters where it can.

    With ``gap``, a pause longer than ``gap`` between two timed turns starts a new run.
    """
    groups: list[list[Turn]] = []
    length = 0
    for turn in turns:
        grown = length + len(turn.speaker) + len(turn.text) + 4
        last = groups[-1][-1] if groups else None
        paused = (
            gap is not None
            and last is not None
            and last.time is not None
            and turn.time is not None
            and turn.time - last.time > gap
        )
        if groups and grown <= size and not paused:
            groups[-1].append(turn)
            length = grown
        else:
            groups.append([turn])
            length = len(turn.speaker) + len(turn.text) + 2
    return groups


def render(turns: Sequence[Turn]) -> str:
    """``speaker: text`` blocks; follow-ups of the same speaker and tool notes unlabelled."""
    out: list[str] = []
    speaker: str | None = None
    for turn in turns:
        if turn.role == TOOL or turn.speaker == speaker:
            out.append("\n" + turn.text if out else turn.text)
            continue
        out.append(("\n\n" if out else "") + f"{turn.speaker}: {turn.text}")
        speaker = turn.speaker
    return "".join(out)


def note(label: str, text: str) -> str:
    """``[label] text`` on one line (white space collapsed), cut to :data:`NOTE_CHARS`."""
    line = f"[{label}] {' '.join(text.split())}"
    return line if len(line) <= NOTE_CHARS else line[: NOTE_CHARS - 1].rstrip() + "…"


def describe(group: Sequence[Turn], *, session: str, index: int) -> dict[str, Any]:
    """The metadata of one exchange (see the module docstring)."""
    times = [t.time for t in group if t.time is not None]
    meta: dict[str, Any] = {
        "session": session,
        "exchange": index,
        "speakers": list(dict.fromkeys(t.speaker for t in group if t.role != TOOL and t.speaker)),
        "message_ids": list(dict.fromkeys(t.id for t in group if t.id)),
    }
    if times:
        meta["time_start"] = iso(min(times))
        meta["time_end"] = iso(max(times))
    return meta


def segments(
    groups: Iterable[Sequence[Turn]],
    *,
    session: str,
    chunking: Chunking,
    render: Callable[[Sequence[Turn]], str] = render,
    extra: Callable[[Sequence[Turn]], Mapping[str, Any]] | None = None,
) -> tuple[Segment, ...]:
    """One segment per group (more when it is too long), described for the drawers.

    Args:
        groups: Exchanges, from :func:`exchanges` or :func:`packed`.
        session: The conversation's id, for the ``session`` metadata field.
        chunking: When and how to cut a long exchange.
        render: Text of a group (default :func:`render`).
        extra: More metadata for a group (e.g. a Slack thread's ``thread_ts``).
    """
    out: list[Segment] = []
    index = 0
    for group in groups:
        text = render(group).strip()
        if not text:
            continue
        meta = describe(group, session=session, index=index) | dict(extra(group) if extra else {})
        index += 1
        out += _cut(group, text, meta, chunking)
    return tuple(out)


def turn_segments(
    groups: Iterable[Sequence[Turn]], *, session: str, chunking: Chunking
) -> tuple[Segment, ...]:
    """One segment per turn of ``groups`` (more when it is too long), each described as
    its own turn (``speaker``, ``speakers``, ``message_ids``, times) of its exchange
    (``exchange``: the exchange's index, numbered as :func:`segments` numbers them).

    A timed turn's text opens with the day it was said, on a line of its own
    (``[8 May 2023]``, UTC): a hit shows when, and a question asking when finds it (a
    turn between people seldom says its date, the exchange around it is not there).
    """
    out: list[Segment] = []
    index = 0
    for group in groups:
        cut: list[Segment] = []
        for turn in group:
            if turn.text.strip():
                text = render([turn]).strip()
                if turn.time is not None:  # on a line of its own: the label opens the next
                    text = f"[{day(turn.time)}]\n{text}"
                meta = describe([turn], session=session, index=index) | {"speaker": turn.speaker}
                cut += _cut([turn], text, meta, chunking)
        if cut:
            index += 1
            out += cut
    return tuple(out)


def conversation_segments(
    turns: Sequence[Turn], *, session: str, chunking: Chunking
) -> tuple[Segment, ...]:
    """The segments of a conversation: its exchanges when someone in it is the user
    (:func:`segments`), its turns when nobody is (:func:`turn_segments`)."""
    if any(t.role == USER for t in turns):
        return segments(exchanges(turns), session=session, chunking=chunking)
    return turn_segments(exchanges(turns), session=session, chunking=chunking)


def _cut(
    group: Sequence[Turn], text: str, meta: dict[str, Any], chunking: Chunking
) -> list[Segment]:
    """``text``, the rendering of ``group``, as one segment, or as parts when too long."""
    lines = [t.line_start for t in group if t.line_start] + [
        t.line_end for t in group if t.line_end
    ]
    first, last = (min(lines), max(lines)) if lines else (None, None)
    date = min((t.time for t in group if t.time is not None), default=None)
    if len(text) <= chunking.size:
        return [Segment(text, first, last, date, meta)]
    parts = chunk_text(text, size=chunking.size, overlap=chunking.overlap)
    return [
        Segment(part.text, first, last, date, meta | {"part": number, "parts": len(parts)})
        for number, part in enumerate(parts, start=1)
    ]


def utc(value: Any) -> datetime | None:
    """A time from a source as an aware UTC datetime, or ``None`` when unreadable.

    Accepts epoch seconds (or milliseconds, when above 1e11) as a number or a numeric
    string (Slack's ``"1709287200.000200"``), and ISO-8601 strings; an ISO time with no
    offset is taken to be UTC.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        if _NUMBER.fullmatch(value):
            value = float(value)
        else:
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                return None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            return parsed.astimezone(UTC)
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) > _MILLISECONDS else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return None


def day(moment: datetime) -> str:
    """The UTC day of ``moment`` as people write it, in English whatever the locale:
    ``8 May 2023``."""
    moment = moment.astimezone(UTC)
    return f"{moment.day} {_MONTHS[moment.month - 1]} {moment.year}"


def iso(moment: datetime) -> str:
    """``moment`` as an ISO-8601 string in UTC."""
    return moment.astimezone(UTC).isoformat()


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
