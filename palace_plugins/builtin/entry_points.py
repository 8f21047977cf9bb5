"""What the ``palace`` entry points of the ``palace-retrievers`` distribution name.

Each object is a :class:`Builtin` plugin that registers its names as references
(``"module:attribute"``), so that a command imports only the built-ins it uses (a search
does not import the source adapters, a status neither the embedder nor the Chroma
client). Built-ins are ``trylast``: an installed plugin with the same name is reached as
``plugin:name``. The objects are named as the entry points, ``-`` as ``_``.
"""

from __future__ import annotations

from collections.abc import Mapping

from palace_plugins.factories import Register
from palace_plugins.hookspecs import hookimpl


class Builtin:
    """A built-in plugin: for the hook ``hook``, each name and its factory's reference."""

    def __init__(self, hook: str, references: Mapping[str, str]) -> None:
        self.references = dict(references)

        def register_all(register: Register[object]) -> None:
            for name, reference in self.references.items():
                register(name, reference)

        register_all.__doc__ = f"Register {', '.join(self.references)}."
        setattr(self, hook, hookimpl(trylast=True)(register_all))

    def __repr__(self) -> str:
        return f"<built-in plugin {', '.join(self.references)}>"


def _backend(name: str, reference: str) -> Builtin:
    return Builtin("palace_register_backends", {name: reference})


def _source(name: str, reference: str) -> Builtin:
    return Builtin("palace_register_sources", {name: reference})


HERE = "palace_plugins.builtin"

chroma = _backend("chroma", f"{HERE}.chroma:ChromaIndex")
sqlite = _backend("sqlite", f"{HERE}.exact:ExactIndex")
qdrant = _backend("qdrant", f"{HERE}.qdrant:QdrantIndex")
pgvector = _backend("pgvector", f"{HERE}.pgvector:PgvectorIndex")

sentence_transformers = Builtin(
    "palace_register_embedders",
    {"sentence-transformers": f"{HERE}.sentence_transformers:SentenceTransformerEmbedder"},
)

files = _source("files", f"{HERE}.files:FilesSource")
text = _source("text", f"{HERE}.text:TextSource")
claude_code = _source("claude-code", f"{HERE}.claude_code:ClaudeCodeSource")
chatgpt = _source("chatgpt", f"{HERE}.chatgpt:ChatGPTSource")
slack = _source("slack", f"{HERE}.slack:SlackSource")
auto = _source("auto", f"{HERE}.auto:AutoSource")

regex = Builtin(
    "palace_register_closet_extractors", {"regex": f"{HERE}.regex_closets:RegexClosetExtractor"}
)
rule_memories = Builtin(
    "palace_register_memory_extractors", {"rules": f"{HERE}.rule_memories:RuleMemoryExtractor"}
)
llm_memories = Builtin(
    "palace_register_memory_extractors", {"llm": f"{HERE}.llm_memories:LLMMemoryExtractor"}
)
learned_judge = Builtin(
    "palace_register_memory_judges", {"learned": f"{HERE}.learned_judge:learned_judge"}
)
llm_judge = Builtin("palace_register_memory_judges", {"llm": f"{HERE}.llm_judge:LLMJudge"})
