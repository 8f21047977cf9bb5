"""Wording: a short memory cut into canonical tokens, so that wording stops mattering.

Two texts that say the same thing in other words should give the same tokens. To that
end :func:`tokens`:

- folds width and case (NFKC), expands English contractions (``I'm`` → ``i be``,
  ``don't`` → ``do not``) and maps possessives to their pronoun (``my`` → ``i``,
  ``our``/``我们`` → ``we``);
- writes times, dates, weekdays and numbers one way: ``9am``, ``9 a.m.``, ``nine am``,
  ``09:00``, ``早上九点`` are all ``09:00`` (``noon`` is ``12:00``, ``midnight`` ``00:00``);
  a phone-like run of digit groups (seven digits or more, joined by ``-`` or ``.``, or by
  spaces after a group of two or three digits or a ``+``: ``555-0142``, ``555 0142``,
  ``+351 912 345 678``) is its digits; ``March 1, 2026`` is ``2026-03-01``;
  ``Tuesdays``/``周二`` are ``tue``; ``six``/``六``/``6`` are ``6``; ``$5,000`` is
  ``usd 5000``;
- lemmatises English words lightly (a table of common verbs, then the palace's suffix
  stemmer, then a final ``e`` dropped: ``live``/``lives``/``living`` are all ``liv``);
- drops articles and the fillers that mark time rather than content (``now``,
  ``currently``, ``these days``, ``现在``, ``已经``, ``了``...), and writes every negation
  (``not``, ``never``, ``no longer``, ``不``, ``没``) as ``not``.

Chinese is cut into characters (each a token), except pronouns, times and numbers. No
model is involved: the same text always gives the same tokens.

About 520 lines: the tables of one canonical reading (contractions, lemmas, numbers,
months, weekdays, Chinese digits and pronouns) beside the steps that read them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from palace_retrievers.terms import stem


def words(text: str) -> list[str]:
    """``text`` split at white space (word lists read better as text)."""
    return text.split()


#: Token kinds that are values by their form alone (a changed one is a changed value).
TYPED = frozenset({"time", "date", "num"})

_MONTHS = {
    m: i
    for i, names in enumerate(
        (
            "jan january",
            "feb february",
            "mar march",
            "apr april",
            "may",
            "jun june",
            "jul july",
            "aug august",
            "sep sept september",
            "oct october",
            "nov november",
            "dec december",
        ),
        start=1,
    )
    for m in names.split()
}
_WEEKDAYS = {
    d[:3]: d[:3] for d in words("monday tuesday wednesday thursday friday saturday sunday")
} | {
    d + s: d[:3]
    for d in words("monday tuesday wednesday thursday friday saturday sunday")
    for s in ("", "s")
}
_ZH_WEEKDAYS = dict(zip("一二三四五六日天", words("mon tue wed thu fri sat sun sun"), strict=True))
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        words(
            "zero one two three four five six seven eight nine ten eleven twelve thirteen "
            "fourteen fifteen sixteen seventeen eighteen nineteen twenty"
        )
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "hundred": 100, "thousand": 1000}
_ORDINALS = {
    w: i
    for i, w in enumerate(
        words("first second third fourth fifth sixth seventh eighth ninth tenth"), start=1
    )
}
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5}
_ZH_DIGITS |= {"六": 6, "七": 7, "八": 8, "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000, "万": 10000}
_ZH_NUM = "[零〇一二两三四五六七八九十百千万]+"

#: English contractions, as the tokens they stand for.
_CONTRACTIONS = {
    "i'm": "i be",
    "we're": "we be",
    "you're": "you be",
    "they're": "they be",
    "it's": "it be",
    "that's": "that be",
    "he's": "he be",
    "she's": "she be",
    "there's": "there be",
    "what's": "what be",
    "i've": "i have",
    "we've": "we have",
    "i'll": "i will",
    "we'll": "we will",
    "i'd": "i would",
    "we'd": "we would",
    "can't": "can not",
    "won't": "will not",
    "ain't": "be not",
}
_LEMMAS = {
    **dict.fromkeys(words("am is are was were be been being 's 're 'm"), "be"),
    **dict.fromkeys(words("has had having"), "have"),
    **dict.fromkeys(words("does did doing done"), "do"),
    **dict.fromkeys(words("goes went gone going"), "go"),
    **dict.fromkeys(words("uses used using"), "use"),
    **dict.fromkeys(words("moves moved moving"), "move"),
    **dict.fromkeys(words("takes took taken taking"), "take"),
    **dict.fromkeys(words("makes made making"), "make"),
    **dict.fromkeys(words("runs ran running"), "run"),
    **dict.fromkeys(words("drives drove driven driving"), "drive"),
    **dict.fromkeys(words("likes liked liking"), "like"),
    **dict.fromkeys(words("loves loved loving"), "love"),
    **dict.fromkeys(words("lives lived living live"), "live"),
    **dict.fromkeys(words("favorite favourite fave"), "favourite"),
    **dict.fromkeys(words("color colour"), "colour"),
    **dict.fromkeys(words("me mine myself my"), "i"),
    **dict.fromkeys(words("our ours us ourselves"), "we"),
    **dict.fromkeys(words("your yours yourself"), "you"),
    **dict.fromkeys(words("his him himself"), "he"),
    **dict.fromkeys(words("her hers herself"), "she"),
    **dict.fromkeys(words("their theirs them themselves"), "they"),
    "never": "not",
    "no": "not",
    "n't": "not",
}
_SHORT_WORDS = frozenset({"not", "no", "us", "be", "do", "on", "in", "at", "to", "an", "hom"})
_NEGATIONS = frozenset({"not", "never", "no", "n't"})
ARTICLES = frozenset({"a", "an", "the"})
#: Words that say when something was said or how strongly, never what.
FILLERS = frozenset(
    words(
        "now currently presently nowadays actually really still anymore just also too so well "
        "btw fyi um uh oh okay ok hey please remember note very honestly basically usually "
        "normally generally typically"
    )
)
_FILLER_PHRASES = (
    ("these", "days"),
    ("right", "now"),
    ("at", "the", "moment"),
    ("any", "more"),
    ("by", "the", "way"),
    ("just", "so", "you", "know"),
    ("for", "the", "record"),
    ("keep", "in", "mind", "that"),
    ("remember", "that"),
    ("note", "that"),
    ("these", "day"),
)
_ZH_FILLERS = re.compile(
    r"请记住|记住|记一下|记得|别忘了|注意|其实|现在|目前|如今|当前|已经|现已|最近|这些天|"
    r"(?<![为除])了(?!解)|啦|呢|吧|啊|呀|哦|嗯|很|非常|特别|真的|一直|还是|平时|通常|一般|比较|经常|新的|(?<=的)新(?=[\u4e00-\u9fff])"
)
_ZH_PRONOUNS = {
    "我们": "we",
    "咱们": "we",
    "你们": "you",
    "他们": "they",
    "她们": "they",
    "我": "i",
    "你": "you",
    "他": "he",
    "她": "she",
}
_ZH_SYNONYMS = (
    ("手机号码", "手机号"),
    ("电话号码", "电话"),
    ("上班", "工作"),
    ("使用", "用"),
    ("采用", "用"),
    ("星期", "周"),
    ("礼拜", "周"),
    ("而不是", "胜过"),
    ("跟", "和"),
)
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "¥": "cny"}
_CURRENCY_WORDS = {
    **dict.fromkeys(words("dollar dollars usd bucks"), "usd"),
    **dict.fromkeys(words("euro euros eur"), "eur"),
    **dict.fromkeys(words("pound pounds gbp"), "gbp"),
    **dict.fromkeys(words("元 块 块钱 人民币 rmb yuan"), "cny"),
}

_SPELLED_HOUR = re.compile(
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)(\s*(?:[ap]\.?m\b|o'clock))",
    re.IGNORECASE,
)
_TIME_ZONE = re.compile(r"\btime\s+zone\b", re.IGNORECASE)
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(
    rf"(?P<iso>\b\d{{4}}-\d{{2}}-\d{{2}}\b)"
    rf"|(?P<mdy>\b(?:{_MONTH})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+(?P<mdy_y>\d{{4}})\b)?)"
    rf"|(?P<dmy>\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH})\b\.?(?:,?\s+(?P<dmy_y>\d{{4}})\b)?)"
    rf"|(?P<zhdate>(?:(?P<zy>\d{{4}})年)?(?P<zm>\d{{1,2}})月(?P<zd>\d{{1,2}})[日号])"
    r"|(?P<clock>\b\d{1,2}:\d{2}(?:\s*(?P<clock_m>[ap])\.?m\b\.?)?)"
    r"|(?P<ampm>\b\d{1,2}\s*(?P<ampm_m>[ap])\.?m\b\.?)"
    r"|(?P<noon>\b(?:noon|midday|midnight)\b)"
    r"|(?P<phone>(?<![\d.,])(?=\+?\d(?:[ .-]?\d){6})(?:\+\d{1,4}(?:[ .-]\d{2,4}){2,4}"
    r"|\d{2,4}(?:[.-]\d{2,4}){1,4}|\d{2,3}(?: \d{2,4}){1,3})(?![\d.,]))"
    r"|(?P<zhtime>(?P<zh_part>上午|早上|早晨|中午|下午|晚上)?(?P<zh_h>\d{1,2})[点點](?P<zh_half>半|\d{1,2}分)?)"
    rf"|(?P<money>[$€£¥]\s?\d[\d,]*(?:\.\d+)?)"
    r"|(?P<code>(?<![a-z0-9])(?:[a-z]+[+-]\d+|\d+(?:-\d+)+|\d+[a-z])(?![a-z0-9]))"
    r"|(?P<ordinal>\b\d+(?:st|nd|rd|th)\b)"
    r"|(?P<num>\b\d[\d,]*(?:\.\d+)*\b|\d+(?:\.\d+)?)"
    r"|(?P<word>[a-z][a-z0-9]*(?:['’][a-z]+)?(?:[.+#-][a-z0-9]+)*[+#]*)"
    rf"|(?P<cjk>[{_CJK}])",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Token:
    """One canonical token of a text.

    Attributes:
        key: The canonical form compared (``liv``, ``09:00``, ``not``, ``i``, ``里``).
        word: The lower-case surface form, contractions expanded (``living``).
        kind: ``word``, ``cjk``, ``time``, ``date``, ``num`` or ``neg``.
        start: Where the token starts in the NFKC-normalised text.
        end: Where it ends in that text.
        proper: Written with a capital or a digit inside a sentence (a name, a version).
    """

    key: str
    word: str
    kind: str
    start: int
    end: int
    proper: bool = False


def normalize(text: str) -> str:
    """``text`` folded to NFKC with typographic quotes made plain."""
    text = unicodedata.normalize("NFKC", text)
    return text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')


def lemma(word: str) -> str:
    """The canonical form of one lower-case English word."""
    if word in _LEMMAS:
        return _LEMMAS[word]
    if word in _NUMBER_WORDS:
        return str(_NUMBER_WORDS[word])
    if word in _ORDINALS:
        return str(_ORDINALS[word])
    if word in _WEEKDAYS:
        return _WEEKDAYS[word]
    if not word.isalpha():
        return word
    stemmed = stem(word)
    if len(stemmed) > 3 and stemmed.endswith("e") and stemmed[:-1] not in _SHORT_WORDS:
        return stemmed[:-1]
    return stemmed


def zh_number(text: str) -> int | None:
    """The value of a Chinese numeral (``二十三`` → 23, ``五千`` → 5000), or ``None``."""
    total = section = 0
    digit: int | None = None
    if not text or text[0] in "百千万":
        return None
    for char in text:
        if char in _ZH_DIGITS:
            digit = _ZH_DIGITS[char]
        elif char in _ZH_UNITS:
            unit = _ZH_UNITS[char]
            if unit == 10000:
                total += (section + (digit or 0)) * unit
                section = 0
            else:
                section += (1 if digit is None else digit) * unit
            digit = None
        else:
            return None
    return total + section + (digit or 0)


def _zh_prepare(text: str) -> str:
    """Chinese weekdays, numerals and fillers rewritten in place (character runs only)."""
    for old, new in _ZH_SYNONYMS:
        text = text.replace(old, new)
    text = re.sub(
        "(?:周|星期|礼拜)([一二三四五六日天])", lambda m: f" {_ZH_WEEKDAYS[m.group(1)]} ", text
    )

    def numeral(match: re.Match[str]) -> str:
        value = zh_number(match.group(1))
        return match.group(0) if value is None else str(value) + match.group(2)

    text = re.sub(
        f"(?<![0-9])({_ZH_NUM})([点點个年月日号岁元块楼层次人只本张条位名天周小分])", numeral, text
    )
    text = re.sub(
        r"(\d+(?:\.\d+)?)([万千])",
        lambda m: f"{float(m.group(1)) * (10000 if m.group(2) == '万' else 1000):g}",
        text,
    )
    return _ZH_FILLERS.sub(" ", text)


def _clock(hour: int, minute: int, meridiem: str | None) -> str:
    if meridiem == "p" and hour < 12:
        hour += 12
    if meridiem == "a" and hour == 12:
        hour = 0
    return f"{hour:02d}:{minute:02d}"


def _typed(match: re.Match[str]) -> tuple[str, str] | None:
    """``(key, kind)`` of a time, date or number match; ``None`` for words."""
    group = match.lastgroup
    value = match.group(0).lower()
    if group == "iso":
        return value, "date"
    if group in ("mdy", "dmy"):
        month = next(int(_MONTHS[m]) for m in re.findall("[a-z]+", value) if m in _MONTHS)
        day = int(re.findall(r"\d{1,2}(?=st|nd|rd|th|\b)", value)[0])
        year = match.group(f"{group}_y")
        return (f"{year}-" if year else "") + f"{month:02d}-{day:02d}", "date"
    if group == "zhdate":
        zy, zm, zd = match.group("zy", "zm", "zd")
        return (f"{zy}-" if zy else "") + f"{int(zm):02d}-{int(zd):02d}", "date"
    if group == "clock":
        hour, minute = (int(p) for p in re.findall(r"\d+", value)[:2])
        return _clock(
            hour, minute, match.group("clock_m") and match.group("clock_m").lower()
        ), "time"
    if group == "ampm":
        return _clock(int(re.findall(r"\d+", value)[0]), 0, match.group("ampm_m").lower()), "time"
    if group == "noon":
        return ("00:00" if value == "midnight" else "12:00"), "time"
    if group == "phone":
        return re.sub(r"\D", "", value), "num"
    if group == "zhtime":
        hour = int(match.group("zh_h"))
        half = match.group("zh_half") or ""
        minute = 30 if half == "半" else int(half[:-1]) if half else 0
        part = match.group("zh_part")
        meridiem = "p" if part in ("下午", "晚上") else "a" if part else None
        return _clock(hour, minute, meridiem), "time"
    if group == "ordinal":
        return str(int(re.findall(r"\d+", value)[0])), "num"
    if group == "num":
        return (
            value.replace(",", "") if re.fullmatch(r"\d{1,3}(,\d{3})+", value) else value
        ), "num"
    if group == "code":
        return value, "num"
    return None


def _raw_tokens(text: str) -> Iterator[Token]:
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        raw = match.group(0)
        sentence_start = start == 0 or bool(re.search(r"[.!?。！？:\n]\s*$", text[:start]))
        if match.lastgroup == "money":
            yield Token(_CURRENCY[raw[0]], _CURRENCY[raw[0]], "word", start, start + 1)
            amount = raw[1:].strip().replace(",", "")
            yield Token(amount, amount, "num", start + 1, end, True)
            continue
        typed = _typed(match)
        if typed is not None:
            yield Token(typed[0], typed[0], typed[1], start, end, True)
            continue
        if match.lastgroup == "cjk":
            yield Token(raw, raw, "cjk", start, end)
            continue
        word = raw.lower()
        proper = (not sentence_start and not raw.islower()) or (
            any(c.isupper() for c in raw[1:]) or any(c.isdigit() for c in raw)
        )
        expanded = _CONTRACTIONS.get(word)
        if expanded is None and word.endswith("n't"):
            expanded = f"{word[:-3] or 'do'} not"
        elif expanded is None and word.endswith("'s"):
            expanded = word[:-2]
        for part in (expanded or word).split():
            key = lemma(part)
            kind = "date" if part in _WEEKDAYS else "num" if key.isdigit() else "word"
            yield Token(key, part, kind, start, end, proper and part == word)


def _fold(tokens: list[Token]) -> list[Token]:
    """Fillers, articles and phrase fillers dropped; negations, pronouns, units written once."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        words = [t.word for t in tokens[i : i + 4]]
        phrase = next((p for p in _FILLER_PHRASES if tuple(words[: len(p)]) == p), None)
        if phrase is not None:
            i += len(phrase)
            continue
        if words[:2] == ["no", "longer"]:
            out.append(Token("not", "not", "neg", token.start, tokens[i + 1].end))
            i += 2
            continue
        i += 1
        if token.kind == "word" and token.word == "new" and not token.proper:
            continue  # "my new manager": the newness is the update itself
        if token.key == "have" and i < len(tokens) and tokens[i].key == "be":
            continue  # "has been moved": the tense says nothing
        if token.kind == "word" and (token.word in ARTICLES or token.word in FILLERS):
            continue
        if token.kind == "word" and token.word in _NEGATIONS:
            if out and out[-1].key in ("do", "be", "will", "can") and out[-1].kind == "word":
                out.pop()  # "do not", "will not": the auxiliary says nothing
            out.append(Token("not", "not", "neg", token.start, token.end))
            continue
        unit = _CURRENCY_WORDS.get(token.word)
        if unit is not None:
            out.append(Token(unit, unit, "word", token.start, token.end))
            continue
        out.append(token)
    return out


