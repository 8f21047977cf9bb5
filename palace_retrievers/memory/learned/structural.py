"""Is a new memory a duplicate of an old one, an update of it, or something new?

Embedding similarity alone gets the common cases wrong (measured with all-MiniLM-L6-v2):
"The team standup is at 9am" and "…10am" are 0.95 alike, so a similarity rule merges
them and loses the old time without history, while "I live in Lisbon" and "I live in
Porto now" are 0.70 alike and both stay true. :func:`compare` therefore decides with
structure first, in this order:

1. **Slots** — both state a single-valued fact (:mod:`palace_retrievers.memory.slots`:
   ``i|lives_in``, ``order database|uses``). On one slot, the same value is a
   *duplicate* and another value (or the same value negated) an *update*, whatever the
   wording ("I'm based in Lisbon" / "I moved to Porto"); on two different slots the texts
   are *new* to each other.
2. **Same words** — the two texts have the same content words once wording is made
   canonical (:mod:`palace_retrievers.memory.wording`: case, punctuation, stop words, light
   stemming, the order of words, numerals, times and dates): a *duplicate*.
3. **One value span** — the texts agree but for one span (aligned token by token), the
   shared part names the subject, and the span is a value: two times, dates or numbers
   of one kind, or two words after a single-valued cue (``is``, ``favourite``,
   ``prefer``, ``是``, ``住``...). An *update*. A span after a cue that holds many values
   at once (``I like hiking`` / ``I like painting``) is *new*; so is a span that changes
   the predicate (``work``/``live``) or the subject (``my sister``/``my brother``).
   A span that is only a negation (``I eat meat`` / ``I don't eat meat anymore``) is an
   *update*. When none of these cues decides, the span is an update only if the texts'
   similarity reaches ``supersede_threshold``.
4. **Similarity** — otherwise, a similarity at or above ``duplicate_threshold`` with the
   same times, dates and numbers, the same polarity and mostly the same words is a
   *duplicate*.
5. **Paraphrase** — what the steps above call *new* is read once more as life slots
   named in any structure (:mod:`palace_retrievers.memory.learned.paraphrase`: "I report to Susan" /
   "My new manager is David", "I take the bus to work" / "I cycle to work", "我月薪两万" /
   "我涨薪了，现在每月两万五"), and a new text that ends the old value ("Sold the Civic,
   ...", "王总调走了") is an update. Anything else is *new*.

No model is called: the caller passes the similarity it already has (the cosine of the
two embeddings). Both functions are pure; a comparison takes about a millisecond, less
when one text was read before (its tokens are cached), as when a new memory is compared
with several candidates.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

from palace_retrievers.errors import InvalidQueryError
from palace_retrievers.memory.learned import paraphrase
from palace_retrievers.memory.slots import Statement, parse_tokens, same_slot, slot_of
from palace_retrievers.memory.wording import TYPED, Token, lemma, read, words
from palace_retrievers.terms import CHINESE_STOP_CHARS, ENGLISH_STOP_WORDS

__all__ = ["VERDICTS", "Match", "compare", "slot_of"]

#: What :func:`compare` can answer.
VERDICTS = ("duplicate", "update", "new")

_KEEP = {"i", "we", "you", "he", "she", "they", "not"}
_STOP = (frozenset(lemma(w) for w in ENGLISH_STOP_WORDS) | {"be", "do", "s"}) - _KEEP
_ZH_STOP = (CHINESE_STOP_CHARS | {"每", "来", "为"}) - {"不", "有", "我", "你", "他", "她"}
_UNITS = frozenset({"usd", "eur", "gbp", "cny"})


def _lemmas(words: str) -> frozenset[str]:
    return frozenset(lemma(w) for w in words.split())


#: Cues of a predicate that holds one value at a time.
_SINGLE = _lemmas(
    "be live based reside resides work works favourite favorite preferred prefer default name "
    "called drive drives use uses run runs host hosts manager lead owner password number "
    "timezone address email phone title role job"
)
_ZH_SINGLE = ("是", "住", "工作", "用", "叫", "开", "更喜欢", "最喜欢", "默认", "在")
#: Cues of a predicate that holds many values at once (unless a strong cue says "the one").
_MULTI = _lemmas(
    "like likes love loves enjoy enjoys hate hates have has own owns visit visited eat eats "
    "drink drinks play plays read reads watch watches learn learning speak speaks know knows "
    "cook cooks collect collects travel wrote bought met"
)
_ZH_MULTI = ("喜欢", "爱", "有", "去过", "吃", "喝", "玩", "看", "学", "会")
_STRONG = _lemmas("better more most favourite favorite prefer rather instead")
_ZH_STRONG = ("最", "更")
#: Verbs that only say a value changed; they and the preposition after them are not content.
_TRANSITION = _lemmas(
    "move moved switch switched change changed upgrade upgraded migrate migrated reschedule "
    "rescheduled push pushed shift shifted cut raise raised increase increased drop dropped "
    "reduce reduced lower lowered bump bumped become became start starts started set now"
)
_ZH_TRANSITION = (
    "改到", "改成", "改为", "改在", "换成", "换到", "变成", "挪到", "推迟到", "提前到", "延期到",
    "迁移到", "升级到", "涨到", "增加到", "降到", "减少到", "改用", "换用", "搬到", "搬去", "转到",
)  # fmt: skip
_PREPOSITIONS = _lemmas("at on in to for from by until till into onto of")
#: A Chinese span that starts with one of these says what is going on, not a value.
_ZH_PASSING = (
    "今天",
    "明天",
    "昨天",
    "今晚",
    "这周",
    "本周",
    "下周",
    "上周",
    "刚才",
    "刚刚",
    "正在",
)
_AUX = _lemmas("do will would can could should shall may might must get")
_PAST = frozenset(words("went met saw bought wrote took made got had did ate drank gave ran sent"))
_PRONOUN_KEYS = frozenset({"i", "we", "you", "he", "she", "they"})
_KEPT_PREPOSITIONS = _PREPOSITIONS | _lemmas("as with without about near")
_IGNORABLE = _PREPOSITIONS | {"be", "是", "的", "在", "到", "于", "为"}
_MAX_SPAN = 4
#: Nouns of people: one of them against another is another subject, not other wording.
PEOPLE = _lemmas(
    "wife husband partner boyfriend girlfriend brother sister mom mum mother dad father "
    "parent parents son daughter kid kids child children friend roommate neighbour neighbor "
    "colleague cousin aunt uncle grandma grandpa grandmother grandfather niece nephew"
)
_MAX_ZH_SPAN = 8


@dataclass(frozen=True, slots=True)
class Match:
    """The verdict on an (old, new) pair of memories.

    Attributes:
        verdict: ``"duplicate"``, ``"update"`` or ``"new"``.
        reason: Which rule decided, in a few words (for logs and the history table).
        old_value: The span of the old text that the new one replaces, if found.
        new_value: The span of the new text that replaces it, if found.
        slot: ``subject|predicate`` when both texts set the same slot.
    """

    verdict: str
    reason: str
    old_value: str | None = None
    new_value: str | None = None
    slot: str | None = None


def _check(similarity: float, duplicate_threshold: float, supersede_threshold: float) -> None:
    for name, value in (
        ("similarity", similarity),
        ("duplicate_threshold", duplicate_threshold),
        ("supersede_threshold", supersede_threshold),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise InvalidQueryError(f"{name} must be a number, not {value!r}")
    if not -1.0 - 1e-4 <= similarity <= 1.0 + 1e-4:  # float32 cosines overshoot a little
        raise InvalidQueryError(f"similarity must be a cosine in [-1, 1], not {similarity}")
    if not 0.0 <= supersede_threshold <= duplicate_threshold <= 1.0:
        raise InvalidQueryError(
            "thresholds must satisfy 0 <= supersede_threshold <= duplicate_threshold <= 1, "
            f"not {supersede_threshold} and {duplicate_threshold}"
        )


def _content(toks: list[Token]) -> Counter[str]:
    """The content words: stop words out, but prepositions kept (``work as``/``work with``)
    except before a time, date or number (``due Friday``/``due on Friday``)."""
    out: Counter[str] = Counter()
    for i, t in enumerate(toks):
        if t.kind == "cjk" and t.key in _ZH_STOP:
            continue
        if t.key in _KEPT_PREPOSITIONS:
            if i + 1 < len(toks) and _typed_token(toks[i + 1]):
                continue
        elif t.key in _STOP:
            continue
        out[t.key] += 1
    return out


def _is_cjk(token: Token) -> bool:
    return token.kind == "cjk"


def _core(toks: list[Token]) -> list[Token]:
    """Tokens that carry the subject, predicate and value: no auxiliary, no transition verb,
    nor the preposition that follows a transition or precedes a time, date or number."""
    out: list[Token] = []
    i = 0
    while i < len(toks):
        token = toks[i]
        if _is_cjk(token):
            run = "".join(t.key for t in toks[i : i + 3] if _is_cjk(t))
            zh = next((w for w in _ZH_TRANSITION if run.startswith(w)), None)
            if zh is not None:
                i += len(zh)
                continue
            if token.key in ("在", "于") and i + 1 < len(toks) and _typed_token(toks[i + 1]):
                i += 1
                continue
        elif token.kind == "word":
            if token.key in _AUX:
                i += 1
                continue
            if token.key in _TRANSITION:
                i += 1
                if i < len(toks) and toks[i].key in _PREPOSITIONS:
                    i += 1
                continue
            if token.key in _PREPOSITIONS and i + 1 < len(toks) and _typed_token(toks[i + 1]):
                i += 1
                continue
        out.append(token)
        i += 1
    return out


def _trim(toks: list[Token], start: int, end: int) -> tuple[int, int]:
    """``start:end`` without the copulas and prepositions at its edges (``is at`` against
    ``moved to`` is no difference)."""
    while start < end and toks[start].key in _IGNORABLE:
        start += 1
    while end > start and toks[end - 1].key in _IGNORABLE:
        end -= 1
    return start, end


def _is_event(prefix: list[Token]) -> bool:
    """A past-tense verb before the span: something happened once (``I met Ana``)."""
    return any(
        t.kind == "word"
        and (t.word in _PAST or (t.word.endswith("ed") and len(t.word) > 4))
        and t.key not in _SINGLE
        for t in prefix
    )


def _typed_token(token: Token) -> bool:
    return token.kind in TYPED or token.key in _UNITS


def _typed_kind(span: list[Token]) -> str | None:
    """``time``/``date``/``num`` when every token of ``span`` is a value of that kind."""
    kinds = {
        t.kind for t in span if t.key not in _UNITS and t.key not in ("每", "下", "next", "every")
    }
    if not span or not all(_typed_token(t) or t.key in ("每", "下", "next", "every") for t in span):
        return None
    return kinds.pop() if len(kinds) == 1 and kinds <= TYPED else None


def _cjk_text(toks: list[Token]) -> str:
    return "".join(t.word for t in toks)


def _has_cue(toks: list[Token], latin: frozenset[str], chinese: tuple[str, ...]) -> bool:
    return any(t.key in latin for t in toks if t.kind == "word") or any(
        cue in _cjk_text(toks) for cue in chinese
    )


def _span(text: str, span: list[Token]) -> str:
    return text[span[0].start : span[-1].end] if span else ""


@dataclass(frozen=True, slots=True)
class _Aligned:
    """What step 3 found: a verdict, and whether a ``new`` verdict is final (``hard``)."""

    match: Match
    hard: bool = True


def _cue_before(prefix: list[Token], latin: frozenset[str], chinese: tuple[str, ...]) -> bool:
    """A cue right before the span: its last word, or the last but one before a preposition
    (``is``, ``live in``, ``用``), so that the span is the cue's value and not a modifier."""
    tail = prefix[-2:] if len(prefix) >= 2 and prefix[-1].key in _KEPT_PREPOSITIONS else prefix[-1:]
    return _has_cue(tail, latin, ()) or any(_cjk_text(prefix[-3:]).endswith(c) for c in chinese)


