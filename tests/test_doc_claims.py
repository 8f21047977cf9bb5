"""What the README and docs/ say, checked against the code.

- every configuration key a page names exists, with the default the page gives;
- every `palace …` command and flag a page names exists;
- the parts of ``Hit.scores`` that docs/search.md lists are the ones a search gives, and
  ``final`` is the sum it says;
- "every memory and graph method takes ``user_id``": the methods that take none are the
  ones docs/guide.md names;
- the install commands name folders, extras and make targets that exist.

docs/cli.md is generated from ``--help`` and checked by ``tests/test_cli_docs.py``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.config import Config, to_dict
from palace_retrievers.graph.knowledge_graph import KnowledgeGraph

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: The pages whose claims are checked (docs/cli.md is generated and checked elsewhere).
PAGES = [
    ROOT / "README.md",
    *sorted(p for p in DOCS.glob("*.md") if p.name != "cli.md"),
    ROOT / "integrations" / "README.md",
]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def toml_value(text: str) -> Any:
    return tomllib.loads(f"value = {text}")["value"]


CONFIG = Config()
DEFAULTS = to_dict(CONFIG)


def default(dotted: str) -> Any:
    """The default of a configuration key, ``section.name`` (an unset key is ``None``)."""
    value: Any = CONFIG
    for part in dotted.split("."):
        names = {f.name for f in dataclasses.fields(value)} if is_dataclass(value) else value
        assert part in names, f"no configuration key {dotted}"
        value = getattr(value, part) if is_dataclass(value) else value[part]
    return value


# -- configuration ----------------------------------------------------------------------


def cells(line: str) -> list[str]:
    """The cells of a table row; a ``|`` inside backticks is text, not a border."""
    out, cell, code = [], "", False
    for char in line.strip().strip("|"):
        if char == "`":
            code = not code
        if char == "|" and not code:
            out.append(cell.strip())
            cell = ""
        else:
            cell += char
    return [*out, cell.strip()]


def table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the rows of the first table under ``heading``."""
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not line.startswith("|---"):
            rows.append(cells(line))
    return rows[1:]  # the header row


def test_the_search_knobs_and_their_defaults_are_the_configs() -> None:
    checked = 0
    for cells in table_rows(read(DOCS / "search.md"), "# Search"):
        keys = cells[-1]
        section = "graph" if keys.startswith("`[graph]`") else "search"
        for name, value in re.findall(r"`(\w+) = ([^`]+)`", keys):
            assert default(f"{section}.{name}") == toml_value(value), (section, name)
            checked += 1
    assert checked >= 25
    limit = re.search(r"`max_query_chars = (\d+)`", read(DOCS / "search.md"))
    assert limit is not None
    assert default("search.max_query_chars") == int(limit[1])


def test_the_guides_configuration_table_names_real_keys_and_defaults() -> None:
    rows = table_rows(read(DOCS / "guide.md"), "## Configuration")
    assert len(rows) > 10
    for key_cell, default_cell, _meaning in rows:
        keys = re.findall(r"`([^`]+)`", key_cell)
        defaults = [d.strip().strip("`") for d in default_cell.split(" / ")] if default_cell else []
        for i, key in enumerate(keys):
            if key.startswith("["):  # a table: [memory], [backends.<name>], ...
                assert key.strip("[]").split(".")[0] in DEFAULTS, key
            elif key.endswith(".*"):
                assert key[:-2] in DEFAULTS, key
            else:
                value = default(key)
                if defaults:
                    want = None if defaults[i] == "unset" else toml_value(defaults[i])
                    assert value == want, key


def test_the_guides_memory_numbers_are_the_defaults() -> None:
    text = " ".join(read(DOCS / "guide.md").split())
    recall = re.search(
        r"`([\d.]+) × relevance \+ ([\d.]+) × importance \+ ([\d.]+) × freshness "
        r"\(half-life (\d+) days\) \+ ([\d.]+) × heat`",
        text,
    )
    assert recall is not None
    names = ["relevance_weight", "importance_weight", "freshness_weight", "half_life_days"]
    for name, value in zip([*names, "heat_weight"], recall.groups(), strict=True):
        assert default(f"memory.{name}") == float(value), name
    gc = re.search(
        r"superseded for over (\d+) days and unused unimportant ones \((\d+) days, "
        r"importance < ([\d.]+)\)",
        text,
    )
    assert gc is not None
    assert default("memory.gc_superseded_days") == float(gc[1])
    assert default("memory.gc_unused_days") == float(gc[2])
    assert default("memory.gc_unused_importance") == float(gc[3])


# -- the command line -------------------------------------------------------------------