def _zh_pronouns(tokens: list[Token]) -> list[Token]:
    """Chinese pronoun characters joined into one token (``我们`` → ``we``); 不/没 → not."""
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "cjk":
            pair = token.word + tokens[i + 1].word if i + 1 < len(tokens) else ""
            if pair in _ZH_PRONOUNS:
                out.append(Token(_ZH_PRONOUNS[pair], pair, "word", token.start, tokens[i + 1].end))
                i += 2
                continue
            if token.word in _ZH_PRONOUNS:
                out.append(
                    Token(_ZH_PRONOUNS[token.word], token.word, "word", token.start, token.end)
                )
                i += 1
                continue
            if pair == "没有":
                out.append(Token("not", pair, "neg", token.start, tokens[i + 1].end))
                i += 2
                continue
            if token.word in "不没别":
                out.append(Token("not", token.word, "neg", token.start, token.end))
                i += 1
                continue
        out.append(token)
        i += 1
    return out


def tokens(text: str) -> list[Token]:
    """The canonical tokens of ``text`` (see the module docstring)."""
    return read(text)[1]


def read(text: str) -> tuple[str, list[Token]]:
    """``(prepared(text), tokens(text))``: token offsets point into the first."""
    ready, toks = _read(text) if len(text) <= _CACHED_CHARS else _read.__wrapped__(text)
    return ready, list(toks)


