"""The plugins ``palace.toml`` selects, each built once, on first use, and checked.

The palace asks the plugin manager for a factory by name only when it needs one: a
source when a mine or a sync starts, the closet extractor when drawers are filed, the
memory extractor and judge when memories are drawn or remembered. A closet extractor
whose factory asks for the palace's ``cache`` (its ``palace_settings``) gets the
palace's :class:`~palace_retrievers.facade.answers.Answers`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from palace_plugins.manager import PluginManager
from palace_retrievers.closets import PALACE_SETTINGS as CLOSET_SETTINGS
from palace_retrievers.closets import ClosetExtractor
from palace_retrievers.config import Config
from palace_retrievers.errors import PluginError
from palace_retrievers.facade.answers import Answers
from palace_retrievers.sources import PALACE_SETTINGS, Source

if TYPE_CHECKING:
    from palace_retrievers.memory.extraction import MemoryExtractor
    from palace_retrievers.memory.judges import MemoryJudge

T = TypeVar("T")


class SelectedPlugins:
    """The closet extractor, memory extractor, memory judge and sources of one palace.

    Args:
        manager: The palace's plugin manager.
        config: The palace's configuration, which names the plugins and their options.
        answers: The palace's answer cache, for the plugins that ask for it.
    """

    def __init__(self, *, manager: PluginManager, config: Config, answers: Answers) -> None:
        self._manager = manager
        self._config = config
        self.answers = answers
        self.closet: ClosetExtractor | None = None
        self.memory: MemoryExtractor | None = None
        self.judge: MemoryJudge | None = None

    def closet_extractor(self) -> ClosetExtractor | None:
        """The configured closet extractor (``None`` when ``closets.extractor`` is empty).

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return a ``ClosetExtractor``.
        """
        name = self._config.closets.extractor
        if not name:
            return None
        if self.closet is None:
            factory = self._manager.closet_extractor(name)
            options = self._config.extractor_options()
            wanted: frozenset[str] = getattr(factory, "palace_settings", frozenset())
            if "cache" in wanted & CLOSET_SETTINGS and options.get("cache", True) is not False:
                options["cache"] = self.answers
            self.closet = checked("closet extractor", name, factory(options), ClosetExtractor)
        return self.closet

    def memory_extractor(self) -> MemoryExtractor | None:
        """The configured memory extractor (``None`` when ``memory.extractor`` is empty).

        Raises:
            PluginNotFoundError: no installed plugin provides the extractor.
            PluginError: its factory did not return a ``MemoryExtractor``.
        """
        from palace_retrievers.memory.extraction import MemoryExtractor

        name = self._config.memory.extractor
        if not name:
            return None
        if self.memory is None:
            self.memory = checked(
                "memory extractor",
                name,
                self._manager.memory_extractor(name)(self._config.memory_extractor_options()),
                MemoryExtractor,
            )
        return self.memory

    def memory_judge(self) -> tuple[str, MemoryJudge]:
        """The configured memory judge (``memory.judge``) and its name.

        Raises:
            PluginNotFoundError: no installed plugin provides the judge.
            PluginError: its factory did not return a ``MemoryJudge``.
        """
        from palace_retrievers.memory.judges import MemoryJudge

        name = self._config.memory.judge
        if self.judge is None:
            self.judge = checked(
                "memory judge",
                name,
                self._manager.memory_judge(name)(self._config.memory_judge_options()),
                MemoryJudge,
            )
        return name, self.judge

    def source(self, name: str) -> Source:
        """A fresh instance of the ``name`` source plugin, with the palace settings it
        asks for (its ``palace_settings``).

        Raises:
            PluginNotFoundError: no installed plugin provides ``name``.
        """
        factory = self._manager.source(name)
        settings = {
            "max_file_bytes": self._config.mining.max_file_bytes,
            "chunk_size": self._config.chunking.size,
            "chunk_overlap": self._config.chunking.overlap,
        }
        wanted: frozenset[str] = getattr(factory, "palace_settings", frozenset()) & PALACE_SETTINGS
        return factory({name: settings[name] for name in sorted(wanted)})


def checked(kind: str, name: str, plugin: T, expected: type[object]) -> T:
    """``plugin``, which the ``kind`` plugin ``name`` built, checked to be an ``expected``
    (the factory's type says so; a plugin that is not type-checked may not keep it).

    Raises:
        PluginError: it is something else.
    """
    if not isinstance(plugin, expected):
        raise PluginError(f"{kind} plugin {name!r} did not return one")
    return plugin
