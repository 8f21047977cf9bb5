"""User isolation of the write paths: no write by one owner ever touches another's records.

Every write that takes an id or names a fact (edit, pin, archive, restore, forget a memory;
delete or overwrite a drawer; invalidate or contradict a triple; and ``remember`` of the
victim's very words, which must not count as a duplicate of the victim's memory nor
supersede it) is made by an attacker on a victim's records, through each surface: the
Python API, the command line (``palace … --user``), the MCP tools (a server bound to the
attacker) and the web page (POSTs with a valid CSRF token, ``user`` = the attacker).
Owner pairs: alice on bob, the unowned partition on bob, alice on the unowned partition
(each in its own palace, where the attacker owns nothing).

Each case must answer clearly (an error naming the missing record, or a count of 0) and
leave the victim's records exactly as they were: every field and the history of their
memory, the memory's vector in the index, their drawer and its text, their triples open.

Only ownership matters: the FAKE hashing embedder and the exact ``sqlite`` backend.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN
from starlette.testclient import TestClient

from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import InvalidQueryError, MemoryNotFoundError
from palace_retrievers.mcp_server.tools import build_server
from palace_retrievers.web import create_app

Owner = str | None
PAIRS: list[tuple[Owner, Owner]] = [("alice", "bob"), (None, "bob"), ("alice", None)]
SECRET = "Zephyrine"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


@dataclass
class Victim:
    """One owner's records, as the attacker would name them."""

    owner: Owner
    memory: str
    archived: str
    memory_text: str
    drawer: str


@dataclass
class World:
    """A palace where only the victim has records; the attacker starts with none."""

    palace: Palace
    attacker: Owner
    victim: Victim


def _text(owner: Owner) -> str:
    return f"The {SECRET} vault code of {owner or 'nobody'} is 4471"


@pytest.fixture(scope="module", params=PAIRS, ids=lambda p: f"{p[0]}-on-{p[1]}")
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    attacker, owner = request.param
    path = tmp_path_factory.mktemp("isolation-writes") / "palace"
    with Palace.open(path, plugins=[FAKE_PLUGIN], embedder="fake", backend="sqlite") as palace:
        drawer = palace.add_texts(
            [f"{SECRET} launch notes of {owner}"], wing="vault", user_id=owner
        )
        memory = palace.remember(_text(owner), user_id=owner).memory.id
        archived = palace.remember(f"{SECRET} locker of {owner} is 12", user_id=owner)
        palace.delete_memory(archived.memory.id, user_id=owner)
        palace.kg.add(SECRET, "lives in", "Leeds", user_id=owner)
        victim = Victim(owner, memory, archived.memory.id, _text(owner), drawer[0])
        yield World(palace, attacker, victim)


def snapshot(palace: Palace, victim: Victim) -> dict[str, Any]:
    """Everything of the victim that a stray write could change."""
    memories = palace.ledger.get_memories([victim.memory, victim.archived])
    return {
        "memories": [repr(m) for m in memories],
        "history": [
            [repr(e) for e in palace.history(i, user_id=victim.owner)]
            for i in (victim.memory, victim.archived)
        ],
        "indexed": [e.id for e in palace.ledger.index_entries("memories", [victim.memory])],
        "drawers": [repr(d) for d in palace.get([victim.drawer], user_id=victim.owner)],
        "drawer_vectors": list(palace.ledger.drawer_vectors([victim.drawer])),
        "triples": [repr(t) for t in palace.kg.timeline(SECRET, user_id=victim.owner)],
        "open": [t.object for t in palace.kg.query(SECRET, user_id=victim.owner)],
    }


# -- the surfaces -------------------------------------------------------------------------


def run_cli(world: World, attacker: Owner, *args: str) -> Any:
    user = ["--user", attacker] if attacker is not None else []
    command = ["--palace", str(world.palace.path), *args, *user]
    with pytest.MonkeyPatch.context() as patch:
        original = Palace.open.__func__  # type: ignore[attr-defined]

        def open_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
            kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
            palace: Palace = original(cls, path, **kwargs)
            return palace

        patch.setattr(Palace, "open", classmethod(open_fake))
        return CliRunner().invoke(cli, command)


def call_mcp(world: World, attacker: Owner, tool: str, **arguments: Any) -> Any:
    server = build_server(world.palace, user_id=attacker)

    async def call() -> Any:
        return await server.call_tool(tool, arguments)

    return anyio.run(call)


def post_web(world: World, attacker: Owner, path: str, **form: str) -> Any:
    client = TestClient(
        create_app(world.palace), base_url="http://127.0.0.1", follow_redirects=False
    )
    page = client.get("/memories", params={"user": attacker} if attacker else {})
    match = CSRF.search(page.text)
    assert match, page.text
    data = {"csrf": match.group(1), "user": attacker or "", **form}
    return client.post(path, data=data)


# -- the cases: each makes the write and checks the answer --------------------------------


def _not_found(call: Callable[[], Any], victim: Victim) -> None:
    with pytest.raises(MemoryNotFoundError, match="no memory"):
        call()


def py_edit(w: World, a: Owner, v: Victim) -> None:
    _not_found(lambda: w.palace.edit_memory(v.memory, user_id=a, text="hijacked"), v)


def py_pin(w: World, a: Owner, v: Victim) -> None:
    _not_found(lambda: w.palace.pin(v.memory, user_id=a), v)


def py_archive(w: World, a: Owner, v: Victim) -> None:
    _not_found(lambda: w.palace.delete_memory(v.memory, user_id=a), v)


def py_restore(w: World, a: Owner, v: Victim) -> None:
    _not_found(lambda: w.palace.restore(v.archived, user_id=a), v)


