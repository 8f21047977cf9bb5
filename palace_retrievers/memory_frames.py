"""Memory frames: the life slots a short memory names, whoever says it how.

A memory is read once (:func:`reading`, cached): whose fact it is (the speaker's, a
relative's, or someone's unnamed), its names (capitalised words, letters with digits),
and, for each slot of :mod:`palace_retrievers.life_slots` its words name in any
structure, the values of that slot's kind (:func:`frames`): "I report to Susan Lee" and
"Susan Lee is my manager" both give the frame ``manager`` with the value Susan Lee.
Beyond the lexicon, a number and what it counts ("8 engineers", "十个人") and any "my X is
Y" / "Y is my X" / "我的X是Y" are frames too. :mod:`palace_retrievers.paraphrase`
compares two readings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from palace_retrievers.life_slots import (
    CONCEPTS,
    FAVOURITE_EN,
    FAVOURITE_NOUNS,
    FAVOURITE_ZH,
    Concept,
)
from palace_retrievers.terms import ENGLISH_STOP_WORDS
from palace_retrievers.wording import (
    FILLERS,
    TYPED,
    Token,
    lemma,
    normalize,
    read,
    words,
    zh_number,
)

__all__ = [
    "CHANGE",
    "CJK",
    "PERIOD_WORDS",
    "PRONOUNS",
    "STOP",
    "Frame",
    "Reading",
    "atoms",
    "frames",
    "proper_runs",
    "reading",
    "zh_strip",
]

CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


_KIN_EN = re.compile(
    r"\b(?:my|our)(?: \w+)? (?P<k>wife|husband|partner|boyfriend|girlfriend|"
    r"brother|sister|mom|mum|mother|dad|father|parents|son|daughter|kids?|children|friend|"
    r"roommate|flatmate|neighbou?r|colleague|cousin|aunt|uncle|grandma|grandpa|grandmother|"
    r"grandfather|sibling|fianc[ée]e?)s?\b"
)


_THIRD_EN = re.compile(r"^(?:he|she)\b|\b(?:his|her|their)\b")


_KIN_ZH = re.compile(
    "(?P<k>老婆|老公|妻子|丈夫|太太|媳妇|妈妈|我妈|爸爸|我爸|父母|爸妈|儿子|女儿|哥哥|姐姐|弟弟|"
    "妹妹|朋友|同事|室友|邻居|孩子|爷爷|奶奶|外公|外婆)"
)


#: Kin words folded, so that "my mum" and "my mother" own one set of slots.
_KIN_FOLD = {
    "mom": "mother", "mum": "mother", "妈妈": "mother", "我妈": "mother",
    "dad": "father", "爸爸": "father", "我爸": "father",
    "老婆": "wife", "妻子": "wife", "太太": "wife", "媳妇": "wife",
    "老公": "husband", "丈夫": "husband", "父母": "parents", "爸妈": "parents",
    "儿子": "son", "女儿": "daughter", "kid": "kids", "children": "kids", "孩子": "kids",
    "朋友": "friend", "同事": "colleague", "室友": "roommate", "flatmate": "roommate",
    "邻居": "neighbour", "neighbor": "neighbour", "grandma": "grandmother",
    "grandpa": "grandfather", "奶奶": "grandmother", "爷爷": "grandfather",
}  # fmt: skip


_SELF = re.compile(
    r"\b(?:i|we|my|our|me|us|i'm|we're|i've|we've)\b"
    r"|^(?:got|sold|bought|moved|switched|started|changed|upgraded|joined|left|quit)\b"
)


PRONOUNS = frozenset({"i", "we", "you", "he", "she", "they", "it", "be"})


_CALENDAR = frozenset(
    words(
        "january february march april may june july august september october november "
        "december jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday "
        "thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays "
        "saturdays sundays"
    )
)


_TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "dr.", "mr.", "mrs.", "ms.", "sir"})


#: Words of when or how often, never of what: left out of a quantity's context.
PERIOD_WORDS = frozenset(
    lemma(w)
    for w in words(
        "every each morning mornings evening evenings night nights day days daily week weeks "
        "weekly month months monthly year annually a per total altogether"
    )
)


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


_ZH_NOISE = re.compile(
    "我们|咱们|你们|他们|她们|我|你|他|她|的|了|是|在|把|被|给|向|跟|"
    "换成|改成|改为|变成|换了|改用|换|改|用|新的|一辆|一部|一台|一个|一家|一位|"
    "现在|最近|已经|全部|每天|每周|每个月|每月|上个月|这个月|去年|今年|上周|这周|直接|直属|"
    "一直|目前|一般|平时|通常|去|叫|一共|总共|扩到|增加到|减少到|降到|涨到|到|"
    + _KIN_ZH.pattern
    + "|"
    "[a-z]{3}(?= |$)|\\d+|\\s"
)


_ZH_PERSON = re.compile(
    "[小老][王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯]|[王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏"
    "魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵"
    "钱严覃武戴莫孔汤](?:总|经理|老师|医生|教授|主任|老板|主管|组长|工|阿姨|叔叔|师傅)"
)


_ZH_AMOUNT = re.compile(
    r"(\d+(?:\.\d+)?|[一二两三四五六七八九十]+)\s*(万|千)([一二三四五六七八九])?(?![个月年天次])"
)


STOP = ENGLISH_STOP_WORDS | FILLERS | {"be", "is", "new", "now", "lately", "recently"}


CHANGE = frozenset(
    lemma(w)
    for w in words(
        "switched switch changed change moved move upgraded upgrade replaced replace swapped "
        "got get started start dropped gave give up sold since instead went up down raised "
        "these days upped hire hired hiring grew grown expanded shrank"
    )
)


@dataclass(frozen=True, slots=True)
class Frame:
    """One slot a text names, and the values of the slot's kind it holds.

    Attributes:
        concept: The slot (:attr:`~palace_retrievers.life_slots.Concept.name`).
        single: The slot holds one value at a time.
        values: Each value as its atoms (words, bigrams, numbers); two values are one when
            they share an atom.
        shown: The values as written, for the verdict's reason.
    """

    concept: str
    single: bool
    values: tuple[frozenset[str], ...]
    shown: str
    kind: str = "name"
    strict: bool = False
    context: frozenset[str] = frozenset()  # a quantity's other words ("run", "team")


@dataclass(frozen=True)
class Reading:
    raw: str  # NFKC text as written
    prepared: str  # wording's prepared text (token offsets point here)
    low: str
    toks: tuple[Token, ...]
    cjk: bool
    owner: str | None  # "self", a kin word ("daughter"), or None: someone not named
    negated: bool
    typed: tuple[str, ...]  # the times, dates and numbers, sorted


@functools.lru_cache(maxsize=4096)
def reading(text: str) -> Reading:
    """A memory read once (cached: a new memory meets several candidates in a row)."""
    prepared, toks = read(text)
    raw = normalize(text)
    cjk = bool(CJK.search(prepared))
    if cjk:  # fillers taken out leave spaces: "我换了一辆" reads "我换 一辆"
        prepared = re.sub(r"(?<=[\u4e00-\u9fff])\s+(?=[\u4e00-\u9fff])", "", prepared)
    low = prepared.lower()
    owner = _owner(raw if cjk else low, cjk)
    negated = any(tok.kind == "neg" for tok in toks)
    typed = tuple(sorted(re.sub(r"\W", "", tok.key) for tok in toks if tok.kind in TYPED))
    return Reading(raw, prepared, low, tuple(toks), cjk, owner, negated, typed)


def _owner(text: str, cjk: bool) -> str | None:
    """Whose fact it is: the speaker's, a relative's or friend's, or someone's unnamed."""
    kin = (_KIN_ZH if cjk else _KIN_EN).search(text)
    if kin is not None:
        word = kin.group("k")
        return _KIN_FOLD.get(word, word)
    if re.match("[他她]", text) if cjk else _THIRD_EN.search(text):
        return None
    thing = None if cjk else re.search(r"\b(?:my|our) (?P<k>[a-z]+)'s\b", text)
    return thing.group("k") if thing else "self"  # "my server's time zone": the server's


def proper_runs(t: Reading) -> list[tuple[str, ...]]:
    """Capitalised words (and a number next to one: ``iPhone 12``, ``2015 Honda Civic``)."""
    toks = t.toks
    flags: list[bool] = []
    for i, tok in enumerate(toks):
        surface = t.prepared[tok.start : tok.end]
        if tok.kind in ("time", "date") or tok.key in PRONOUNS or tok.word in PRONOUNS:
            flags.append(False)  # "We're": a pronoun, even with a capital
            continue
        if surface.lower().rstrip(".") in _TITLES or surface.lower() in _CALENDAR:
            flags.append(False)  # a title, a month or a day is no name ("renews in June")
            continue
        capital = (
            surface[:1].isupper()
            or any(c.isupper() for c in surface[1:])
            or (any(c.isdigit() for c in surface) and any(c.isalpha() for c in surface))
        )  # a capital, or letters and digits together (a model, a code, a password)
        before = t.prepared[: tok.start].rstrip()
        after_title = (
            i > 0 and t.prepared[toks[i - 1].start : toks[i - 1].end].lower().rstrip(".") in _TITLES
        )
        first = not before or (before.endswith((".", "!", "?", ":")) and not after_title)
        if capital and first and not any(c.isupper() for c in surface[1:]):
            later = [x for x in toks[i + 1 :] if x.start >= tok.end]
            nxt = t.prepared[later[0].start : later[0].end] if later else ""
            capital = (
                nxt[:1].isupper()
                or nxt.lower() in ("is", "was", "'s")
                or (nxt.endswith("ed") and not surface.lower().endswith(("ed", "s")))
            )
        flags.append(capital and tok.kind != "num")
    runs: list[tuple[str, ...]] = []
    current: list[str] = []
    for i, tok in enumerate(toks):
        is_num = tok.kind == "num"
        near = (i > 0 and flags[i - 1]) or (i + 1 < len(toks) and flags[i + 1])
        if flags[i] or (is_num and near):
            word = t.prepared[tok.start : tok.end].lower()
            current.append(word[:-2] if word.endswith("'s") else word)
            continue
        if current:
            runs.append(tuple(current))
            current = []
    if current:
        runs.append(tuple(current))
    return [r for r in runs if not all(w.isdigit() for w in r)]


def _zh_residual(t: Reading, match: re.Match[str]) -> list[str]:
    """Chinese words left in the cue's clause once the cue and function words are out."""
    clauses = [(m.start(), m.end()) for m in re.finditer(r"[^，,。；;！!？?、]+", t.prepared)]
    start, end = next(((a, b) for a, b in clauses if a <= match.start() < b), (0, len(t.prepared)))
    clause = t.prepared[start : match.start()] + " " + t.prepared[match.end() : end]
    latin = [
        w.lower()
        for w in re.findall(r"[A-Za-z][A-Za-z0-9.+#-]*", clause)
        if w.lower() not in ("i", "we", "mon", "tue", "wed", "thu", "fri", "sat", "sun", "cny")
    ]
    if latin:
        return latin
    return _zh_words(clause)


