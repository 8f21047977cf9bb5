"""The LangChain example of ``integrations/README.md`` runs as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from langchain_core.documents import Document
from palace_retrievers import Palace

README = Path(__file__).resolve().parents[3] / "README.md"


def example(section: str) -> str:
    text = README.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", body, re.DOTALL)
    assert match, f"no python example under '## {section}'"
    return match.group(1)


def test_langchain_example(corpus_palace: Palace) -> None:
    code = example("LangChain")
    assert len(code.strip().splitlines()) <= 5
    code = code.replace('"~/.palace/default"', repr(str(corpus_palace.path)))
    code = code.replace('user_id="u1"', "user_id=None")
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(compile(code, str(README), "exec"), namespace)
    docs = namespace["docs"]
    assert isinstance(docs, list)
    assert docs
    assert all(isinstance(doc, Document) for doc in docs)
    assert docs[0].id == "db"
    assert "'vector'" in out.getvalue()
    namespace["retriever"].palace.close()  # type: ignore[attr-defined]
