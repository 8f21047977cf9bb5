"""The ``llm`` closet extractor, with a FAKE, deterministic chat model.

:class:`SectionReader` is a LangChain ``BaseChatModel`` that knows nothing of language:
it reads the numbered sections it is sent and answers, for each, the capitalised words,
numbers and Chinese runs as entities and the first words as the topic. It implements
``bind_tools``, so LangChain's own ``with_structured_output`` runs on it (its answer is
a tool call); without tools bound it answers JSON text. It records every call. It exists
to test the extractor's logic (batching, structured output, the cache, bad answers), not
what a real model would find.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from palace_plugins.builtin.extractors.llm_closets import PROMPT, SCHEMA, LLMClosetExtractor
from palace_plugins.manager import PluginManager
from palace_plugins.testing import ClosetExtractorTests
from palace_plugins.testing.closets import SAMPLES, ClosetExtractorFactory, drawers
from palace_retrievers import Palace
from palace_retrievers.closets import ClosetEntry, build_closets
from palace_retrievers.errors import ConfigError, ModelAnswerError, PluginError
from palace_retrievers.facade.answers import ANSWERS_FILE, Answers

_SECTION = re.compile(r"^\[(\d+)\]\n", re.MULTILINE)
_WORD = re.compile(r"[\u4e00-\u9fff]{2,6}|\w[\w'-]*")


def _read(text: str) -> dict[str, Any]:
    """What the FAKE model says about one section."""
    words = _WORD.findall(text)
    entities = [w for w in words if w[0].isupper() or w[0].isdigit() or w[0] >= "\u4e00"]
    return {"topic": " ".join(words[:3]), "entities": entities[:30]}


class SectionReader(BaseChatModel):
    """A FAKE chat model for the extractor's logic (see the module docstring)."""

    calls: list[str] = Field(default_factory=list)
    tools_seen: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-section-reader"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"reads": "sections"}  # not the calls it recorded: they name no model

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Any:
        names = [convert_to_openai_tool(tool)["function"]["name"] for tool in tools]
        return self.bind(tool_names=names, **kwargs)

    def answer(self, human: str) -> dict[str, Any]:
        parts = _SECTION.split(human)
        items = [
            {"section": int(number), **_read(text)}
            for number, text in zip(parts[1::2], parts[2::2], strict=True)
        ]
        return {"closets": items}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        human = str(messages[-1].content)
        self.calls.append(human)
        answer = self.answer(human)
        names = kwargs.get("tool_names")
        if names:
            self.tools_seen.extend(names)
            call = {"name": names[0], "args": answer, "id": f"call_{len(self.calls)}"}
            message = AIMessage(content="", tool_calls=[call])
        else:
            message = AIMessage(content=json.dumps(answer))
        return ChatResult(generations=[ChatGeneration(message=message)])


class TestLLMClosetExtractor(ClosetExtractorTests):
    """The conformance suite, with the FAKE model behind the extractor."""

    languages = ("en", "zh", "de")

    @pytest.fixture
    def extractor_factory(self) -> ClosetExtractorFactory:
        model = SectionReader()
        return lambda options: LLMClosetExtractor({"model": model, **options})


def test_the_prompt_is_documented_in_the_module() -> None:
    import palace_plugins.builtin.extractors.llm_closets as module

    assert module.__doc__ is not None
    assert all(line.strip() in module.__doc__ for line in PROMPT.splitlines())
    assert SCHEMA["title"] == "closets"


def test_one_structured_call_per_source() -> None:
    model = SectionReader()
    extractor = LLMClosetExtractor({"model": model})
    given = drawers(SAMPLES["en"] * 3, source="test://a") + drawers(
        SAMPLES["de"], source="test://b"
    )
    closets = build_closets(given, extractor=extractor, extractor_name="llm", drawers_per_closet=2)
    assert len(model.calls) == 2  # two sources, one call each
    assert model.tools_seen == ["closets", "closets"]  # with_structured_output's tool
    # nine drawers of a: five runs; b's two: one (the sources are asked at once, so the
    # calls may come in either order)
    assert sorted(len(_SECTION.findall(call)) for call in model.calls) == [1, 5]
    assert len(closets) == 5 + 1
    line = next(c.line for c in closets if "Alice" in c.line)
    assert "Berlin" in line or "Larkspur" in line


