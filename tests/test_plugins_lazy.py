"""Lazy plugins: a name registered by reference is imported when it is first used, and
the plugin machinery loads without the engine (no import cycle between the packages)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from fakes import make_plugin

from palace_plugins import PluginManager
from palace_plugins.builtin import entry_points
from palace_retrievers import PluginError

LAZY_MODULE = "palace_test_lazy_factory"


def _python(code: str) -> str:
    """Run ``code`` in a fresh interpreter; returns what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_reference_is_imported_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / f"{LAZY_MODULE}.py").write_text(
        "from palace_plugins.builtin.backends.exact import ExactIndex\n"
        "class LazyIndex(ExactIndex):\n    pass\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, LAZY_MODULE, raising=False)
    plugin = make_plugin(
        "lazy",
        palace_register_backends=lambda register: register("lazy", f"{LAZY_MODULE}:LazyIndex"),
    )
    pm = PluginManager(plugins=[plugin])
    assert "lazy" in pm.registry("backend").names()
    assert LAZY_MODULE not in sys.modules
    factory = pm.backend("lazy")
    assert factory is sys.modules[LAZY_MODULE].LazyIndex
    assert pm.backend("lazy") is factory


@pytest.mark.parametrize(
    ("reference", "error"),
    [
        ("palace_test_no_such_module:Thing", "cannot be imported"),
        ("palace_plugins.builtin.backends.exact:NoSuchThing", "cannot be imported"),
        ("palace_plugins.builtin.backends.exact", "not a factory"),
        ("palace_plugins.builtin.backends.exact:__doc__", "not a factory"),
    ],
)
def test_a_bad_reference_is_a_plugin_error_naming_it(reference: str, error: str) -> None:
    plugin = make_plugin(
        "careless", palace_register_backends=lambda register: register("careless", reference)
    )
    pm = PluginManager(plugins=[plugin])
    with pytest.raises(PluginError, match=rf"'careless'.*{error}"):
        pm.backend("careless")


def test_every_builtin_reference_resolves() -> None:
    pm = PluginManager()
    kinds = {
        "palace_register_backends": pm.backend,
        "palace_register_embedders": pm.embedder,
        "palace_register_sources": pm.source,
        "palace_register_closet_extractors": pm.closet_extractor,
        "palace_register_memory_extractors": pm.memory_extractor,
        "palace_register_memory_judges": pm.memory_judge,
    }
    for ep in metadata.entry_points(group="palace"):
        if ep.dist is None or ep.dist.name != "palace-retrievers":
            continue
        builtin = getattr(entry_points, ep.name.replace("-", "_"))
        assert ep.load() is builtin
        (hook,) = [name for name in kinds if hasattr(builtin, name)]
        for name in builtin.references:
            assert callable(kinds[hook](name))


def test_loading_the_plugins_imports_no_builtin_nor_third_party_module() -> None:
    loaded = _python(
        "import sys\n"
        "from palace_plugins import PluginManager\n"
        "pm = PluginManager()\n"
        "assert 'files' in pm.registry('source').names()\n"
        "print('\\n'.join(sys.modules))\n"
    ).split()
    heavy = [
        m
        for m in loaded
        if m.startswith(("palace_plugins.builtin.", "markitdown", "chromadb", "torch"))
        and m != "palace_plugins.builtin.entry_points"
    ]
    assert heavy == []


def test_the_plugin_machinery_does_not_import_the_engine() -> None:
    """No cycle: palace_plugins' manager needs only the engine's errors, and the engine
    (its facade) imports the manager; either package can be imported first."""
    loaded = set(_python("import sys, palace_plugins\nprint('\\n'.join(sys.modules))").split())
    engine = {m for m in loaded if m.startswith("palace_retrievers.")}
    assert engine <= {"palace_retrievers.errors"}
    _python("import palace_plugins.manager\nfrom palace_retrievers import Palace\n")
    _python("from palace_retrievers import Palace\nimport palace_plugins.manager\n")
