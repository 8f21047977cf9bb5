"""User isolation under every entry point: a matrix of entry points × owners.

One palace holds, for ``alice``, ``bob`` and no one (the unowned partition), drawers,
memories, closets (built by the regex extractor from the drawers' proper nouns) and
triples that all name the same secret word, each carrying its owner's marker. Every entry
point (the Python API, LangChain, LlamaIndex, the CLI, the web page and the MCP tools) is
asked, for each owner, about that word; every item it answers must carry that owner's
marker and no other, and the owner's own items must be found (so each case can fail both
ways).

Meaning does not matter here, only who owns what: the FAKE hashing embedder is used (the
texts share their words, so everything is a candidate for every query), on the exact
``sqlite`` backend; the Python search paths also run on the real Chroma index.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from fakes import FAKE_PLUGIN
from starlette.testclient import TestClient

from palace_retrievers import Filter, Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import MemoryNotFoundError
from palace_retrievers.mcp_server.tools import build_server
from palace_retrievers.web import create_app

Owner = str | None

#: Each owner's marker: every record of that owner carries it, no other record does.
MARKERS: dict[Owner, str] = {"alice": "ALICE-7f3", "bob": "BOB-9c1", None: "NOBODY-2d8"}
OWNERS: tuple[Owner, ...] = tuple(MARKERS)
SECRET = "Zephyrine"
QUERY = "Zephyrine vault code Marseille"


def owner_id(owner: Owner) -> str:
    return owner or "unowned"


def wing_of(owner: Owner) -> str:
    """Each owner's drawers live in a wing of their own, named after their marker."""
    return f"vault-{MARKERS[owner].lower()}"


def owners_in(text: str) -> set[Owner]:
    """The owners whose marker ``text`` carries (case-insensitive)."""
    folded = text.casefold()
    return {owner for owner, marker in MARKERS.items() if marker.casefold() in folded}


@dataclass
class Built:
    """The palace and the ids of what each owner holds."""

    palace: Palace
    drawers: dict[Owner, list[str]]
    memories: dict[Owner, list[str]]

    @property
    def all_drawers(self) -> list[str]:
        return [i for ids in self.drawers.values() for i in ids]

    @property
    def all_memories(self) -> list[str]:
        return [i for ids in self.memories.values() for i in ids]


def build(palace: Palace) -> Built:
    """File every kind of record for each owner; each names the secret and its marker."""
    drawers: dict[Owner, list[str]] = {}
    memories: dict[Owner, list[str]] = {}
    for owner, marker in MARKERS.items():
        drawers[owner] = palace.add_texts(
            [
                f"{SECRET} launch notes from Marseille: the vault code is {marker}.",
                f"Orlanda Vance keeps the {SECRET} ledger; her badge reads {marker}.",
            ],
            wing=wing_of(owner),
            room="plans",
            user_id=owner,
        )
        remembered = palace.remember(f"The {SECRET} vault code is {marker}", user_id=owner)
        memories[owner] = [remembered.memory.id]
        palace.kg.add(SECRET, "vault_code", marker, user_id=owner, source_drawer=drawers[owner][0])
    return Built(palace, drawers, memories)


@pytest.fixture(scope="module")
def sqlite_built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    path = tmp_path_factory.mktemp("isolation") / "palace"
    with Palace.open(path, plugins=[FAKE_PLUGIN], embedder="fake", backend="sqlite") as palace:
        yield build(palace)


@pytest.fixture(scope="module")
def chroma_built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    path = tmp_path_factory.mktemp("isolation-chroma") / "palace"
    with Palace.open(path, plugins=[FAKE_PLUGIN], embedder="fake", backend="chroma") as palace:
        yield build(palace)


def test_the_palace_holds_every_kind_of_record_for_every_owner(sqlite_built: Built) -> None:
    """The premise of the matrix: each owner really has drawers, memories, closets and
    triples about the secret, so an empty answer elsewhere would be a failure."""
    ledger = sqlite_built.palace.ledger
    for owner in OWNERS:
        if owner is not None:
            rows = ledger.user_rows(owner)
            for table in ("drawers", "memories", "closets", "triples"):
                assert rows[table] > 0, (owner, table, rows)
    closets = [c for batch in ledger.iter_closets() for c in batch]
    assert {c.user_id for c in closets} == set(OWNERS)
    for closet in closets:
        assert set(closet.drawer_ids) <= set(sqlite_built.drawers[closet.user_id])


