"""Memory frames: the life slots a short memory names, whoever says it how.

A memory is read once (:func:`~palace_retrievers.memory.learned.reading.reading`); for each slot
of :mod:`palace_retrievers.memory.learned.life_slots` its words name in any structure, the values
of that
slot's kind (:func:`~palace_retrievers.memory.learned.slot_values.slot_values`) make a frame
(:func:`frames`): "I report to Susan Lee" and "Susan Lee is my manager" both give the
frame ``manager`` with the value Susan Lee. Beyond the lexicon, a number and what it
counts ("8 engineers", "十个人") and any "my X is Y" / "Y is my X" / "我的X是Y" are frames
too. A fact of someone else's has no frame; a relative's frames are named after them
(``wife/diet``). :mod:`palace_retrievers.memory.learned.paraphrase` compares two memories' frames.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from palace_retrievers.memory.learned.life_slots import (
    CONCEPTS,
    FAVOURITE_EN,
    FAVOURITE_NOUNS,
    FAVOURITE_ZH,
    Concept,
)
from palace_retrievers.memory.learned.reading import (
    CHANGE,
    CJK,
    KIN_ZH,
    PERIOD_WORDS,
    PRONOUNS,
    SELF,
    STOP,
    Reading,
    atoms,
    proper_runs,
    reading,
    zh_strip,
    zh_words,
)
from palace_retrievers.memory.learned.slot_values import slot_values
from palace_retrievers.memory.wording import lemma, words, zh_number

__all__ = ["Frame", "frames"]


#: Group nouns: "我们团队" and "我们组" are one team.
_ZH_GROUPS = re.compile("团队|组|部门|公司|项目组|小组|科室")


#: A number and what it counts or measures: "8 engineers", "5 km", "十个人".
_COUNTED_ZH = re.compile(
    r"(?P<num>\d+(?:\.\d+)?|[一二两三四五六七八九十百]+)\s*(?:个|名|位)?(?P<what>[\u4e00-\u9fff])"
)


#: "my X is Y", "Y is our X": any noun of the speaker's, not only the lexicon's.
_NOUN_IS = re.compile(
    r"\b(?:my|our|the)(?: new| current| main| usual)? (?P<n>[a-z]+(?: [a-z]+)?) (?:is|are)\b"
)


_NOUN_TO = re.compile(
    r"\b(?:changed|switched|updated|set|moved|reset) (?:my|our|the) (?P<n>[a-z]+(?: [a-z]+)?) to\b"
)


_IS_NOUN = re.compile(
    r"\b(?:is|are) (?:my|our)(?: new| current| main| usual)? (?P<n>[a-z]+(?: [a-z]+)?)\W*$"
)


_ZH_ME = "(?:我们家|我家|我们|我)"


_ZH_NOUN_PATTERNS = (
    re.compile(
        rf"^{_ZH_ME}的?(?P<n>[\u4e00-\u9fff]{{1,4}}?)(?:的?名字)?(?:是|叫)(?P<v>[^，。,；;]+)$"
    ),
    re.compile(rf"^(?P<v>[^，。,；;]+?)是{_ZH_ME}的(?P<n>[\u4e00-\u9fff]{{2,4}})$"),
    re.compile("换了?(?:个|一个)?新?的?(?P<n>[\u4e00-\u9fff]{2,4})[，,] ?(?P<v>[^，。,；;]+)$"),
)


#: Where a thing of the speaker's is: 我们公司在望京 / 公司搬到了中关村.
_ZH_WHERE = re.compile(
    rf"^{_ZH_ME}?的?(?P<n>[\u4e00-\u9fff]{{2,4}}?)(?:的(?:办公室|地址|位置))?"
    r"(?:在|位于|搬到|搬去|迁到|迁往)(?P<v>[^，。,；;\s]{2,8})$"
)


_PEOPLE = frozenset(
    words(
        "wife husband partner boyfriend girlfriend brother sister mom mum mother dad father "
        "parents son daughter kids children friend friends roommate neighbour neighbor "
        "colleague cousin aunt uncle family"
    )
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One slot a text names, and the values of the slot's kind it holds.

    Attributes:
        concept: The slot (:attr:`~palace_retrievers.memory.learned.life_slots.Concept.name`).
        single: The slot holds one value at a time.
        values: Each value as its atoms (words, bigrams, numbers); two values are one when
            they share an atom.
        shown: The values as written, for the verdict's reason.
        kind: The slot's kind of value
        (:attr:`~palace_retrievers.memory.learned.life_slots.Concept.kind`).
        strict: The slot compares only when the two texts' qualifiers agree (a work and a
            personal e-mail).
        context: A quantity's other words ("run", "team"): two counts compare only when
            these agree.
    """

    concept: str
    single: bool
    values: tuple[frozenset[str], ...]
    shown: str
    kind: str = "name"
    strict: bool = False
    context: frozenset[str] = frozenset()


