"""The ``learned`` memory judge (the default): no LLM, offline, shipped weights.

Registered here; its code is :mod:`palace_retrievers.memory.learned.judge`, imported when
a palace first judges a pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from palace_retrievers.memory.judges import MemoryJudge


def learned_judge(options: Mapping[str, Any] | None = None) -> MemoryJudge:
    """The learned judge with ``options`` (``[memory_judges.learned]``)."""
    from palace_retrievers.memory.learned.judge import LearnedJudge

    return LearnedJudge(options)