def _align(
    old: list[Token],
    new: list[Token],
    old_text: str,
    new_text: str,
    similarity: float,
    supersede_threshold: float,
) -> _Aligned | None:
    """The verdict of step 3 (one value span), or ``None`` when it does not decide."""
    a, b = _core(old), _core(new)
    matcher = SequenceMatcher(None, [t.key for t in a], [t.key for t in b], autojunk=False)
    raw = [op[1:] for op in matcher.get_opcodes() if op[0] != "equal"]
    ops = [(_trim(a, i1, i2), _trim(b, j1, j2)) for i1, i2, j1, j2 in raw]
    kept = [k for k, (oa, ob) in enumerate(ops) if oa[0] < oa[1] or ob[0] < ob[1]]
    if not kept:
        return _Aligned(Match("duplicate", "the same words but for tense and transition verbs"))
    ops, raw = [ops[k] for k in kept], [raw[k] for k in kept]
    spans = [(a[i1:i2], b[j1:j2]) for (i1, i2), (j1, j2) in ops]
    if all(t.kind == "neg" for o, n in spans for t in (*o, *n)):
        return _Aligned(Match("update", "the same statement negated"))
    if any(t.kind == "neg" for o, n in spans for t in (*o, *n)):
        return _Aligned(Match("new", "a negation and another change"))
    if len(spans) > 1:
        kinds = [(_typed_kind(o), _typed_kind(n)) for o, n in spans]
        if all(ko is not None and ko == kn for ko, kn in kinds):
            return _Aligned(
                Match(
                    "update",
                    "several times, dates or numbers changed",
                    " ".join(_span(old_text, o) for o, _ in spans),
                    " ".join(_span(new_text, n) for _, n in spans),
                )
            )
        return None
    (o, n), ((i1, i2), _) = spans[0], ops[0]
    prefix, suffix = a[:i1], a[i2:]
    cjk = any(_is_cjk(t) for t in (*prefix, *o, *n))
    subject = [t for t in prefix if t.key not in _PRONOUN_KEYS and (cjk or _content([t]))]
    if not subject:
        return _Aligned(Match("new", "the subject differs"), hard=False)
    if not o or not n:
        return None  # one text says more; only similarity can call it a duplicate
    values = (_span(old_text, o), _span(new_text, n))
    if cjk and any(_cjk_text(x).startswith(_ZH_PASSING) for x in (o, n)):
        return _Aligned(Match("new", "a passing state, not a value"))
    if max(len(o), len(n)) > (_MAX_ZH_SPAN if cjk else _MAX_SPAN):
        return _Aligned(Match("new", "too much differs"), hard=False)
    ko, kn = _typed_kind(o), _typed_kind(n)
    if ko or kn:
        if ko == kn:
            return _Aligned(Match("update", f"the {ko} changed", *values))
        return _Aligned(Match("new", "values of different kinds"))
    if any(_typed_token(t) for t in (*o, *n)):
        return _Aligned(Match("new", "a name and a number changed together"))
    if all(t.key in _KEPT_PREPOSITIONS for t in (*o, *n)):
        return _Aligned(Match("new", "the relation differs"))
    first_old, first_new = a[raw[0][0]], b[min(raw[0][2], len(b) - 1)]
    if (first_old.key in _PREPOSITIONS) != (first_new.key in _PREPOSITIONS):
        return _Aligned(Match("new", "a state against a value"))
    if _has_cue(o + n, _SINGLE | _MULTI | _TRANSITION, _ZH_SINGLE + _ZH_MULTI):
        return _Aligned(Match("new", "the predicate differs"), hard=False)
    if _is_event(prefix):
        return _Aligned(Match("new", "an event, not a standing fact"), hard=False)
    strong = _has_cue(prefix, _STRONG, _ZH_STRONG)
    if _has_cue(prefix, _MULTI, _ZH_MULTI) and not strong:
        return _Aligned(Match("new", "a predicate that holds many values"), hard=False)
    if suffix and _content(suffix[:1]) and not cjk:
        return None  # the span qualifies a shared word ("morning meetings"/"short meetings")
    cues = (_SINGLE | _STRONG, _ZH_SINGLE + _ZH_STRONG)
    if _cue_before(prefix, *cues) and not _cue_before(b[: ops[0][1][0]], *cues):
        return _Aligned(Match("new", "the cue is on one side only"), hard=False)
    if _cue_before(prefix, *cues):
        return _Aligned(
            Match("update", "one value changed after a single-valued predicate", *values)
        )
    if cjk or any(t.proper or _typed_token(t) for t in suffix):
        return None  # no cue in Chinese, or the value is shared and the wording differs
    if all(t.proper for t in (*o, *n)):
        return _Aligned(Match("update", "one name replaced another", *values))
    if similarity >= supersede_threshold:
        return _Aligned(Match("update", "one value span changed and the texts are close", *values))
    return None


