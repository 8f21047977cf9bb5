"""The ``llm`` closet extractor: any LangChain chat model names each run's topic and entities.

The engine does not depend on LangChain: the model is any object with
``invoke(messages)`` (every LangChain chat model, e.g. ``ChatOpenAI`` or ``ChatOllama``),
and LangChain is imported only when ``model`` is given as a string
(``"openai:gpt-4o-mini"``, through ``langchain.chat_models.init_chat_model``).

**One call per source.** The palace hands over all the runs of one source together
(``drawers_per_closet`` consecutive drawers each, see
:meth:`~palace_retrievers.closets.ClosetExtractor.extract_runs`); each run is a numbered
section of one message, its drawers' text joined and cut at ``max_chars``. A source
longer than ``max_chars`` is sent in several calls, whole sections each. Blank runs are
not sent. The sources of a batch are asked ``concurrency`` at a time (threads). The
messages are ``[("system", PROMPT), ("human", sections)]`` with this prompt (override it
with the ``prompt`` option):

.. code-block:: text

{prompt}

**Structured output.** The answer is asked for with LangChain's
``model.with_structured_output(SCHEMA, include_raw=True)`` (a JSON schema: a list of
``{{"section", "topic", "entities"}}``). A model that has no structured output (no tool
calling, or not a LangChain model) is asked with plain ``invoke`` and its answer read as
JSON, as the ``llm`` memory extractor reads it (code fences and prose ignored, a bare list
accepted); so is a structured call whose parsed answer is missing. Turn structured
output off with ``structured = false``. Each item is cleaned: the topic cut to 120
characters, entities that are not text or are longer than 100 characters dropped,
repeats (case-insensitive) dropped, ``max_entities`` kept.

**Cache.** Each section's answer is kept in the palace's answer cache (``answers.sqlite``
in the palace's folder, see :mod:`palace_retrievers.facade.answers`), per owner, under a
hash of the model's identity (its class and identifying parameters, or the
``provider:model`` string), the prompt and the section's text: a re-mine, a re-filing by
``add_texts`` or an edit elsewhere in the source asks nothing again for a section whose
text is unchanged. ``cache = false`` turns it off; built outside a palace (in a test) the
extractor keeps nothing.

**Bad answers.** A model that raises, an answer that is not of the asked shape, or a
section the answer leaves out or numbers wrongly gives that section no answer. With
``fallback = "regex"`` (the default) such a section gets the ``regex`` extractor's
closet, which is not cached, so the next filing asks the model again; with
``fallback = ""`` the extractor raises :class:`~palace_retrievers.errors.ModelAnswerError`
and the palace files the batch's drawers without closets (logged). Either way every
drawer is filed: closets are a signal, never a gate.

Options (``[extractors.llm]``, or a dict in code): ``model`` (required: a chat model or a
``provider:model`` string), ``prompt``, ``max_chars`` (section text per call, default
12000), ``max_entities`` (kept per closet, default 20), ``structured`` (default true),
``fallback`` (``"regex"`` or ``""``), ``cache`` (false: keep nothing), ``concurrency``
(sources asked at once, default 4; 1 asks one after the other).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from palace_plugins.builtin.extractors.llm_memories import load_model, parse_json
from palace_plugins.builtin.extractors.regex_closets import RegexClosetExtractor
from palace_retrievers.closets import AnswerCache, ClosetEntry, ClosetExtractor
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError, ModelAnswerError
from palace_retrievers.ids import digest
from palace_retrievers.records import Drawer

log = logging.getLogger(__name__)

WHO = "the llm closet extractor"
OPTIONS = {
    "model",
    "prompt",
    "max_chars",
    "max_entities",
    "structured",
    "fallback",
    "cache",
    "concurrency",
}
#: The cache's namespace; a new value makes every kept answer stale (asked again).
NAMESPACE = "closets:llm:1"

PROMPT = """\
You index a person's notes, documents and conversations so that a search finds them again.
The text below comes from one source, cut into numbered sections [n], each a run of
consecutive passages. For every section give:
- topic: what the section is about, in a few words (at most eight), in its own language;
- entities: what someone might search for, copied as the section writes it: people,
  places, organisations, products and projects, dates and times, numbers with their
  unit, quoted titles, and the key actions ("moved the backups to S3"); the most telling
  first, each once, at most 20; no pronouns, no generic words.
Give one item per section, with its number. A section with nothing worth indexing gets
an empty topic and no entities. Never add what the section does not say.

