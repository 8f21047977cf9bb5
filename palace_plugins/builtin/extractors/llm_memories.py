"""The ``llm`` memory extractor: any LangChain chat model reads the drawers and answers JSON.

The engine does not depend on LangChain: the model is any object with
``invoke(messages)`` returning a message with ``.content`` (every LangChain chat model,
e.g. ``ChatOpenAI``, ``ChatOllama``, or ``FakeListChatModel`` in tests), and LangChain is
imported only when ``model`` is given as a string (``"openai:gpt-4o-mini"``, through
``langchain.chat_models.init_chat_model``).

Code drawers are never sent. The other drawers of a batch are numbered passages, with the
speakers' labels kept so that the model can tell the user from the assistant; a batch
longer than ``max_chars`` is sent in several calls. The messages are ``[("system",
PROMPT), ("human", passages)]`` with this prompt (override it with the ``prompt`` option):

.. code-block:: text

{prompt}

The answer is parsed defensively: code fences and prose around the JSON are ignored, a
bare list is accepted for ``{{"memories": [...]}}``, an item that is not an object with a
``text`` is skipped, an unknown ``kind`` becomes ``fact``, ``importance`` is clipped to
[0, 1], ``source`` must name a passage (otherwise the memory points at every drawer of the
call). An answer that is not JSON at all, or a model that raises, is logged and gives no
candidates: mining goes on.

Options (``[memory_extractors.llm]``, or a dict in code): ``model`` (required: a chat model
or a ``provider:model`` string), ``prompt``, ``importance`` (default when the model gives
none, 0.6), ``max_chars`` (passage text per call, default 12000), ``max_memories`` (kept
per call, default 20), ``users`` (speaker names that are the user).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.extraction import (
    KINDS,
    Candidate,
    MemoryExtractor,
    TripleSpec,
    is_code,
    prose,
    user_speaker,
)
from palace_retrievers.memory.slots import slot_of
from palace_retrievers.records import Drawer

log = logging.getLogger(__name__)

OPTIONS = {"model", "prompt", "importance", "max_chars", "max_memories", "users"}

PROMPT = """\
You extract long-term memories from conversations for a personal assistant.

A memory is one short, self-contained statement that the USER made about themselves,
their work or their plans, and that will still matter in a later conversation: a fact
(where they live or work, what their team uses), a preference, a decision, or an event or
deadline with its date. Rules:
- Only what the user says. Never the assistant's words, never code, never questions,
  hypotheticals, greetings or small talk.
- One statement per memory, in the user's own language and words ("I live in Porto",
  "我们用PostgreSQL做订单数据库"); resolve "it"/"that" so the memory stands alone.
- kind is one of: fact, preference, decision, event, summary.
- importance is 0 to 1: 1.0 when the user asks you to remember it, 0.9 for decisions,
  0.8 for preferences, 0.6 for other facts and events.
- source is the number of the passage [n] the memory comes from.
- triple is [subject, predicate, object] only for a fact that holds one value at a time,
  with subject "user" for the user and a snake_case predicate such as lives_in,
  works_at, works_as, uses_tool, favourite_<thing> or current_<thing>; otherwise null.
- If nothing qualifies, return an empty list.

Answer with JSON only, no prose, in this shape:
{"memories": [{"text": "...", "kind": "fact", "importance": 0.6, "source": 1,
  "triple": ["user", "lives_in", "Porto"]}]}"""

__doc__ = (__doc__ or "").format(prompt="\n".join("    " + line for line in PROMPT.splitlines()))

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_MAX_TEXT = 500


def load_model(spec: Any, who: str = "memory extractor 'llm'") -> Any:
    """The chat model an option names: an object with ``invoke``, or a LangChain model id
    (``who`` names the plugin in errors).

    Raises:
        ConfigError: neither, or a name without LangChain installed.
    """
    if hasattr(spec, "invoke"):
        return spec
    if isinstance(spec, str) and spec.strip():
        try:
            from langchain.chat_models import init_chat_model  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise ConfigError(
                f"{who}: a model given by name needs the 'langchain' package; "
                "install it, or pass a chat model object as the 'model' option"
            ) from None
        return init_chat_model(spec)
    raise ConfigError(
        f"{who} needs a 'model' option: a LangChain chat model (any object "
        "with .invoke(messages)) or a 'provider:model' string"
    )


def _number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(f"memory extractor 'llm': {name} must be in [{low}, {high}]")
    return float(value)


def passage(drawer: Drawer, users: set[str]) -> str:
    """One drawer as the model reads it: prose only, the user's turns marked as the user's."""
    speakers = drawer.metadata.get("speakers")
    text = prose(drawer.text).strip()
    if isinstance(speakers, list | tuple) and speakers:
        mine = user_speaker(speakers, users=users)
        marked = ", ".join(sorted(mine)) or "nobody"
        text = f"(speakers: {', '.join(map(str, speakers))}; the user is: {marked})\n{text}"
    date = drawer.content_date.date().isoformat() if drawer.content_date else "date unknown"
    return f"({date}) {text}"


def parse_json(content: Any, key: str, who: str) -> list[dict[str, Any]] | None:
    """The objects of a model's JSON answer: ``{key: [...]}`` or a bare list; ``None``
    (and a log line naming ``who``) when the answer holds no such JSON."""
    if isinstance(content, list):  # content blocks: keep the text ones
        content = "".join(
            b if isinstance(b, str) else str(b.get("text", "")) if isinstance(b, dict) else ""
            for b in content
        )
    if not isinstance(content, str):
        log.warning("%s got a %s, not text", who, type(content).__name__)
        return None
    fenced = _FENCE.search(content)
    text = fenced.group(1) if fenced else content
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        log.warning("%s's answer has no JSON: %.200r", who, content)
        return None
    start = min(starts)
    end = text.rfind("}" if text[start] == "{" else "]")
    try:
        data = json.loads(text[start : end + 1])
    except (json.JSONDecodeError, ValueError) as exc:
        log.warning("%s's answer is not valid JSON (%s): %.200r", who, exc, content)
        return None
    items = data.get(key) if isinstance(data, dict) else data
    if not isinstance(items, list):
        log.warning("%s's answer has no list of %s: %.200r", who, key, content)
        return None
    return [item for item in items if isinstance(item, dict)]


def parse_answer(content: Any) -> list[dict[str, Any]]:
    """The memory items of a model's answer; ``[]`` (and a log line) when it is not JSON."""
    return parse_json(content, "memories", "the llm memory extractor") or []


