"""The memory page through Starlette's TestClient, against a real SQLite palace.

These tests use the FAKE embedder (``open_palace``'s default): they are about what the
page shows and refuses, not about what search finds. The browser tests
(tests/test_web_browser.py) drive the real app in chromium with the real model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from palace_retrievers import Filter, Palace
from palace_retrievers.errors import ConfigError, MemoryNotFoundError
from palace_retrievers.web import UnsafeBindError, create_app, serve
from palace_retrievers.web.server import check_host, is_loopback

SCRIPT = "<script>window.pwned = 1</script>"
CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
#: Where the tests' clients say they reach the page (its Host header): the default bind.
BASE = "http://127.0.0.1:8765"
TOKEN = "s3cret-page-token-0042"


@pytest.fixture
def palace(open_palace: Callable[..., Palace], tmp_path: Path) -> Palace:
    return open_palace(tmp_path / "palace", backend="sqlite")


def client_for(app: Any, base_url: str = BASE, **kwargs: Any) -> TestClient:
    """A TestClient that reaches ``app`` as a browser on this machine would."""
    return TestClient(app, base_url=base_url, **kwargs)


@pytest.fixture
def client(palace: Palace) -> TestClient:
    return client_for(create_app(palace))


def csrf_of(client: TestClient, path: str = "/memories") -> str:
    """The CSRF token of the client's session, read from a page's form."""
    page = client.get(path)
    assert page.status_code == 200
    match = CSRF.search(page.text)
    assert match, "the page has no CSRF field"
    return match.group(1)


# -- reading ------------------------------------------------------------------------------


def test_search_shows_each_hit_with_its_score_parts(palace: Palace, client: TestClient) -> None:
    palace.add_texts(
        ["the orders database runs on postgres", "lunch is at noon"],
        wing="work",
        room="infra",
        user_id="u1",
    )
    page = client.get("/search", params={"q": "orders database postgres", "user": "u1"})
    assert page.status_code == 200
    assert "the orders database runs on postgres" in page.text
    hits = palace.search("orders database postgres", user_id="u1")
    for part in hits[0].scores:
        assert f"<th>{part}</th>" in page.text
    assert f"{hits[0].score:.3f}" in page.text
    assert "work / infra" in page.text


def test_wings_rooms_and_drawers_are_browsable(palace: Palace, client: TestClient) -> None:
    palace.add_texts(["alpha note"], wing="notes", room="ideas", user_id="u1")
    palace.add_texts(["beta note", "gamma note"], wing="notes", room="todo", user_id="u1")
    wings = client.get("/wings", params={"user": "u1"})
    assert wings.status_code == 200
    assert "ideas" in wings.text
    assert "todo" in wings.text
    room = client.get("/browse", params={"wing": "notes", "room": "todo", "user": "u1"})
    assert "beta note" in room.text
    assert "gamma note" in room.text
    assert "alpha note" not in room.text
    (drawer_id,) = palace.ledger.drawer_ids(palace_filter(wing="notes", room="ideas", user="u1"))
    drawer = client.get(f"/drawers/{drawer_id}", params={"user": "u1"})
    assert drawer.status_code == 200
    assert "alpha note" in drawer.text


def palace_filter(*, wing: str, room: str, user: str) -> Filter:
    return Filter(wing=wing, room=room, user_id=user)


def test_memories_are_listed_by_kind_and_status(palace: Palace, client: TestClient) -> None:
    fact = palace.remember("The office is on the third floor", kind="fact", user_id="u1")
    liked = palace.remember("I prefer green tea", kind="preference", user_id="u1")
    gone = palace.remember("The wifi password is hunter2", kind="fact", user_id="u1")
    palace.delete_memory(gone.memory.id, user_id="u1")

    active = client.get("/memories", params={"user": "u1"}).text
    assert fact.memory.text in active
    assert liked.memory.text in active
    assert gone.memory.text not in active
    facts = client.get("/memories", params={"user": "u1", "kind": "preference"}).text
    assert liked.memory.text in facts
    assert fact.memory.text not in facts
    archived = client.get("/memories", params={"user": "u1", "status": "archived"}).text
    assert gone.memory.text in archived
    assert fact.memory.text not in archived
    assert "Restore" in archived
    everything = client.get("/memories", params={"user": "u1", "status": "all"}).text
    assert all(m in everything for m in (fact.memory.text, liked.memory.text, gone.memory.text))


def test_a_memory_page_shows_its_history_and_supersede_chain(
    palace: Palace, client: TestClient
) -> None:
    old = palace.remember("The team standup is at 9am", kind="fact", user_id="u1")
    new = palace.remember("The team standup is at 10am", kind="fact", user_id="u1")
    assert new.action == "updated"
    chain = palace.chain(new.memory.id, user_id="u1")
    assert [m.id for m in chain][-1] == new.memory.id
    page = client.get(f"/memories/{new.memory.id}", params={"user": "u1"}).text
    assert "Supersede chain" in page
    assert page.index("at 9am") < page.index("at 10am</a>")  # oldest first
    old_page = client.get(f"/memories/{old.memory.id}", params={"user": "u1"}).text
    assert "superseded" in old_page
    for event in palace.history(new.memory.id, user_id="u1"):
        assert f"<td>{event.event}</td>" in page


def test_search_shows_superseded_memories_only_when_asked(
    palace: Palace, client: TestClient
) -> None:
    palace.remember("The team standup is at 9am", kind="fact", user_id="u1")
    palace.remember("The team standup is at 10am", kind="fact", user_id="u1")
    params = {"q": "team standup", "user": "u1"}
    current = client.get("/search", params=params).text
    assert "at 10am" in current
    assert "at 9am" not in current
    both = client.get("/search", params=params | {"history": "1"}).text
    assert "at 10am" in both
    assert "at 9am" in both
    assert "status-superseded" in both
    assert 'name="history" value="1" checked' in both


def test_search_dates_each_memory_hit(palace: Palace, client: TestClient) -> None:
    day = datetime(2025, 3, 4, tzinfo=UTC)
    palace.remember("The team standup is at 9am", kind="fact", user_id="u1", now=day)
    page = client.get("/search", params={"q": "team standup", "user": "u1"}).text
    assert "at 9am" in page
    assert '<span class="where">2025-03-04</span>' in page


def test_the_timeline_of_an_entity(palace: Palace, client: TestClient) -> None:
    palace.kg.add("Alice", "works_at", "Acme", valid_from="2024-01-01", user_id="u1")
    palace.kg.add("Alice", "works_at", "Globex", valid_from="2025-06-01", user_id="u1")
    palace.kg.add("Bob", "works_at", "Initech", valid_from="2024-01-01", user_id="u2")
    page = client.get("/timeline", params={"entity": "Alice", "user": "u1"}).text
    assert "Acme" in page
    assert "Globex" in page
    assert "Initech" not in page
    assert page.index("Acme") < page.index("Globex")
    assert '<tr class="closed">' in page  # Acme ended when Globex began
    other = client.get("/timeline", params={"entity": "Alice", "user": "u2"}).text
    assert "Acme" not in other


# -- escaping -----------------------------------------------------------------------------


def test_stored_markup_is_shown_as_text_everywhere(palace: Palace, client: TestClient) -> None:
    (drawer_id,) = palace.add_texts([f"note {SCRIPT} end"], wing="w<b>", room="r", user_id="u1")
    memory = palace.remember(f"remember {SCRIPT}", user_id="u1", tags=["<i>tag</i>"]).memory
    palace.kg.add(SCRIPT, "is", "<img src=x onerror=alert(1)>", user_id="u1")
    pages = [
        client.get("/search", params={"q": "note end", "user": "u1"}),
        client.get("/search", params={"q": SCRIPT, "user": "u1"}),
        client.get("/wings", params={"user": "u1"}),
        client.get("/browse", params={"wing": "w<b>", "user": "u1"}),
        client.get(f"/drawers/{drawer_id}", params={"user": "u1"}),
        client.get("/memories", params={"user": "u1"}),
        client.get(f"/memories/{memory.id}", params={"user": "u1"}),
        client.get("/timeline", params={"entity": SCRIPT, "user": "u1"}),
        client.get("/memories", params={"user": SCRIPT}),
    ]
    for page in pages:
        assert page.status_code == 200, page.url
        assert "<script>window" not in page.text, page.url
        assert "<img src=x" not in page.text
        assert "<b>" not in page.text
        assert "<i>tag" not in page.text
    for page in pages[:-1]:
        assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page.text or (
            "w&lt;b&gt;" in page.text
        ), page.url


def test_pages_forbid_inline_script(client: TestClient) -> None:
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert "<script>" not in page.text  # the page's own script is a file


# -- writing ------------------------------------------------------------------------------


def test_edit_pin_delete_and_restore_go_through_the_palace(
    palace: Palace, client: TestClient
) -> None:
    memory = palace.remember("I drink coffee", kind="preference", importance=0.4, user_id="u1")
    mid = memory.memory.id
    token = csrf_of(client, f"/memories/{mid}?user=u1")
    edit = {"csrf": token, "user": "u1", "text": "I drink tea", "kind": "preference"}
    edit |= {"importance": "0.5", "tags": "drinks, morning"}
    done = client.post(f"/memories/{mid}/edit", data=edit, follow_redirects=False)
    assert done.status_code == 303
    assert done.headers["location"] == f"/memories/{mid}?done=edited&user=u1"
    now = palace.memory(mid, user_id="u1")
    assert (now.text, now.importance, list(now.tags)) == ("I drink tea", 0.5, ["drinks", "morning"])
    page = client.get(done.headers["location"]).text
    assert "Saved." in page
    assert "I drink tea" in page

    client.post(f"/memories/{mid}/pin", data={"csrf": token, "user": "u1"})
    assert palace.memory(mid, user_id="u1").importance == 1.0

    client.post(f"/memories/{mid}/delete", data={"csrf": token, "user": "u1"})
    assert palace.memory(mid, user_id="u1").status == "archived"
    assert mid not in [m.id for m in palace.memories(user_id="u1")]
    assert "I drink tea" not in client.get("/memories", params={"user": "u1"}).text

    client.post(f"/memories/{mid}/restore", data={"csrf": token, "user": "u1"})
    assert palace.memory(mid, user_id="u1").status == "active"
    events = [e.event for e in palace.history(mid, user_id="u1")]
    assert events[0] == "add"
    assert {"update", "archive", "restore"} <= set(events) or {"update", "delete"} <= set(events)


def test_remember_from_the_form(palace: Palace, client: TestClient) -> None:
    token = csrf_of(client, "/memories?user=u1")
    form = {"csrf": token, "user": "u1", "text": "Our release train leaves on Thursdays"}
    done = client.post("/memories", data=form | {"kind": "decision", "tags": "release"})
    assert done.status_code == 200
    assert "Remembered." in done.text
    (memory,) = palace.memories(user_id="u1")
    assert (memory.text, memory.kind, list(memory.tags)) == (form["text"], "decision", ["release"])
    assert palace.memories() == []  # not the unowned records'


def test_a_post_without_the_csrf_token_is_refused(palace: Palace, client: TestClient) -> None:
    mid = palace.remember("Keep me", importance=0.3, user_id="u1").memory.id
    token = csrf_of(client)
    stranger = client_for(create_app(palace))
    stranger_token = csrf_of(stranger)
    for data in (
        {"user": "u1"},  # no token
        {"user": "u1", "csrf": ""},
        {"user": "u1", "csrf": token[:-1] + ("0" if token[-1] != "0" else "1")},
        {"user": "u1", "csrf": stranger_token},  # another session's token
    ):
        refused = client.post(f"/memories/{mid}/pin", data=data)
        assert refused.status_code == 403
        assert palace.memory(mid, user_id="u1").importance == 0.3
    fresh = client_for(create_app(palace))  # no session cookie at all
    assert fresh.post(f"/memories/{mid}/delete", data={"user": "u1"}).status_code == 403
    assert palace.memory(mid, user_id="u1").status == "active"
    # Another app (restarted server) has another key: the old token is stale.
    restarted = client_for(create_app(palace), cookies=dict(client.cookies))
    stale = restarted.post(f"/memories/{mid}/pin", data={"csrf": token, "user": "u1"})
    assert stale.status_code == 403
    assert client.post(f"/memories/{mid}/pin", data={"csrf": token, "user": "u1"}).is_success
    assert palace.memory(mid, user_id="u1").importance == 1.0


def test_a_post_from_another_site_is_refused(palace: Palace, client: TestClient) -> None:
    mid = palace.remember("Keep me too", importance=0.3, user_id="u1").memory.id
    token = csrf_of(client)
    refused = client.post(
        f"/memories/{mid}/pin",
        data={"csrf": token, "user": "u1"},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status_code == 403
    assert palace.memory(mid, user_id="u1").importance == 0.3


# -- isolation ----------------------------------------------------------------------------


def test_every_page_is_isolated_to_its_user(palace: Palace, client: TestClient) -> None:
    palace.add_texts(["u1 secret garden plans"], wing="home", user_id="u1")
    palace.add_texts(["u2 secret garden plans"], wing="house", user_id="u2")
    mine = palace.remember("u1 keeps bees", user_id="u1").memory
    theirs = palace.remember("u2 keeps goats", user_id="u2").memory
    token = csrf_of(client)

    found = client.get("/search", params={"q": "secret garden plans", "user": "u1"}).text
    assert "u1 secret" in found
    assert "u2 secret" not in found
    assert "u1 secret" not in client.get("/search", params={"q": "secret garden plans"}).text
    wings = client.get("/wings", params={"user": "u1"}).text
    assert "home" in wings
    assert "house" not in wings
    listed = client.get("/memories", params={"user": "u1", "status": "all"}).text
    assert "u1 keeps bees" in listed
    assert "u2 keeps goats" not in listed
    assert client.get(f"/memories/{theirs.id}", params={"user": "u1"}).status_code == 404
    assert client.get(f"/memories/{mine.id}").status_code == 404  # not an unowned memory
    (their_drawer,) = palace.ledger.drawer_ids(
        palace_filter(wing="house", room="general", user="u2")
    )
    assert client.get(f"/drawers/{their_drawer}", params={"user": "u1"}).status_code == 404
    for action in ("pin", "delete", "edit"):
        data = {"csrf": token, "user": "u1", "text": "taken over"}
        assert client.post(f"/memories/{theirs.id}/{action}", data=data).status_code == 404
    still = palace.memory(theirs.id, user_id="u2")
    assert (still.text, still.status) == ("u2 keeps goats", "active")
    with pytest.raises(MemoryNotFoundError):
        palace.memory(theirs.id, user_id="u1")


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/search?q=x&k=abc", 400),
        ("/search?q=x&k=0", 400),
        ("/memories?status=bogus", 400),
        ("/memories?kind=bogus", 400),
        ("/memories?offset=-1", 400),
        ("/memories/no-such-memory", 404),
        ("/drawers/no-such-drawer", 404),
        ("/memories?user=" + "u" * 300, 400),
    ],
)
def test_bad_input_shows_an_error_page(client: TestClient, path: str, status: int) -> None:
    page = client.get(path)
    assert page.status_code == status
    assert 'class="error"' in page.text
    assert "Traceback" not in page.text


def test_an_over_long_query_shows_an_error_page(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    palace = open_palace(tmp_path / "short", config={"search": {"max_query_chars": 100}})
    page = client_for(create_app(palace)).get("/search", params={"q": "x" * 101})
    assert page.status_code == 400
    assert "search.max_query_chars" in page.text


def test_a_bad_edit_changes_nothing(palace: Palace, client: TestClient) -> None:
    mid = palace.remember("Stay as I am", importance=0.3, user_id="u1").memory.id
    token = csrf_of(client)
    for form in ({"importance": "2"}, {"importance": "lots"}, {"text": "  "}, {"kind": "gossip"}):
        data = {"csrf": token, "user": "u1", "text": "Stay as I am"} | form
        page = client.post(f"/memories/{mid}/edit", data=data)
        assert page.status_code == 400, form
        assert 'class="error"' in page.text
    memory = palace.memory(mid, user_id="u1")
    assert (memory.text, memory.importance, memory.kind) == ("Stay as I am", 0.3, "fact")


# -- access token and binding -------------------------------------------------------------


def test_a_token_guards_every_page(palace: Palace) -> None:
    client = client_for(create_app(palace, token=TOKEN))
    assert client.get("/").status_code == 401
    assert client.get("/static/page.css").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/?token=nope").status_code == 401
    first = client.get(f"/memories?token={TOKEN}&user=u1", follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/memories?user=u1"  # the token leaves the URL
    assert client.get("/memories?user=u1").status_code == 200  # the cookie carries it


def test_loopback_only_without_a_token(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("localhost")
    assert is_loopback("::1")
    assert is_loopback("127.8.0.1")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.10")
    assert not is_loopback("example.org")
    check_host("127.0.0.1", None)
    check_host("0.0.0.0", TOKEN)
    with pytest.raises(UnsafeBindError, match="token"):
        serve(tmp_path / "nowhere", host="0.0.0.0")
    with pytest.raises(UnsafeBindError):
        serve(tmp_path / "nowhere", host="::", token="")
    assert not (tmp_path / "nowhere").exists()  # refused before opening anything


@pytest.mark.parametrize(
    "weak",
    [
        "x",
        "",
        " ",
        " " * 24,
        "fifteen-chars-x",  # one short of 16
        "has a space in the middle",
        "tab\tinside-the-long-token",
        "aaaaaaaaaaaaaaaaaaaaaaaa",  # long, but one character
        "ünïcödé-tökén-lóng-énough",
    ],
)
def test_a_weak_access_token_is_refused_at_start(palace: Palace, tmp_path: Path, weak: str) -> None:
    """A token that is short, blank, holds whitespace or repeats one character guards
    nothing: the page refuses to start with it (a ConfigError naming the rule), before
    any palace is opened."""
    with pytest.raises(ConfigError, match="at least 16 printable ASCII characters") as refused:
        create_app(palace, token=weak)
    if len(weak.strip()) > 1:
        assert weak not in str(refused.value)  # the message does not repeat the token
    with pytest.raises(ConfigError, match="access token"):
        check_host("127.0.0.1", weak)
    with pytest.raises(ConfigError):
        serve(tmp_path / "nowhere", token=weak)
    assert not (tmp_path / "nowhere").exists()


def test_a_strong_access_token_is_accepted(palace: Palace) -> None:
    """``openssl rand -hex 16`` (32 hex digits) and a 16-character token pass the rule."""
    for token in ("9f86d081884c7d659a2feaa0c55ad015", "abcd-1234-EFGH-5"):
        client = client_for(create_app(palace, token=token))
        assert client.get("/", headers={"Authorization": f"Bearer {token}"}).status_code == 200


# -- the Host header (DNS rebinding) ------------------------------------------------------


def test_a_foreign_host_header_is_refused_so_dns_rebinding_reads_nothing(
    palace: Palace, client: TestClient
) -> None:
    """A page on a domain an attacker rebinds to 127.0.0.1 reaches the memory page with
    its own name as Host (and as Origin): refused with 421 before anything is read or
    written, even with a CSRF token and cookies it got earlier. Loopback names, with or
    without a port, are served."""
    mid = palace.remember("The vault code is 4411", importance=0.3, user_id="u1").memory.id
    token = csrf_of(client)
    evil = client_for(create_app(palace), "http://rebind.evil.example:8765")
    for path in ("/", "/memories?user=u1", f"/memories/{mid}?user=u1", "/static/page.css"):
        page = evil.get(path)
        assert page.status_code == 421, path
        assert "vault code" not in page.text
        assert 'name="csrf"' not in page.text
    evil.cookies = client.cookies
    for action in ("pin", "delete"):
        posted = evil.post(
            f"/memories/{mid}/{action}",
            data={"csrf": token, "user": "u1"},
            headers={"Origin": "http://rebind.evil.example:8765"},
        )
        assert posted.status_code == 421
    memory = palace.memory(mid, user_id="u1")
    assert (memory.status, memory.importance) == ("active", 0.3)
    for host in ("localhost:8765", "LOCALHOST", "127.0.0.1", "127.3.4.5:80", "[::1]:8765"):
        assert client.get("/", headers={"Host": host}).status_code == 200, host
    for host in (
        "127.0.0.1.evil.example",
        "localhost.evil.example:8765",
        "evil.example@127.0.0.1",
        "127.0.0.1:80abc",
        "[::1]evil",
        "0.0.0.0:8765",
    ):
        assert client.get("/", headers={"Host": host}).status_code == 421, host


def test_the_page_answers_to_the_host_it_listens_on_and_same_origin_forms_only(
    palace: Palace,
) -> None:
    """Bound to a named host (with a token), the page answers to that name and loopback
    names only; a POST's Origin must be the page's own, on an allowed host. Bound to
    every address (0.0.0.0, which needs a token) it answers to any name."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    app = create_app(palace, token=TOKEN, host="memory.lan")
    assert client_for(app, "http://memory.lan:8765").get("/", headers=auth).status_code == 200
    assert client_for(app, "http://MEMORY.LAN").get("/", headers=auth).status_code == 200
    assert client_for(app, "http://other.lan:8765").get("/", headers=auth).status_code == 421
    assert client_for(app).get("/", headers=auth).status_code == 200
    wildcard = create_app(palace, token=TOKEN, host="0.0.0.0")
    assert client_for(wildcard, "http://box.lan").get("/", headers=auth).status_code == 200

    mid = palace.remember("Keep me as I am", importance=0.3, user_id="u1").memory.id
    client = client_for(create_app(palace))
    token = csrf_of(client)
    for origin in ("http://localhost:8765", "http://127.0.0.1:9999", "null", "http://evil.example"):
        posted = client.post(
            f"/memories/{mid}/pin", data={"csrf": token, "user": "u1"}, headers={"Origin": origin}
        )
        assert posted.status_code == 403, origin
    assert palace.memory(mid, user_id="u1").importance == 0.3
    same = client.post(
        f"/memories/{mid}/pin", data={"csrf": token, "user": "u1"}, headers={"Origin": BASE}
    )
    assert same.is_success
    assert palace.memory(mid, user_id="u1").importance == 1.0


