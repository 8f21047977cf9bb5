"""The examples of this package's README and of ``integrations/README.md`` run as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from palace_retrievers import Palace

HERE = Path(__file__).resolve().parents[1]
READMES = {
    "package": (HERE / "README.md", None),
    "integrations": (HERE.parent / "README.md", "LangGraph"),
}


def example(page: Path, section: str | None) -> str:
    text = page.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1] if section else text
    match = re.search(r"```python\n(.*?)```", body, re.DOTALL)
    assert match, f"no python example in {page} under {section}"
    return match.group(1)


@pytest.mark.parametrize("readme", READMES)
def test_the_example_runs(readme: str, tmp_path: Path) -> None:
    page, section = READMES[readme]
    code = example(page, section)
    assert len(code.strip().splitlines()) <= 6
    Palace.open(tmp_path / "palace").close()
    code = code.replace('"~/.palace/default"', repr(str(tmp_path / "palace")))
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, str(page), "exec"), namespace)
    store = namespace["store"]
    palace = store.palace  # type: ignore[attr-defined]
    try:
        current = palace.memories(user_id="u1")
        assert len(current) == 1
        if readme == "package":
            assert current[0].text == "I live in Porto now"
            (old,) = palace.memories(user_id="u1", status="superseded")
            assert old.text == "I live in Lisbon"
        else:
            assert "PostgreSQL" in out.getvalue()
    finally:
        store.close()  # type: ignore[attr-defined]
