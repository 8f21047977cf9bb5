"""The LlamaIndex example of ``integrations/README.md`` runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from palace_retrievers import Palace

README = Path(__file__).resolve().parents[2] / "README.md"


def example(section: str) -> str:
    text = README.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", body, re.DOTALL)
    assert match, f"no python example under '## {section}'"
    return match.group(1)


@pytest.mark.slow
def test_llama_index_example(minilm_palace: Palace) -> None:
    minilm_palace.add_texts(
        ["We moved the main database to PostgreSQL 15."], ids=["readme-db"], user_id="u1"
    )
    code = example("LlamaIndex")
    assert len(code.strip().splitlines()) <= 6
    code = code.replace('"~/.palace/default"', repr(str(minilm_palace.path)))
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, str(README), "exec"), namespace)
    assert "PostgreSQL 15" in out.getvalue()  # MockLLM echoes the prompt with the context
    namespace["retriever"].palace.close()  # type: ignore[attr-defined]