#: Adverbs taken out only where a phrase starts: 我们都去 is 去, but 成都 stays 成都.
_ZH_ADVERBS = re.compile(r"(?:^|(?<=\s))[也都还就才又再只和]+")


def zh_strip(text: str) -> str:
    """Chinese text without its function words (each a space)."""
    return _ZH_ADVERBS.sub(" ", _ZH_NOISE.sub(" ", text))


def _zh_words(text: str) -> list[str]:
    """Runs of two or more Chinese characters once function words are out."""
    return [run for run in zh_strip(text).split() if len(CJK.findall(run)) >= 2]


def atoms(value: str) -> frozenset[str]:
    """A value's parts: Chinese bigrams, or words (one value is another when its parts are
    a subset: ``Civic`` is ``2015 Honda Civic``, ``西湖区`` is ``杭州西湖区``)."""
    if CJK.search(value):
        return frozenset(value[i : i + 2] for i in range(len(value) - 1)) or frozenset({value})
    return frozenset(value.split())


def _times(t: Reading, *, days: bool) -> list[str]:
    out: list[str] = []
    for i, tok in enumerate(t.toks):
        if tok.kind == "time":
            hour, minute = (int(p) for p in tok.key.split(":"))
            out.append(f"{hour % 12}:{minute:02d}")
        elif tok.kind == "date" and days:
            out.append(tok.key)
        elif (
            tok.kind == "num"
            and tok.key.isdigit()
            and int(tok.key) <= 12
            and i > 0
            and t.toks[i - 1].word in ("at", "around", "by", "until", "before", "after", "about")
        ):
            out.append(f"{int(tok.key) % 12}:00")  # "to sleep at 10": an hour
    return out