def _owner_elsewhere(t: Reading, concept: Concept, match: re.Match[str]) -> bool:
    """The cue's verb has a subject other than the speaker ("Susan Lee reports to ...")."""
    if t.cjk or not concept.verb or re.match(r"(?:my|our)\b", match.group(0)):
        return False
    before = t.low[: match.start()]
    if not before.strip() or SELF.search(before):
        return False
    return any(c.isupper() for c in t.prepared[: match.start()])


def _favourite(t: Reading) -> tuple[str, re.Match[str]] | None:
    pattern = FAVOURITE_ZH if t.cjk else FAVOURITE_EN
    match = pattern.search(t.prepared if t.cjk else t.low)
    if match is None:
        return None
    noun = next((g for g in (match.groupdict().get(k) for k in ("n", "n2", "verb")) if g), None)
    folded = FAVOURITE_NOUNS.get(noun or "")
    return (f"favourite:{folded}", match) if folded else None


def frames(text: str) -> dict[str, Frame]:
    """The life slots ``text`` names about the speaker, with the values found for each.

    >>> sorted(frames("I take the bus to work"))
    ['commute']
    >>> sorted(frames("My wife is vegetarian"))
    ['wife/diet']
    """
    return dict(_frames(text))


@functools.lru_cache(maxsize=4096)
def _frames(text: str) -> tuple[tuple[str, Frame], ...]:
    t = reading(text)
    if t.owner is None:
        return ()
    found: list[tuple[Concept, re.Match[str]]] = []
    for concept in CONCEPTS:
        pattern = concept.zh if t.cjk else concept.en
        match = pattern.search(t.prepared if t.cjk else t.low) if pattern else None
        if match is None or _owner_elsewhere(t, concept, match):
            continue
        if concept.unless is not None and concept.unless.search(t.prepared if t.cjk else t.low):
            continue
        if concept.personal and not t.cjk and not SELF.search(t.low):
            continue  # "The server runs in UTC": no one's own slot
        found.append((concept, match))
    favourite = _favourite(t)
    if favourite is not None:
        found.append((Concept(favourite[0], "name"), favourite[1]))
    out: dict[str, Frame] = {}
    for name, frame in (*_quantities(t).items(), *_nouns(t).items()):
        if frame.values:
            out[name if t.owner == "self" else f"{t.owner}/{name}"] = frame
    for concept, match in found:
        values = slot_values(t, concept, match)
        if concept.name.startswith("favourite:") and not values:
            values = slot_values(t, Concept(concept.name, "words", noise=frozenset(
                words("favourite favorite fave best most like love enjoy prefer food band")
            )), match)  # fmt: skip
        values = [v for v in values if v]
        if values:
            key = concept.name if t.owner == "self" else f"{t.owner}/{concept.name}"
            out[key] = Frame(
                concept.name,
                concept.single,
                tuple(atoms(v) for v in values),
                ", ".join(values),
                concept.kind,
                concept.strict,
            )
    return tuple(out.items())


