"""A learned second opinion on memory pairs: update, duplicate or new, from embeddings.

The structural matcher (:mod:`palace_retrievers.memory.learned.structural`) tells an update from a
duplicate by reading the two texts: the same slot with another value. Its rules and its
lexicon of life slots are precise, but they only know the slots and sentence shapes they
were written for; a memory about a slot they don't name ("our car insurance is with
Geico" → "I switched the car insurance to Progressive") comes out *new*, and the old value
stays current beside the new one.

This module asks the embedder instead of a lexicon. For a pair (old, new) it lines the two
texts up word by word (:func:`palace_retrievers.memory.wording.tokens`, so "switched" meets
"switch" and "9am" meets "9:00"), and embeds four more texts with the palace's own model:

- each text with the words the other lacks replaced by "something" (the *templates*:
  "my car insurance is with something" / "I switched my car insurance to something");
- the words each text alone has (the *values*: "Geico" / "switched Progressive").

From these and the plain cosine it computes nineteen numbers (:data:`FEATURES`): how alike
the templates are, how alike the values are, how much of each text the other lacks, a
change cue, an additive cue, whether a lacking part holds a name or a person, and so on.
A random forest over those numbers and a logistic regression over them and the six
vectors (:func:`pair_vectors`), trained on the labelled pairs of ``benchmarks/data``
(``benchmarks/train_pair_model.py``, fixed seed; the newest held-out set is left out of
training), give the three probabilities, averaged
(:mod:`palace_retrievers.memory.learned.pair_estimators`;
plain JSON in ``palace_retrievers/memory/learned/data/pair_model.json``: no pickle, no scikit-learn
at run
time).

The model was trained on the vectors of one embedder (all-MiniLM-L6-v2, named in the
JSON); a palace that embeds with another model is not given its opinion (remembering
checks), since its features would mean something else.

:func:`combine` weighs it in: a pair the structural matcher calls *new* takes the model's
*update* when it is at least ``memory.pair_model_threshold`` sure, or its *duplicate* at
``memory.pair_model_duplicate_threshold``, and a structural *update* the model calls
something else with at least ``memory.pair_model_veto`` becomes that. The measured effect
is in benchmarks/README.md ("Memories").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from palace_retrievers.errors import ConfigError
from palace_retrievers.memory.learned import pair_estimators
from palace_retrievers.memory.learned.reading import KIN_ZH
from palace_retrievers.memory.learned.structural import PEOPLE
from palace_retrievers.memory.wording import TYPED, Token, tokens, words

LABELS = ("duplicate", "new", "update")
MASK = "something"
NOTHING = "nothing"
FEATURES = (
    "cosine",
    "template cosine",
    "value cosine",
    "template cosine - cosine",
    "shared words (Jaccard)",
    "share of the old text the new lacks",
    "share of the new text the old lacks",
    "the new text lacks nothing of the old",
    "the old text lacks nothing of the new",
    "a change cue in the new text",
    "Chinese",
    "a name among the old text's own words",
    "a name among the new text's own words",
    "a person among either text's own words",
    "a negation among either text's own words",
    "a typed value (time, date, number) among both texts' own words",
    "an additive cue in the new text (also, too, another, 也, 又)",
    "cosine of the old text and the new text's own words",
    "cosine of the new text and the old text's own words",
)
CHANGE_WORDS = frozenset(
    words(
        "now switched switch changed change moved move instead replaced replace no longer "
        "anymore new newly became become transferred started start stopped quit gave up "
        "upgraded went got"
    )
)
ADDITIVE_WORDS = frozenset(words("also too well another additionally second both extra"))
ADDITIVE_ZH = ("也", "又", "还有", "另外", "另一", "多了")
CHANGE_ZH = (
    "现在", "改", "换", "搬", "不再", "已经", "新", "转", "变", "调", "升", "不用",
    "开始", "后来", "如今", "目前", "最近",
)  # fmt: skip
_CJK = re.compile(r"[\u4e00-\u9fff]")

Embed = Callable[[Sequence[str]], Any]


@dataclass(frozen=True, slots=True)
class PairTexts:
    """What the features are computed from: the two texts lined up, before embedding.

    Attributes:
        old: The old memory's text.
        new: The new memory's text.
        old_template: ``old`` with the words ``new`` lacks replaced by :data:`MASK`.
        new_template: ``new`` with the words ``old`` lacks replaced by :data:`MASK`.
        old_values: The words of ``old`` that ``new`` lacks, or :data:`NOTHING`.
        new_values: The words of ``new`` that ``old`` lacks, or :data:`NOTHING`.
        counts: Words of old, of new, old's own, new's own, shared keys, all keys.
        old_named: A name (a proper or typed token) is among old's own words.
        new_named: A name is among new's own words.
        cue: ``new`` carries a change cue ("switched", "now", "改成", ...).
        chinese: Either text has a CJK character.
        person: A person ("my son", "我妈") is among either text's own words.
        negation: A negation ("not", "不") is among either text's own words.
        typed: Both texts' own words hold a time, date or number.
        additive: ``new`` adds rather than replaces ("also", "too", "as well", "也", "又").
    """

    old: str
    new: str
    old_template: str
    new_template: str
    old_values: str
    new_values: str
    counts: tuple[int, int, int, int, int, int]
    old_named: bool
    new_named: bool
    cue: bool
    chinese: bool
    person: bool
    negation: bool
    typed: bool
    additive: bool

    def texts(self) -> tuple[str, ...]:
        """The six texts to embed, in the order :func:`features` reads them."""
        return (
            self.old,
            self.new,
            self.old_template,
            self.new_template,
            self.old_values,
            self.new_values,
        )


def _template(text: str, toks: Sequence[Token], kept: Sequence[bool]) -> str:
    """``text`` with each run of tokens not ``kept`` replaced by one :data:`MASK` (the
    spaces between the run's words stay, as the model was trained)."""
    out: list[str] = []
    last, masking = 0, False
    for token, keep in zip(toks, kept, strict=True):
        out.append(text[last : token.start])
        if keep:
            out.append(text[token.start : token.end])
        elif not masking:
            out.append(MASK)
        masking = not keep
        last = token.end
    out.append(text[last:])
    return "".join(out)


def line_up(old: str, new: str) -> PairTexts:
    """Line ``old`` and ``new`` up word by word (pure: no embedding)."""
    a, b = tokens(old), tokens(new)
    keys_a, keys_b = {t.key for t in a}, {t.key for t in b}
    kept_a = [t.key in keys_b for t in a]
    kept_b = [t.key in keys_a for t in b]
    own_a = [t for t, kept in zip(a, kept_a, strict=True) if not kept]
    own_b = [t for t, kept in zip(b, kept_b, strict=True) if not kept]
    return PairTexts(
        old=old,
        new=new,
        old_template=_template(old, a, kept_a),
        new_template=_template(new, b, kept_b),
        old_values=" ".join(t.word for t in own_a) or NOTHING,
        new_values=" ".join(t.word for t in own_b) or NOTHING,
        counts=(
            len(a),
            len(b),
            len(own_a),
            len(own_b),
            len(keys_a & keys_b),
            len(keys_a | keys_b),
        ),
        old_named=any(t.proper for t in own_a),
        new_named=any(t.proper for t in own_b),
        cue=any(t.word.lower() in CHANGE_WORDS for t in b) or any(c in new for c in CHANGE_ZH),
        chinese=bool(_CJK.search(old) or _CJK.search(new)),
        person=any(t.key in PEOPLE for t in own_a + own_b)
        or set(KIN_ZH.findall(old)) != set(KIN_ZH.findall(new)),
        negation=any(t.kind == "neg" for t in own_a + own_b),
        typed=any(t.kind in TYPED for t in own_a) and any(t.kind in TYPED for t in own_b),
        additive=any(w in ADDITIVE_WORDS for w in words(new.lower()))
        or any(c in new for c in ADDITIVE_ZH),
    )


def features(pair: PairTexts, vectors: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The :data:`FEATURES` of ``pair`` given the unit vectors of ``pair.texts()``."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.shape[0] != 6:
        raise ValueError(f"features need the 6 vectors of PairTexts.texts(), not {v.shape[0]}")
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    cosine, template, value = float(v[0] @ v[1]), float(v[2] @ v[3]), float(v[4] @ v[5])
    n_old, n_new, own_old, own_new, shared, union = pair.counts
    return np.array(
        [
            cosine,
            template,
            value,
            template - cosine,
            shared / max(1, union),
            own_old / max(1, n_old),
            own_new / max(1, n_new),
            float(own_old == 0),
            float(own_new == 0),
            float(pair.cue),
            float(pair.chinese),
            float(pair.old_named),
            float(pair.new_named),
            float(pair.person),
            float(pair.negation),
            float(pair.typed),
            float(pair.additive),
            float(v[0] @ v[5]),
            float(v[1] @ v[4]),
        ]
    )


def pair_vectors(vectors: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The pair's vectors side by side, for the linear model: for the two texts, the two
    templates and the two sets of differing words, each pair's |a − b| and a ⊙ b."""
    v = np.asarray(vectors, dtype=np.float64)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    parts = []
    for a, b in ((2, 3), (4, 5), (0, 1)):
        parts += [np.abs(v[a] - v[b]), v[a] * v[b]]
    return np.concatenate(parts)


def model(path: Path = pair_estimators.MODEL_FILE) -> pair_estimators.PairModel:
    """The shipped model, checked against this version's features."""
    loaded = pair_estimators.load(path)
    if loaded.features != FEATURES or set(loaded.labels) != set(LABELS):
        raise ConfigError("the pair model does not match this version's features")
    return loaded


def judge_many(
    pairs: Sequence[tuple[str, str]],
    embed: Embed,
    path: Path = pair_estimators.MODEL_FILE,
) -> list[dict[str, float]]:
    """The model's (the shipped one, or the one in ``path``) probability of each label for
    each (old, new) pair: one call of ``embed`` for all their texts (the palace's embedder
    answers the texts it already has vectors for without embedding them again)."""
    lined = [line_up(old, new) for old, new in pairs]
    texts = sorted({t for pair in lined for t in pair.texts()})
    if not texts:
        return []
    vectors = np.asarray(embed(texts), dtype=np.float64)
    where = {t: i for i, t in enumerate(texts)}
    sixes = [vectors[[where[t] for t in pair.texts()]] for pair in lined]
    return model(path).probabilities_many(
        np.stack([features(pair, six) for pair, six in zip(lined, sixes, strict=True)]),
        np.stack([pair_vectors(six) for six in sixes]),
    )


def judge(old: str, new: str, embed: Embed) -> dict[str, float]:
    """The model's probability of each label for the pair (old, new)."""
    return judge_many([(old, new)], embed)[0]


def combine(
    verdict: str,
    probabilities: Mapping[str, float],
    threshold: float,
    veto: float,
    duplicate_threshold: float | None = None,
) -> str:
    """The structural matcher's ``verdict`` with the learned judges' ``probabilities``
    weighed in.

    A *new* becomes an *update* when the judges give it at least ``threshold`` (and no less
    than a duplicate), or a *duplicate* when they give that at least
    ``duplicate_threshold`` (``threshold`` when ``None``) and more than an update. An
    *update* the judges call anything else with at least ``veto`` (their probability of
    update at most ``1 - veto``) becomes the likelier of *new* and *duplicate*: the rules'
    updates on phrasings they were not written for are the less precise half. Anything
    else stands.
    """
    if duplicate_threshold is None:
        duplicate_threshold = threshold
    update, duplicate = probabilities["update"], probabilities["duplicate"]
    if verdict == "new":
        if update >= threshold and update >= duplicate:
            return "update"
        if duplicate >= duplicate_threshold and duplicate > update:
            return "duplicate"
        return "new"
    if verdict == "update" and 1.0 - update >= veto:
        return "duplicate" if duplicate > probabilities["new"] else "new"
    return verdict
