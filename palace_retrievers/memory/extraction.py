"""Memory extraction at mine time: the plugin contract, and what every extractor needs.

A memory extractor plugin (``palace_register_memory_extractors``) registers a factory that
takes its options table (``[memory_extractors.<name>]`` in ``palace.toml``) and returns a
:class:`MemoryExtractor`. At mine time the palace hands it the new drawers of a source, a
batch at a time, through :func:`extract_memories`, and remembers each :class:`Candidate`
it returns (``origin="extracted"``, pointing at ``source_ids``) the way
:meth:`~palace_retrievers.Palace.remember` does: deduplicated and superseded against the
owner's memories, its triples filed in the knowledge graph.

Built-ins: ``rules`` (the default; patterns, English and Chinese, no model) and ``llm``
(any LangChain chat model and a documented prompt).

Extractors read what people said, not what they pasted: :func:`turns` cuts a
conversation drawer into its speakers' turns (as the conversation sources render them,
``speaker: text``), :func:`user_speaker` tells whose turns are the user's, and
:func:`is_code` keeps code drawers and code blocks out.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import PurePosixPath

from palace_retrievers.errors import PluginError
from palace_retrievers.memory.wording import words
from palace_retrievers.records import Drawer

log = logging.getLogger(__name__)

#: The kinds a candidate may have: the memory kinds (``memories.MEMORY_KINDS``).
KINDS = ("fact", "preference", "decision", "summary", "event")
#: ``(subject, predicate, object, valid_from)``: a fact for the knowledge graph.
TripleSpec = tuple[str, str, str, datetime | None]

#: Speaker names (case-insensitive) whose turns are the user's.
USER_NAMES = frozenset({"user", "human", "me", "you"})
#: Speaker names (case-insensitive) of assistants, whose turns are never extracted.
ASSISTANT_NAMES = frozenset(
    {"assistant", "ai", "bot", "system", "claude", "chatgpt", "gpt", "model", "tool"}
)
#: File suffixes of code: a drawer from such a file is never extracted from.
CODE_SUFFIXES = frozenset(
    words(
        ".py .pyi .js .jsx .ts .tsx .mjs .cjs .java .kt .kts .scala .go .rs .c .h .cc .cpp .hpp "
        ".cs .rb .php .swift .m .mm .sh .bash .zsh .fish .ps1 .bat .sql .r .jl .lua .pl .pm .hs "
        ".ml .ex .exs .erl .clj .dart .vue .svelte .css .scss .less .html .xml .json .yaml .yml "
        ".toml .ini .cfg .lock .gradle .cmake .mk .dockerfile .tf .proto .ipynb"
    )
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|if .*:\s*$|for .*:\s*$|"
    r"(?:const|let|var|function|public|private|static|fn|func|package|#include)\b)"
    r"|[;{}]\s*$|^\s*[}\])]\s*$|^\s*(?:\$|>>>) "
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory an extractor found, before the palace remembers it.

    Attributes:
        text: The statement, short and self-contained ("We use PostgreSQL for the orders
            database").
        kind: One of ``fact``, ``preference``, ``decision``, ``summary``, ``event``.
        importance: 0 to 1 (an explicit "remember that ..." is 1.0).
        source_ids: The drawers it was found in (a subset of those given).
        slot: ``subject|predicate`` when it sets a single-valued fact
            (:func:`palace_retrievers.memory.learned.structural.slot_of`), else ``None``.
        content_date: When it was said, if known (the drawer's date).
        triples: Facts for the knowledge graph, ``(subject, predicate, object,
            valid_from)``; single-valued predicates close the previous value.
    """

    text: str
    kind: str = "fact"
    importance: float = 0.5
    source_ids: tuple[str, ...] = ()
    slot: str | None = None
    content_date: datetime | None = None
    triples: tuple[TripleSpec, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise PluginError("a memory candidate needs a non-empty text")
        if self.kind not in KINDS:
            raise PluginError(f"unknown memory kind {self.kind!r}; kinds are: {', '.join(KINDS)}")
        if (
            isinstance(self.importance, bool)
            or not isinstance(self.importance, int | float)
            or not 0.0 <= self.importance <= 1.0
        ):
            raise PluginError(
                f"a candidate's importance must be in [0, 1], not {self.importance!r}"
            )
        for triple in self.triples:
            if len(triple) != 4 or not all(isinstance(p, str) and p.strip() for p in triple[:3]):
                raise PluginError(
                    f"a triple is (subject, predicate, object, valid_from): {triple!r}"
                )


class MemoryExtractor(ABC):
    """Finds memories in drawers (consecutive drawers of one source)."""

    @abstractmethod
    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        """The candidates found in ``drawers``, each pointing at the drawers it came from."""


def extract_memories(
    drawers: Sequence[Drawer], *, extractor: MemoryExtractor, extractor_name: str
) -> list[Candidate]:
    """Run ``extractor`` on ``drawers`` and check what it returns.

    Candidates with the same text are merged (their sources joined, the higher importance
    kept); drawers of several owners are handed over one owner at a time.

    Raises:
        PluginError: the extractor raised, returned something else than candidates, or
            pointed at drawers it was not given.
    """
    out: dict[tuple[str, str], Candidate] = {}
    groups: dict[str, list[Drawer]] = {}
    for drawer in drawers:
        groups.setdefault(drawer.user_id or "", []).append(drawer)
    for group in groups.values():
        given = {d.id for d in group}
        try:
            found = extractor.extract(drawers=group)
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"memory extractor {extractor_name!r} raised: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(found, list) or not all(isinstance(c, Candidate) for c in found):
            raise PluginError(f"memory extractor {extractor_name!r} did not return Candidates")
        for candidate in found:
            if not set(candidate.source_ids) <= given:
                raise PluginError(
                    f"memory extractor {extractor_name!r} pointed to drawers it was not given"
                )
            key = (group[0].user_id or "", " ".join(candidate.text.split()).casefold())
            seen = out.get(key)
            if seen is None:
                out[key] = candidate
            else:
                out[key] = replace(
                    seen,
                    importance=max(seen.importance, candidate.importance),
                    source_ids=tuple(dict.fromkeys([*seen.source_ids, *candidate.source_ids])),
                    triples=tuple(dict.fromkeys([*seen.triples, *candidate.triples])),
                )
    return list(out.values())


# -- what extractors share ---------------------------------------------------------------


def is_code(drawer: Drawer) -> bool:
    """A drawer of code: from a code file, or mostly lines that look like code."""
    name = str(drawer.metadata.get("file_name") or "")
    suffix = PurePosixPath(name or drawer.source).suffix.lower()
    if suffix in CODE_SUFFIXES or name.lower() in ("dockerfile", "makefile"):
        return True
    lines = [line for line in drawer.text.splitlines() if line.strip()]
    if len(lines) < 3:
        return False
    return sum(bool(_CODE_LINE.search(line)) for line in lines) / len(lines) >= 0.4


def prose(text: str) -> str:
    """``text`` without fenced code blocks, indented code, tool notes and quoted lines."""
    out: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or line.startswith(("    ", "\t")) or line.lstrip().startswith(">"):
            continue
        if re.match(r"^\s*\[[^\]]{1,60}\]", line):  # "[Bash result] ...": a tool's note
            continue
        out.append(line)
    return "\n".join(out)


def user_speaker(speakers: Iterable[str], *, users: Iterable[str] = USER_NAMES) -> set[str]:
    """The speakers (as written) whose turns are the user's.

    The user is whoever is named like one (``user``, ``human``, ``me``, or a name in
    ``users``). With nobody so named, a conversation between one person and an assistant
    makes that person the user; a conversation between people (Slack, LoCoMo) has no user.
    """
    names = [s for s in speakers if isinstance(s, str) and s.strip()]
    wanted = {u.casefold() for u in users}
    named = {s for s in names if _bare(s) in wanted}
    if named:
        return named
    people = [s for s in names if _bare(s) not in ASSISTANT_NAMES]
    has_assistant = len(people) < len(names)
    return set(people) if has_assistant and len(set(people)) == 1 else set()


def turns(drawer: Drawer) -> list[tuple[str | None, str]]:
    """``(speaker, text)`` of each turn of ``drawer``; one ``(None, text)`` for a document.

    A conversation drawer (one whose metadata lists ``speakers``) is rendered as
    ``speaker: text`` blocks; a line that opens with a known speaker's label starts that
    speaker's turn, and the lines after it (follow-ups) stay in it. Text before the first
    label (the tail of a turn cut into parts) belongs to nobody.
    """
    speakers = drawer.metadata.get("speakers")
    if not isinstance(speakers, list | tuple) or not speakers:
        return [(None, drawer.text)]
    names = sorted({s for s in speakers if isinstance(s, str) and s}, key=len, reverse=True)
    if not names:
        return [(None, drawer.text)]
    label = re.compile(
        r"^\s*\**(" + "|".join(re.escape(n) for n in names) + r")\**\s*:\s?", re.MULTILINE
    )
    out: list[tuple[str | None, str]] = []
    matches = list(label.finditer(drawer.text))
    if not matches:
        return [("?", drawer.text)]
    if matches[0].start() > 0 and drawer.text[: matches[0].start()].strip():
        out.append(("?", drawer.text[: matches[0].start()]))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(drawer.text)
        out.append((match.group(1), drawer.text[match.end() : end].strip()))
    return out


def user_texts(
    drawer: Drawer, *, users: Iterable[str] = USER_NAMES, documents: bool = True
) -> list[str]:
    """What the user wrote in ``drawer``, code left out.

    A conversation gives its user turns (none when nobody is the user, see
    :func:`user_speaker`); a document (no ``speakers``) gives its prose when
    ``documents`` is true; a code drawer gives nothing.
    """
    if is_code(drawer):
        return []
    parts = turns(drawer)
    if parts and parts[0][0] is None:
        return [prose(drawer.text)] if documents else []
    speakers = drawer.metadata.get("speakers") or []
    mine = user_speaker(speakers, users=users)
    return [prose(text) for speaker, text in parts if speaker in mine and text.strip()]


def _bare(name: str) -> str:
    return name.strip("* ").casefold()
