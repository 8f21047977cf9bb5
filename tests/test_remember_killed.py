"""A ``remember`` killed by SIGKILL at a random moment leaves each memory whole or absent.

A child process remembers a stream of values of one slot (each superseding the last) and
of unrelated facts, and is killed at a random moment, three times over; then the palace
is opened again. Every memory in the ledger has its history (its first event files it),
every superseded memory points at a memory that exists and got its ``supersede`` event,
at most one memory of the slot is current, and after the next write the vector index
holds exactly the ledger's active memories. Real SQLite and real Chroma, the FAKE
embedder: this is about bookkeeping, not meaning.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from fakes import FAKE_PLUGIN

from palace_retrievers import Palace
from palace_retrievers.ledger.memory_store import CURRENT

TESTS = Path(__file__).parent
USER = "u1"

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    from fakes import FAKE_PLUGIN
    from palace_retrievers import Palace
    from palace_retrievers.memory.learned import judge
    judge.DEFAULTS["structural"] = False  # the cosine thresholds decide (fake embedder)

    palace = Palace.open(Path({path!r}), embedder="fake", plugins=[FAKE_PLUGIN])
    print("ready", flush=True)
    n = {start}
    while True:
        palace.remember(f"The deploy window of the payments service is slot {{n}}", user_id="u1")
        palace.remember(f"Fact number {{n}} about the harbour lantern", user_id="u1")
        n += 1
    """
)


def test_a_remember_killed_at_a_random_moment_leaves_every_memory_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "palace"
    # the learned judges off: this tests a killed write, not the decision
    config = {
        "memory": {
            "supersede_similarity": 0.8,
            "duplicate_similarity": 0.999,
            "pair_model": False,
            "pair_reader": False,
        }
    }
    Palace.open(path, embedder="fake", plugins=[FAKE_PLUGIN], config=config).close()
    rng = random.Random(7)
    for round_ in range(3):
        script = CHILD.format(tests=str(TESTS), path=str(path), start=round_ * 10_000)
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.5, 2.0))
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    with Palace.open(path, embedder="fake", plugins=[FAKE_PLUGIN]) as palace:
        memories = palace.ledger.list_memories(user_id=USER, statuses=None, limit=100_000)
        assert len(memories) > 6  # the child got some work done each round
        ids = {m.id for m in memories}
        histories = palace.ledger.memory_histories(list(ids))
        for memory in memories:
            events = histories.get(memory.id, [])
            assert events, memory.id
            assert events[0].event in ("add", "update"), (memory.id, events[0])
            if memory.status == "superseded":
                assert memory.superseded_by in ids, memory
                links = [e for e in events if e.detail.get("superseded_by")]
                assert [e.detail["superseded_by"] for e in links] == [memory.superseded_by]
        current = [m for m in memories if m.status in CURRENT and "deploy window" in m.text]
        assert len(current) <= 1, [m.text for m in current]
        palace.remember("One more fact after the kills", user_id=USER)
        active = [m for m in palace.ledger.list_memories(user_id=USER, limit=100_000)]
        status = {s.collection: s for s in palace.indexes.status()}["memories"]
        assert status.ok, status
        assert status.count == status.ledger_count
        found = {
            hit.id
            for hit in palace.search("deploy window payments slot", k=50, user_id=USER)
            if hit.is_memory
        }
        assert found <= {m.id for m in active}
