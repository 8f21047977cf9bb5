"""Loading plugins from the ``palace`` entry-point group, and looking up what they provide.

Every :class:`~palace_retrievers.Palace` owns one :class:`PluginManager`; nothing is
global. Plugins are loaded lazily on first use. A plugin that raises while loading is
logged, listed in :attr:`PluginManager.failures` and skipped: the palace still opens.

``PALACE_PLUGINS`` (comma-separated entry-point names) limits which third-party plugins
load; the built-ins, shipped in the ``palace-retrievers`` distribution, always load.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Generic, TypeVar

import pluggy

from palace_plugins import hookspecs
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

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Provider(Generic[T]):
    """One name a plugin registered: ``factory`` builds the thing."""

    name: str
    factory: T
    plugin: str
    builtin: bool


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
class Registry(Generic[T]):
    """The names of one kind (backends, embedders, ...) and who provides them.

    A plain name resolves to its only provider. When several plugins register one name,
    the built-in keeps it and the others are reached as ``"<plugin>:<name>"``, so that
    installing a plugin never changes what an existing palace uses.
    """

    kind: str
    providers: dict[str, list[Provider[T]]] = field(default_factory=dict)

    def add(self, provider: Provider[T]) -> None:
        self.providers.setdefault(provider.name, []).append(provider)

    def names(self) -> list[str]:
        out: list[str] = []
        for name, providers in sorted(self.providers.items()):
            out.append(name)
            if len(providers) > 1:
                out.extend(f"{p.plugin}:{name}" for p in providers if not p.builtin)
        return out

    def get(self, name: str) -> T:
        """The factory registered as ``name`` (or ``plugin:name``).

        Raises:
            PluginNotFoundError: no plugin provides ``name``.
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
        return chosen.factory


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
        self._registries: dict[str, Registry[Any]] = {}
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
        for ep in sorted(metadata.entry_points(group=GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist else None
            version = ep.dist.version if ep.dist else None
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

    def registry(self, kind: str) -> Registry[Any]:
        """Everything registered for ``kind`` (``"backend"``, ``"embedder"``, ...)."""
        self._load()
        if kind not in self._registries:
            registry: Registry[Any] = Registry(kind)
            hook = getattr(self._pm.hook, HOOKS[kind])
            for impl in hook.get_hookimpls():
                plugin_name = impl.plugin_name
                builtin = self._is_builtin(plugin_name)

                def register(
                    name: str, factory: Any, _p: str = plugin_name, _b: bool = builtin
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

    def backend(self, name: str) -> Callable[..., Any]:
        return self.registry("backend").get(name)  # type: ignore[no-any-return]

    def embedder(self, name: str) -> Callable[..., Any]:
        return self.registry("embedder").get(name)  # type: ignore[no-any-return]

    def source(self, name: str) -> Callable[..., Any]:
        return self.registry("source").get(name)  # type: ignore[no-any-return]

    def closet_extractor(self, name: str) -> Callable[..., Any]:
        return self.registry("closet extractor").get(name)  # type: ignore[no-any-return]

    def memory_judge(self, name: str) -> Callable[..., Any]:
        return self.registry("memory judge").get(name)  # type: ignore[no-any-return]

    def memory_extractor(self, name: str) -> Callable[..., Any]:
        return self.registry("memory extractor").get(name)  # type: ignore[no-any-return]

    def plugins(self) -> Iterator[PluginInfo]:
        """Every registered plugin, then every one that failed to load."""
        self._load()
        for name, plugin in sorted(self._pm.list_name_plugin(), key=lambda item: item[0]):
            hooks = tuple(sorted(h.name for h in self._pm.get_hookcallers(plugin) or ()))
            dist, version = self._dists.get(name, (None, None))
            yield PluginInfo(name, dist, version, hooks, dist == BUILTIN_DISTRIBUTION)
        for failure in self.failures:
            yield PluginInfo(failure.name, failure.distribution, None, (), False, failure.error)