Answer with JSON only, in this shape:
{"closets": [{"section": 1, "topic": "release planning",
  "entities": ["Alice Moreau", "12 March 2026", "Larkspur 2.0"]}]}"""

#: The structured answer asked for (a JSON schema, so that no pydantic model is needed).
SCHEMA: dict[str, Any] = {
    "title": "closets",
    "description": "The topic and entities of each numbered section.",
    "type": "object",
    "properties": {
        "closets": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "section": {"type": "integer", "description": "the section's number [n]"},
                    "topic": {"type": "string", "description": "a few words"},
                    "entities": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["section", "topic", "entities"],
            },
        }
    },
    "required": ["closets"],
}

__doc__ = (__doc__ or "").format(prompt="\n".join("    " + line for line in PROMPT.splitlines()))

_MAX_TOPIC = 120
_MAX_ENTITY = 100
_KEPT_ENTITIES = 100  # kept in the cache, whatever max_entities says

#: What the model said about one section: its topic and entities.
Answer = tuple[str, tuple[str, ...]]


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(
            f"closet extractor 'llm': {name} must be a whole number in [{low}, {high}]"
        )
    return value


def model_identity(model: Any, spec: Any) -> str:
    """What names the model in the cache's keys: the ``provider:model`` string it was
    given as, else its class, its ``model_name``/``model``/``model_id`` and LangChain's
    identifying parameters (model, temperature and the like)."""
    if isinstance(spec, str):
        return spec.strip()
    names = [getattr(model, a, None) for a in ("model_name", "model", "model_id")]
    params = getattr(model, "_identifying_params", None)
    try:
        shown = json.dumps(
            {"names": [str(n) for n in names if n], "params": dict(params or {})},
            sort_keys=True,
            default=str,
        )
    except (TypeError, ValueError):
        shown = ""
    return f"{type(model).__module__}.{type(model).__qualname__}{shown}"


def clean(item: Mapping[str, Any]) -> Answer:
    """The topic and entities of one answered item, cleaned (see the module docstring)."""
    topic = item.get("topic")
    topic = " ".join(topic.split())[:_MAX_TOPIC] if isinstance(topic, str) else ""
    entities = item.get("entities")
    out: list[str] = []
    seen: set[str] = set()
    for entity in entities if isinstance(entities, list) else []:
        if not isinstance(entity, str):
            continue
        entity = " ".join(entity.split())
        if entity and len(entity) <= _MAX_ENTITY and entity.casefold() not in seen:
            seen.add(entity.casefold())
            out.append(entity)
    return topic, tuple(out[:_KEPT_ENTITIES])


def _kept(text: str) -> Answer | None:
    """A cached answer, or ``None`` when the cache holds something else."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return clean(data) if isinstance(data, dict) else None