def compare(
    old_text: str,
    new_text: str,
    *,
    similarity: float,
    duplicate_threshold: float = 0.92,
    supersede_threshold: float = 0.85,
) -> Match:
    """Whether ``new_text`` duplicates, updates or stands apart from ``old_text``.

    Args:
        old_text: The memory already kept.
        new_text: The memory being remembered.
        similarity: Cosine similarity of the two texts' embeddings.
        duplicate_threshold: Similarity at which two texts with no structural
            difference count as duplicates (step 4 of the module docstring).
        supersede_threshold: Similarity at which one differing span with no cue counts
            as an update (step 3).

    Raises:
        InvalidQueryError: a similarity outside [-1, 1], or thresholds out of order.

    >>> compare("I live in Lisbon", "I live in Porto now", similarity=0.69).verdict
    'update'
    >>> compare("The team standup is at 9am", "Team standup: 9 a.m.", similarity=0.9).verdict
    'duplicate'
    """
    _check(similarity, duplicate_threshold, supersede_threshold)
    match = _structural(old_text, new_text, similarity, duplicate_threshold, supersede_threshold)
    if match.verdict != "new":
        return match
    judged = paraphrase.judge(old_text, new_text, agreement=similarity >= supersede_threshold)
    if judged is None or judged.verdict == "new":
        return match
    return Match(judged.verdict, judged.reason, judged.old_value, judged.new_value)


