"""The MCP server, driven by the official SDK's own client, in real subprocesses.

``python -m palace_retrievers.cli mcp`` runs once over stdio and once over streamable
HTTP, each on its own copy of a palace built with the real model and real Chroma, bound
to user ``u1``. The stdio session is scripted once (one server start) and each test reads
what it needs from its record; the HTTP server is shared by the module's HTTP tests.
The Host-header and token-rule tests drive the HTTP app in process (Starlette's
TestClient) on a palace with the FAKE embedder: they are about who is refused, not about
what search finds.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from starlette.testclient import TestClient

from palace_retrievers import Palace, mcp_server
from palace_retrievers.cli import cli
from palace_retrievers.embedder import Embedder
from palace_retrievers.errors import ConfigError

pytestmark = pytest.mark.slow

TOOLS = {
    "search",
    "remember",
    "forget",
    "get_drawer",
    "list_wings",
    "list_rooms",
    "memories",
    "kg_query",
    "kg_add",
    "kg_invalidate",
    "kg_timeline",
    "context",
    "status",
}
TOKEN = "s3cret-mcp-token-0042"
CAT = "Alice adopted a grey cat called Miso in May.\nShe feeds her twice a day, at 7 and 19."


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder) -> dict[str, Any]:
    """A palace with drawers, memories and triples of u1 and of u2; returns its ids."""
    root = tmp_path_factory.mktemp("mcp")
    path = root / "palace"
    with Palace.open(path, embedder=real_embedder) as palace:
        u1 = palace.add_texts(
            [CAT, "We deploy to production with a blue/green switch on lk-prod-blue."],
            metadatas=[{"wing": "notes", "room": "pets"}, {"wing": "notes", "room": "ops"}],
            user_id="u1",
        )
        u2 = palace.add_texts(
            ["Bob's secret chili recipe uses smoked paprika and dark chocolate."],
            metadatas=[{"wing": "kitchen", "room": "recipes"}],
            user_id="u2",
        )
        tea = palace.remember("I prefer green tea in the morning", kind="preference", user_id="u1")
        locker = palace.remember("My gym locker code is 7781", user_id="u2")
        palace.kg.add("Alice", "lives in", "Lisbon", valid_from="2020-01-01", user_id="u1")
        palace.kg.add("Alice", "lives in", "Porto", valid_from="2024-06-01", user_id="u1")
        palace.kg.add("Bob", "lives in", "Leeds", user_id="u2")
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALACE_")}
    env.update(HOME=str(home), ANONYMIZED_TELEMETRY="False")
    return {
        "path": path,
        "root": root,
        "env": env,
        "cat": u1[0],
        "deploy": u1[1],
        "recipe": u2[0],
        "tea": tea.memory.id,
        "locker": locker.memory.id,
    }


def server_args(palace: Path, *extra: str) -> list[str]:
    return ["-m", "palace_retrievers.cli", "--palace", str(palace), "mcp", "--user", "u1", *extra]


def copy_of(built: dict[str, Any], name: str) -> Path:
    target = built["root"] / name
    shutil.copytree(built["path"], target)
    return target


def structured(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


# -- stdio ----------------------------------------------------------------------------


async def _stdio_script(client: Client, ids: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"tools": (await client.list_tools()).tools}
    call = client.call_tool
    out["search"] = await call("search", {"query": "who adopted a cat?", "k": 3})
    out["get"] = await call("get_drawer", {"ids": [ids["cat"], ids["recipe"], ids["tea"]]})
    out["paprika"] = await call("search", {"query": "smoked paprika chili recipe", "k": 10})
    out["wings"] = await call("list_wings", {})
    out["rooms"] = await call("list_rooms", {"wing": "notes"})
    out["no_room"] = await call("list_rooms", {"wing": "kitchen"})
    out["memories"] = await call("memories", {})
    out["remember"] = await call(
        "remember", {"text": "Our release train leaves every second Tuesday", "kind": "decision"}
    )
    out["context"] = await call("context", {"query": "when do we release?"})
    out["kg_query"] = await call("kg_query", {"entity": "alice"})
    out["kg_past"] = await call("kg_query", {"entity": "Alice", "as_of": "2021-03-01"})
    out["kg_bob"] = await call("kg_timeline", {"entity": "Bob"})
    out["kg_add"] = await call(
        "kg_add",
        {"subject": "Alice", "predicate": "works at", "object": "Acme", "valid_from": "2025-01-01"},
    )
    out["kg_invalidate"] = await call(
        "kg_invalidate", {"subject": "Alice", "predicate": "works at", "ended": "2099-01-01"}
    )
    out["kg_timeline"] = await call("kg_timeline", {"entity": "Alice"})
    out["forget_other"] = await call("forget", {"memory_ids": [ids["locker"]]})
    out["bad"] = {
        "empty query": await call("search", {"query": ""}),
        "k zero": await call("search", {"query": "cats", "k": 0}),
        "k text": await call("search", {"query": "cats", "k": "many"}),
        "bad kind": await call("remember", {"text": "x", "kind": "rumour"}),
        "bad date": await call("kg_query", {"entity": "Alice", "as_of": "someday"}),
        "no ids": await call("get_drawer", {"ids": []}),
        "missing arg": await call("kg_add", {"subject": "Alice"}),
        "unknown tool": await call("teleport", {}),
    }
    out["status"] = await call("status", {})
    return out


@pytest.fixture(scope="module")
def stdio(built: dict[str, Any]) -> dict[str, Any]:
    """One stdio session of the server, scripted; its results, stderr and stray output."""
    palace = copy_of(built, "stdio-palace")
    params = StdioServerParameters(
        command=sys.executable, args=server_args(palace), env=built["env"]
    )
    stray: list[Exception] = []
    errlog_path = built["root"] / "stdio-stderr.txt"

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            stray.append(message)

    async def session() -> dict[str, Any]:
        with errlog_path.open("w") as errlog:
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, message_handler=on_message, read_timeout_seconds=120) as c:
                return await _stdio_script(c, built)

    results = anyio.run(session)
    results["stray"] = stray
    results["stderr"] = errlog_path.read_text()
    return results


def test_every_tool_has_a_typed_schema_and_a_one_line_description(stdio: dict[str, Any]) -> None:
    tools = {t.name: t for t in stdio["tools"]}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert "\n" not in tool.description.strip(), tool.name
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None, tool.name
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    assert search["properties"]["k"]["type"] == "integer"
    assert search["properties"]["k"]["maximum"] == 50
    assert "user_id" not in search["properties"]  # the user is the server's, not the caller's
    assert tools["search"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True


def test_search_is_a_compact_index_and_get_drawer_the_full_text(
    stdio: dict[str, Any], built: dict[str, Any]
) -> None:
    hits = structured(stdio["search"])["hits"]
    assert hits[0]["id"] == built["cat"]
    assert hits[0]["first_line"] == CAT.splitlines()[0]
    assert set(hits[0]) == {"id", "date", "first_line", "score", "kind", "wing", "room"}
    assert len(hits[0]["date"]) == 10

    got = structured(stdio["get"])
    drawers = {d["id"]: d for d in got["drawers"]}
    assert drawers[built["cat"]]["text"] == CAT
    assert (drawers[built["cat"]]["wing"], drawers[built["cat"]]["room"]) == ("notes", "pets")
    assert drawers[built["tea"]]["source"] == f"memory:{built['tea']}"
    assert got["missing"] == [built["recipe"]]  # u2's drawer is not there for u1


def test_the_server_cannot_cross_users(stdio: dict[str, Any], built: dict[str, Any]) -> None:
    hits = structured(stdio["paprika"])["hits"]
    assert built["recipe"] not in {h["id"] for h in hits}
    assert built["locker"] not in {h["id"] for h in hits}
    assert {w["wing"] for w in structured(stdio["wings"])["wings"]} == {"notes"}
    assert "no wing named 'kitchen'" in error_text(stdio["no_room"])
    assert structured(stdio["kg_bob"])["triples"] == []
    assert structured(stdio["forget_other"]) == {"deleted": 0}
    assert [m["id"] for m in structured(stdio["memories"])["memories"]] == [built["tea"]]


def test_memory_and_graph_tools(stdio: dict[str, Any]) -> None:
    rooms = structured(stdio["rooms"])
    assert rooms["rooms"] == [{"room": "ops", "drawers": 1}, {"room": "pets", "drawers": 1}]
    remembered = structured(stdio["remember"])
    assert remembered["action"] == "added"
    assert remembered["memory"]["kind"] == "decision"
    context = structured(stdio["context"])["result"]
    assert "(decision) Our release train leaves every second Tuesday" in context

    assert [t["object"] for t in structured(stdio["kg_query"])["triples"]] == ["Porto"]
    assert [t["object"] for t in structured(stdio["kg_past"])["triples"]] == ["Lisbon"]
    assert structured(stdio["kg_add"])["predicate"] == "works_at"
    assert structured(stdio["kg_invalidate"]) == {"invalidated": 1}
    timeline = structured(stdio["kg_timeline"])["triples"]
    assert [t["object"] for t in timeline] == ["Lisbon", "Porto", "Acme"]
    assert timeline[-1]["valid_to"].startswith("2099-01-01")

    status = structured(stdio["status"])
    assert status["user_id"] == "u1"
    assert (status["drawers"], status["memories"], status["wings"]) == (2, 2, 1)
    assert status["index_ok"] is True


def test_invalid_arguments_are_tool_errors_not_crashes(stdio: dict[str, Any]) -> None:
    for name, result in stdio["bad"].items():
        assert result.is_error, name
    assert "query" in error_text(stdio["bad"]["empty query"])
    assert "k" in error_text(stdio["bad"]["k zero"])
    assert "not an ISO-8601 time" in error_text(stdio["bad"]["bad date"])
    assert "teleport" in error_text(stdio["bad"]["unknown tool"])
    structured(stdio["status"])  # the session outlived every error


def test_stdout_carries_only_the_protocol(stdio: dict[str, Any]) -> None:
    assert stdio["stray"] == []
    assert "Traceback" not in stdio["stderr"]


# -- streamable HTTP ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url(built: dict[str, Any]) -> Iterator[str]:
    """The HTTP server, in a subprocess, for the module's HTTP tests."""
    palace = copy_of(built, "http-palace")
    port = _free_port()
    errlog = (built["root"] / "http-stderr.txt").open("w")
    process = subprocess.Popen(
        [sys.executable, *server_args(palace, "--http", "--port", str(port), "--token", TOKEN)],
        env=built["env"],
        stdout=subprocess.DEVNULL,
        stderr=errlog,
    )
    deadline = time.monotonic() + 120
    try:
        while True:
            if process.poll() is not None:
                errlog.flush()
                pytest.fail((built["root"] / "http-stderr.txt").read_text())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("the MCP HTTP server did not start in 120 s")
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        errlog.close()


