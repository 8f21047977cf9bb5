"""The ``llm`` memory judge: any LangChain chat model calls each pair, answering JSON.

The engine does not depend on LangChain: the model is any object with
``invoke(messages)`` returning a message with ``.content`` (every LangChain chat model,
or ``FakeListChatModel`` in tests), and LangChain is imported only when ``model`` is
given as a string (``"openai:gpt-4o-mini"``, through ``init_chat_model``). All of a new
memory's pairs go in one call, numbered; the messages are ``[("system", PROMPT),
("human", pairs)]`` with this prompt (override it with the ``prompt`` option):

.. code-block:: text

{prompt}

The answer is read defensively (code fences and prose around the JSON ignored, a bare list
accepted). A pair the answer does not cover, a label it does not know, or an answer that is
not JSON makes the judge raise, and the palace then files the new memory as new: a model
that fails never supersedes anything. ``confidence`` (0 to 1, default 0.9) is the
probability of the given label; the rest is shared by the other two.

Options (``[memory_judges.llm]``, or a dict in code): ``model`` (required), ``prompt``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from palace_plugins.builtin.extractors.llm_memories import load_model, parse_json
from palace_retrievers.embedder import options_check
from palace_retrievers.errors import PluginError
from palace_retrievers.memory.judges import LABELS, JudgeContext, MemoryJudge, Opinion, Pair

OPTIONS = {"model", "prompt"}

PROMPT = """\
You keep a person's long-term memories. For each numbered pair, OLD is a memory you keep
and NEW is a memory that just arrived. Say how NEW relates to OLD:
- "duplicate": NEW says what OLD says; nothing new is learned and OLD is still exactly
  right (other words, units or numeral forms count as the same).
- "update": NEW gives a new value for the same attribute of the same subject, so OLD is
  no longer true (a new amount, time, place, person, device, plan replacing the old one).
- "new": anything else, in particular when OLD is still true after NEW: another
  attribute or subject, an added detail, another item of a list, a past event, a one-off
  exception, the same attribute of another person.
When unsure between "duplicate" and "update", say "update" with a low confidence.

Answer with JSON only, one item per pair, in this shape:
{"pairs": [{"pair": 1, "label": "update", "confidence": 0.9, "reason": "rent 1850 -> 2100"}]}"""

__doc__ = (__doc__ or "").format(prompt="\n".join("    " + line for line in PROMPT.splitlines()))


class LLMJudge(MemoryJudge):
    """Pairs judged by a chat model (see the module's docstring)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = dict(options or {})
        options_check("memory judge", "llm", options, OPTIONS)
        self.model = load_model(options.get("model"), "memory judge 'llm'")
        self.prompt = str(options.get("prompt") or PROMPT)

    def judge(self, pairs: Sequence[Pair], context: JudgeContext) -> list[Opinion]:
        if not pairs:
            return []
        lines = [
            f"[{n}] OLD: {pair.old}\n    NEW: {pair.new}" for n, pair in enumerate(pairs, start=1)
        ]
        answer = self.model.invoke([("system", self.prompt), ("human", "\n".join(lines))])
        items = parse_json(getattr(answer, "content", answer), "pairs", "the llm memory judge")
        if items is None:
            raise PluginError("the llm memory judge's answer is not JSON")
        by_pair: dict[int, Opinion] = {}
        for item in items:
            number, label = item.get("pair"), item.get("label")
            if not isinstance(number, int) or isinstance(number, bool) or label not in LABELS:
                continue
            confidence = item.get("confidence", 0.9)
            if isinstance(confidence, bool) or not isinstance(confidence, int | float):
                confidence = 0.9
            confidence = min(max(float(confidence), 0.0), 1.0)
            rest = (1.0 - confidence) / 2
            probabilities = {k: confidence if k == label else rest for k in LABELS}
            reason = str(item.get("reason", ""))[:200]
            by_pair[number] = Opinion(str(label), probabilities, (f"llm: {reason}",))
        missing = [n for n in range(1, len(pairs) + 1) if n not in by_pair]
        if missing:
            raise PluginError(f"the llm memory judge gave no usable label for pairs {missing}")
        return [by_pair[n] for n in range(1, len(pairs) + 1)]
