"""Two machines sharing one PostgreSQL ledger: one writer, race-free memory decisions, an
outage that fails fast and heals.

Each "machine" is a process with a palace folder of its own (its ``palace.toml``) and
the same PostgreSQL schema, as two hosts sharing a team ledger would have; they share
nothing else (no file lock can reach from one folder to the other). The tests run
against the session's real PostgreSQL 16 (``tests/services.py``) with the FAKE
embedder: they are about who may write and what stays current, not about meaning
(the structural matcher, which needs no model, reads "The deploy date of ... is X" as
one slot, so each round's two values update each other).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from fakes import FAKE_PLUGIN, HashingEmbedder
from pg_palace import open_postgres_palace

from palace_retrievers import Palace
from palace_retrievers.errors import PalaceBusyError
from palace_retrievers.ledger.memory_store import CURRENT
from palace_retrievers.ledger.postgres.connection import RETRY_SECONDS, LedgerUnavailableError

if TYPE_CHECKING:
    from services import PostgresService

pytest_plugins = ["services"]

TESTS = Path(__file__).parent
USER = "u1"
ROUNDS = 50

#: A machine: opens its own folder on the shared schema, then obeys lines on stdin.
MACHINE = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from fakes import FAKE_PLUGIN, HashingEmbedder
    from pg_palace import open_postgres_palace
    from palace_retrievers.errors import PalaceBusyError

    palace = open_postgres_palace(
        Path({path!r}), url={url!r}, schema={schema!r}, embedder=HashingEmbedder(),
        plugins=(FAKE_PLUGIN,),
    )
    print("ready", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["do"] == "hold":
            try:
                with palace.writing(command["operation"], timeout=0):
                    print("holding", flush=True)
                    sys.stdin.readline()  # until told to let go (or killed)
            except PalaceBusyError as exc:
                print("busy: " + str(exc), flush=True)
                continue
            print("released", flush=True)
        elif command["do"] == "remember":
            until = command["at"]
            while time.time() < until:  # both machines start the round together
                pass
            remembered = palace.remember(command["text"], user_id={user!r})
            print(json.dumps({{"id": remembered.memory.id, "action": remembered.action}}),
                  flush=True)
    palace.close()
    """
)