class LLMMemoryExtractor(MemoryExtractor):
    """Memories read by a chat model (see the module docstring)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options_check("memory extractor", "llm", options, OPTIONS)
        self.model = load_model(options.get("model"))
        self.prompt = str(options.get("prompt") or PROMPT)
        self.importance = _number(options.get("importance", 0.6), "importance", 0.0, 1.0)
        self.max_chars = int(_number(options.get("max_chars", 12_000), "max_chars", 200, 1e7))
        self.max_memories = int(_number(options.get("max_memories", 20), "max_memories", 1, 1e4))
        users = options.get("users", [])
        if isinstance(users, str) or not all(isinstance(u, str) for u in users):
            raise ConfigError("memory extractor 'llm': users must be a list of names")
        self.users = {"user", "human", "me", "you"} | {u.casefold() for u in users}

    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        batch: list[tuple[Drawer, str]] = []
        size = 0
        out: list[Candidate] = []
        for drawer in drawers:
            if is_code(drawer):
                continue
            text = passage(drawer, self.users)[: self.max_chars]
            if batch and size + len(text) > self.max_chars:
                out += self._call(batch)
                batch, size = [], 0
            batch.append((drawer, text))
            size += len(text)
        if batch:
            out += self._call(batch)
        return out

    def _call(self, batch: list[tuple[Drawer, str]]) -> list[Candidate]:
        passages = "\n\n".join(f"[{n}] {text}" for n, (_, text) in enumerate(batch, start=1))
        messages = [("system", self.prompt), ("human", f"Passages:\n\n{passages}")]
        try:
            answer = self.model.invoke(messages)
        except Exception as exc:  # a model that fails gives no memories; mining goes on
            log.warning("the llm memory extractor's model failed: %s: %s", type(exc).__name__, exc)
            return []
        out: list[Candidate] = []
        for item in parse_answer(getattr(answer, "content", answer))[: self.max_memories]:
            candidate = self._candidate(item, batch)
            if candidate is not None:
                out.append(candidate)
        return out

    def _candidate(
        self, item: Mapping[str, Any], batch: list[tuple[Drawer, str]]
    ) -> Candidate | None:
        text = item.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > _MAX_TEXT:
            log.info("the llm memory extractor skipped an item without a usable text: %r", item)
            return None
        text = " ".join(text.split())
        kind = item.get("kind") if item.get("kind") in KINDS else "fact"
        importance = item.get("importance", self.importance)
        if isinstance(importance, bool) or not isinstance(importance, int | float):
            importance = self.importance
        source = item.get("source")
        drawers = (
            [batch[source - 1][0]]
            if isinstance(source, int)
            and not isinstance(source, bool)
            and 1 <= source <= len(batch)
            else [d for d, _ in batch]
        )
        date = drawers[0].content_date
        triples: tuple[TripleSpec, ...] = ()
        triple = item.get("triple")
        if (
            isinstance(triple, list | tuple)
            and len(triple) == 3
            and all(isinstance(p, str) and p.strip() for p in triple)
        ):
            triples = ((triple[0].strip(), triple[1].strip(), triple[2].strip(), date),)
        return Candidate(
            text=text,
            kind=str(kind),
            importance=min(max(float(importance), 0.0), 1.0),
            source_ids=tuple(d.id for d in drawers),
            slot=slot_of(text),
            content_date=date,
            triples=triples,
        )