def test_sources_are_asked_at_once_and_give_the_same_closets() -> None:
    given = [
        d
        for n in range(12)
        for d in drawers(
            [f"Alice met Bob in Lisbon on day {n}.", "Carol wrote it up."], source=f"s{n}"
        )
    ]
    found = {}
    for concurrency in (1, 4):
        model = SectionReader()
        extractor = LLMClosetExtractor({"model": model, "concurrency": concurrency})
        assert extractor.concurrency == concurrency
        found[concurrency] = build_closets(
            given, extractor=extractor, extractor_name="llm", drawers_per_closet=3
        )
        assert len(model.calls) == 12
    assert found[4] == found[1]


def test_a_large_source_is_asked_in_several_calls_of_whole_sections() -> None:
    model = SectionReader()
    extractor = LLMClosetExtractor({"model": model, "max_chars": 400})
    texts = [f"Run {n}: Alice met Bob in Lisbon, then Carol in Oslo." * 3 for n in range(8)]
    runs = [drawers([t], source="test://big") for t in texts]
    found = extractor.extract_runs(runs=runs)
    assert len(model.calls) > 1
    assert all(len(call) < 400 + 60 for call in model.calls)
    assert [len(entries) for entries in found] == [1] * 8
    assert all(
        e.drawer_ids == (run[0].id,) for e, run in zip([f[0] for f in found], runs, strict=True)
    )


def test_a_model_without_structured_output_is_read_as_json() -> None:
    reader = SectionReader()
    text = "Alice moved to Porto in 2024."
    answer = json.dumps(reader.answer(f"[1]\n{text}"))
    model = FakeListChatModel(responses=[f"Here you go:\n```json\n{answer}\n```"])
    extractor = LLMClosetExtractor({"model": model})
    assert extractor.structured is None  # FakeListChatModel has no tool calling
    (entry,) = extractor.extract(drawers=drawers([text]))
    assert entry.entities == ("Alice", "Porto", "2024")


def test_answers_are_cleaned() -> None:
    item = {
        "section": 1,
        "topic": "  release\n planning  ",
        "entities": ["Alice", "alice", 3, "", "x" * 101, " Bob  Chen "],
    }
    model = FakeListChatModel(responses=[json.dumps({"closets": [item]})])
    (entry,) = LLMClosetExtractor({"model": model}).extract(drawers=drawers(["Alice, Bob"]))
    assert entry.topic == "release planning"
    assert entry.entities == ("Alice", "Bob Chen")