def commands(text: str) -> Iterator[list[str]]:
    """`palace …` as written in inline code and shell blocks, split into words."""
    spans = re.findall(r"`(palace [^`\n]+)`", text)
    blocks = re.findall(r"^```(?:sh|bash|shell)\n(.*?)^```", text, flags=re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines()]
    for written in [*spans, *(line for line in lines if line.startswith("palace "))]:
        if "|" in written or "/" in written.split("#")[0].split(" ")[1]:
            continue  # a list of commands (`palace init | mine PATH`, `kg add/query`)
        yield written.split("#")[0].split()[1:]


def resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    command: click.Command = cli
    options = [o for p in cli.params for o in getattr(p, "opts", [])]
    for word in words:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        command = command.commands[word]
        options += [o for p in command.params for o in (*p.opts, *p.secondary_opts)]
    return command, options


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_palace_command_and_flag_named_exists(page: Path) -> None:
    for words in commands(read(page)):
        command, options = resolve(words)
        assert command is not cli, f"{page.name}: no command `palace {' '.join(words)}`"
        for word in words:
            flag = word.split("=")[0]
            if re.fullmatch(r"--?[a-z][a-z-]*", flag):
                assert flag in options, f"{page.name}: `palace {' '.join(words)}`: {flag}"


# -- Hit.scores ---------------------------------------------------------------------------


def documented_scores() -> tuple[list[str], list[str]]:
    """The keys docs/search.md lists for a drawer hit, and the parts it sums to ``final``."""
    row = next(
        cells for cells in table_rows(read(DOCS / "search.md"), "# Search") if "6." in cells[0]
    )
    listed, formula = row[1].split("; ", 1)
    keys = re.findall(r"`(\w+)`", listed)
    parts = re.search(r"`final = ([\w +]+)`", formula)
    assert parts is not None
    return keys, [p.strip() for p in parts[1].split("+")]


def test_hit_scores_are_the_documented_parts(fake_palace: Palace) -> None:
    fake_palace.add_texts(
        ["Alice moved the orders database to PostgreSQL", "Bob likes chess", "orders ship daily"],
        metadatas=[{"speaker": "Alice"}, {}, {}],
    )
    keys, parts = documented_scores()
    hits = fake_palace.search("where did Alice put the orders database?", k=3, memories=False)
    assert hits
    for hit in hits:
        assert sorted(hit.scores) == sorted(keys)
        assert hit.scores["final"] == pytest.approx(sum(hit.scores[p] for p in parts))
        assert hit.score == hit.scores["final"]


# -- user_id ------------------------------------------------------------------------------

#: What docs/guide.md says takes no user: palace-wide, or not about records at all.
NO_USER = {"open", "close", "stats", "reindex", "writing", "import_jsonl"}
#: Accessors of the palace's plugins and a predicate of the graph's configuration.
NOT_RECORDS = {"closet_extractor", "memory_extractor", "memory_judge", "is_single_valued"}


