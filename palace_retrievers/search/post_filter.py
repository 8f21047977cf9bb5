"""Bounded post-filtering: the first ``k`` hits that pass a test the index cannot apply.

The integrations' metadata operators (``$in``, ``$contains``, ...) are such tests; they
ask for more hits, a few times over, instead of filtering inside the index.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from palace_retrievers.records import Drawer, Hit

log = logging.getLogger(__name__)


#: The most hits a search is asked for while a caller's own test is checked on its hits
#: (:func:`first_passing`).
FETCH_LIMIT = 1024


def first_passing(
    run: Callable[[int], list[Hit]],
    k: int,
    test: Callable[[Drawer], bool] | None,
    *,
    limit: int = FETCH_LIMIT,
    what: str = "filter",
) -> list[Hit]:
    """The first ``k`` hits of ``run`` whose drawer passes ``test`` (a filter the index
    cannot apply, such as the integrations' metadata operators).

    ``run(n)`` returns the best ``n`` hits. It is asked for ``4 k`` hits, then four times
    as many each round, until ``k`` pass, ``run`` has no more to give, or it was asked for
    ``limit`` hits (``k``, if larger): then the hits that passed are returned, fewer than
    ``k``, and a warning says so. So a search runs at most four or five times, however
    rare the drawers that pass. ``what`` names the test in the warning.
    """
    if test is None:
        return run(k)
    cap = max(limit, k)
    wanted = min(k * 4, cap)
    while True:
        hits = run(wanted)
        kept = [hit for hit in hits if test(hit.drawer)]
        if len(kept) >= k or len(hits) < wanted:
            return kept[:k]
        if wanted >= cap:
            log.warning(
                "only %d of the best %d hits pass the %s (%d wanted); the search stops "
                "there: narrow it with wing, room, kind or a time range, which the index applies",
                len(kept),
                wanted,
                what,
                k,
            )
            return kept
        wanted = min(wanted * 4, cap)