class LLMClosetExtractor(ClosetExtractor):
    """Closets named by a chat model, one call per source, cached (see the module docstring)."""

    palace_settings = frozenset({"cache"})

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options_check("closet extractor", "llm", options, OPTIONS)
        spec = options.get("model")
        self.model = load_model(spec, "closet extractor 'llm'")
        self.prompt = str(options.get("prompt") or PROMPT)
        self.max_chars = _whole(options.get("max_chars", 12_000), "max_chars", 200, 10_000_000)
        self.max_entities = _whole(options.get("max_entities", 20), "max_entities", 1, 100)
        self.concurrency = _whole(options.get("concurrency", 4), "concurrency", 1, 64)
        structured = options.get("structured", True)
        fallback = options.get("fallback", "regex")
        cache = options.get("cache")
        if not isinstance(structured, bool):
            raise ConfigError("closet extractor 'llm': structured must be true or false")
        if fallback not in ("regex", ""):
            raise ConfigError('closet extractor \'llm\': fallback must be "regex" or ""')
        if cache is True or cache is False:
            cache = None  # true: the palace's, which a palace gives; false: none
        if cache is not None and not (hasattr(cache, "get") and hasattr(cache, "put")):
            raise ConfigError("closet extractor 'llm': cache must be false or an AnswerCache")
        self.cache: AnswerCache | None = cache
        self.fallback = RegexClosetExtractor() if fallback else None
        self.structured = self._structured() if structured else None
        self._identity = model_identity(self.model, spec)

    def _structured(self) -> Any | None:
        """The model asked for :data:`SCHEMA`, or ``None`` when it has no structured output."""
        try:
            return self.model.with_structured_output(SCHEMA, include_raw=True)
        except (AttributeError, NotImplementedError, TypeError, ValueError):
            return None

    # -- the contract ---------------------------------------------------------------------

    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        return self.extract_runs(runs=[drawers])[0] if drawers else []

    def extract_runs(self, *, runs: Sequence[Sequence[Drawer]]) -> list[list[ClosetEntry]]:
        texts = ["\n".join(d.text for d in run).strip()[: self.max_chars] for run in runs]
        todo = [i for i, text in enumerate(texts) if text and runs[i]]
        keys = {i: self._key(texts[i]) for i in todo}
        answers = self._cached(runs, todo, keys)
        asked = [i for i in todo if i not in answers]
        reasons: list[str] = []
        for call in self._calls(asked, texts):
            got, reason = self._ask([texts[i] for i in call])
            fresh: dict[int, Answer] = {}
            for number, i in enumerate(call, start=1):
                if number in got:
                    answers[i] = fresh[i] = got[number]
            if len(fresh) < len(call):
                reasons.append(reason or f"{len(call) - len(fresh)} sections left out")
            self._keep(runs, keys, fresh)
        missing = [i for i in asked if i not in answers]
        if missing:
            where = runs[missing[0]][0].source
            if self.fallback is None:
                raise ModelAnswerError(
                    f"{WHO} got no usable answer for {len(missing)} of {len(runs)} runs of "
                    f"{where!r} ({'; '.join(reasons)}); check the model, or set "
                    '[extractors.llm] fallback = "regex" to file the regex closets instead'
                )
            log.warning(
                "%s got no usable answer for %d of %d runs of %r (%s); they get the regex "
                "extractor's closets, and are asked again next time",
                WHO,
                len(missing),
                len(runs),
                where,
                "; ".join(reasons),
            )
        out: list[list[ClosetEntry]] = [[] for _ in runs]
        for i in todo:
            if i in answers:
                topic, entities = answers[i]
                if topic or entities:
                    ids = tuple(d.id for d in runs[i])
                    out[i] = [ClosetEntry(topic, entities[: self.max_entities], ids)]
            elif self.fallback is not None:
                out[i] = self.fallback.extract(drawers=runs[i])
        return out

    # -- the cache ------------------------------------------------------------------------

    def _key(self, text: str) -> str:
        """The cache key of a section: the model, the prompt and the section's text."""
        return digest(NAMESPACE, self._identity, self.prompt, text, length=64)

    def _cached(
        self, runs: Sequence[Sequence[Drawer]], todo: list[int], keys: dict[int, str]
    ) -> dict[int, Answer]:
        """The answers the cache holds for the sections ``todo``."""
        found: dict[int, Answer] = {}
        if self.cache is None:
            return found
        by_owner: dict[str, list[int]] = {}
        for i in todo:
            by_owner.setdefault(runs[i][0].user_id or "", []).append(i)
        for owner, sections in by_owner.items():
            kept = self.cache.get(NAMESPACE, owner, [keys[i] for i in sections])
            for i in sections:
                answer = _kept(kept[keys[i]]) if keys[i] in kept else None
                if answer is not None:
                    found[i] = answer
        return found

    def _keep(
        self, runs: Sequence[Sequence[Drawer]], keys: dict[int, str], fresh: dict[int, Answer]
    ) -> None:
        """Keep the answers just given, per owner."""
        if self.cache is None or not fresh:
            return
        by_owner: dict[str, dict[str, str]] = {}
        for i, (topic, entities) in fresh.items():
            text = json.dumps({"topic": topic, "entities": list(entities)}, ensure_ascii=False)
            by_owner.setdefault(runs[i][0].user_id or "", {})[keys[i]] = text
        for owner, answers in by_owner.items():
            self.cache.put(NAMESPACE, owner, answers)

    # -- the model ------------------------------------------------------------------------

    def _calls(self, asked: list[int], texts: list[str]) -> Iterator[list[int]]:
        """The sections ``asked``, packed into calls of at most ``max_chars`` of text."""
        call: list[int] = []
        size = 0
        for i in asked:
            if call and size + len(texts[i]) > self.max_chars:
                yield call
                call, size = [], 0
            call.append(i)
            size += len(texts[i])
        if call:
            yield call

    def _ask(self, sections: list[str]) -> tuple[dict[int, Answer], str]:
        """The model's answer for each section number (1-based), and why some are missing."""
        body = "\n\n".join(f"[{n}]\n{text}" for n, text in enumerate(sections, start=1))
        messages = [("system", self.prompt), ("human", f"Sections:\n\n{body}")]
        try:
            if self.structured is not None:
                items = self._read_structured(self.structured.invoke(messages))
            else:
                answer = self.model.invoke(messages)
                items = parse_json(getattr(answer, "content", answer), "closets", WHO)
        except Exception as exc:  # a failing model costs its sections, never the mine
            return {}, f"the model failed: {type(exc).__name__}: {exc}"
        if items is None:
            return {}, "the answer is not of the asked shape"
        got: dict[int, Answer] = {}
        for item in items:
            number = item.get("section")
            if isinstance(number, bool) or not isinstance(number, int):
                continue
            if 1 <= number <= len(sections) and number not in got:
                got[number] = clean(item)
        return got, "" if len(got) == len(sections) else "the answer left sections out"

    def _read_structured(self, result: Any) -> list[dict[str, Any]] | None:
        """The items of a structured call's result (``raw``, ``parsed``, ``parsing_error``);
        the raw message read as JSON when nothing was parsed."""
        if not isinstance(result, Mapping):
            return parse_json(result, "closets", WHO)
        parsed = result.get("parsed")
        if isinstance(parsed, Mapping) and isinstance(parsed.get("closets"), list):
            return [item for item in parsed["closets"] if isinstance(item, dict)]
        raw = result.get("raw")
        content = getattr(raw, "content", None)
        if content:
            return parse_json(content, "closets", WHO)
        log.warning("%s's structured answer did not parse: %s", WHO, result.get("parsing_error"))
        return None
