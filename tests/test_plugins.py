"""The plugin manager: built-ins over entry points, third parties, failures, name clashes."""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes import make_plugin

import palace_plugins.manager as manager_module
from palace_plugins import PluginManager, hookspecs
from palace_plugins.builtin.backends.exact import ExactIndex
from palace_retrievers import Palace, PluginError, PluginNotFoundError
from palace_retrievers.index import BackendContext, VectorIndex

VERSION = importlib.metadata.version("palace-retrievers")
BUILTINS = {
    "chroma": ("palace_register_backends",),
    "sqlite": ("palace_register_backends",),
    "sentence-transformers": ("palace_register_embedders",),
    "files": ("palace_register_sources",),
}


class AcmeIndex(ExactIndex):
    """A third-party backend that happens to register the name ``sqlite`` too."""


def test_builtins_are_listed_with_distribution_version_and_hooks() -> None:
    infos = {info.name: info for info in PluginManager().plugins()}
    for name, hooks in BUILTINS.items():
        info = infos[name]
        assert info.distribution == "palace-retrievers"
        assert info.version == VERSION
        assert info.builtin
        assert info.error is None
        assert set(hooks) <= set(info.hooks)


def test_builtins_come_from_the_palace_entry_point_group() -> None:
    names = {ep.name for ep in importlib.metadata.entry_points(group="palace")}
    assert set(BUILTINS) <= names


def test_builtin_names() -> None:
    pm = PluginManager()
    assert {"chroma", "sqlite"} <= set(pm.registry("backend").names())
    assert "sentence-transformers" in pm.registry("embedder").names()
    assert "files" in pm.registry("source").names()


def test_hookspecs_each_take_register_and_have_a_docstring() -> None:
    for name in manager_module.HOOKS.values():
        spec = getattr(hookspecs, name)
        assert spec.__doc__
        assert list(inspect.signature(spec).parameters) == ["register"]


def test_a_plugin_registered_in_a_test() -> None:
    pm = PluginManager()
    plugin = make_plugin(
        "temporary-backend",
        palace_register_backends=lambda register: register("temporary", AcmeIndex),
    )
    name = pm.register(plugin)
    try:
        assert name == "temporary-backend"
        assert pm.backend("temporary") is AcmeIndex
        info = {i.name: i for i in pm.plugins()}["temporary-backend"]
        assert info.hooks == ("palace_register_backends",)
        assert not info.builtin
    finally:
        pm.unregister(name)
    with pytest.raises(PluginNotFoundError):
        pm.backend("temporary")
    pm.unregister("never-registered")  # no error