class Fixed:
    """A FAKE model object (no LangChain) that always gives ``answer``; counts its calls."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls = 0

    def invoke(self, messages: object) -> AIMessage:
        self.calls += 1
        return AIMessage(content=self.answer)


@pytest.mark.parametrize(
    "answer",
    [
        "no JSON at all",
        '{"closets": "not a list"}',
        '{"closets": [{"section": 7, "topic": "beyond the sections", "entities": []}]}',
        '{"closets": [{"section": true, "topic": "a bool is no number", "entities": []}]}',
    ],
)
def test_an_unusable_answer_falls_back_to_regex_and_is_asked_again(
    answer: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    model = Fixed(answer)
    given = drawers(["On 12 March 2026 Alice Moreau shipped Larkspur."])
    cache = Answers(tmp_path / ANSWERS_FILE)
    extractor = LLMClosetExtractor({"model": model, "cache": cache})
    with caplog.at_level(logging.WARNING):
        (entry,) = extractor.extract(drawers=given)
    assert "Alice Moreau" in entry.entities  # the regex extractor's closet
    assert "regex extractor's closets" in caplog.text
    extractor.extract(drawers=given)
    assert model.calls == 2  # nothing was kept: it is asked again
    cache.close()


def test_a_failing_model_without_fallback_is_a_model_answer_error() -> None:
    class Down:
        def invoke(self, messages: object) -> object:
            raise TimeoutError("the model is down")

    extractor = LLMClosetExtractor({"model": Down(), "fallback": ""})
    with pytest.raises(ModelAnswerError, match="the model is down"):
        extractor.extract(drawers=drawers(["Alice met Bob."]))
    with pytest.raises(PluginError, match="ModelAnswerError"):
        build_closets(
            drawers(["Alice met Bob."]),
            extractor=extractor,
            extractor_name="llm",
            drawers_per_closet=3,
        )


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="model"):
        LLMClosetExtractor({})
    for bad in (
        {"max_chars": 10},
        {"max_entities": True},
        {"structured": "yes"},
        {"fallback": "rules"},
        {"cache": "answers.sqlite"},
    ):
        with pytest.raises(ConfigError):
            LLMClosetExtractor({"model": SectionReader(), **bad})


def test_llm_is_a_builtin_closet_extractor() -> None:
    manager = PluginManager()
    assert manager.closet_extractor("llm") is LLMClosetExtractor
    listed = {p.name: p for p in manager.plugins()}
    assert "palace_register_closet_extractors" in listed["llm-closets"].hooks


# -- in a palace: selected by palace.toml, cached in the palace's folder -------------------


def _llm_palace(
    open_palace: Callable[..., Palace], path: Path, model: Any, **options: Any
) -> Palace:
    """A palace (FAKE embedder) whose closets the ``llm`` extractor builds with ``model``.

    The palace is created first, so that its palace.toml says ``extractor = "llm"``; the
    model object is then handed over in code, as an application does.
    """
    open_palace(path, backend="sqlite", config={"closets": {"extractor": "llm"}}).close()
    assert 'extractor = "llm"' in (path / "palace.toml").read_text(encoding="utf-8")
    extractors = {"llm": {"model": model, **options}}
    return open_palace(path, backend="sqlite", config={"extractors": extractors})


TEXTS = [
    "Alice adopted a cat in Paris.",
    "Bob sold his bike in Rome.",
    "Carol moved to Oslo in May 2025.",
    "Dmitri joined Northwind as a nurse.",
]


def test_a_palace_files_llm_closets_and_asks_nothing_again(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    model = SectionReader()
    palace = _llm_palace(open_palace, tmp_path / "p", model)
    metadatas = [{"source": "notes.md", "chunk_index": i} for i in range(4)]
    palace.add_texts(TEXTS, metadatas=metadatas, ids=["a", "b", "c", "d"])
    assert len(model.calls) == 1  # one source: one call for its two runs
    lines = sorted(c.line for batch in palace.ledger.iter_closets() for c in batch)
    assert len(lines) == 2
    assert {c.extractor for batch in palace.ledger.iter_closets() for c in batch} == {"llm"}
    assert (tmp_path / "p" / ANSWERS_FILE).exists()

    palace.add_texts(TEXTS, metadatas=metadatas, ids=["a", "b", "c", "d"])  # filed again
    assert len(model.calls) == 1  # every section was in the cache
    again = sorted(c.line for batch in palace.ledger.iter_closets() for c in batch)
    assert again == lines

    palace.add_texts(["Alice adopted a dog in Lyon."], metadatas=[metadatas[0]], ids=["a"])
    assert len(model.calls) == 2
    assert "[2]" not in model.calls[-1]  # only the changed run was asked
    palace.close()

    reopened = _llm_palace(open_palace, tmp_path / "p", SectionReader())
    reopened.add_texts(TEXTS, metadatas=metadatas, ids=["a", "b", "c", "d"])  # as at first
    assert reopened.closet_extractor().model.calls == []  # type: ignore[union-attr]


def test_a_mine_asks_once_per_source(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Trip\n\nAlice flew to Lisbon on 3 May 2026.\n", encoding="utf-8")
    (notes / "b.md").write_text("Bob fixed the billing service for Northwind.\n", encoding="utf-8")
    model = SectionReader()
    palace = _llm_palace(open_palace, tmp_path / "p", model)
    palace.mine(notes, wing="notes")
    assert len(model.calls) == 2
    closets = [c for batch in palace.ledger.iter_closets() for c in batch]
    assert {c.extractor for c in closets} == {"llm"}
    assert any("Lisbon" in c.line for c in closets)
    assert "Lisbon" in palace.search("Lisbon", k=1)[0].text


def test_forget_deletes_the_users_kept_answers(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    model = SectionReader()
    palace = _llm_palace(open_palace, tmp_path / "p", model)
    palace.add_texts(TEXTS[:2], metadatas=[{"user_id": "u1"}, {"user_id": "u2"}], ids=["a", "b"])
    answers = Answers(tmp_path / "p" / ANSWERS_FILE)
    count = "SELECT user_id, count(*) FROM answers GROUP BY user_id ORDER BY 1"
    assert answers._connect(create=False).execute(count).fetchall() == [("u1", 1), ("u2", 1)]  # type: ignore[union-attr]
    palace.forget(user_id="u1")
    assert answers._connect(create=False).execute(count).fetchall() == [("u2", 1)]  # type: ignore[union-attr]
    answers.close()


def test_cache_false_keeps_nothing(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    model = SectionReader()
    palace = _llm_palace(open_palace, tmp_path / "p", model, cache=False)
    palace.add_texts(TEXTS[:1], ids=["a"])
    palace.add_texts(TEXTS[:1], ids=["a"])
    assert len(model.calls) == 2
    assert not (tmp_path / "p" / ANSWERS_FILE).exists()


def test_a_model_that_fails_in_a_palace_costs_no_drawer(
    open_palace: Callable[..., Palace], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Down:
        def invoke(self, messages: object) -> object:
            raise ConnectionError("no route to the model")

    palace = _llm_palace(open_palace, tmp_path / "p", Down(), fallback="")
    with caplog.at_level(logging.WARNING):
        assert palace.add_texts(TEXTS[:1], ids=["a"]) == ["a"]
    assert palace.stats().ledger.drawers == 1
    assert palace.stats().ledger.closets == 0
    assert "no route to the model" in caplog.text


def test_entries_point_to_their_run_only() -> None:
    extractor = LLMClosetExtractor({"model": SectionReader()})
    runs = [drawers(SAMPLES["en"][:2]), drawers(SAMPLES["en"][2:], source="test://2")]
    found = extractor.extract_runs(runs=runs)
    for run, entries in zip(runs, found, strict=True):
        assert all(isinstance(e, ClosetEntry) for e in entries)
        assert all(set(e.drawer_ids) == {d.id for d in run} for e in entries)


def test_a_palace_created_with_a_model_in_code_opens_again(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """palace.toml cannot hold a chat model: it names it in a comment, and stays TOML."""
    config = {"closets": {"extractor": "llm"}, "extractors": {"llm": {"model": SectionReader()}}}
    open_palace(tmp_path / "p", backend="sqlite", config=config).close()
    toml = (tmp_path / "p" / "palace.toml").read_text(encoding="utf-8")
    assert "# model = ...  # a SectionReader given in code" in toml
    palace = open_palace(tmp_path / "p", backend="sqlite")
    assert palace.config.closets.extractor == "llm"
    with pytest.raises(ConfigError, match="model"):
        palace.closet_extractor()


class WrongShape(SectionReader):
    """The FAKE model, answering its tool call with arguments of the wrong shape."""

    def answer(self, human: str) -> dict[str, Any]:
        return {"closets": "not a list"}


def test_a_structured_answer_of_the_wrong_shape_falls_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = WrongShape()
    extractor = LLMClosetExtractor({"model": model})
    with caplog.at_level(logging.WARNING):
        (entry,) = extractor.extract(drawers=drawers(["On 12 March 2026 Alice Moreau left."]))
    assert model.tools_seen == ["closets"]
    assert "Alice Moreau" in entry.entities  # the regex closet
    assert "not of the asked shape" in caplog.text
    with pytest.raises(ModelAnswerError, match="not of the asked shape"):
        LLMClosetExtractor({"model": model, "fallback": ""}).extract(drawers=drawers(["Bob"]))