# -- the entry points ----------------------------------------------------------------------
#
# Each returns the items it answered for ``owner`` as strings: every one must carry the
# owner's marker only, and together they must include the owner's own records.

Ask = Callable[[Built, Owner], list[str]]


def _py_search(built: Built, owner: Owner) -> list[str]:
    hits = built.palace.search(QUERY, k=20, user_id=owner)
    assert any(h.is_memory for h in hits)
    assert any(not h.is_memory for h in hits)
    assert {h.drawer.user_id for h in hits} == {owner}
    return [h.text for h in hits]


def _py_search_by_vector(built: Built, owner: Owner) -> list[str]:
    vector = built.palace.embedder.embed_query(QUERY)
    hits = built.palace.search_by_vector(vector, k=20, user_id=owner)
    assert {h.drawer.user_id for h in hits} == {owner}
    return [h.text for h in hits]


def _py_closets(built: Built, owner: Owner) -> list[str]:
    """The closet stage of search: the closets found for the owner, and the drawers
    their boosts raise (``scores["closet"]``), are the owner's only."""
    palace = built.palace
    vector = palace.embedder.embed_query(QUERY)
    matches = palace.indexes.query("closets", vector=vector, k=50, where=Filter(user_id=owner))
    owners = {c.id: c.user_id for batch in palace.ledger.iter_closets() for c in batch}
    assert matches
    assert {owners[m.id] for m in matches} == {owner}
    pointed = palace.ledger.closet_pointers([m.id for m in matches])
    boosted = [h for h in palace.search(QUERY, k=20, user_id=owner) if h.scores.get("closet")]
    assert boosted, "no hit was raised by a closet"
    drawers = palace.ledger.get_drawers([i for ids in pointed.values() for i in ids])
    return [d.text for d in drawers] + [h.text for h in boosted]


def _py_get(built: Built, owner: Owner) -> list[str]:
    return [d.text for d in built.palace.get(built.all_drawers, user_id=owner)]


def _py_memories(built: Built, owner: Owner) -> list[str]:
    return [m.text for m in built.palace.memories(user_id=owner, status=None)]


def _py_memory(built: Built, owner: Owner) -> list[str]:
    found = []
    for memory_id in built.all_memories:
        try:
            found.append(built.palace.memory(memory_id, user_id=owner).text)
        except MemoryNotFoundError:
            assert memory_id not in built.memories[owner]
    return found


def _py_context(built: Built, owner: Owner) -> list[str]:
    return [built.palace.context(QUERY, user_id=owner, drawers=True)]


def _py_kg_query(built: Built, owner: Owner) -> list[str]:
    return [json.dumps(t.as_dict()) for t in built.palace.kg.query(SECRET, user_id=owner)]


def _py_kg_timeline(built: Built, owner: Owner) -> list[str]:
    return [json.dumps(t.as_dict()) for t in built.palace.kg.timeline(SECRET, user_id=owner)]


def _py_wings(built: Built, owner: Owner) -> list[str]:
    wings = built.palace.wings(user_id=owner)
    assert wings == {wing_of(owner): {"plans": 2}}
    return list(wings)


def _lc_retriever(built: Built, owner: Owner) -> list[str]:
    from langchain_palace import PalaceRetriever

    retriever = PalaceRetriever(palace=built.palace, k=20, user_id=owner)
    return [d.page_content for d in retriever.invoke(QUERY)]


def _lc_store(built: Built, owner: Owner) -> list[str]:
    from langchain_palace import PalaceVectorStore

    store = PalaceVectorStore(built.palace, user_id=owner)
    vector = store.embeddings.embed_query(QUERY)
    docs = [
        *store.similarity_search(QUERY, k=20),
        *store.similarity_search_by_vector(vector, k=20),
        *store.max_marginal_relevance_search(QUERY, k=5, fetch_k=20),
        *store.get_by_ids(built.all_drawers),
    ]
    return [d.page_content for d in docs]


def _li_retriever(built: Built, owner: Owner) -> list[str]:
    from llama_index.retrievers.palace import PalaceRetriever

    retriever = PalaceRetriever(built.palace, similarity_top_k=20, user_id=owner)
    return [n.node.get_content() for n in retriever.retrieve(QUERY)]


