"""PalaceMemoryBlock inside ``llama_index.core.memory.Memory``, run by an agent workflow."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.llms import MockFunctionCallingLLM
from llama_index.core.memory import Memory
from palace_plugins import hookimpl
from palace_retrievers import Drawer, Palace, PalaceNotFoundError
from palace_retrievers.memory.extraction import Candidate, MemoryExtractor
from pydantic import ValidationError

from llama_index.memory.palace import PalaceMemoryBlock, __all__
from tests.conftest import HashEmbedder


def test_all() -> None:
    assert __all__ == ["PalaceMemoryBlock"]


class Prompts:
    """A scripted LLM's answers: "noted", and the system prompt it was given, kept."""

    def __init__(self) -> None:
        self.system: list[str] = []

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        system = [m.content or "" for m in messages if m.role == MessageRole.SYSTEM]
        self.system.append("\n".join(system))
        return ChatMessage(role="assistant", content="Noted.")


def memory_of(block: PalaceMemoryBlock, session: str) -> Memory:
    # Words as tokens, and a chat history short enough to flush after two exchanges.
    return Memory.from_defaults(
        session_id=session,
        token_limit=40,
        token_flush_size=10,
        tokenizer_fn=str.split,
        memory_blocks=[block],
    )


@pytest.mark.slow
# The workflows library reads every member of the agent, deprecated pydantic ones too.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")
async def test_flushed_messages_become_the_users_memories(minilm_palace: Palace) -> None:
    prompts = Prompts()
    agent = FunctionAgent(
        tools=[], llm=MockFunctionCallingLLM(response_generator=prompts), system_prompt="Help."
    )
    block = PalaceMemoryBlock(palace=minilm_palace, user_id="ana")
    memory = memory_of(block, "monday")
    for said in (
        "I live in Lisbon and I work at a small bakery.",
        "I prefer green tea in the morning.",
        "Can you plan my week with that in mind please?",
        "Also book a table for two on Friday evening.",
    ):
        await agent.run(user_msg=said, memory=memory)

    texts = [m.text for m in minilm_palace.memories(user_id="ana")]
    assert any("Lisbon" in text for text in texts)
    assert any("green tea" in text for text in texts)
    assert minilm_palace.memories(user_id="bob") == []
    assert minilm_palace.memories(user_id=None) == []
    source = "llama-index:monday"
    drawers = minilm_palace.source_drawers(source, wing="conversations", user_id="ana")
    assert drawers[0].text.startswith("user: I live in Lisbon")
    assert drawers[0].metadata["speakers"] == ["user", "assistant"]
    assert [d.chunk_index for d in drawers] == list(range(len(drawers)))
    assert minilm_palace.source_drawers(source, wing="conversations") == []

    # A new session: the follow-up question gets the dated memory block in its prompt.
    followup = memory_of(block, "tuesday")
    messages = await followup.aget(input="Where do I live?")
    assert messages[0].role == MessageRole.SYSTEM
    assert "<PalaceMemory>" in str(messages[0].content)
    assert "Lisbon" in str(messages[0].content)
    await agent.run(user_msg="Where do I live?", memory=followup)
    assert "Lisbon" in prompts.system[-1]

    # Another user of the same palace is told nothing of Ana.
    other = memory_of(PalaceMemoryBlock(palace=minilm_palace, user_id="bob"), "tuesday-bob")
    assert "Lisbon" not in str(await other.aget(input="Where do I live?"))


@pytest.mark.slow
async def test_a_new_value_supersedes_the_old(minilm_palace: Palace) -> None:
    block = PalaceMemoryBlock(palace=minilm_palace, user_id="carla")
    await block.aput([ChatMessage(role="user", content="I live in Berlin.")], session_id="s1")
    await block.aput([ChatMessage(role="user", content="I live in Porto now.")], session_id="s2")
    current = [m.text for m in minilm_palace.memories(user_id="carla")]
    assert any("Porto" in text for text in current)
    assert not any("Berlin" in text for text in current)
    assert "Porto" in await block.aget([ChatMessage(role="user", content="Where do I live?")])
    lives = minilm_palace.kg.query("Porto", predicate="lives_in", user_id="carla")
    assert [t.subject for t in lives] == ["user"]
    assert minilm_palace.kg.query("Porto", user_id=None) == []


class Exploding(MemoryExtractor):
    def extract(self, *, drawers: Sequence[Drawer]) -> list[Candidate]:
        raise RuntimeError("boom")


class ExplodingPlugin:
    @hookimpl
    def palace_register_memory_extractors(self, register: Callable[[str, Any], None]) -> None:
        register("exploding", lambda options: Exploding())


@pytest.mark.parametrize("extractor", ["exploding", ""])
async def test_without_an_extractor_the_messages_are_kept(
    tmp_path: Path, extractor: str, caplog: pytest.LogCaptureFixture
) -> None:
    with Palace.open(
        tmp_path / "p",
        embedder=HashEmbedder(),
        plugins=[ExplodingPlugin()],
        config={"memory": {"extractor": extractor}},
    ) as palace:
        block = PalaceMemoryBlock(palace=palace, user_id="u1")
        with caplog.at_level(logging.WARNING):
            await block.aput([ChatMessage(role="user", content="I live in Lisbon.")])
        assert len(palace.drawer_ids(user_id="u1")) == 1
        assert palace.memories(user_id="u1") == []
        assert ("boom" in caplog.text) == (extractor == "exploding")


async def test_nothing_to_keep_or_ask(palace: Palace) -> None:
    block = PalaceMemoryBlock(palace=palace, user_id="u1")
    assert await block.aget([]) == ""
    assert await block.aget([ChatMessage(role="system", content="Be brief.")]) == ""
    await block.aput([ChatMessage(role="system", content="Be brief.")])
    assert palace.drawer_ids(user_id="u1") == []


def test_a_path_is_opened(tmp_path: Path) -> None:
    Palace.open(tmp_path / "p").close()
    block = PalaceMemoryBlock(palace=str(tmp_path / "p"), user_id="u1")
    assert isinstance(block.palace, Palace)
    block.palace.close()
    with pytest.raises(PalaceNotFoundError):
        PalaceMemoryBlock(palace=tmp_path / "missing", user_id="u1")


@pytest.mark.parametrize("user_id", [None, "", 7])
def test_a_user_is_needed(palace: Palace, user_id: Any) -> None:
    with pytest.raises(ValidationError):
        PalaceMemoryBlock(palace=palace, user_id=user_id)


def test_a_palace_is_needed() -> None:
    with pytest.raises(ValidationError):
        PalaceMemoryBlock(palace=42, user_id="u1")