_CACHED_CHARS = 1000  # memories are short; a long text is read again rather than kept


@functools.lru_cache(maxsize=4096)
def _read(text: str) -> tuple[str, tuple[Token, ...]]:
    """Cached: a new memory is compared with several candidates, one after another."""
    ready = prepared(text)
    return ready, tuple(_zh_pronouns(_fold(list(_raw_tokens(ready)))))


def prepared(text: str) -> str:
    """``text`` as :func:`tokens` reads it: NFKC-folded, Chinese runs rewritten."""
    text = _SPELLED_HOUR.sub(lambda m: str(_NUMBER_WORDS[m.group(1).lower()]) + m.group(2), text)
    text = _TIME_ZONE.sub("timezone", text)
    return _zh_prepare(normalize(text))


def clean(toks: list[Token]) -> str:
    """The tokens' surface words as one lower-case line (Chinese characters unspaced)."""
    return line(toks)[0]


def line(toks: list[Token]) -> tuple[str, list[tuple[int, int]]]:
    """:func:`clean`, and where each token stands in it (``(start, end)`` per token)."""
    out: list[str] = []
    where: list[tuple[int, int]] = []
    length = 0
    previous = ""
    for token in toks:
        word = token.word if token.kind in ("word", "cjk", "neg") else token.key
        if token.key == "be":
            word = "is"
        if token.kind == "neg":
            word = "not" if not re.match(f"[{_CJK}]", token.word) else token.word
        cjk = bool(re.match(f"[{_CJK}]", word))
        if out and not (cjk and previous == "cjk"):
            out.append(" ")
            length += 1
        out.append(word)
        where.append((length, length + len(word)))
        length += len(word)
        previous = "cjk" if cjk else "latin"
    return "".join(out), where