# -- a page bound to one user ---------------------------------------------------------------


def test_a_page_bound_to_a_user_reads_and_writes_only_that_user(palace: Palace) -> None:
    """``palace serve --user u1``: every page is u1's; a ``user`` parameter naming anyone
    else (another user) is refused with 403, an empty one means u1, never the unowned
    records; writes without a user field are u1's."""
    palace.add_texts(["u1 secret garden plans"], wing="home", user_id="u1")
    palace.add_texts(["u2 secret garden plans"], wing="house", user_id="u2")
    mine = palace.remember("u1 keeps bees", importance=0.3, user_id="u1").memory
    theirs = palace.remember("u2 keeps goats", importance=0.3, user_id="u2").memory
    unowned = palace.remember("nobody keeps llamas", importance=0.3).memory
    client = client_for(create_app(palace, user="u1"))
    token = csrf_of(client)

    listed = client.get("/memories", params={"status": "all"}).text
    assert "u1 keeps bees" in listed
    assert "u2 keeps goats" not in listed
    assert "llamas" not in listed
    assert 'id="who-user"' not in listed  # no box to switch users
    found = client.get("/search", params={"q": "secret garden plans"}).text
    assert "u1 secret" in found
    assert "u2 secret" not in found
    assert "llamas" not in client.get("/memories", params={"user": ""}).text
    for path, params in [
        ("/memories", {"user": "u2"}),
        ("/search", {"q": "secret garden plans", "user": "u2"}),
        (f"/memories/{theirs.id}", {"user": "u2"}),
        ("/wings", {"user": "u2"}),
        ("/timeline", {"entity": "u2", "user": "u2"}),
    ]:
        page = client.get(path, params=params)
        assert page.status_code == 403, path
        assert "serves only the records of user &#39;u1&#39;" in page.text
        assert "u2 keeps goats" not in page.text
        assert "u2 secret" not in page.text
    assert client.get(f"/memories/{theirs.id}").status_code == 404
    assert client.get(f"/memories/{unowned.id}").status_code == 404
    for action in ("pin", "delete", "edit"):
        data = {"csrf": token, "user": "u2", "text": "taken over"}
        assert client.post(f"/memories/{theirs.id}/{action}", data=data).status_code == 403
        for victim in (theirs.id, unowned.id):
            data["user"] = ""
            assert client.post(f"/memories/{victim}/{action}", data=data).status_code == 404
    for victim, owner in ((theirs, "u2"), (unowned, None)):
        still = palace.memory(victim.id, user_id=owner)
        assert (still.text, still.status, still.importance) == (victim.text, "active", 0.3)

    done = client.post("/memories", data={"csrf": token, "text": "Our release train is Thursday"})
    assert done.status_code == 200
    assert "Our release train is Thursday" in [m.text for m in palace.memories(user_id="u1")]
    assert [m.text for m in palace.memories()] == ["nobody keeps llamas"]
    assert client.post(f"/memories/{mine.id}/pin", data={"csrf": token}).is_success
    assert palace.memory(mine.id, user_id="u1").importance == 1.0


def test_an_unbound_page_lets_its_visitor_choose_any_user(
    palace: Palace, client: TestClient
) -> None:
    """Without ``user=``, the ``user`` parameter is only a view selector: the page shows
    whichever user's records it names (what the README and --help warn about)."""
    palace.remember("u2 keeps goats", user_id="u2")
    assert "u2 keeps goats" in client.get("/memories", params={"user": "u2"}).text
    assert 'id="who-user"' in client.get("/memories").text


@pytest.mark.parametrize("user", ["", "  ", " u1", "u" * 201])
def test_a_blank_or_over_long_bound_user_is_refused(
    palace: Palace, tmp_path: Path, user: str
) -> None:
    with pytest.raises(ConfigError):
        create_app(palace, user=user)
    with pytest.raises(ConfigError):
        serve(tmp_path / "nowhere", user=user)
    assert not (tmp_path / "nowhere").exists()
