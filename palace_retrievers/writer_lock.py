"""The palace-wide writer lock: one process writes to a palace at a time, wherever it runs.

Every write (a mine, a sync, a reindex, ``add_texts``, ``delete``) holds the palace's
writer lock, so two writers never interleave their ledger and index changes. Which lock
depends on the ledger, and the ledger hands it out (:meth:`Ledger.writer_lock`):

- a SQLite ledger (one machine): ``<palace>/writer.lock``, an OS ``flock`` through the
  ``filelock`` package (:class:`WriterLock`);
- a PostgreSQL ledger (machines sharing it): a session-level advisory lock named after
  the palace's schema
  (:class:`~palace_retrievers.ledger.postgres.lock.AdvisoryWriterLock`), so a second
  machine's mine is refused just as a second process's is.

Either is released when its holder dies, even by SIGKILL (the OS drops the ``flock``,
PostgreSQL ends the dead client's session and its locks): a stale lock never needs
cleaning up. Readers (search, status) never take it.

Who holds the lock (host, pid, operation, since when) is recorded beside it (``writer.json``
next to the file lock; the ledger's ``meta`` table for the advisory lock), so that a
writer turned away can say who is in the way::

    another mine is running on /home/me/.palace/default (pid 4242 on host build-2, since 10:31:07)

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

import errno
import json
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import PalaceBusyError, PalaceReadOnlyError

if TYPE_CHECKING:
    from filelock import FileLock

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
    host: str = ""

    @property
    def is_this_process(self) -> bool:
        """Whether the holder is the calling process (same host, same pid)."""
        return self.pid == os.getpid() and self.host in ("", socket.gethostname())

    @classmethod
    def now(cls, operation: str) -> Holder:
        """The calling process, starting ``operation`` now."""
        return cls(os.getpid(), operation, time.time(), socket.gethostname())

    def dumps(self) -> str:
        return json.dumps(
            {"pid": self.pid, "operation": self.operation, "since": self.since, "host": self.host}
        )

    @classmethod
    def loads(cls, text: str) -> Holder | None:
        """The holder recorded in ``text``, or ``None`` if it is not one."""
        try:
            data: Any = json.loads(text)
            return cls(
                int(data["pid"]),
                str(data["operation"]),
                float(data["since"]),
                str(data.get("host", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


class PalaceLock(ABC):
    """A writer lock: re-entrant within a thread, fail-fast or waiting across threads,
    processes and machines. Subclasses say how it is taken and where its holder is
    recorded."""

    def __init__(self, where: str) -> None:
        self.where = where
        """What the lock guards, for messages (the palace's folder)."""
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
        if not self._acquire(max(timeout, 0.0)):
            raise PalaceBusyError(self._busy_message(operation, timeout))
        self._local.depth = 1
        try:
            self._record(Holder.now(operation))
            yield
        finally:
            self._local.depth = 0
            self._release()

    @abstractmethod
    def _acquire(self, timeout: float) -> bool:
        """Take the lock within ``timeout`` seconds; False when another holds it still."""

    @abstractmethod
    def _release(self) -> None:
        """Let the lock go."""

    @abstractmethod
    def _record(self, holder: Holder) -> None:
        """Record who holds the lock now (best effort: only used for messages)."""

    @abstractmethod
    def holder(self) -> Holder | None:
        """What the current (or last) holder recorded, if it still holds the lock."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the lock keeps open (not the lock: a holder lets it go itself)."""

    def _busy_message(self, operation: str, waited: float) -> str:
        holder = self.holder()
        if holder is None:
            who = "another writer is working on"
            detail = "pid unknown"
        else:
            who = f"another {holder.operation} is running on"
            since = datetime.fromtimestamp(holder.since).strftime("%H:%M:%S")
            host = f" on host {holder.host}" if holder.host else ""
            detail = f"pid {holder.pid}{host}, since {since}"
        if waited > 0:
            tail = f"this {operation} gave up after waiting {waited:g} s"
        else:
            tail = "try again when it is done, or let this one wait (--wait SECONDS)"
        return f"{who} {self.where} ({detail}); {tail}"


class WriterLock(PalaceLock):
    """The file writer lock of the palace at ``palace_dir`` (one machine).

    ``filelock`` is imported when the lock is first taken: a palace opened only to read
    (a one-shot ``palace status`` or search) never takes it.
    """

    def __init__(self, palace_dir: Path) -> None:
        super().__init__(str(palace_dir))
        self._dir = palace_dir
        self._file_lock: FileLock | None = None
        self._making = threading.Lock()

    @property
    def _lock(self) -> FileLock:
        """The file lock, made once (two threads taking it first make one)."""
        with self._making:
            if self._file_lock is None:
                from filelock import FileLock

                self._file_lock = FileLock(self._dir / LOCK_FILE, thread_local=True)
            return self._file_lock

    def _acquire(self, timeout: float) -> bool:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=timeout, blocking=True)
        except Timeout:
            return False
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise PalaceReadOnlyError(
                    f"the palace at {self._dir} is read-only: its writer lock cannot be "
                    f"taken ({exc.strerror or exc}); reading works, writing does not"
                ) from None
            raise
        return True

    def _release(self) -> None:
        self._lock.release()

    def holder(self) -> Holder | None:
        try:
            text = (self._dir / HOLDER_FILE).read_text(encoding="utf-8")
        except (OSError, ValueError):
            return None
        holder = Holder.loads(text)
        if holder is None:
            return None
        try:
            os.kill(holder.pid, 0)
        except ProcessLookupError:
            return None  # a writer that died: the OS already released its lock
        except PermissionError:
            pass  # alive, owned by another user
        return holder

    def _record(self, holder: Holder) -> None:
        temp = self._dir / f".{HOLDER_FILE}.{os.getpid()}"
        try:
            temp.write_text(holder.dumps(), encoding="utf-8")
            os.replace(temp, self._dir / HOLDER_FILE)
        except OSError:
            pass  # only used for messages