def _amounts(t: Reading) -> list[str]:
    out: list[str] = []
    if t.cjk:
        for m in _ZH_AMOUNT.finditer(t.raw):
            number = m.group(1)
            base = float(number) if number[0].isdigit() else zh_number(number)
            if base is None:
                continue
            unit = 10000 if m.group(2) == "万" else 1000
            tail = zh_number(m.group(3)) if m.group(3) else 0
            out.append(f"{base * unit + (tail or 0) * unit / 10:g}")
        if out:
            return out
    for tok in t.toks:
        surface = t.prepared[tok.start : tok.end].lower()
        if tok.kind == "num" and not re.search(r"\d(?:st|nd|rd|th)$", surface):
            try:
                value = float(tok.key)
            except ValueError:
                continue
            if value >= 10:
                out.append(f"{value:g}")
    return out


def _modes(t: Reading, concept: Concept) -> list[str]:
    text = t.prepared if t.cjk else t.low
    taken: list[tuple[int, int]] = []
    out: list[str] = []
    for pattern, option in concept.modes:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            taken.append(m.span())
            negated = re.search(
                r"(?:\bnot|n't|\bno longer|\bnever|不|没)\W{0,2}\w*\W?$", text[: m.start()]
            )
            out.append(("not:" if negated else "") + option)
    return out