def over_http(url: str, script: Callable[[Client], Awaitable[Any]], token: str = TOKEN) -> Any:
    async def run() -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, read_timeout_seconds=60) as client:
                return await script(client)

    return anyio.run(run)


def test_http_serves_the_tools_to_the_sdk_client(http_url: str, built: dict[str, Any]) -> None:
    async def script(client: Client) -> dict[str, Any]:
        return {
            "tools": {t.name for t in (await client.list_tools()).tools},
            "search": await client.call_tool("search", {"query": "how do we deploy?", "k": 2}),
            "get": await client.call_tool("get_drawer", {"ids": [built["deploy"]]}),
            "paprika": await client.call_tool("search", {"query": "smoked paprika", "k": 10}),
            "bad": await client.call_tool("search", {"query": "x", "k": 500}),
            "remember": await client.call_tool("remember", {"text": "The VPN key rotates monthly"}),
        }

    got = over_http(http_url, script)
    assert got["tools"] == TOOLS
    assert structured(got["search"])["hits"][0]["id"] == built["deploy"]
    assert "blue/green" in structured(got["get"])["drawers"][0]["text"]
    assert built["recipe"] not in {h["id"] for h in structured(got["paprika"])["hits"]}
    assert got["bad"].is_error
    memory_id = structured(got["remember"])["memory"]["id"]

    async def later(client: Client) -> Any:  # a second connection sees the write
        return await client.call_tool("memories", {"kind": "fact"})

    listed = structured(over_http(http_url, later))["memories"]
    assert memory_id in {m["id"] for m in listed}