def test_plugins_passed_to_open_are_per_palace(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    first = open_palace(tmp_path / "one", backend="sqlite")
    with pytest.raises(PluginNotFoundError, match="'fake'"):
        Palace.open(tmp_path / "two", backend="sqlite", embedder="fake")
    assert first.embedder.model_name.startswith("fake/")


def _fake_entry_points(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, modules: dict[str, str]
) -> None:
    """Make ``entry_points(group="palace")`` also yield plugins living in ``tmp_path``."""
    for module, source in modules.items():
        (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    real = importlib.metadata.entry_points
    extra = [
        importlib.metadata.EntryPoint(name=module.replace("_", "-"), value=module, group="palace")
        for module in modules
    ]

    def entry_points(**params: Any) -> Any:
        found = list(real(**params))
        if params.get("group") == "palace":
            found += extra
        return found

    monkeypatch.setattr(manager_module.metadata, "entry_points", entry_points)


BROKEN = 'raise RuntimeError("the plugin is broken on purpose")\n'
WORKING = """
from palace_plugins import hookimpl
from palace_plugins.builtin.backends.exact import ExactIndex

class WorkingIndex(ExactIndex):
    pass

@hookimpl
def palace_register_backends(register):
    register("working", WorkingIndex)
"""


def test_a_plugin_that_raises_on_import_is_reported_and_skipped(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    open_palace: Callable[..., Palace],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _fake_entry_points(
        monkeypatch, tmp_path, {"palace_test_broken": BROKEN, "palace_test_working": WORKING}
    )
    palace = open_palace(tmp_path / "palace", backend="working")
    assert type(palace.indexes._indexes["drawers"]).__name__ == "WorkingIndex"
    failures = [f for f in palace.stats().plugin_failures if f.startswith("palace-test-")]
    assert len(failures) == 1
    assert failures[0].startswith("palace-test-broken: RuntimeError")
    assert "broken on purpose" in failures[0]
    assert "palace-test-broken" in caplog.text
    listed = {i.name: i for i in palace.plugins.plugins()}
    assert listed["palace-test-broken"].error is not None
    assert listed["palace-test-working"].error is None
    assert not listed["palace-test-working"].builtin
    palace.add_texts(["the palace still works"])
    assert palace.search("palace works", k=1)[0].text == "the palace still works"


def test_palace_plugins_env_limits_third_party_plugins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_entry_points(
        monkeypatch, tmp_path, {"palace_test_broken": BROKEN, "palace_test_working": WORKING}
    )
    monkeypatch.setenv("PALACE_PLUGINS", "palace-test-working")
    pm = PluginManager()
    names = {i.name for i in pm.plugins()}
    assert "palace-test-working" in names
    assert "palace-test-broken" not in names
    assert set(BUILTINS) <= names  # the built-ins always load
    assert "palace-test-broken" not in {f.name for f in pm.failures}  # not even tried
    monkeypatch.setenv("PALACE_PLUGINS", "")
    assert "palace-test-working" not in {i.name for i in PluginManager().plugins()}


@pytest.mark.parametrize(
    ("kind", "name", "available"),
    [
        ("backend", "qdrantt", ["chroma", "sqlite"]),
        ("embedder", "openai", ["sentence-transformers"]),
        ("source", "slak", ["files"]),
    ],
)
def test_unknown_name_lists_the_available_ones(kind: str, name: str, available: list[str]) -> None:
    lookup = getattr(PluginManager(), kind)
    with pytest.raises(PluginNotFoundError) as caught:
        lookup(name)
    message = str(caught.value)
    assert f"no {kind} named {name!r}" in message
    for known in available:
        assert known in message
    assert "palace plugins" in message


def test_unknown_backend_or_embedder_at_open(tmp_path: Path) -> None:
    with pytest.raises(PluginNotFoundError, match=r"'nope'.*chroma.*sqlite"):
        Palace.open(tmp_path / "a", backend="nope")
    with pytest.raises(PluginNotFoundError, match=r"'nope'.*sentence-transformers"):
        Palace.open(tmp_path / "b", embedder="nope")


def test_unknown_source_when_mining(fake_palace: Palace, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    with pytest.raises(PluginNotFoundError, match=r"'discord'.*files"):
        fake_palace.mine(tmp_path / "a.txt", source="discord")


def _acme() -> Any:
    def register_backends(register: Callable[[str, Any], None]) -> None:
        register("sqlite", AcmeIndex)
        register("acme-only", AcmeIndex)

    return make_plugin("acme", palace_register_backends=register_backends)


def test_duplicate_name_builtin_keeps_the_plain_name() -> None:
    pm = PluginManager(plugins=[_acme()])
    assert pm.backend("sqlite") is ExactIndex
    assert pm.backend("acme:sqlite") is AcmeIndex
    assert pm.backend("acme-only") is AcmeIndex
    names = pm.registry("backend").names()
    assert "sqlite" in names
    assert "acme:sqlite" in names
    with pytest.raises(PluginNotFoundError):
        pm.backend("nobody:sqlite")


def test_duplicate_name_selected_by_plugin_prefix_at_open(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "p", backend="acme:sqlite", plugins=[_acme()])
    assert type(palace.indexes._indexes["drawers"]) is AcmeIndex
    plain = open_palace(tmp_path / "q", backend="sqlite", plugins=[_acme()])
    assert type(plain.indexes._indexes["drawers"]) is ExactIndex


def test_a_plugin_with_an_unknown_hook_is_refused() -> None:
    pm = PluginManager()
    bad = make_plugin("bad", palace_register_widgets=lambda register: None)
    with pytest.raises(PluginError, match="bad"):
        pm.register(bad)
    assert "bad" not in {i.name for i in pm.plugins()}


def test_a_plugin_that_raises_in_its_hook_is_named() -> None:
    def explode(register: Callable[[str, Any], None]) -> None:
        raise RuntimeError("kaboom")

    pm = PluginManager(plugins=[make_plugin("exploding", palace_register_backends=explode)])
    with pytest.raises(PluginError, match=r"'exploding'.*kaboom"):
        pm.backend("sqlite")


def test_an_embedder_plugin_must_return_an_embedder(tmp_path: Path) -> None:
    plugin = make_plugin(
        "liar",
        palace_register_embedders=lambda register: register("liar", lambda **kw: object()),
    )
    with pytest.raises(PluginError, match="'liar'"):
        Palace.open(tmp_path / "p", embedder="liar", plugins=[plugin], backend="sqlite")


def test_no_global_state_two_palaces_two_backends(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    exact = open_palace(tmp_path / "exact", backend="sqlite")
    chroma = open_palace(tmp_path / "chroma", backend="chroma")
    exact.add_texts(["only in the exact palace"])
    chroma.add_texts(["only in the chroma palace"])
    assert [h.text for h in exact.search("palace", k=5)] == ["only in the exact palace"]
    assert [h.text for h in chroma.search("palace", k=5)] == ["only in the chroma palace"]
    assert exact.stats().backend == "sqlite"
    assert chroma.stats().backend == "chroma"
    assert isinstance(exact.indexes._indexes["drawers"], VectorIndex)
    assert exact.plugins is not chroma.plugins


def test_backend_context_for_plugins(open_palace: Callable[..., Palace], tmp_path: Path) -> None:
    seen: list[BackendContext] = []

    def factory(context: BackendContext) -> VectorIndex:
        seen.append(context)
        return ExactIndex(context)

    plugin = make_plugin("spy", palace_register_backends=lambda register: register("spy", factory))
    open_palace(tmp_path / "p", backend="spy", plugins=[plugin]).close()
    assert {c.collection for c in seen} == {"drawers", "closets", "memories"}
    assert all(c.dimension == 64 and c.palace_dir == tmp_path / "p" for c in seen)