def _rest(t: Reading, concept: Concept, match: re.Match[str]) -> list[str]:
    if t.cjk:
        return _zh_residual(t, match)
    noise = {lemma(w) for w in concept.noise} | concept.noise
    return [
        tok.key
        for tok in t.toks
        if tok.kind == "word"
        and tok.word not in STOP
        and tok.key not in noise
        and tok.word not in noise
        and tok.key not in CHANGE
        and tok.key not in ("i", "we", "you", "he", "she", "they")
    ]


def _values(t: Reading, concept: Concept, match: re.Match[str]) -> list[str]:
    kind = concept.kind
    if kind == "email":
        return re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", t.raw.lower())
    if kind == "digits":
        digits = (re.sub(r"\D", "", tok.key) for tok in t.toks if tok.kind == "num")
        return [d for d in digits if len(d) >= 6]
    if kind == "amount":
        return _amounts(t)
    if kind == "count":
        return [tok.key for tok in t.toks if tok.kind == "num"]
    if kind in ("time", "when"):
        return _times(t, days=kind == "when")
    if kind == "times":  # how often: "three times a week", "每周三次"
        toks = t.toks
        return [
            tok.key
            for i, tok in enumerate(toks)
            if tok.kind == "num" and i + 1 < len(toks) and toks[i + 1].word in ("times", "x", "次")
        ]
    if kind == "mode":
        return _modes(t, concept)
    if kind == "words":
        return _rest(t, concept, match)
    if t.cjk:
        if kind == "person":  # 王总, 小李, 张阿姨, or a name in Latin letters ("Tony")
            return _ZH_PERSON.findall(t.prepared) + [
                w.lower() for w in re.findall(r"\b[A-Z][a-z]+\b", t.raw)
            ]
        groups = [v for k, v in match.groupdict().items() if v and k in ("v", "v2", "v3")]
        if groups:
            latin = re.findall(r"[A-Za-z][A-Za-z0-9.+#-]*", groups[0])
            return [w.lower() for w in latin] or _zh_words(groups[0])
        return _zh_residual(t, match)
    return [" ".join(run) for run in proper_runs(t)]


def _owner_elsewhere(t: Reading, concept: Concept, match: re.Match[str]) -> bool:
    """The cue's verb has a subject other than the speaker ("Susan Lee reports to ...")."""
    if t.cjk or not concept.verb or re.match(r"(?:my|our)\b", match.group(0)):
        return False
    before = t.low[: match.start()]
    if not before.strip() or _SELF.search(before):
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
        if concept.personal and not t.cjk and not _SELF.search(t.low):
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
        values = _values(t, concept, match)
        if concept.name.startswith("favourite:") and not values:
            values = _rest(t, Concept(concept.name, "words", noise=frozenset(
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
    if m is None or re.search(_ZH_NOT_NOUN, m.group("n")) or _KIN_ZH.search(m.group("n")):
        return {}
    values = _zh_words(m.group("v"))
    key = "where:" + m.group("n")
    return {key: Frame(key, True, tuple(atoms(v) for v in values), ", ".join(values))}


def _zh_nouns(t: Reading) -> dict[str, Frame]:
    """我的车牌号是沪A12345 / 我车牌是沪A12345 / 我换了新车牌，沪B67890."""
    out: dict[str, Frame] = {}
    for pattern in _ZH_NOUN_PATTERNS:
        m = pattern.search(t.prepared)
        if m is None or _KIN_ZH.search(m.group("n")) or re.search(_ZH_NOT_NOUN, m.group("n")):
            continue  # a relative's, or no noun at all (我们用的是...)
        value = m.group("v")
        latin = re.findall(r"[A-Za-z0-9][A-Za-z0-9.+#-]*", value)
        values = [w.lower() for w in latin] or _zh_words(value)
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