def _structural(
    old_text: str,
    new_text: str,
    similarity: float,
    duplicate_threshold: float,
    supersede_threshold: float,
) -> Match:
    """Steps 1 to 4 of the module docstring."""
    (old_text, old), (new_text, new) = read(old_text), read(new_text)
    a, b = parse_tokens(old, old_text), parse_tokens(new, new_text)
    if a is not None and b is not None:
        if same_slot(a, b):
            return _slot_verdict(a, b, old_text, new_text)
        return Match("new", f"different slots ({a.slot}, {b.slot})")
    old_content, new_content = _content(old), _content(new)
    if old_content == new_content and old_content:
        return Match("duplicate", "the same words")
    aligned = _align(old, new, old_text, new_text, similarity, supersede_threshold)
    if aligned is not None and (aligned.match.verdict != "new" or aligned.hard):
        return aligned.match
    if _near_duplicate(old, new, old_content, new_content, similarity, duplicate_threshold):
        return Match("duplicate", f"similarity {similarity:.2f} with the same values")
    if aligned is not None:
        return aligned.match
    return Match("new", "no shared slot, value span or near-identical wording")


def _near_duplicate(
    old: list[Token],
    new: list[Token],
    old_content: Counter[str],
    new_content: Counter[str],
    similarity: float,
    duplicate_threshold: float,
) -> bool:
    """Step 4: close embeddings, the same values and polarity, mostly the same words.

    Chinese text is left out: an English embedding model finds most Chinese sentences
    alike (``我在谷歌工作``/``我在谷歌吃午饭``: 0.998 with all-MiniLM-L6-v2).
    """
    if similarity < duplicate_threshold or any(t.kind == "cjk" for t in (*old, *new)):
        return False
    if sorted(t.key for t in old if t.kind in TYPED) != sorted(
        t.key for t in new if t.kind in TYPED
    ):
        return False
    if any(t.kind == "neg" for t in old) != any(t.kind == "neg" for t in new):
        return False
    old_words = Counter({k: v for k, v in old_content.items() if k not in _KEPT_PREPOSITIONS})
    new_words = Counter({k: v for k, v in new_content.items() if k not in _KEPT_PREPOSITIONS})
    if (set(old_words) ^ set(new_words)) & PEOPLE:
        return False  # "my daughter" / "my son": another person's fact, however alike
    shared = sum((old_words & new_words).values())
    return shared / max(1, sum((old_words | new_words).values())) >= 0.6


