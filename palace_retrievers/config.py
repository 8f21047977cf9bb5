"""Typed, validated configuration: ``palace.toml`` in the palace, then ``PALACE_*`` variables.

Precedence, lowest first: the defaults below, the palace's ``palace.toml``, environment
variables, then what the caller passes to :meth:`Palace.open`. A nested key is named with
a double underscore in the environment: ``PALACE_SEARCH__OVERFETCH=4``. Values in the
environment are read as TOML literals when they parse (``4``, ``true``, ``[1, 2]``) and as
plain strings otherwise. Any key the palace does not know is an error that names it.

Options of a plugin (``[backends.chroma]``, ``[embedders.sentence-transformers]``) are
passed to that plugin, which validates them itself.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, cast, get_args, get_origin, get_type_hints

from palace_retrievers.errors import ConfigError

CONFIG_FILE = "palace.toml"
ENV_PREFIX = "PALACE_"
#: ``PALACE_*`` variables that are not configuration keys.
ENV_RESERVED = frozenset({"PALACE_PATH", "PALACE_PLUGINS"})


def _doc(text: str) -> dict[str, str]:
    return {"doc": text}


@dataclass(frozen=True)
class ChunkingConfig:
    """How sources are cut into drawers."""

    size: int = field(default=800, metadata=_doc("largest drawer, in characters"))
    overlap: int = field(default=100, metadata=_doc("characters shared by neighbour drawers"))

    def __post_init__(self) -> None:
        if self.size < 50:
            raise ConfigError(f"chunking.size must be at least 50, not {self.size}")
        if not 0 <= self.overlap < self.size // 2:
            raise ConfigError(
                f"chunking.overlap must be in [0, chunking.size / 2), not {self.overlap}"
            )


@dataclass(frozen=True)
class SearchConfig:
    """How a query is answered."""

    overfetch: int = field(default=3, metadata=_doc("vector candidates = k × overfetch"))
    min_candidates: int = field(default=50, metadata=_doc("vector candidates, at least"))
    max_query_chars: int = field(
        default=100_000, metadata=_doc("longest query accepted, in characters")
    )

    def __post_init__(self) -> None:
        for name in ("overfetch", "min_candidates", "max_query_chars"):
            if getattr(self, name) < 1:
                raise ConfigError(f"search.{name} must be at least 1")


@dataclass(frozen=True)
class MiningConfig:
    """How sources are read and embedded."""

    max_file_bytes: int = field(
        default=5_000_000, metadata=_doc("files larger than this are skipped when mining")
    )
    batch_size: int = field(default=64, metadata=_doc("drawers embedded per batch"))

    def __post_init__(self) -> None:
        if self.max_file_bytes < 1 or self.batch_size < 1:
            raise ConfigError("mining.max_file_bytes and mining.batch_size must be positive")


@dataclass(frozen=True)
class Config:
    """Everything a palace can be told. See ``docs`` in each field's metadata."""

    backend: str = field(default="chroma", metadata=_doc("vector index backend plugin"))
    embedder: str = field(default="sentence-transformers", metadata=_doc("embedder plugin"))
    model: str | None = field(
        default=None, metadata=_doc("embedding model; unset: the embedder's default")
    )
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    mining: MiningConfig = field(default_factory=MiningConfig)
    backends: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per backend plugin, e.g. [backends.chroma]")
    )
    embedders: dict[str, dict[str, Any]] = field(
        default_factory=dict, metadata=_doc("options per embedder plugin")
    )

    def backend_options(self) -> dict[str, Any]:
        """The options table of the selected backend (empty when there is none)."""
        return dict(self.backends.get(self.backend, {}))

    def embedder_options(self) -> dict[str, Any]:
        """The options table of the selected embedder (empty when there is none)."""
        return dict(self.embedders.get(self.embedder, {}))

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


def _build(cls: type[Any], values: Mapping[str, Any], *, prefix: str, origin: str) -> Any:
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if key not in fields:
            raise ConfigError(f"unknown key {name!r} in {origin}; known: {', '.join(fields)}")
        annotation = hints[key]
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
    """``palace.toml`` text for ``config``, each key with its documentation as a comment."""
    lines = ["# palace.toml: this palace's configuration (see the README for every key)."]

    def emit(obj: Any, section: str) -> None:
        tables = []
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                tables.append((f.name, value))
                continue
            if isinstance(value, dict):
                continue  # plugin tables are written by hand, [backends.<name>]
            doc = f.metadata.get("doc", "")
            if value is None:
                lines.append(f"# {f.name} = ...  # {doc}")
            else:
                lines.append(f"{f.name} = {_literal(value)}  # {doc}")
        for name, table in tables:
            lines.extend(["", f"[{section}{name}]"])
            emit(table, f"{section}{name}.")

    emit(config, "")
    return "\n".join(lines) + "\n"


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)
