"""Loading plugins from the ``palace`` entry-point group, and looking up what they provide.

Every :class:`~palace_retrievers.Palace` owns one :class:`PluginManager`; nothing is
global. Plugins are loaded lazily on first use. A plugin that raises while loading is
logged, listed in :attr:`PluginManager.failures` and skipped: the palace still opens.
A name registered as a reference (``"module:attribute"``) is imported when it is first
looked up, so that loading the plugins imports only their small plugin modules.

``PALACE_PLUGINS`` (comma-separated entry-point names) limits which third-party plugins
load; the built-ins, shipped in the ``palace-retrievers`` distribution, always load.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import cast

import pluggy

from palace_plugins import hookspecs
from palace_plugins.factories import (
    BackendFactory,
    ClosetExtractorFactory,
    EmbedderFactory,
    MemoryExtractorFactory,
    MemoryJudgeFactory,
    SourceFactory,
)
from palace_retrievers.errors import PluginError, PluginNotFoundError

log = logging.getLogger(__name__)

GROUP = "palace"
BUILTIN_DISTRIBUTION = "palace-retrievers"
HOOKS = {
    "backend": "palace_register_backends",
    "source": "palace_register_sources",
    "closet extractor": "palace_register_closet_extractors",
    "memory extractor": "palace_register_memory_extractors",
    "embedder": "palace_register_embedders",
    "memory judge": "palace_register_memory_judges",
}


@dataclass(slots=True)
class Provider:
    """One name a plugin registered: ``factory`` builds the thing; until the name is
    used it may be a reference, ``"module:attribute"``, to import then."""

    name: str
    factory: object
    plugin: str
    builtin: bool

    def load(self) -> object:
        """The factory, imported (once) if it was registered as a reference.

        Raises:
            PluginError: the reference cannot be imported or names nothing callable.
        """
        if isinstance(self.factory, str):
            module, _, attribute = self.factory.partition(":")
            try:
                found: object = importlib.import_module(module)
                for part in attribute.split(".") if attribute else ():
                    found = getattr(found, part)
            except Exception as exc:
                raise PluginError(
                    f"plugin {self.plugin!r} registered {self.name!r} as {self.factory!r}, "
                    f"which cannot be imported: {type(exc).__name__}: {exc}"
                ) from exc
            if not attribute or not callable(found):
                raise PluginError(
                    f"plugin {self.plugin!r} registered {self.name!r} as {self.factory!r}, "
                    "which is not a factory (use 'module:attribute')"
                )
            self.factory = found
        return self.factory


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What ``palace plugins`` shows for one plugin."""

    name: str
    distribution: str | None
    version: str | None
    hooks: tuple[str, ...]
    builtin: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PluginFailure:
    """A plugin that could not be loaded, and why."""

    name: str
    distribution: str | None
    error: str


@dataclass(slots=True)
class Registry:
    """The names of one kind (backends, embedders, ...) and who provides them.

    A plain name resolves to its only provider. When several plugins register one name,
    the built-in keeps it and the others are reached as ``"<plugin>:<name>"``, so that
    installing a plugin never changes what an existing palace uses.
    """

    kind: str
    providers: dict[str, list[Provider]] = field(default_factory=dict)

    def add(self, provider: Provider) -> None:
        self.providers.setdefault(provider.name, []).append(provider)

    def names(self) -> list[str]:
        out: list[str] = []
        for name, providers in sorted(self.providers.items()):
            out.append(name)
            if len(providers) > 1:
                out.extend(f"{p.plugin}:{name}" for p in providers if not p.builtin)
        return out

    def get(self, name: str) -> object:
        """The factory registered as ``name`` (or ``plugin:name``), imported if need be.

        Raises:
            PluginNotFoundError: no plugin provides ``name``.
            PluginError: its reference cannot be imported.
        """
        plugin, _, plain = name.rpartition(":")
        candidates = self.providers.get(plain, [])
        if plugin:
            candidates = [p for p in candidates if p.plugin == plugin]
        if not candidates:
            known = ", ".join(self.names()) or "none"
            raise PluginNotFoundError(
                f"no {self.kind} named {name!r} is installed; available: {known} "
                f"(see `palace plugins`)"
            )
        builtins = [p for p in candidates if p.builtin]
        chosen = builtins[0] if builtins else candidates[0]
        if len(candidates) > 1:
            log.info("%s %r has several providers; using %s", self.kind, name, chosen.plugin)
        return chosen.load()


