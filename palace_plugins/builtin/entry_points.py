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


HERE = "palace_plugins.builtin"


def _one(hook: str, name: str, module: str, attribute: str) -> Builtin:
    """The built-in registering ``name`` for ``hook`` as ``HERE.module:attribute``."""
    return Builtin(hook, {name: f"{HERE}.{module}:{attribute}"})


BACKENDS = "palace_register_backends"
SOURCES = "palace_register_sources"

chroma = _one(BACKENDS, "chroma", "backends.chroma", "ChromaIndex")
sqlite = _one(BACKENDS, "sqlite", "backends.exact", "ExactIndex")
qdrant = _one(BACKENDS, "qdrant", "backends.qdrant", "QdrantIndex")
pgvector = _one(BACKENDS, "pgvector", "backends.pgvector", "PgvectorIndex")

sentence_transformers = _one(
    "palace_register_embedders",
    "sentence-transformers",
    "embedders.sentence_transformers",
    "SentenceTransformerEmbedder",
)

files = _one(SOURCES, "files", "sources.files", "FilesSource")
text = _one(SOURCES, "text", "sources.text", "TextSource")
claude_code = _one(SOURCES, "claude-code", "sources.claude_code", "ClaudeCodeSource")
chatgpt = _one(SOURCES, "chatgpt", "sources.chatgpt", "ChatGPTSource")
slack = _one(SOURCES, "slack", "sources.slack", "SlackSource")
auto = _one(SOURCES, "auto", "sources.auto", "AutoSource")

regex = _one(
    "palace_register_closet_extractors", "regex", "extractors.regex_closets", "RegexClosetExtractor"
)
llm_closets = _one(
    "palace_register_closet_extractors", "llm", "extractors.llm_closets", "LLMClosetExtractor"
)
rule_memories = _one(
    "palace_register_memory_extractors", "rules", "extractors.rule_memories", "RuleMemoryExtractor"
)
llm_memories = _one(
    "palace_register_memory_extractors", "llm", "extractors.llm_memories", "LLMMemoryExtractor"
)
learned_judge = _one(
    "palace_register_memory_judges", "learned", "judges.learned_judge", "learned_judge"
)
llm_judge = _one("palace_register_memory_judges", "llm", "judges.llm_judge", "LLMJudge")