def _li_store(built: Built, owner: Owner) -> list[str]:
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.vector_stores.palace import PalaceVectorStore

    store = PalaceVectorStore(built.palace, user_id=owner)
    vector = [float(x) for x in built.palace.embedder.embed_query(QUERY)]
    nodes = [
        *(store.query(VectorStoreQuery(query_str=QUERY, similarity_top_k=20)).nodes or []),
        *(store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=20)).nodes or []),
        *store.get_nodes(node_ids=built.all_drawers),
        *store.get_nodes(),
    ]
    return [n.get_content() for n in nodes]


def _cli(built: Built, owner: Owner, *args: str) -> Any:
    """Run a CLI command (with ``--json``) on the palace as ``owner``."""
    user = ["--user", owner] if owner is not None else []
    command = ["--palace", str(built.palace.path), *args, *user, "--json"]
    with pytest.MonkeyPatch.context() as patch:
        original = Palace.open.__func__  # type: ignore[attr-defined]

        def open_fake(cls: type[Palace], /, path: Any = None, **kwargs: Any) -> Palace:
            kwargs.setdefault("embedder", "fake")
            kwargs.setdefault("backend", "sqlite")
            kwargs["plugins"] = [FAKE_PLUGIN, *kwargs.get("plugins", ())]
            palace: Palace = original(cls, path, **kwargs)
            return palace

        patch.setattr(Palace, "open", classmethod(open_fake))
        result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.stderr or result.stdout
    return json.loads(result.stdout)


def _cli_search(built: Built, owner: Owner) -> list[str]:
    return [hit["text"] for hit in _cli(built, owner, "search", QUERY, "-k", "20")]


def _cli_memories(built: Built, owner: Owner) -> list[str]:
    return [m["text"] for m in _cli(built, owner, "memories", "list")]


def _cli_context(built: Built, owner: Owner) -> list[str]:
    return [_cli(built, owner, "context", QUERY)["context"]]


def _cli_kg(built: Built, owner: Owner) -> list[str]:
    triples = [*_cli(built, owner, "kg", "query", SECRET)]
    triples += _cli(built, owner, "kg", "timeline", SECRET)
    return [json.dumps(t) for t in triples]


def _web(built: Built, owner: Owner, path: str, **params: str) -> str:
    client = TestClient(create_app(built.palace), base_url="http://127.0.0.1")
    if owner is not None:
        params["user"] = owner
    page = client.get(path, params=params)
    assert page.status_code == 200, page.text
    return page.text


def _web_search(built: Built, owner: Owner) -> list[str]:
    return [_web(built, owner, "/search", q=QUERY, k="20")]


def _web_memories(built: Built, owner: Owner) -> list[str]:
    return [_web(built, owner, "/memories", status="all")]


def _web_timeline(built: Built, owner: Owner) -> list[str]:
    return [_web(built, owner, "/timeline", entity=SECRET)]


def _web_wings(built: Built, owner: Owner) -> list[str]:
    return [_web(built, owner, "/wings")]


def _web_drawers(built: Built, owner: Owner) -> list[str]:
    """Each drawer's page: the owner's open, every other one is a 404."""
    client = TestClient(create_app(built.palace), base_url="http://127.0.0.1")
    params = {"user": owner} if owner is not None else {}
    pages = []
    for drawer_id in built.all_drawers:
        page = client.get(f"/drawers/{drawer_id}", params=params)
        mine = drawer_id in built.drawers[owner]
        assert page.status_code == (200 if mine else 404), (drawer_id, page.status_code)
        if mine:
            pages.append(page.text)
    return pages


def _mcp(built: Built, owner: Owner, tool: str, **arguments: Any) -> Any:
    """Call one MCP tool in-process, on a server bound to ``owner``."""
    server = build_server(built.palace, user_id=owner)

    async def call() -> Any:
        return await server.call_tool(tool, arguments)

    result = anyio.run(call)
    assert not result.is_error, result
    return result.structured_content


def _mcp_search(built: Built, owner: Owner) -> list[str]:
    hits = _mcp(built, owner, "search", query=QUERY, k=20)["hits"]
    assert hits
    ids = [h["id"] for h in hits]
    found = _mcp(built, owner, "get_drawer", ids=ids)
    assert found["missing"] == []
    return [d["text"] for d in found["drawers"]]


def _mcp_get_drawer(built: Built, owner: Owner) -> list[str]:
    ids = built.all_drawers + built.all_memories
    found = _mcp(built, owner, "get_drawer", ids=ids)
    mine = set(built.drawers[owner] + built.memories[owner])
    assert set(found["missing"]) == set(ids) - mine
    return [d["text"] for d in found["drawers"]]