#: Words that say what something is like, not which one it is.
_QUALITIES = frozenset(
    words(
        "strict nice kind busy great good bad awesome friendly mean tired sick happy sad fun "
        "funny smart young old tall short boring amazing lovely helpful annoying grumpy cool "
        "new slow fast cheap expensive quiet loud late early fine ok okay patient demanding "
        "relaxed tough fair wonderful terrible awful rude lazy chill calm away out sick"
    )
)


def _quality(value: str) -> bool:
    """One lower-case word that describes (``strict``, ``noisy``, ``helpful``)."""
    value = value.strip()
    return bool(re.fullmatch("[a-z]+", value)) and (
        value in _QUALITIES
        or value.endswith(("ful", "ous", "ive", "ible", "able", "ish", "less", "y"))
    )


def _slot_verdict(a: Statement, b: Statement, old_text: str, new_text: str) -> Match:
    slot = b.slot if len(b.subject) >= len(a.subject) else a.slot
    old_value = old_text[a.span[0] : a.span[1]] if a.span else a.value
    new_value = new_text[b.span[0] : b.span[1]] if b.span else b.value
    if _quality(old_value) != _quality(new_value) and any(
        c.isupper() or c.isdigit() for c in old_value + new_value
    ):
        return Match("new", 'a quality against a name ("is strict" / "is Mr. Brown")')
    if sorted(a.value_key.split()) == sorted(b.value_key.split()):
        if a.negated == b.negated:
            return Match("duplicate", "the same slot with the same value", slot=slot)
        return Match("update", "the same slot, negated", old_value, new_value, slot)
    return Match("update", "the same slot with another value", old_value, new_value, slot)