class Machine:
    """A child process standing for another machine that shares the ledger."""

    def __init__(self, path: Path, url: str, schema: str) -> None:
        script = MACHINE.format(tests=str(TESTS), path=str(path), url=url, schema=schema, user=USER)
        self.process = subprocess.Popen(
            [sys.executable, "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert self.read() == "ready"

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, **command: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"machine {self.pid} died (exit {self.process.poll()})"
        return line.strip()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture
def schema(postgres: PostgresService) -> Iterator[str]:
    name = f"two_machines_{uuid.uuid4().hex[:10]}"
    yield name
    postgres.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture
def here(postgres: PostgresService, schema: str, tmp_path: Path) -> Iterator[Palace]:
    """This machine's palace (folder ``here``) on the shared schema."""
    palace = open_postgres_palace(
        tmp_path / "here",
        url=postgres.url,
        schema=schema,
        embedder=HashingEmbedder(),
        plugins=(FAKE_PLUGIN,),
    )
    yield palace
    palace.close()


@pytest.fixture
def machines(postgres: PostgresService, schema: str, tmp_path: Path) -> Iterator[list[Machine]]:
    started: list[Machine] = []
    try:
        for name in ("first", "second"):
            started.append(Machine(tmp_path / name, postgres.url, schema))
        yield started
    finally:
        for machine in started:
            machine.stop()


def test_a_second_machines_mine_is_refused_with_the_first_ones_host_and_pid(
    here: Palace, machines: list[Machine], tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("The payments service moved to PostgreSQL 16.\n")
    first = machines[0]
    first.send(do="hold", operation="mine")
    assert first.read() == "holding"
    with pytest.raises(PalaceBusyError) as refused:
        here.mine(notes, wing="shared")
    message = str(refused.value)
    assert f"another mine is running on {here.path}" in message
    assert f"(pid {first.pid} on host {socket.gethostname()}," in message
    assert here.ledger.drawer_ids() == []  # refused before anything was embedded or filed
    # A memory written meanwhile does not wait for the mine: it is queued in the ledger.
    started = time.monotonic()
    queued = here.remember("The deploy window is Tuesday", user_id=USER)
    assert time.monotonic() - started < 5
    assert here.memory(queued.memory.id, user_id=USER).status == "active"
    # Killed by SIGKILL, the first machine leaves no stale lock: its session ends.
    os.kill(first.pid, signal.SIGKILL)
    first.process.wait(timeout=30)
    deadline = time.monotonic() + 20
    while True:
        try:
            report = here.mine(notes, wing="shared")
            break
        except PalaceBusyError:
            assert time.monotonic() < deadline, "the dead machine's lock was never released"
            time.sleep(0.2)
    assert report.drawers_added == 1


def test_the_lock_is_let_go_and_taken_in_turn(here: Palace, machines: list[Machine]) -> None:
    first, second = machines
    first.send(do="hold", operation="sync")
    assert first.read() == "holding"
    second.send(do="hold", operation="reindex")
    refused = second.read()
    assert refused.startswith("busy: another sync is running on")
    assert f"(pid {first.pid} on host {socket.gethostname()}," in refused
    first.send(do="let go")  # any line ends the hold
    assert first.read() == "released"
    second.send(do="hold", operation="reindex")
    assert second.read() == "holding"
    busy = f"another reindex is running .*pid {second.pid}"
    with pytest.raises(PalaceBusyError, match=busy), here.writing("mine", timeout=0):
        pass
    second.send(do="let go")
    assert second.read() == "released"
    lock = here.ledger.writer_lock(here.path)  # the palace's lock, as any process sees it
    with here.writing("mine", timeout=0):
        assert lock.holder() is not None
        assert lock.holder().is_this_process  # type: ignore[union-attr]
    assert lock.holder() is None  # nobody holds it now


def test_two_machines_remembering_conflicting_values_keep_one_current_and_every_link(
    here: Palace, machines: list[Machine]
) -> None:
    """50 rounds: both machines remember another deploy date for the same service at the
    same instant. After every round exactly one memory of the slot is current, and no
    memory was superseded twice (its ``superseded_by`` overwritten, a link lost)."""
    first, second = machines
    start = date(2027, 1, 1)
    for round_ in range(ROUNDS):
        at = time.time() + 0.3
        for k, machine in enumerate(machines):
            day = start + timedelta(days=round_ * 2 + k)
            text = f"The deploy date of the payments service is {day.isoformat()}"
            machine.send(do="remember", text=text, at=at)
        answers = [json.loads(machine.read()) for machine in (first, second)]
        assert all(a["action"] in ("added", "updated") for a in answers), answers
        memories = here.ledger.list_memories(user_id=USER, statuses=None, limit=1000)
        current = [m for m in memories if m.status in CURRENT]
        assert len(current) == 1, (round_, [(m.id, m.text, m.status) for m in current])
        for memory in memories:
            # Superseded later ("supersede"), or filed superseded when the other machine's
            # value was remembered a moment after it ("add", older than the current one).
            links = [
                e.detail["superseded_by"]
                for e in here.ledger.memory_history(memory.id)
                if "superseded_by" in e.detail
            ]
            assert len(links) <= 1, (round_, memory.id, links)
            if memory.status == "superseded":
                assert links == [memory.superseded_by], (round_, memory.id, links)
    assert len(here.ledger.list_memories(user_id=USER, statuses=None, limit=1000)) == ROUNDS * 2


def test_a_search_during_an_outage_fails_within_the_timeout_and_the_next_one_works(
    postgres: PostgresService, schema: str, tmp_path: Path
) -> None:
    timeout = 2.0
    palace = Palace.open(
        tmp_path / "outage",
        config={
            "ledger": "postgres",
            "ledgers": {"postgres": {"url": postgres.url, "schema": schema, "timeout": timeout}},
        },
        embedder=HashingEmbedder(),
        backend="sqlite",
        plugins=(FAKE_PLUGIN,),
    )
    try:
        palace.add_texts(["The payments service runs on PostgreSQL 16"], wing="w")
        assert palace.search("payments PostgreSQL", k=1)
        postgres.stop()
        try:
            started = time.monotonic()
            with pytest.raises(LedgerUnavailableError, match="cannot be reached"):
                palace.search("payments PostgreSQL", k=1)
            assert time.monotonic() - started < timeout + 1.0
        finally:
            postgres.start()
        time.sleep(RETRY_SECONDS)  # failed attempts are not repeated more often than this
        hits = palace.search("payments PostgreSQL", k=1)  # no reopening, no back-off wait
        assert [h.text for h in hits] == ["The payments service runs on PostgreSQL 16"]
    finally:
        palace.close()
