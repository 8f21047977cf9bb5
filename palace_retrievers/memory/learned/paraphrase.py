"""Paraphrase: two memories that set one life slot in different structures.

The structural matcher (:mod:`palace_retrievers.memory.learned.structural`) aligns two texts token
by token, so it needs them built alike. People restate a fact in other structures:
"I report to Susan Lee" / "My new manager is David Chen", "I take the bus to work" / "I
cycle to work these days", "我的直属领导是王总" / "现在我向李经理汇报". Each text is read as
*frames* (:mod:`palace_retrievers.memory.learned.frames`): the slots of
:mod:`palace_retrievers.memory.learned.life_slots` its words name (whatever the structure), each
with
the values of the slot's kind found in the text
(capitalised names, amounts, times of day, one of a closed set of options...). Two texts
with a frame of one slot, both about the speaker, then compare by value:

- the same values: a **duplicate** ("I get to work by bus" / "I take the bus to work");
- no value in common, on a slot that holds one value at a time: an **update**;
- anything in between (some values shared) decides nothing.

Independently of slots, a new text that *ends* a value of the old one ("Sold the
Civic, ...", "I gave up tennis", "We replaced Jenkins with ...", "我把卡罗拉卖了",
"王总调走了") is an update of it.

Precision first: a text about someone else ("my wife is vegetarian", "我妈的手机号是…",
"Susan Lee reports to the VP") has no frame of the speaker; slots with a qualifier
(a work or a personal e-mail, a monthly or a yearly salary) compare only when the
qualifiers agree; and when nothing decides, :func:`judge` answers ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from palace_retrievers.memory.learned.frames import Frame, frames
from palace_retrievers.memory.learned.reading import (
    CHANGE,
    CJK,
    PERIOD_WORDS,
    PRONOUNS,
    STOP,
    Reading,
    atoms,
    proper_runs,
    reading,
    zh_strip,
)
from palace_retrievers.memory.wording import lemma, words

__all__ = ["Frame", "Judgement", "frames", "judge"]

#: Which one of several of a kind: a strict slot compares only when these agree.
_KIND_QUALIFIERS = (
    ("work", r"\bwork\b|\boffice\b|\bbusiness\b|工作|公司|办公"),
    ("personal", r"\bpersonal\b|\bprivate\b|\bhome\b|私人|个人|家里"),
    ("school", r"\bschool\b|\buniversity\b|学校"),
    ("backup", r"\bbackup\b|\bsecond\b|备用"),
)


#: How often: two that clash part any slot (a monthly and a yearly salary).
_PERIODS = (
    ("week", r"\bweekly\b|\bevery week\b|\ba week\b|每周|每个?星期"),
    ("month", r"\bmonth(?:ly)?\b|\ba month\b|月"),
    ("year", r"\byear(?:ly)?\b|\bannual(?:ly)?\b|\ba year\b|年"),
)


#: Kinds whose values are themselves times, dates or numbers.
_TYPED_KINDS = frozenset({"amount", "count", "digits", "time", "when", "times"})


_STRONG_CHANGE = re.compile(
    r"\b(?:switched|switch|changed|replaced|instead|no longer|anymore|any more|moved|"
    r"upgraded|swapped|went with|go with|going with)\b"
)


_ORDERED = re.compile(r"\b(?:over|than|instead of|rather than|versus|vs)\b|\bfrom\b.*\bto\b")


_WEAK_CHANGE = re.compile(r"\b(?:now|these days|nowadays|lately|started|starting)\b")


_EVENT = re.compile(
    r"\b(?:visited|met|saw|went|bought|watched|attended|ate|had|took|got|tried|won|lost)\b"
)


#: Verbs that say little about what: "I get / grab / have lunch at ...".
_LIGHT = frozenset(
    lemma(w)
    for w in words(
        "get got grab have has had take took go went do did make use buy pick order ordering "
        "purchase where"
    )
)


#: Verbs of things one holds many of at once.
_MANY = frozenset(
    lemma(w)
    for w in words(
        "like love enjoy hate own visit eat drink play read watch learn speak know cook "
        "collect travel follow support listen"
    )
)


_EN_END = re.compile(
    r"\b(?:sold|sell(?:ing)?|gave up|give up|giving up|quit|dropped|stopped(?: using)?|left|"
    r"replaced|swapped(?: out)?|ditched|cancell?ed|moved out of|moved away from|moved from|"
    r"switched (?:away )?from|changed from|got rid of|traded in|broke up with"
    r"|(?:switched|moved|changed|migrated|went|upgraded|transferred)(?: \w+){0,3}? from)\s+"
    r"(?:(?:my|our|the|a|an)\s+)?(?P<o>[^,.;!?]{1,40})"
)


_ZH_END = re.compile(
    "把(?P<o>[^，,。把]{1,8}?)(?:卖|换掉|退|取消|停|辞)"
    "|(?P<o2>[^，,。]{1,6}?)(?:调走|离职|辞职|卖了|卖掉|退了|取消了|不干)"
    "|(?:不再|辞掉|离开|退掉|放弃|戒了|取消|卖了|卖掉|不用)(?P<o3>[^，,。]{1,8})"
    "|不(?P<o4>[\u4e00-\u9fff]{1,5}?)了"
)


#: Words too common to be the value an end cue names ("I left work early").
_GENERIC = frozenset(
    words(
        "work job home day week weekend weekends morning evening night time early late office "
        "team today yesterday it that this one thing"
    )
)


@dataclass(frozen=True, slots=True)
class Judgement:
    """What :func:`judge` found: a verdict, why, and the values it rests on."""

    verdict: str
    reason: str
    old_value: str | None = None
    new_value: str | None = None
    concept: str | None = None


def _qualifiers(t: Reading, table: tuple[tuple[str, str], ...]) -> set[str]:
    text = t.prepared if t.cjk else t.low
    return {name for name, pattern in table if re.search(pattern, text)}


def _apart(old: Reading, new: Reading, frame: Frame) -> bool:
    """The two texts qualify the slot differently (a work and a personal e-mail)."""
    po, pn = _qualifiers(old, _PERIODS), _qualifiers(new, _PERIODS)
    if po and pn and not po & pn:
        return True
    return frame.strict and _qualifiers(old, _KIND_QUALIFIERS) != _qualifiers(new, _KIND_QUALIFIERS)


def _same(a: frozenset[str], b: frozenset[str]) -> bool:
    return a <= b or b <= a


def _latin(frame: Frame) -> bool:
    return not any(CJK.search(atom) for value in frame.values for atom in value)


def _compare(old: Frame, new: Frame, old_text: Reading, new_text: Reading) -> str | None:
    if _latin(old) != _latin(new):
        return None  # a name against a Chinese phrase ("MySQL" / "北京机房")
    new_matched = [any(_same(v, w) for w in old.values) for v in new.values]
    old_matched = [any(_same(v, w) for w in new.values) for v in old.values]
    if old.context and new.context and (not old.context & new.context):
        return None  # "5 km" of a run, "3 km" of a walk
    if new.context - old.context:
        return None  # "2 cups of coffee" / "3 cups of tea", 两杯咖啡 / 两杯水
    negation = old_text.negated != new_text.negated and old.kind != "mode"
    if all(new_matched) and all(old_matched):
        if negation:
            return "update"  # the same value, now denied
        if old.kind not in _TYPED_KINDS and old_text.typed != new_text.typed:
            return None  # the same name, but a time, date or number changed beside it
        return "duplicate"
    if negation:
        return None
    if not any(new_matched):
        return "update" if old.single and new.single else "new"
    return None


def _content(t: Reading) -> set[str]:
    if t.cjk:
        text = zh_strip(t.prepared)
        return {a for run in text.split() for a in atoms(run)}
    return {
        tok.key
        for tok in t.toks
        if tok.kind == "word" and tok.word not in STOP and tok.key not in _GENERIC
    }


def _ended(old: Reading, new: Reading) -> str | None:
    """The value of ``old`` that ``new`` says has ended ("Sold the Civic"), if any."""
    if old.owner is None or old.owner != new.owner or old.cjk != new.cjk:
        return None
    old_content = _content(old)
    if new.cjk:
        for m in _ZH_END.finditer(new.raw):  # the raw text: 了 is kept
            obj = next((g for g in m.groups() if g), "")
            parts = {a for run in zh_strip(obj).split() for a in atoms(run)}
            hit = parts & old_content
            if hit and CJK.search("".join(hit)):
                return obj.strip()
        return None
    new_content = _content(new)
    for m in _EN_END.finditer(new.low):
        picked: list[str] = []
        for word in m.group("o").split():
            if word in STOP:
                break
            picked.append(lemma(word))
            if len(picked) == 3:
                break
        hit = set(picked) & old_content
        if not hit:
            continue
        first = {tok.key for tok in old.toks[:2]}
        if hit <= first and not (old_content & new_content) - hit:
            continue  # the old text's subject, and nothing else shared ("Maria is away")
        return " ".join(picked)
    return None


def _pairs(old: dict[str, Frame], new: dict[str, Frame]) -> list[tuple[str, str]]:
    """Frames of one slot: the same name, or two nouns one of which begins the other
    (车牌号 / 车牌: the head comes first in these compounds of a thing and its part)."""
    out = [(name, name) for name in old.keys() & new.keys()]
    for a in old:
        for b in new:
            if a != b and a.startswith("noun:") and b.startswith("noun:"):
                x, y = a[5:], b[5:]
                if (
                    CJK.match(x)
                    and min(len(x), len(y)) >= 2
                    and (x.startswith(y) or y.startswith(x))
                ):
                    out.append((a, b))
    return out


def _moved_on(old: Reading, new: Reading) -> str | None:
    """Another named value on the same topic, with a cue that things changed: "I shop at
    Trader Joe's for groceries" / "I get my groceries at Whole Foods now". No lexicon:
    the topic is the words outside the names, and everything the new text is about must
    be in the old one."""
    if old.cjk or new.cjk or old.owner is None or old.owner != new.owner:
        return None
    strong = _STRONG_CHANGE.search(new.low)
    if not strong and not _WEAK_CHANGE.search(new.low):
        return None
    if _EVENT.search(old.low):
        return None  # "I visited Paris": an event, not a standing fact
    old_runs, new_runs = _object_runs(old), _object_runs(new)
    if not old_runs or not new_runs:
        return None
    if any(_same(frozenset(a), frozenset(b)) for a in old_runs for b in new_runs):
        return None
    old_topic, new_topic = _topic(old, old_runs), _topic(new, new_runs)
    if not new_topic or not new_topic <= old_topic:
        return None
    if not strong and any(tok.key in _MANY for tok in (*old.toks, *new.toks)):
        return None  # "I like X" / "I like Y now": one more liked thing, perhaps
    return ", ".join(" ".join(r) for r in new_runs)


def _restated(old: Reading, new: Reading) -> bool:
    """The same names and the same topic words in another order ("I buy my coffee beans
    from Blue Bottle" / "Blue Bottle is where I get my coffee beans"), light verbs aside."""
    if old.cjk or new.cjk or old.owner is None or old.owner != new.owner:
        return False
    if old.negated != new.negated or old.typed != new.typed:
        return False
    if any(_ORDERED.search(t.low) for t in (old, new)):
        return False  # "Python over JavaScript": the order of the names is the meaning
    old_runs, new_runs = proper_runs(old), proper_runs(new)
    if not old_runs or len(old_runs) != len(new_runs):
        return False
    if not all(any(_same(frozenset(a), frozenset(b)) for b in new_runs) for a in old_runs):
        return False
    if not all(any(_same(frozenset(a), frozenset(b)) for a in old_runs) for b in new_runs):
        return False
    old_topic, new_topic = _topic(old, old_runs), _topic(new, new_runs)
    return bool(old_topic) and old_topic == new_topic


def _object_runs(t: Reading) -> list[tuple[str, ...]]:
    """Names that are not the sentence's subject ("Maria is away": Maria is the subject)."""
    first = t.prepared[t.toks[0].start : t.toks[0].end].lower() if t.toks else ""
    return [r for r in proper_runs(t) if r[0] != first]


def _topic(t: Reading, runs: list[tuple[str, ...]]) -> frozenset[str]:
    named = {w for r in runs for w in r}
    return frozenset(
        tok.key
        for tok in t.toks
        if tok.kind == "word"
        and tok.word not in STOP
        and tok.word.lower() not in named
        and tok.key not in CHANGE
        and tok.key not in PRONOUNS
        and tok.key not in PERIOD_WORDS
        and tok.key not in _LIGHT
    )


def judge(old_text: str, new_text: str, *, agreement: bool = True) -> Judgement | None:
    """Whether ``new_text`` updates or duplicates ``old_text`` by paraphrase, or ``None``.

    Args:
        old_text: The memory kept.
        new_text: The memory being remembered.
        agreement: Whether the embeddings agree the texts are close (the caller's
            similarity at its supersede threshold). The weakest rule, the same names and
            topic words rearranged with no slot named, calls a duplicate only then.

    >>> judge("I report to Susan Lee", "My new manager is David Chen").verdict
    'update'
    >>> judge("I take the bus to work", "I get to work by bus").verdict
    'duplicate'
    >>> judge("I'm allergic to peanuts", "I'm also allergic to shellfish").verdict
    'new'
    """
    old, new = reading(old_text), reading(new_text)
    ended = _ended(old, new)
    if ended is not None:
        return Judgement("update", "the new text ends the old value", ended, None, None)
    moved = _moved_on(old, new)
    if moved is not None:
        return Judgement("update", "another name on the same topic, and a change cue", None, moved)
    if agreement and _restated(old, new):
        return Judgement("duplicate", "the same names and the same topic words, rearranged")
    old_frames, new_frames = frames(old_text), frames(new_text)
    verdicts: dict[str, tuple[str, Frame, Frame]] = {}
    for name, other in _pairs(old_frames, new_frames):
        a, b = old_frames[name], new_frames[other]
        if _apart(old, new, a):
            continue  # a work and a personal e-mail, a monthly and a yearly salary
        verdict = _compare(a, b, old, new)
        if verdict is not None:
            verdicts[name] = (verdict, a, b)
    kinds = {v for v, _, _ in verdicts.values()}
    if len(kinds) != 1:
        return None
    verdict = kinds.pop()
    name, (_, a, b) = sorted(verdicts.items())[0]
    reason = {
        "duplicate": f"one life slot ({name}) with the same value, in other words",
        "update": f"one life slot ({name}) with another value, in other words",
        "new": f"another value of a slot that holds many ({name})",
    }[verdict]
    return Judgement(verdict, reason, a.shown, b.shown, name)
