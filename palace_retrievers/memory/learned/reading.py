"""Memory reading: a short memory read once, for whose fact it is and what it names.

:func:`reading` (cached: a new memory meets several candidates in a row) gives a
:class:`Reading`: the text as written and as :mod:`palace_retrievers.memory.wording` prepares it,
its tokens, whether it is Chinese, whose fact it is (the speaker's, a relative's or
friend's, or someone's unnamed), whether it is negated, and its times, dates and numbers.
Beside it are the parts the frames and the verdict both read a reading by: its names
(:func:`proper_runs`: capitalised words, letters with digits), a value's parts
(:func:`atoms`), Chinese text without its function words (:func:`zh_strip`,
:func:`zh_words`) and the word sets left out of what a text is about (:data:`STOP`,
:data:`CHANGE`, :data:`PRONOUNS`, :data:`PERIOD_WORDS`).
:mod:`palace_retrievers.memory.learned.frames` reads the life slots a reading names;
:mod:`palace_retrievers.memory.learned.paraphrase` compares two readings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from palace_retrievers.memory.wording import (
    FILLERS,
    TYPED,
    Token,
    lemma,
    normalize,
    read,
    words,
)
from palace_retrievers.terms import ENGLISH_STOP_WORDS

__all__ = [
    "CHANGE",
    "CJK",
    "KIN_ZH",
    "PERIOD_WORDS",
    "PRONOUNS",
    "SELF",
    "STOP",
    "Reading",
    "atoms",
    "proper_runs",
    "reading",
    "zh_strip",
    "zh_words",
]


CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


_KIN_EN = re.compile(
    r"\b(?:my|our)(?: \w+)? (?P<k>wife|husband|partner|boyfriend|girlfriend|"
    r"brother|sister|mom|mum|mother|dad|father|parents|son|daughter|kids?|children|friend|"
    r"roommate|flatmate|neighbou?r|colleague|cousin|aunt|uncle|grandma|grandpa|grandmother|"
    r"grandfather|sibling|fianc[ée]e?)s?\b"
)


_THIRD_EN = re.compile(r"^(?:he|she)\b|\b(?:his|her|their)\b")


#: A relative or friend named in Chinese (the group ``k``).
KIN_ZH = re.compile(
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


#: The speaker: a first-person word, or a verb with no subject ("Sold the Civic").
SELF = re.compile(
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


_ZH_NOISE = re.compile(
    "我们|咱们|你们|他们|她们|我|你|他|她|的|了|是|在|把|被|给|向|跟|"
    "换成|改成|改为|变成|换了|改用|换|改|用|新的|一辆|一部|一台|一个|一家|一位|"
    "现在|最近|已经|全部|每天|每周|每个月|每月|上个月|这个月|去年|今年|上周|这周|直接|直属|"
    "一直|目前|一般|平时|通常|去|叫|一共|总共|扩到|增加到|减少到|降到|涨到|到|"
    + KIN_ZH.pattern
    + "|"
    "[a-z]{3}(?= |$)|\\d+|\\s"
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


@dataclass(frozen=True)
class Reading:
    """A memory as read once by :func:`reading`.

    Attributes:
        raw: The NFKC text as written.
        prepared: :func:`palace_retrievers.memory.wording.read`'s prepared text (the tokens'
            offsets point here; Chinese without the spaces fillers left).
        low: ``prepared`` in lower case.
        toks: The tokens of ``prepared``.
        cjk: The text is Chinese.
        owner: Whose fact it is: ``"self"``, a kin word folded (``"mother"``), a thing of
            the speaker's (``"server"``), or ``None``: someone not named.
        negated: The text has a negation.
        typed: The times, dates and numbers, sorted.
    """

    raw: str
    prepared: str
    low: str
    toks: tuple[Token, ...]
    cjk: bool
    owner: str | None
    negated: bool
    typed: tuple[str, ...]


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
    kin = (KIN_ZH if cjk else _KIN_EN).search(text)
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


#: Adverbs taken out only where a phrase starts: 我们都去 is 去, but 成都 stays 成都.
_ZH_ADVERBS = re.compile(r"(?:^|(?<=\s))[也都还就才又再只和]+")


def zh_strip(text: str) -> str:
    """Chinese text without its function words (each a space)."""
    return _ZH_ADVERBS.sub(" ", _ZH_NOISE.sub(" ", text))


def zh_words(text: str) -> list[str]:
    """Runs of two or more Chinese characters once function words are out."""
    return [run for run in zh_strip(text).split() if len(CJK.findall(run)) >= 2]


def atoms(value: str) -> frozenset[str]:
    """A value's parts: Chinese bigrams, or words (one value is another when its parts are
    a subset: ``Civic`` is ``2015 Honda Civic``, ``西湖区`` is ``杭州西湖区``)."""
    if CJK.search(value):
        return frozenset(value[i : i + 2] for i in range(len(value) - 1)) or frozenset({value})
    return frozenset(value.split())
