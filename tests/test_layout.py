"""The layout docs/architecture.md draws is the one the code has.

docs/architecture.md lists the parts of ``palace_retrievers`` in layers, top first, in its
"Which way imports go" block. These tests read that block and check, over every import
of every module (those under ``if TYPE_CHECKING:`` too):

- every part that exists (a subpackage, a top-level module) is in exactly one layer,
  and every part the block names exists;
- an import goes to a lower layer, or to a part of its own layer, and the parts import
  one another without a cycle;
- no module imports the package's public face (``palace_retrievers/__init__.py``);
- every subpackage's ``__init__.py`` has a docstring saying its job;
- every file of the engine, and every module or name to import from it, that the README
  and docs/ name exists (so a move moves what the pages say).
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "palace_retrievers"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Upward imports made only for a type, each with the reason it cannot point down.
TYPE_ONLY_UP = {
    ("index", "ledger"): "BackendContext hands a backend plugin the palace's ledger to read",
}


@dataclass(frozen=True)
class Import:
    """One import of one part of the package by another."""

    source: str  # the importing part
    target: str  # the imported part ("" for the package's __init__)
    where: str  # path:line
    type_only: bool


def layers() -> list[list[str]]:
    """The parts of each layer, top first, as docs/architecture.md lists them."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = re.search(r"## Which way imports go\n.*?```\n(.*?)```", text, flags=re.S)
    assert block is not None, "docs/architecture.md has no 'Which way imports go' block"
    out = []
    for line in block[1].splitlines():
        _layer, *parts = line.split()
        out.append([part.removesuffix("/").removesuffix(".py") for part in parts])
    return out


def parts() -> set[str]:
    """The parts that exist: subpackages and top-level modules (not ``__init__``)."""
    found = set()
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            found.add(path.name)
        elif path.suffix == ".py" and path.name != "__init__.py":
            found.add(path.stem)
    return found


def module_of(path: Path) -> list[str]:
    names = list(path.with_suffix("").relative_to(ROOT).parts)
    return names[:-1] if names[-1] == "__init__" else names


def imported(path: Path, tree: ast.Module) -> Iterator[tuple[ast.stmt, str]]:
    """``(node, dotted module)`` for each import in ``tree``, relative ones resolved."""
    module = module_of(path)
    package = module if path.name == "__init__.py" else module[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            if name == "palace_retrievers":  # from palace_retrievers import web, config
                for alias in node.names:
                    yield node, f"palace_retrievers.{alias.name}"
            else:
                yield node, name


def type_checking_nodes(tree: ast.Module) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside.update(id(child) for child in ast.walk(node))
    return inside


def imports() -> list[Import]:
    found = []
    known = parts()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_of(path)
        if len(module) < 2:
            continue  # the package's __init__: the public face imports everything
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typed = type_checking_nodes(tree)
        for node, name in imported(path, tree):
            words = name.split(".")
            if words[0] != "palace_retrievers":
                continue
            target = words[1] if len(words) > 1 and words[1] in known else ""
            if target != module[1]:
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.append(Import(module[1], target, where, id(node) in typed))
    return found


def test_every_part_is_in_one_layer_and_every_layer_part_exists() -> None:
    listed = [part for layer in layers() for part in layer]
    assert len(listed) == len(set(listed)), "a part is listed in two layers"
    missing = parts() - set(listed)
    assert not missing, f"docs/architecture.md does not place {sorted(missing)} in a layer"
    gone = set(listed) - parts()
    assert not gone, f"docs/architecture.md places {sorted(gone)}, which do not exist"


def upward(found: list[Import], order: list[list[str]]) -> list[str]:
    """The imports in ``found`` that go up ``order`` (not counting :data:`TYPE_ONLY_UP`)."""
    level = {part: i for i, layer in enumerate(order) for part in layer}
    return [
        f"{imp.where}: {imp.source} -> {imp.target or 'palace_retrievers (the public face)'}"
        for imp in found
        if not imp.target
        or (
            level[imp.target] < level[imp.source]
            and not (imp.type_only and (imp.source, imp.target) in TYPE_ONLY_UP)
        )
    ]


def cycle(found: list[Import]) -> list[str]:
    """A circle of parts importing one another in ``found``, or ``[]``."""
    edges: dict[str, set[str]] = {}
    for imp in found:
        if not (imp.type_only and (imp.source, imp.target) in TYPE_ONLY_UP):
            edges.setdefault(imp.source, set()).add(imp.target)
    done: set[str] = set()

    def visit(part: str, path: list[str]) -> list[str]:
        if part in path:
            return [*path[path.index(part) :], part]
        if part not in done:
            for target in sorted(edges.get(part, ())):
                if circle := visit(target, [*path, part]):
                    return circle
            done.add(part)
        return []

    for part in sorted(edges):
        if circle := visit(part, []):
            return circle
    return []


def test_imports_go_down_the_layers() -> None:
    wrong = upward(imports(), layers())
    assert not wrong, "imports that go up the layers of docs/architecture.md:\n" + "\n".join(wrong)


def test_each_upward_import_allowed_is_still_made() -> None:
    """An allowance for an upward import that no longer exists is dropped, not kept."""
    made = {(imp.source, imp.target) for imp in imports() if imp.type_only}
    assert set(TYPE_ONLY_UP) <= made, set(TYPE_ONLY_UP) - made


def test_the_parts_import_one_another_without_a_cycle() -> None:
    circle = cycle(imports())
    assert not circle, "the parts import one another in a circle: " + " -> ".join(circle)


def test_the_checks_catch_an_upward_import_and_a_cycle() -> None:
    """The two checks above on imports made up: they fail where they should."""
    order = [["cli"], ["palace"], ["search", "memory"], ["ledger"]]
    down = [Import("cli", "palace", "a:1", False), Import("memory", "search", "b:1", False)]
    assert upward(down, order) == []
    assert cycle(down) == []
    up = Import("ledger", "palace", "c:1", True)  # type-only, and not an allowed one
    assert upward([*down, up], order) == ["c:1: ledger -> palace"]
    assert upward([Import("cli", "", "d:1", False)], order)  # the public face
    back = Import("search", "memory", "e:1", False)  # same layer, but round in a circle
    assert cycle([*down, back]) in (["memory", "search", "memory"], ["search", "memory", "search"])
    assert {"palace", "ledger"} <= {imp.source for imp in imports()}  # the real ones are read


@pytest.mark.parametrize(
    "package", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
)
def test_every_subpackage_says_its_job(package: str) -> None:
    tree = ast.parse((PACKAGE / package / "__init__.py").read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree)
    assert doc, f"palace_retrievers/{package}/__init__.py has no docstring"
    assert len(doc.split()) >= 8, f"palace_retrievers/{package}/__init__.py: say its job"


PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "integrations").glob("**/README.md")),
    ROOT / "benchmarks" / "README.md",
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_engine_path_a_page_names_exists(page: Path) -> None:
    """A page that names a file of the engine, or a module or name to import from it,
    names one that is there: moving a module moves what the pages say."""
    text = page.read_text(encoding="utf-8")
    for path in set(re.findall(r"\bpalace_retrievers/[\w/.]*\w", text)):
        assert (ROOT / path).exists(), f"{page.name}: {path}"
    for dotted in set(re.findall(r"\bpalace_retrievers(?:\.\w+)+", text)):
        module, names = dotted, []
        while module not in sys.modules:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError:
                module, _, name = module.rpartition(".")
                names.insert(0, name)
        value: object = sys.modules[module]
        for name in names:
            assert hasattr(value, name), f"{page.name}: {dotted}"
            value = getattr(value, name)
