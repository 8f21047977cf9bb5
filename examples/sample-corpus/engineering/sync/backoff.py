"""Reference retry policy for the Larkspur sync client (ADR-008).

The iOS (Swift) and Android (Kotlin) sync engines implement the same rules;
this module is the executable spec and the source of the shared test vectors.
Written during the 2.3.1 incident on 2026-03-23, shipped in app 2.3.2.
"""

from __future__ import annotations

import random
from enum import Enum
from typing import Optional, Sequence, TypeVar

T = TypeVar("T")

BATCH_SIZE = 500            # operations per push request sent by the client
SERVER_HARD_LIMIT = 4096    # server answers HTTP 413 / LK-SYNC-413 above this
BASE_DELAY_S = 1.0
MAX_DELAY_S = 300.0
MAX_ATTEMPTS = 8            # after this the batch is parked ("Sync paused")


class Action(Enum):
    RETRY = "retry"                  # back off, then resend the same batch
    SPLIT = "split"                  # halve the batch and send each half
    REFRESH_AUTH = "refresh_auth"    # refresh the token once, then retry
    FAIL = "fail"                    # do not retry; surface to the user


def classify(status: int) -> Action:
    """Map an HTTP status from /v2/sync/push to what the client should do."""
    if 200 <= status < 300:
        raise ValueError("success is not an error")
    if status == 413:
        return Action.SPLIT
    if status == 401:
        return Action.REFRESH_AUTH
    if status in (408, 429) or 500 <= status < 600:
        return Action.RETRY
    return Action.FAIL  # 400, 409 after merge, 422 malformed, ...


def next_delay(attempt: int, rng: random.Random,
               retry_after: Optional[float] = None) -> float:
    """Full-jitter exponential backoff, in seconds, for a 1-based attempt."""
    if attempt < 1:
        raise ValueError("attempt starts at 1")
    ceiling = min(MAX_DELAY_S, BASE_DELAY_S * (2 ** attempt))
    delay = rng.uniform(0.0, ceiling)
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_DELAY_S))
    return delay


def should_park(attempt: int) -> bool:
    return attempt >= MAX_ATTEMPTS


def split_batch(ops: Sequence[T]) -> tuple[list[T], list[T]]:
    """Halve a batch after HTTP 413. A single operation cannot be split."""
    if len(ops) < 2:
        raise ValueError("cannot split a batch of one; mark the op as failed")
    mid = len(ops) // 2
    return list(ops[:mid]), list(ops[mid:])


def chunk(ops: Sequence[T], size: int = BATCH_SIZE) -> list[list[T]]:
    return [list(ops[i:i + size]) for i in range(0, len(ops), size)]
