"""The palace-wide writer lock: one process writes to a palace at a time.

Every write (a mine, a sync, a reindex, ``add_texts``, ``delete``) holds
``<palace>/writer.lock`` (an OS ``flock`` through the ``filelock`` package), so two
writers never interleave their ledger and index changes. The OS releases the lock when
its holder dies, even by SIGKILL: a stale lock never needs cleaning up. Readers (search,
status) never take it; the ledger's WAL mode lets them read while a writer writes.

Who holds the lock (pid, operation, since when) is written next to it, in
``writer.json``, so that a writer turned away can say who is in the way::

    another mine is running on /home/me/.palace/default (pid 4242, since 10:31:07)

A long operation (mine, sync, reindex) does not wait by default: it fails at once with
:class:`~palace_retrievers.errors.PalaceBusyError`, since queueing behind a mine that
may take an hour surprises more than it helps (``palace mine --wait SECONDS`` waits).
A short write (``add_texts``, ``delete``) waits up to ``mining.lock_timeout`` seconds;
a memory write made while another process mines or syncs does not wait at all: it is
queued through the ledger's index journal (see :meth:`palace_retrievers.Palace.writing`).
The lock is re-entrant within a thread; other threads of the same process wait for it
like other processes do.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from filelock import FileLock, Timeout

from palace_retrievers.errors import PalaceBusyError

#: The long writes, during which another process's memory writes are queued rather than
#: kept waiting (see :meth:`palace_retrievers.Palace.writing`). A reindex is not one: it
#: rebuilds the indexes from the ledger and then clears the whole journal.
LONG_WRITES = frozenset({"mine", "sync"})
LOCK_FILE = "writer.lock"
HOLDER_FILE = "writer.json"


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the writer lock, as its holder recorded it."""

    pid: int
    operation: str
    since: float


class WriterLock:
    """The writer lock of the palace at ``palace_dir``."""

    def __init__(self, palace_dir: Path) -> None:
        self._dir = palace_dir
        self._lock = FileLock(palace_dir / LOCK_FILE, thread_local=True)
        self._local = threading.local()

    @property
    def held(self) -> bool:
        """Whether this thread holds the lock."""
        return bool(getattr(self._local, "depth", 0))

    @contextmanager
    def hold(self, operation: str, *, timeout: float = 0.0) -> Iterator[None]:
        """Hold the lock for ``operation`` (e.g. ``"mine"``), waiting up to ``timeout``
        seconds for another writer to finish; re-entrant within a thread.

        Raises:
            PalaceBusyError: another writer still holds it after ``timeout`` seconds.
        """
        depth: int = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        try:
            self._lock.acquire(timeout=max(timeout, 0.0), blocking=True)
        except Timeout:
            raise PalaceBusyError(self._busy_message(operation, timeout)) from None
        self._local.depth = 1
        try:
            self._record(operation)
            yield
        finally:
            self._local.depth = 0
            self._lock.release()

    def holder(self) -> Holder | None:
        """What the current (or last) holder recorded, if it is still alive."""
        try:
            data = json.loads((self._dir / HOLDER_FILE).read_text(encoding="utf-8"))
            holder = Holder(int(data["pid"]), str(data["operation"]), float(data["since"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return None  # a writer that died: the OS already released its lock
        except PermissionError:
            pass  # alive, owned by another user
        return holder

    def _record(self, operation: str) -> None:
        data = {"pid": os.getpid(), "operation": operation, "since": time.time()}
        temp = self._dir / f".{HOLDER_FILE}.{os.getpid()}"
        try:
            temp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(temp, self._dir / HOLDER_FILE)
        except OSError:
            pass  # only used for messages

    def _busy_message(self, operation: str, waited: float) -> str:
        holder = self.holder()
        if holder is None:
            who = "another writer is working on"
            detail = "pid unknown"
        else:
            who = f"another {holder.operation} is running on"
            since = datetime.fromtimestamp(holder.since).strftime("%H:%M:%S")
            detail = f"pid {holder.pid}, since {since}"
        if waited > 0:
            tail = f"this {operation} gave up after waiting {waited:g} s"
        else:
            tail = "try again when it is done, or let this one wait (--wait SECONDS)"
        return f"{who} {self._dir} ({detail}); {tail}"