def public_methods(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in inspect.getmembers(cls, callable):
        if not name.startswith("_"):
            yield name, member


@pytest.mark.parametrize("cls", [Palace, KnowledgeGraph])
def test_every_method_on_records_takes_a_user(cls: type) -> None:
    without = {
        name
        for name, method in public_methods(cls)
        if "user_id" not in inspect.signature(method).parameters
    }
    assert without <= NO_USER | NOT_RECORDS, without - NO_USER - NOT_RECORDS
    guide = read(DOCS / "guide.md")
    for name in without & NO_USER - {"open", "close", "writing"}:
        assert f"`{name}()`" in guide, name


# -- installing ---------------------------------------------------------------------------


def pyproject(folder: Path) -> dict[str, Any]:
    with (folder / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


@pytest.mark.parametrize("page", [ROOT / "README.md", DOCS / "install.md"], ids=lambda p: p.name)
def test_the_install_commands_name_what_exists(page: Path) -> None:
    text = read(page)
    installs = re.findall(r"pip install ([^`\n#]+)", text)
    assert installs
    for line in installs:
        for word in line.split():
            word = word.strip("\"'")
            if word.startswith("-") or "://" in word or word.split("==")[0] == "torch":
                continue
            match = re.fullmatch(r"([\w./-]+?)(?:\[([\w,]+)\])?", word)
            assert match is not None, word
            folder = ROOT / match[1]
            assert (folder / "pyproject.toml").is_file(), word
            extras = pyproject(folder)["project"].get("optional-dependencies", {})
            for extra in (match[2] or "").split(","):
                assert not extra or extra in extras, word
    makefile = read(ROOT / "Makefile")
    for target in set(re.findall(r"\bmake ([a-z][\w-]*)", text)):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target


def test_the_demo_installs_no_test_tool() -> None:
    makefile = read(ROOT / "Makefile")
    demo_install = re.search(r"^\$\(VENV\)/\.installed:.*\n\t(.*)\n", makefile, flags=re.M)
    assert demo_install is not None
    assert "[" not in demo_install[1]  # no extra: neither [dev] nor an integration's [test]
    extras = pyproject(ROOT)["project"]["optional-dependencies"]
    for tool in ("pytest", "selenium", "pgserver", "mypy", "ruff"):
        assert not any(tool in r for r in pyproject(ROOT)["project"]["dependencies"]), tool
        assert any(tool in r for name in ("test", "lint") for r in extras[name]), tool


# -- the tests a page cites -------------------------------------------------------------


KITS = sorted((ROOT / "palace_plugins" / "testing").glob("*.py"))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_test_a_page_cites_exists(page: Path) -> None:
    text = read(page)
    for path in set(re.findall(r"`((?:tests|palace_plugins|integrations)/[\w/.-]+\.py)", text)):
        assert (ROOT / path).is_file(), f"{page.name}: {path}"
    for path, names in re.findall(r"`((?:tests|palace_plugins)/[\w/.-]+\.py)((?:::\w+)+)", text):
        # A conformance test is inherited from the suite in palace_plugins/testing.
        source = read(ROOT / path) + "".join(map(read, KITS))
        for name in names.strip(":").split("::"):
            assert re.search(rf"^\s*(?:def|class) {name}\b", source, flags=re.M), (
                f"{page.name}: {path}::{name}"
            )


def test_every_error_the_guide_names_can_be_caught_from_the_package() -> None:
    import palace_retrievers

    named = set(re.findall(r"`(?:palace_retrievers\.)?(\w+Error)`", read(DOCS / "guide.md")))
    assert {"PalaceError", "PalaceBusyError"} <= named
    for name in named:
        error = getattr(palace_retrievers, name, None)
        assert isinstance(error, type), name
        assert issubclass(error, palace_retrievers.PalaceError), name


def test_the_mcp_tools_the_guide_lists_are_the_servers(fake_palace: Palace) -> None:
    import anyio

    from palace_retrievers.mcp_server import build_server

    text = " ".join(read(DOCS / "guide.md").split())
    listed = re.search(r"Tools: (.*?)\. A server is bound to one user", text)
    assert listed is not None
    names = set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", listed[1])))
    tools = anyio.run(build_server(fake_palace, user_id="u1").list_tools)
    assert names == {tool.name for tool in tools}


def test_the_guides_command_overview_lists_every_command() -> None:
    block = re.search(r"## CLI and MCP\n\n```sh\n(.*?)```", read(DOCS / "guide.md"), flags=re.S)
    assert block is not None
    listed: set[tuple[str, ...]] = set()
    for line in block[1].splitlines():
        for part in line.removeprefix("palace ").split(" | "):
            name, *rest = part.split()
            listed.add((name,))
            if rest and "/" in rest[0]:
                listed.update((name, sub) for sub in rest[0].split("/"))
    real = {(name,) for name in cli.commands}
    for name, command in cli.commands.items():
        if isinstance(command, click.Group):
            real.update((name, sub) for sub in command.commands)
    assert {path for path in listed if len(path) == 1} == {p for p in real if len(p) == 1}
    assert listed <= real, listed - real


def test_the_retriever_takes_what_the_readme_says() -> None:
    from langchain_palace import PalaceRetriever

    readme = " ".join(read(ROOT / "README.md").split())
    said = re.search(r"`PalaceRetriever` takes (.*?), as fields", readme)
    assert said is not None
    names = set(re.findall(r"`(\w+)`", said[1]))
    assert len(names) == 7
    assert names <= set(PalaceRetriever.model_fields)


def test_the_guides_plugin_table_has_every_hook_and_only_real_suites() -> None:
    import palace_plugins.testing
    from palace_plugins import hookspecs

    text = read(DOCS / "guide.md")
    hooks = {n for n, _ in inspect.getmembers(hookspecs, inspect.isfunction) if n[:7] == "palace_"}
    assert set(re.findall(r"^\| `(palace_\w+)\(register\)`", text, flags=re.M)) == hooks
    plugins = text.split("## Plugins", 1)[1]
    for suite in set(re.findall(r"`(\w+Tests)`", plugins)):
        assert suite in palace_plugins.testing.__all__, suite


def test_the_guides_layout_names_files_that_exist() -> None:
    block = re.search(r"## Layout\n\n```\n(.*?)```", read(DOCS / "guide.md"), flags=re.S)
    assert block is not None
    package = ROOT
    named = 0
    for line in block[1].splitlines():
        if not line.startswith(" "):
            top = line.split()[0]
            assert (ROOT / top).exists(), top
            package = ROOT / top
            continue
        words = line.strip().split("(")[0].split("  ")[0].split()
        for word in words:
            if word.endswith((".py", "/")):
                assert (package / word).exists(), f"{package.name}/{word}"
                named += 1
    assert named > 20
    listed = set(block[1].split())
    for path in (ROOT / "palace_retrievers").iterdir():
        if path.name.startswith("_") or path.name == "py.typed":
            continue
        name = path.name + "/" if path.is_dir() else path.name
        assert name in listed, f"docs/guide.md's layout leaves out palace_retrievers/{name}"