class PluginManager:
    """The plugins of one palace.

    Args:
        entry_points: Load plugins from the ``palace`` entry-point group.
        plugins: Extra plugin objects (modules or instances with hook implementations)
            to register, e.g. in tests or notebooks.
    """

    def __init__(self, *, entry_points: bool = True, plugins: Iterable[object] = ()) -> None:
        self._pm = pluggy.PluginManager(GROUP)
        self._pm.add_hookspecs(hookspecs)
        self._use_entry_points = entry_points
        self._loaded = False
        self._extra = list(plugins)
        self._dists: dict[str, tuple[str | None, str | None]] = {}
        self._registries: dict[str, Registry] = {}
        self.failures: list[PluginFailure] = []

    # -- loading ------------------------------------------------------------------------

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self._use_entry_points:
            self._load_entry_points()
        for plugin in self._extra:
            self.register(plugin)

    def _load_entry_points(self) -> None:
        wanted = os.environ.get("PALACE_PLUGINS")
        allowed = None if wanted is None else {n.strip() for n in wanted.split(",") if n.strip()}
        # Each distribution's name and version, read once: reading a distribution's
        # metadata parses its file, and one distribution has many entry points.
        read: dict[metadata.Distribution, tuple[str, str]] = {}
        for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
            if ep.dist is not None and ep.dist not in read:
                read[ep.dist] = (ep.dist.name, ep.dist.version)
            dist, version = read[ep.dist] if ep.dist is not None else (None, None)
            builtin = dist == BUILTIN_DISTRIBUTION
            if allowed is not None and not builtin and ep.name not in allowed:
                continue
            if self._pm.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
                self._pm.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not stop the palace
                message = f"{type(exc).__name__}: {exc}"
                log.warning(
                    "plugin %r (%s) failed to load and is skipped: %s", ep.name, dist, message
                )
                self.failures.append(PluginFailure(ep.name, dist, message))
                continue
            self._dists[ep.name] = (dist, version)

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object; returns the name it is registered under.

        Raises:
            PluginError: the object implements a hook the palace does not define.
        """
        self._load()
        try:
            registered = self._pm.register(plugin, name=name)
            self._pm.check_pending()
        except (pluggy.PluginValidationError, ValueError) as exc:
            if self._pm.is_registered(plugin):
                self._pm.unregister(plugin)
            raise PluginError(f"cannot register plugin {name or plugin!r}: {exc}") from None
        self._registries.clear()
        return str(registered)

    def unregister(self, name: str) -> None:
        """Remove the plugin registered as ``name`` (no error when there is none)."""
        plugin = self._pm.get_plugin(name)
        if plugin is not None:
            self._pm.unregister(plugin)
            self._registries.clear()

    # -- lookups ------------------------------------------------------------------------

    def _is_builtin(self, plugin_name: str) -> bool:
        return self._dists.get(plugin_name, (None, None))[0] == BUILTIN_DISTRIBUTION

    def registry(self, kind: str) -> Registry:
        """Everything registered for ``kind`` (``"backend"``, ``"embedder"``, ...)."""
        self._load()
        if kind not in self._registries:
            registry = Registry(kind)
            hook = getattr(self._pm.hook, HOOKS[kind])
            for impl in hook.get_hookimpls():
                plugin_name = impl.plugin_name
                builtin = self._is_builtin(plugin_name)

                def register(
                    name: str, factory: object, _p: str = plugin_name, _b: bool = builtin
                ) -> None:
                    registry.add(Provider(name, factory, _p, _b))

                try:
                    impl.function(register=register)
                except Exception as exc:
                    raise PluginError(
                        f"plugin {plugin_name!r} raised in {HOOKS[kind]}: {exc}"
                    ) from exc
            self._registries[kind] = registry
        return self._registries[kind]

    # The factories are the plugins' own: their types are what the hooks' ``register``
    # asked for (checked by the plugin's type checker), not checked again here.

    def backend(self, name: str) -> BackendFactory:
        """The factory of the vector index backend ``name``."""
        return cast("BackendFactory", self.registry("backend").get(name))

    def embedder(self, name: str) -> EmbedderFactory:
        """The factory of the embedder ``name``."""
        return cast("EmbedderFactory", self.registry("embedder").get(name))

    def source(self, name: str) -> SourceFactory:
        """The factory of the source ``name``."""
        return cast("SourceFactory", self.registry("source").get(name))

    def closet_extractor(self, name: str) -> ClosetExtractorFactory:
        """The factory of the closet extractor ``name``."""
        return cast("ClosetExtractorFactory", self.registry("closet extractor").get(name))

    def memory_judge(self, name: str) -> MemoryJudgeFactory:
        """The factory of the memory judge ``name``."""
        return cast("MemoryJudgeFactory", self.registry("memory judge").get(name))

    def memory_extractor(self, name: str) -> MemoryExtractorFactory:
        """The factory of the memory extractor ``name``."""
        return cast("MemoryExtractorFactory", self.registry("memory extractor").get(name))

    def plugins(self) -> Iterator[PluginInfo]:
        """Every registered plugin, then every one that failed to load."""
        self._load()
        for name, plugin in sorted(self._pm.list_name_plugin(), key=lambda item: item[0]):
            hooks = tuple(sorted(h.name for h in self._pm.get_hookcallers(plugin) or ()))
            dist, version = self._dists.get(name, (None, None))
            yield PluginInfo(name, dist, version, hooks, dist == BUILTIN_DISTRIBUTION)
        for failure in self.failures:
            yield PluginInfo(failure.name, failure.distribution, None, (), False, failure.error)