def test_http_needs_the_bearer_token(http_url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        response = httpx2.post(http_url, json=body, headers={**headers, **auth}, timeout=30)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert json.loads(response.text) == {"error": "a valid bearer token is required"}

    async def list_tools(client: Client) -> Any:
        return await client.list_tools()

    with pytest.raises(BaseException):  # noqa: B017,PT011 (the SDK wraps the 401 its own way)
        over_http(http_url, list_tools, token="wrong")


def test_http_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--palace", str(tmp_path / "none"), "mcp", "--http", "--host", "0.0.0.0"]
    )
    assert result.exit_code == 1
    assert "give a bearer token with --token or PALACE_MCP_TOKEN" in result.stderr
    assert not (tmp_path / "none").exists()  # refused before the palace was opened


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "palace-tests", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def test_http_accepts_the_bearer_scheme_in_any_case(http_url: str) -> None:
    """RFC 7235: the auth scheme is case-insensitive; the token itself is not."""
    for scheme in ("bearer", "BEARER", "BeArEr", "Bearer"):
        headers = {**MCP_HEADERS, "Authorization": f"{scheme} {TOKEN}"}
        response = httpx2.post(http_url, json=INITIALIZE, headers=headers, timeout=30)
        assert response.status_code == 200, (scheme, response.text)
        assert "serverInfo" in response.text
    for auth in (f"bearer {TOKEN.upper()}", f"Basic {TOKEN}", f"Bearer{TOKEN}", f"bearer x{TOKEN}"):
        headers = {**MCP_HEADERS, "Authorization": auth}
        response = httpx2.post(http_url, json=INITIALIZE, headers=headers, timeout=30)
        assert response.status_code == 401, auth