def _mcp_memories(built: Built, owner: Owner) -> list[str]:
    return [m["text"] for m in _mcp(built, owner, "memories")["memories"]]


def _mcp_context(built: Built, owner: Owner) -> list[str]:
    result = _mcp(built, owner, "context", query=QUERY)
    return [json.dumps(result)]


def _mcp_kg(built: Built, owner: Owner) -> list[str]:
    triples = _mcp(built, owner, "kg_query", entity=SECRET)["triples"]
    triples += _mcp(built, owner, "kg_timeline", entity=SECRET)["triples"]
    return [json.dumps(t) for t in triples]


def _mcp_wings(built: Built, owner: Owner) -> list[str]:
    wings = _mcp(built, owner, "list_wings")["wings"]
    assert [w["wing"] for w in wings] == [wing_of(owner)]
    return [w["wing"] for w in wings]


ENTRY_POINTS: dict[str, Ask] = {
    "python-search": _py_search,
    "python-search_by_vector": _py_search_by_vector,
    "python-closets": _py_closets,
    "python-get": _py_get,
    "python-memories": _py_memories,
    "python-memory": _py_memory,
    "python-context": _py_context,
    "python-kg.query": _py_kg_query,
    "python-kg.timeline": _py_kg_timeline,
    "python-wings": _py_wings,
    "langchain-retriever": _lc_retriever,
    "langchain-vectorstore": _lc_store,
    "llamaindex-retriever": _li_retriever,
    "llamaindex-vectorstore": _li_store,
    "cli-search": _cli_search,
    "cli-memories": _cli_memories,
    "cli-context": _cli_context,
    "cli-kg": _cli_kg,
    "web-search": _web_search,
    "web-memories": _web_memories,
    "web-timeline": _web_timeline,
    "web-wings": _web_wings,
    "web-drawers": _web_drawers,
    "mcp-search": _mcp_search,
    "mcp-get_drawer": _mcp_get_drawer,
    "mcp-memories": _mcp_memories,
    "mcp-context": _mcp_context,
    "mcp-kg": _mcp_kg,
    "mcp-wings": _mcp_wings,
}

#: Entry points that leak, found by this matrix (reported, not fixed here).
LEAKS: dict[str, str] = {}


def _case(name: str, owner: Owner) -> Any:
    marks = []
    if name in LEAKS:
        marks.append(pytest.mark.xfail(strict=True, reason=LEAKS[name]))
    return pytest.param(name, owner, id=f"{name}-{owner_id(owner)}", marks=marks)


def assert_isolated(items: list[str], owner: Owner) -> None:
    """Every item carries ``owner``'s marker and no other; and something was found."""
    assert items, f"nothing of {owner_id(owner)} was found"
    for item in items:
        assert owners_in(item) == {owner}, (owner_id(owner), item)


@pytest.mark.parametrize(
    ("entry_point", "owner"), [_case(name, owner) for name in ENTRY_POINTS for owner in OWNERS]
)
def test_an_entry_point_answers_only_with_the_owners_records(
    sqlite_built: Built, entry_point: str, owner: Owner
) -> None:
    assert_isolated(ENTRY_POINTS[entry_point](sqlite_built, owner), owner)


CHROMA_PATHS = ("python-search", "python-search_by_vector", "python-closets")


@pytest.mark.parametrize(
    ("entry_point", "owner"), [_case(name, owner) for name in CHROMA_PATHS for owner in OWNERS]
)
def test_the_python_search_paths_are_isolated_on_chroma_too(
    chroma_built: Built, entry_point: str, owner: Owner
) -> None:
    assert_isolated(ENTRY_POINTS[entry_point](chroma_built, owner), owner)


def test_a_stranger_gets_nothing_anywhere(sqlite_built: Built) -> None:
    """A user with no records is answered with nothing of the three owners."""
    palace, stranger = sqlite_built.palace, "mallory"
    assert palace.search(QUERY, k=20, user_id=stranger) == []
    assert palace.get(sqlite_built.all_drawers, user_id=stranger) == []
    assert palace.memories(user_id=stranger, status=None) == []
    assert palace.context(QUERY, user_id=stranger, drawers=True) == ""
    assert palace.kg.timeline(SECRET, user_id=stranger) == []
    assert palace.wings(user_id=stranger) == {}
    assert owners_in(_web(sqlite_built, stranger, "/search", q=QUERY)) == set()
    assert _mcp(sqlite_built, stranger, "search", query=QUERY)["hits"] == []
