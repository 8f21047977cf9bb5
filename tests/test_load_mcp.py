"""The MCP HTTP server under a loopback load from another process, bounded in count and time.

One palace (real SQLite, real Chroma) holds drawers of ``alice`` and of ``bob``, each
carrying its owner's marker and the same shared words. Two real ``palace mcp --http``
servers run on it, in their own processes, one bound to each user (a server serves one
user). A client process (``tests/load_mcp_client.py``, the official SDK's client) opens
three concurrent sessions per server and sends 200 requests in all, within 60 seconds:
three searches in four, the rest ``remember`` of new statements, so both servers write to
the palace at once through its writer lock.

Then: no call failed; every search hit of a user carries that user's marker and is one
of that user's records (the shared words make every record a candidate: a leak would
show); both servers still answer and list every memory they remembered; and, the servers
stopped, every remembered memory is in the ledger under its owner and found in the vector
index by its own vector.

Meaning does not matter here, only bookkeeping under concurrency: the servers use the
FAKE hashing embedder (``tests/load_mcp_server.py`` registers it into the real command
line), so that the test takes seconds, not minutes of model loading.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fakes import FAKE_PLUGIN
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from palace_retrievers import Filter, Palace

HERE = Path(__file__).resolve().parent
TOKEN = "load-token-0123456789abcdef"
MARKERS = {"alice": "ALICE-7f3", "bob": "BOB-9c1"}
QUERY = "spare kettle ladder in the attic garage box"
REQUESTS = 200
SESSIONS = 3
DEADLINE = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _open(path: Path) -> Palace:
    return Palace.open(path, plugins=[FAKE_PLUGIN], embedder="fake", backend="chroma")


@pytest.fixture
def palace_dir(tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    """A palace with 40 drawers for each user, all sharing the query's words."""
    path = tmp_path / "palace"
    drawers: dict[str, list[str]] = {}
    with _open(path) as palace:
        for user, marker in MARKERS.items():
            drawers[user] = palace.add_texts(
                [
                    f"{marker} keeps the spare kettle {i} and a ladder in the attic box {i}"
                    for i in range(40)
                ],
                wing="storage",
                room="boxes",
                user_id=user,
            )
    return path, drawers


@pytest.fixture
def servers(
    palace_dir: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> Iterator[dict[str, str]]:
    """One ``palace mcp --http`` process per user on the same palace; user → URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALACE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    processes: dict[str, tuple[subprocess.Popen[bytes], int, Path]] = {}
    try:
        for user in MARKERS:
            port = _free_port()
            log = tmp_path / f"{user}-stderr.txt"
            with log.open("w") as errors:
                command = [
                    sys.executable,
                    str(HERE / "load_mcp_server.py"),
                    "--palace",
                    str(palace_dir[0]),
                    "mcp",
                    "--user",
                    user,
                    "--http",
                    "--port",
                    str(port),
                    "--token",
                    TOKEN,
                ]
                process = subprocess.Popen(
                    command, env=env, stdout=subprocess.DEVNULL, stderr=errors
                )
            processes[user] = (process, port, log)
        deadline = time.monotonic() + 120
        for process, port, log in processes.values():
            while True:
                if process.poll() is not None:
                    pytest.fail(log.read_text())
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail("an MCP HTTP server did not start in 120 s")
                    time.sleep(0.2)
        yield {user: f"http://127.0.0.1:{port}/mcp" for user, (_, port, _) in processes.items()}
    finally:
        for process, _, _ in processes.values():
            process.terminate()
        for process, _, log in processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            assert "Traceback" not in log.read_text(), log.read_text()


def _call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    async def run() -> Any:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, read_timeout_seconds=60) as client:
                result = await client.call_tool(tool, arguments)
                assert not result.is_error, result.content
                return result.structured_content

    return anyio.run(run)


def test_two_servers_under_load_from_another_process_lose_and_leak_nothing(
    palace_dir: tuple[Path, dict[str, list[str]]], servers: dict[str, str], tmp_path: Path
) -> None:
    path, drawers = palace_dir
    spec = {
        "users": {u: {"url": servers[u], "marker": m} for u, m in MARKERS.items()},
        "token": TOKEN,
        "sessions": SESSIONS,
        "requests": REQUESTS,
        "seconds": DEADLINE,
        "query": QUERY,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    started = time.monotonic()
    client = subprocess.run(
        [sys.executable, str(HERE / "load_mcp_client.py"), "spec.json", "out.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE + 60,
        check=False,
    )
    assert client.returncode == 0, client.stderr
    assert time.monotonic() - started < DEADLINE + 60
    calls = json.loads((tmp_path / "out.json").read_text())["calls"]

    # Bounded in count, all served, none failed.
    assert len(calls) == REQUESTS, f"only {len(calls)} requests within {DEADLINE:g} s"
    assert [c for c in calls if "error" in c] == []
    remembered = {
        u: [c for c in calls if c["user"] == u and c["tool"] == "remember"] for u in MARKERS
    }
    for user in MARKERS:
        assert remembered[user], f"no remember for {user}: the mix is wrong"
        assert {c["session"] for c in calls if c["user"] == user} == set(range(SESSIONS))

    # No hit of one user ever carries another's marker or id.
    owned = {u: {*drawers[u], *(c["id"] for c in remembered[u])} for u in MARKERS}
    for call in (c for c in calls if c["tool"] == "search"):
        assert call["hits"], call
        for hit_id, first_line in call["hits"]:
            assert hit_id in owned[call["user"]], (call["user"], hit_id, first_line)
            assert MARKERS[call["user"]] in first_line, (call["user"], first_line)

    # Both servers still answer, and list every memory they remembered.
    for user, url in servers.items():
        assert _call(url, "status", {})["user_id"] == user
        listed = _call(url, "memories", {"status": "all", "limit": 200})["memories"]
        assert {c["id"] for c in remembered[user]} <= {m["id"] for m in listed}
        assert all(MARKERS[user] in m["text"] for m in listed)

    # In the ledger under their owner, and in the vector index (found by their own vector).
    with _open(path) as palace:
        for user in MARKERS:
            ids = list(dict.fromkeys(c["id"] for c in remembered[user]))
            for memory_id in ids:
                assert palace.memory(memory_id, user_id=user).user_id == user
            active = [i for i in ids if palace.memory(i, user_id=user).status == "active"]
            for entry in palace.ledger.index_entries("memories", active):
                matches = palace.indexes.query(
                    "memories", vector=entry.vector, k=5, where=Filter(user_id=user)
                )
                assert entry.id in {m.id for m in matches}, entry.id
        status = {s.collection: s for s in palace.stats().indexes}
        assert all(s.ok and s.count == s.ledger_count for s in status.values()), status
