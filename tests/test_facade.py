"""The facade by composition: ``Palace`` and ``Remembering`` hold their parts, mix none in,
and the clear names mean what their older names meant.

- ``delete_drawers`` is ``delete`` (drawers, for good), ``archive_memory`` is
  ``delete_memory`` (a memory, archived: ``restore`` brings it back); ``forget_memories``
  deletes memories for good.
- Every module of the engine is about 500 lines at most, or says at its top why not.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from palace_retrievers import MemoryNotFoundError, Palace
from palace_retrievers.memory.keeping import MemoryKeeping
from palace_retrievers.memory.remembering import Remembering

PACKAGE = Path(__file__).resolve().parents[1] / "palace_retrievers"
#: Lines a module may have without saying why it needs more.
LONG = 560


@pytest.mark.parametrize("cls", [Palace, Remembering, MemoryKeeping])
def test_the_facade_and_the_lifecycle_mix_nothing_in(cls: type) -> None:
    assert cls.__mro__ == (cls, object)


@pytest.mark.parametrize(
    ("clear", "older"), [("delete_drawers", "delete"), ("archive_memory", "delete_memory")]
)
def test_an_older_name_takes_what_its_clear_name_takes(clear: str, older: str) -> None:
    assert inspect.signature(getattr(Palace, clear)) == inspect.signature(getattr(Palace, older))
    assert f":meth:`{clear}`" in (getattr(Palace, older).__doc__ or "")


def test_delete_and_delete_drawers_remove_the_owners_drawers_for_good(fake_palace: Palace) -> None:
    a, b, c = fake_palace.add_texts(["alpha notes", "beta notes", "gamma notes"], user_id="u1")
    assert fake_palace.delete_drawers([a], user_id="u2") == 0  # another owner's: untouched
    assert fake_palace.delete_drawers([a], user_id="u1") == 1
    assert fake_palace.delete([b], user_id="u1") == 1
    assert [d.id for d in fake_palace.get([a, b, c], user_id="u1")] == [c]


def test_archive_memory_and_delete_memory_archive_and_forget_memories_erases(
    fake_palace: Palace,
) -> None:
    first = fake_palace.remember("Alice likes green tea", user_id="u1").memory
    second = fake_palace.remember("Bob plays the cello on Sundays", user_id="u1").memory
    assert fake_palace.archive_memory(first.id, user_id="u1").status == "archived"
    assert fake_palace.delete_memory(second.id, user_id="u1").status == "archived"
    assert fake_palace.restore(first.id, user_id="u1").status == "active"
    assert fake_palace.forget_memories([first.id], user_id="u1") == 1
    with pytest.raises(MemoryNotFoundError):
        fake_palace.memory(first.id, user_id="u1")
    assert [e.event for e in fake_palace.history(first.id, user_id="u1")][-1] == "delete"


def test_a_long_module_says_why() -> None:
    unsaid = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines <= LONG:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if "lines" not in doc:
            unsaid.append(f"{path.relative_to(PACKAGE.parent)} ({lines} lines)")
    assert not unsaid, "long modules that do not say why at their top: " + ", ".join(unsaid)
