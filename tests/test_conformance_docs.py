"""docs/plugins.md keeps up with the code: every hook and suite is documented, and its
minimal plugin, with its tests, passes the conformance suite it claims to pass."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import palace_plugins.testing
from palace_plugins import hookspecs

DOC = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"
FILE_BLOCK = re.compile(r"```python\n# (\w+\.py)\n(.*?)```", re.DOTALL)


def hook_names() -> list[str]:
    return sorted(
        name
        for name, value in inspect.getmembers(hookspecs, inspect.isfunction)
        if name.startswith("palace_")
    )


def test_every_hook_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert hook_names()
    for name in hook_names():
        assert f"### `{name}(register)`" in text, f"{name} has no section in {DOC.name}"
    documented = set(re.findall(r"^### `(palace_\w+)\(", text, re.MULTILINE))
    assert documented == set(hook_names()), "a section documents a hook that is gone"


def test_every_suite_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    suites = [name for name in palace_plugins.testing.__all__ if name.endswith("Tests")]
    assert len(suites) >= 4
    for suite in suites:
        assert f"| `{suite}` |" in text, f"{suite} is missing from the table in {DOC.name}"


def test_the_minimal_plugin_passes_its_suite(tmp_path: Path) -> None:
    files = dict(FILE_BLOCK.findall(DOC.read_text(encoding="utf-8")))
    assert set(files) == {"palace_hashtags.py", "test_hashtags.py"}
    for name, code in files.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_hashtags.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", result.stdout)
    assert passed is not None
    assert int(passed.group(1)) >= 15  # the suite's checks and the page's own two tests
