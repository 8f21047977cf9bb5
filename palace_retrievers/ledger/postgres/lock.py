"""The writer lock of a palace whose ledger is in PostgreSQL: a session advisory lock.

Machines that share a PostgreSQL ledger each have a folder of their own, so a file lock
in it excludes nobody on another machine. :class:`AdvisoryWriterLock` is the same writer
lock (:class:`~palace_retrievers.writer_lock.PalaceLock`: re-entrant in a thread, fail
fast or wait) taken as the session-level advisory lock ``(WRITER_LOCK_CLASS,
hashtext(<schema>))`` on a connection the holding thread keeps checked out of the
ledger's pool until it lets go. PostgreSQL ends a dead client's session and releases its
locks, so a writer killed by SIGKILL never leaves the lock stale.

Its holder (host, pid, operation, since) is kept in the ledger's ``meta`` table under
``writer``; :meth:`AdvisoryWriterLock.holder` reports it only while ``pg_locks`` shows
the lock granted, so a dead holder's record is never named as the one in the way.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from palace_retrievers.errors import PalaceError
from palace_retrievers.writer_lock import Holder, PalaceLock

if TYPE_CHECKING:
    from palace_retrievers.ledger.postgres.connection import PostgresConnection

#: First key of the writer lock (the second is the schema's hash). The ledger's write
#: transactions take ``LOCK_CLASS`` (:mod:`.connection`); this one is held for a whole
#: mine, so it must not be that one.
WRITER_LOCK_CLASS = 0x7A1B
HOLDER_KEY = "writer"
#: How often a waiting writer asks again.
POLL_SECONDS = 0.05


class AdvisoryWriterLock(PalaceLock):
    """The writer lock of the palace whose ledger is ``connection``'s schema.

    Args:
        connection: The ledger's connection pool.
        where: The palace's folder, for messages.
    """

    def __init__(self, connection: PostgresConnection, where: str) -> None:
        super().__init__(f"{where} (ledger schema {connection.schema})")
        self._ledger = connection

    def _acquire(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        conn = self._ledger.checkout()
        try:
            while True:
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(%s, hashtext(%s))",
                    (WRITER_LOCK_CLASS, self._ledger.schema),
                ).fetchone()
                if row and row[0]:
                    self._local.conn = conn
                    return True
                if time.monotonic() >= deadline:
                    self._ledger.checkin(conn)
                    return False
                time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0.0)))
        except BaseException:
            self._ledger.checkin(conn, broken=True)
            raise

    def _release(self) -> None:
        conn = self._local.conn
        self._local.conn = None
        try:
            conn.execute(
                "SELECT pg_advisory_unlock(%s, hashtext(%s))",
                (WRITER_LOCK_CLASS, self._ledger.schema),
            )
        except Exception:
            # The session is gone (the server restarted, the network dropped): so is the
            # lock. The connection is not returned to the pool.
            self._ledger.checkin(conn, broken=True)
            return
        self._ledger.checkin(conn)

    def _record(self, holder: Holder) -> None:
        conn = self._local.conn
        with contextlib.suppress(Exception):  # only used for messages
            conn.execute(
                "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = %s",
                (HOLDER_KEY, holder.dumps(), holder.dumps()),
            )

    def holder(self) -> Holder | None:
        try:
            rows: list[Any] = self._ledger.read_rows(
                "SELECT (SELECT value FROM meta WHERE key = %s), EXISTS ("
                "  SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                "  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                "  AND classid::bigint = %s AND objsubid = 2"
                "  AND objid::bigint = (hashtext(%s)::bigint & 4294967295))",
                (HOLDER_KEY, WRITER_LOCK_CLASS, self._ledger.schema),
            )
        except PalaceError:
            return None
        if not rows or not rows[0][1] or rows[0][0] is None:
            return None  # nobody holds it: a recorded holder died and PostgreSQL let go
        return Holder.loads(str(rows[0][0]))