def test_http_refuses_a_foreign_host_whatever_address_it_listens_on(
    open_palace: Callable[..., Palace], tmp_path: Path
) -> None:
    """DNS rebinding: on 127.0.0.2 (which the SDK's own check does not cover) or on a
    named host, a request whose Host is another site gets 421 and never reaches a tool;
    loopback names and the address listened on are served. The FAKE embedder is enough:
    this is about the Host header, not about search."""
    palace = open_palace(tmp_path / "palace", backend="sqlite")
    server = mcp_server.build_server(palace, user_id="u1")
    cases = [
        ("127.0.0.2", None, {}),
        ("mcp.lan", TOKEN, {"Authorization": f"Bearer {TOKEN}"}),
    ]
    for host, token, auth in cases:
        app = mcp_server.http_app(server, host=host, token=token)
        with TestClient(app, base_url=f"http://{host}:8766") as client:
            headers = {**MCP_HEADERS, **auth}
            for foreign in ("rebind.evil.example:8766", "evil.example", "127.0.0.2.evil.example"):
                refused = client.post("/mcp", json=INITIALIZE, headers={**headers, "Host": foreign})
                assert refused.status_code == 421, (host, foreign)
                assert "serverInfo" not in refused.text
            evil_origin = {**headers, "Origin": "http://rebind.evil.example:8766"}
            assert client.post("/mcp", json=INITIALIZE, headers=evil_origin).status_code == 403
            for allowed in (f"{host}:8766", host, "localhost:8766", "[::1]:8766"):
                served = client.post("/mcp", json=INITIALIZE, headers={**headers, "Host": allowed})
                assert served.status_code == 200, (host, allowed, served.text)
                assert "serverInfo" in served.text


@pytest.mark.parametrize("weak", ["x", " ", " " * 24, "fifteen-chars-x", "has a space in it!"])
def test_a_weak_bearer_token_is_refused_at_start(tmp_path: Path, weak: str) -> None:
    """A one-character, blank or whitespace token is refused before the palace is opened:
    a ConfigError from Python, one line on stderr and exit code 1 from the CLI."""
    with pytest.raises(ConfigError, match="at least 16 printable ASCII characters"):
        mcp_server.check_bind("127.0.0.1", weak)
    with pytest.raises(ConfigError, match="bearer token"):
        mcp_server.BearerToken(lambda scope, receive, send: None, weak)  # type: ignore[arg-type]
    for host in ("127.0.0.1", "0.0.0.0"):
        result = CliRunner().invoke(
            cli,
            ["--palace", str(tmp_path / "none"), "mcp", "--http", "--host", host, "--token", weak],
        )
        assert result.exit_code == 1, result.stderr
        assert result.stderr.startswith("error: the bearer token ")
        assert result.stderr.count("\n") == 1
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "none").exists()