def _quantities(t: Reading) -> dict[str, Frame]:
    """A number and what it counts, with the text's other words as the context."""
    out: dict[str, Frame] = {}
    if t.cjk:
        rest = zh_strip(_ZH_GROUPS.sub(" ", _COUNTED_ZH.sub(" ", t.prepared)))
        context = frozenset(a for run in rest.split() if CJK.search(run) for a in atoms(run))
        groups = frozenset({"<group>"}) if _ZH_GROUPS.search(t.prepared) else frozenset()
        for m in _COUNTED_ZH.finditer(t.prepared):
            if m.group("what") in "次点月年日号岁周天楼层块元":
                continue  # how often, a time, a date, an age, a floor, an amount
            number = m.group("num")
            value = number if number[0].isdigit() else str(zh_number(number))
            if value == "None" or m.group("what") in "个名位":
                continue
            if value == "1" and m.group("what") in "家辆部台只本张条件间所":
                continue  # 一家银行: "a bank", not a count
            key = f"qty:{m.group('what')}"
            out[key] = Frame(key, True, (frozenset({value}),), m.group(0), "count",
                             context=context | groups)  # fmt: skip
        return out
    toks = t.toks
    for i, tok in enumerate(toks[:-1]):
        unit = toks[i + 1]
        if tok.kind != "num" or unit.kind != "word" or unit.word in STOP:
            continue
        if unit.word in ("times", "x", "am", "pm") or unit.key in PERIOD_WORDS:
            continue
        context = frozenset(
            x.key
            for x in toks
            if x.kind == "word"
            and x is not unit
            and x.word not in STOP
            and x.key not in PERIOD_WORDS
            and x.key not in CHANGE
            and x.key not in PRONOUNS
        )
        key = f"qty:{unit.key}"
        out[key] = Frame(key, True, (frozenset({tok.key}),), f"{tok.key} {unit.word}", "count",
                         context=context)  # fmt: skip
    return out


_ZH_NOT_NOUN = "[的用在是有去做叫了住学吃喝每今明昨天现最]"


def _zh_where(t: Reading) -> dict[str, Frame]:
    m = _ZH_WHERE.search(t.prepared)
    if m is None or re.search(_ZH_NOT_NOUN, m.group("n")) or KIN_ZH.search(m.group("n")):
        return {}
    values = zh_words(m.group("v"))
    key = "where:" + m.group("n")
    return {key: Frame(key, True, tuple(atoms(v) for v in values), ", ".join(values))}


def _zh_nouns(t: Reading) -> dict[str, Frame]:
    """我的车牌号是沪A12345 / 我车牌是沪A12345 / 我换了新车牌，沪B67890."""
    out: dict[str, Frame] = {}
    for pattern in _ZH_NOUN_PATTERNS:
        m = pattern.search(t.prepared)
        if m is None or KIN_ZH.search(m.group("n")) or re.search(_ZH_NOT_NOUN, m.group("n")):
            continue  # a relative's, or no noun at all (我们用的是...)
        value = m.group("v")
        latin = re.findall(r"[A-Za-z0-9][A-Za-z0-9.+#-]*", value)
        values = [w.lower() for w in latin] or zh_words(value)
        if values:
            key = "noun:" + m.group("n")
            out[key] = Frame(key, True, tuple(atoms(v) for v in values), ", ".join(values))
    return out


def _nouns(t: Reading) -> dict[str, Frame]:
    """ "My internet provider is Comcast" / "Comcast is our internet provider"."""
    if t.cjk:
        return {**_zh_nouns(t), **_zh_where(t)}
    out: dict[str, Frame] = {}
    for pattern in (_NOUN_IS, _IS_NOUN, _NOUN_TO):
        m = pattern.search(t.low)
        if m is None or m.group("n").split()[-1] in _PEOPLE:
            continue
        noun = m.group("n").split()
        key = "noun:" + " ".join(lemma(w) for w in noun)
        runs = [r for r in proper_runs(t) if not set(r) & set(noun)]
        if runs:
            values = tuple(frozenset(r) for r in runs)
            out[key] = Frame(key, True, values, ", ".join(" ".join(r) for r in runs))
    return out
