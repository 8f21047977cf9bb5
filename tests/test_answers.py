"""The palace's answer cache (``answers.sqlite``): kept per namespace and owner, shared by
threads, forgotten per owner, and a file that cannot be used costs only the questions."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from palace_retrievers.errors import PalaceReadOnlyError
from palace_retrievers.facade.answers import ANSWERS_FILE, Answers


def test_answers_are_kept_per_namespace_and_owner(tmp_path: Path) -> None:
    answers = Answers(tmp_path / ANSWERS_FILE)
    assert answers.get("n", "", ["k"]) == {}
    assert not (tmp_path / ANSWERS_FILE).exists()  # nothing kept, no file
    answers.put("n", "", {"k": "for nobody", "j": "other"})
    answers.put("n", "u1", {"k": "for u1"})
    answers.put("m", "", {"k": "another plugin's"})
    assert answers.get("n", "", ["k", "k", "missing"]) == {"k": "for nobody"}
    assert answers.get("n", "u1", ["k", "j"]) == {"k": "for u1"}
    answers.close()
    again = Answers(tmp_path / ANSWERS_FILE)  # kept in the file
    assert again.get("m", "", ["k"]) == {"k": "another plugin's"}
    assert again.forget("u1") == 1
    assert again.get("n", "u1", ["k"]) == {}
    assert again.get("n", "", ["k"]) == {"k": "for nobody"}
    again.close()


def test_many_keys_and_threads(tmp_path: Path) -> None:
    answers = Answers(tmp_path / ANSWERS_FILE)
    keys = [f"k{n}" for n in range(1200)]  # more than one SELECT's worth

    def put(start: int) -> None:
        answers.put("n", "", {k: k.upper() for k in keys[start : start + 100]})

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(put, range(0, 1200, 100)))
    assert answers.get("n", "", keys) == {k: k.upper() for k in keys}
    answers.close()


def test_a_file_that_is_no_database_costs_only_the_questions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / ANSWERS_FILE
    path.write_bytes(b"this is not a database" * 100)
    answers = Answers(path)
    answers.put("n", "", {"k": "v"})
    assert answers.get("n", "", ["k"]) == {}
    assert "model answers are not kept" in caplog.text
    with pytest.raises(PalaceReadOnlyError, match="delete it"):
        answers.forget("u1")
    answers.close()