def py_forget(w: World, a: Owner, v: Victim) -> None:
    assert w.palace.forget_memories([v.memory, v.archived], user_id=a) == 0


def py_delete_drawer(w: World, a: Owner, v: Victim) -> None:
    assert w.palace.delete([v.drawer], user_id=a) == 0


def py_overwrite_drawer(w: World, a: Owner, v: Victim) -> None:
    with pytest.raises(InvalidQueryError, match="another owner"):
        w.palace.add_texts(["hijacked"], ids=[v.drawer], user_id=a)


def py_invalidate(w: World, a: Owner, v: Victim) -> None:
    assert w.palace.kg.invalidate(SECRET, "lives in", "Leeds", user_id=a) == 0


def py_contradict(w: World, a: Owner, v: Victim) -> None:
    w.palace.kg.add(SECRET, "lives in", f"Paris-{a}", user_id=a)  # single-valued: closes a's own


def py_remember_same_words(w: World, a: Owner, v: Victim) -> None:
    got = w.palace.remember(v.memory_text, user_id=a)
    assert got.memory.id != v.memory
    assert got.memory.user_id == a
    assert got.action in ("added", "duplicate")  # a duplicate of the attacker's own, at most
    if got.previous is not None:
        assert got.previous.user_id == a


def py_remember_update(w: World, a: Owner, v: Victim) -> None:
    got = w.palace.remember(v.memory_text.replace("4471", "9000"), user_id=a)
    assert got.memory.user_id == a
    assert got.previous is None or got.previous.user_id == a


def _cli_fails(result: Any) -> None:
    assert result.exit_code == 1, result.output
    assert "no memory" in result.stderr
    assert "Traceback" not in result.output


def cli_edit(w: World, a: Owner, v: Victim) -> None:
    _cli_fails(run_cli(w, a, "memories", "edit", v.memory, "--text", "hijacked"))


def cli_pin(w: World, a: Owner, v: Victim) -> None:
    _cli_fails(run_cli(w, a, "memories", "edit", v.memory, "--pin"))


def cli_archive(w: World, a: Owner, v: Victim) -> None:
    _cli_fails(run_cli(w, a, "memories", "delete", v.memory))


def cli_restore(w: World, a: Owner, v: Victim) -> None:
    _cli_fails(run_cli(w, a, "restore", v.archived))


def cli_forget(w: World, a: Owner, v: Victim) -> None:
    result = run_cli(w, a, "forget", v.memory, v.archived, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"deleted": 0}


def cli_invalidate(w: World, a: Owner, v: Victim) -> None:
    result = run_cli(w, a, "kg", "invalidate", SECRET, "lives in", "Leeds", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"invalidated": 0}


def cli_remember(w: World, a: Owner, v: Victim) -> None:
    result = run_cli(w, a, "remember", v.memory_text, "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["memory"]["id"] != v.memory
    assert got["memory"]["user_id"] == a


def mcp_forget(w: World, a: Owner, v: Victim) -> None:
    result = call_mcp(w, a, "forget", memory_ids=[v.memory, v.archived])
    assert not result.is_error
    assert result.structured_content == {"deleted": 0}


def mcp_invalidate(w: World, a: Owner, v: Victim) -> None:
    result = call_mcp(w, a, "kg_invalidate", subject=SECRET, predicate="lives in", object="Leeds")
    assert not result.is_error
    assert result.structured_content == {"invalidated": 0}


def mcp_contradict(w: World, a: Owner, v: Victim) -> None:
    result = call_mcp(w, a, "kg_add", subject=SECRET, predicate="lives in", object="Oslo")
    assert not result.is_error, result.content


def mcp_remember(w: World, a: Owner, v: Victim) -> None:
    result = call_mcp(w, a, "remember", text=v.memory_text)
    assert not result.is_error, result.content
    assert result.structured_content["memory"]["id"] != v.memory


def _web_refused(response: Any) -> None:
    assert response.status_code == 404, (response.status_code, response.text[:300])
    assert "no memory" in response.text


def web_edit(w: World, a: Owner, v: Victim) -> None:
    _web_refused(post_web(w, a, f"/memories/{v.memory}/edit", text="hijacked", kind="fact"))


def web_pin(w: World, a: Owner, v: Victim) -> None:
    _web_refused(post_web(w, a, f"/memories/{v.memory}/pin"))


def web_archive(w: World, a: Owner, v: Victim) -> None:
    _web_refused(post_web(w, a, f"/memories/{v.memory}/delete"))


def web_restore(w: World, a: Owner, v: Victim) -> None:
    _web_refused(post_web(w, a, f"/memories/{v.archived}/restore"))


def web_remember(w: World, a: Owner, v: Victim) -> None:
    response = post_web(w, a, "/memories", text=v.memory_text)
    assert response.status_code == 303, response.text[:300]
    assert f"/memories/{v.memory}" not in response.headers["location"]


CASES: dict[str, Callable[[World, Owner, Victim], None]] = {
    name: case
    for name, case in globals().items()
    if name.startswith(("py_", "cli_", "mcp_", "web_")) and callable(case)
}


def test_every_surface_has_write_cases() -> None:
    """The premise: each surface is exercised, with the writes it offers."""
    surfaces = {name.split("_")[0] for name in CASES}
    assert surfaces == {"py", "cli", "mcp", "web"}
    assert len(CASES) >= 24


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_write_never_touches_another_owners_records(world: World, case: str) -> None:
    before = snapshot(world.palace, world.victim)
    assert before["memories"]
    assert before["drawers"]
    assert before["open"] == ["Leeds"]
    CASES[case](world, world.attacker, world.victim)
    assert snapshot(world.palace, world.victim) == before
