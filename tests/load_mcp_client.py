"""The load of ``tests/test_load_mcp.py``: MCP sessions hammering two HTTP servers.

Run in its own process::

    python tests/load_mcp_client.py SPEC.json OUT.json

``SPEC.json`` gives each user's server URL and marker, the bearer token, the number of
concurrent sessions per user, the total number of requests and a deadline in seconds.
Each session (the official SDK's ``Client`` over streamable HTTP, its own connection)
takes requests from a shared count until it is spent or the deadline passes; each request
is a ``search`` (three in four) or a ``remember`` of a new statement carrying the user's
marker. Every call is recorded in ``OUT.json``: user, tool, latency, the error if any,
the ids and first lines of search hits, the id and action of a remembered memory.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

THINGS = ("kettle", "ladder", "bicycle", "violin", "tent", "drill", "kayak", "lamp")
PLACES = ("attic", "garage", "shed", "cellar", "office", "van", "boathouse", "loft")


def statement(marker: str, number: int, rng: random.Random) -> str:
    thing, place = rng.choice(THINGS), rng.choice(PLACES)
    return f"{marker} keeps spare {thing} number {number} in the {place} box {rng.randrange(10**6)}"


async def session(
    spec: dict[str, Any],
    user: str,
    number: int,
    counter: itertools.count[int],
    deadline: float,
    calls: list[dict[str, Any]],
) -> None:
    conf = spec["users"][user]
    rng = random.Random(f"{user}-{number}")
    headers = {"Authorization": f"Bearer {spec['token']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(conf["url"], http_client=http)
        async with Client(transport, read_timeout_seconds=60) as client:
            while time.monotonic() < deadline and next(counter) < spec["requests"]:
                record: dict[str, Any] = {"user": user, "session": number}
                if rng.random() < 0.25:
                    text = statement(conf["marker"], len(calls), rng)
                    record.update(tool="remember", text=text)
                    arguments: dict[str, Any] = {"text": text}
                else:
                    record["tool"] = "search"
                    arguments = {"query": spec["query"], "k": 10}
                started = time.perf_counter()
                try:
                    result = await client.call_tool(record["tool"], arguments)
                except Exception as exc:
                    record["error"] = f"{type(exc).__name__}: {exc}"
                else:
                    if result.is_error:
                        record["error"] = " ".join(getattr(c, "text", "") for c in result.content)
                    elif record["tool"] == "remember":
                        data = result.structured_content or {}
                        record["id"] = data["memory"]["id"]
                        record["action"] = data["action"]
                    else:
                        hits = (result.structured_content or {})["hits"]
                        record["hits"] = [[h["id"], h["first_line"]] for h in hits]
                record["seconds"] = time.perf_counter() - started
                calls.append(record)


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    calls: list[dict[str, Any]] = []
    counter = itertools.count()
    started = time.monotonic()
    deadline = started + spec["seconds"]
    async with anyio.create_task_group() as group:
        for user in spec["users"]:
            for number in range(spec["sessions"]):
                group.start_soon(session, spec, user, number, counter, deadline, calls)
    return {"calls": calls, "seconds": time.monotonic() - started}


if __name__ == "__main__":
    spec_path, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    result = anyio.run(run, json.loads(spec_path.read_text()))
    out_path.write_text(json.dumps(result))
