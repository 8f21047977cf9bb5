"""As-of: the past period a question asks about ("Where did I live in March 2024?").

Recall (:mod:`palace_retrievers.memory.recall`) answers such a question with the memories that
held during that period, superseded ones included, rather than with the current ones.
:func:`period_in` finds the period; :func:`without_period` gives the question without it
("Where did I live?"), which is what :func:`palace_retrievers.memory.slots.question_slots`
reads.

Forms understood (case-insensitive; a year is four digits, 1900 to 2199):

=====================================  ==========================================
English                                period
=====================================  ==========================================
``2024-03-10``, ``2024/03/10``         that day
``March 10, 2024``, ``10 March 2024``  that day (``Mar``, ``10th``, ``of`` allowed)
``2024-03``, ``March 2024``            that month
``in 2023``, ``during 2023``,          that year (a bare year only after one of
``as of 2023``, ``back in 2023``       these words: "the 2023 budget" is no date)
``yesterday``, ``last week``,          the day, week (Monday first), month or year
``last month``, ``last year``          before the current one
``3 days ago``, ``a year ago``,        the day, week, month or year that far back
``two months ago``
=====================================  ==========================================

=====================================  ==========================================
Chinese                                period
=====================================  ==========================================
``2024年3月10日`` (or ``号``)            that day
``2024年3月``                           that month
``2024年``                              that year
``昨天``, ``上周``/``上个星期``,              the day, week, month or year before
``上个月``, ``去年``, ``前年``                the current one (``前年``: two years back)
``3天前``, ``两个月前``, ``一年前``           that far back
=====================================  ==========================================

Without a year, a month or a day is its most recent occurrence that has begun by ``now``
("in March" asked in June 2026 is March 2026, asked in February 2026 it is March 2025;
"June 3" asked on June 3 is that day). ``last year``/``this year`` after it, or
``去年``/``今年``/``前年`` before it, give the year; ``last March`` is never the current
month:

=====================================  ==========================================
without a year                         period
=====================================  ==========================================
``on June 3``, ``June 3rd``,           that day
``3 June``, ``the 3rd of June``
``in March``, ``during May``,          that month (a month alone only after one of
``since April``, ``last March``,       these words, so "May I…" is no date; ``May``
``of June``, ``in early March``        and ``March`` alone only capitalised, so "march
                                       to the office" is none; ``Jan``-style short
                                       names alone only capitalised, never after "of")
``March last year``,                   that month (or day) of that year
``June 3 this year``
``6月3日``, ``6月3号``, ``六月三号``         that day
``3月``, ``3月份``, ``三月``               that month
``去年3月``, ``今年6月3日``                 that month (or day) of that year
=====================================  ==========================================

A phrase before the date that only says "at that time" goes with it: ``in``, ``on``,
``during``, ``as of``, ``back in``, ``at``, ``around``, ``since``, ``until``, ``of``, and
``截至``, ``截止到``, ``在`` before, ``的时候``, ``时`` after. Spelled-out Chinese years
(二〇二四年) are not understood. A period that has not started yet is no as-of question
(:func:`period_in` returns ``None``): the current value answers "Where will I live in
2030?" as well as anything.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sept sep",
            "october oct",
            "november nov",
            "december dec",
        ),
        start=1,
    )
    for name in names.split()
}
_MONTH_WORDS = "|".join(sorted(_MONTHS, key=len, reverse=True))
_MONTH = "(?:" + _MONTH_WORDS + r")\.?"
_YEAR = r"(?:19|20|21)\d\d"
_TH = r"(?:st|nd|rd|th)?"
_ZH_DIGITS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8}
_ZH_DIGITS |= {"九": 9, "十": 10, "半": 0}
_COUNT_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_UNITS = {"day": "day", "week": "week", "month": "month", "year": "year"}
_ZH_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "个星期": "week"}
_ZH_UNITS |= {"个月": "month", "月": "month", "年": "year"}

# Dates without a year. Whether a month's name is one is checked by _month_word_ok.
_BARE_MONTH = rf"(?P<mn>{_MONTH_WORDS})\b(?!['’]s\b)\.?"  # "June's car": a name
_NO_YEAR_AFTER = rf"(?![-/:]\d)(?!,?\s*{_YEAR}\b)"  # "June 3, 2030": not this table's
_YEAR_AFTER = r"(?:,?\s+(?:of\s+)?(?P<rel>last|this)\s+year\b)?"
_ZH_MONTH = r"1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九]"
_ZH_DAY = r"[12]\d|3[01]|0?[1-9]|[二三]?十[一二三四五六七八九]?|[一二三四五六七八九]"
_ZH_NOT_BEFORE = r"[\d年月个第每零〇一二两三四五六七八九十]"
# Not "until"/"till": "closed until June" is as likely the coming June as the last one.
_MONTH_ALONE_AFTER = r"back\s+in|as\s+of|in|during|throughout|since|of|around|last"

# Each pattern has named groups for its parts; the first that matches wins, in this order.
_PATTERNS = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"(?P<y>{_YEAR})[-/.](?P<m>\d{{1,2}})[-/.](?P<d>\d{{1,2}})(?!\d)",
        rf"\b(?P<mn>{_MONTH})\s+(?P<d>\d{{1,2}}){_TH},?\s+(?P<y>{_YEAR})\b",
        rf"\b(?P<d>\d{{1,2}}){_TH}\s+(?:of\s+)?(?P<mn>{_MONTH}),?\s+(?P<y>{_YEAR})\b",
        rf"(?P<y>{_YEAR})\s*年\s*(?P<m>\d{{1,2}})\s*月\s*(?P<d>\d{{1,2}})\s*[日号]",
        rf"(?<![\d-])(?P<y>{_YEAR})[-/](?P<m>\d{{1,2}})(?![\d/-])",
        rf"\b(?P<mn>{_MONTH}),?\s+(?:of\s+)?(?P<y>{_YEAR})\b",
        rf"(?P<y>{_YEAR})\s*年\s*(?P<m>\d{{1,2}})\s*月(?:份)?",
        rf"(?P<y>{_YEAR})\s*年(?:份)?(?!\s*\d)",
        rf"\b(?:back\s+in|in|during|throughout|as\s+of|as\s+at)\s+(?P<y>{_YEAR})\b(?![-/.]\d)",
        # Days and weeks back ("last week", "3 days ago", "上周") before dates without a
        # year: "what did I say last week about the trip in May?" asks about last week.
        r"\b(?P<yesterday>yesterday)\b",
        r"\blast\s+(?P<last>week|month)\b",
        r"\b(?P<n>\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
        r"(?P<unit>day|week|month|year)s?\s+ago\b",
        r"(?P<zh_last>昨天|上周|上个?星期|上个月)",
        r"(?P<zn>\d{1,3}|[一两二三四五六七八九十]+)\s*(?P<zunit>天|个星期|星期|周|个月|年)(?:以)?前",
        rf"\b{_BARE_MONTH}\s+(?P<d>\d{{1,2}})(?P<th>st|nd|rd|th)?\b{_NO_YEAR_AFTER}{_YEAR_AFTER}",
        rf"(?:\bthe\s+)?\b(?P<d>\d{{1,2}})(?P<th>st|nd|rd|th)?\s+(?P<of>of\s+)?{_BARE_MONTH}"
        rf"{_NO_YEAR_AFTER}{_YEAR_AFTER}",
        rf"\b(?P<pre>{_MONTH_ALONE_AFTER})\s+(?:(?:early|late|mid)[\s-]+)?{_BARE_MONTH}"
        rf"(?!\s*\d){_YEAR_AFTER}",
        rf"(?:(?P<zrel>去年|今年|前年)\s*|(?<!{_ZH_NOT_BEFORE}))(?P<m>{_ZH_MONTH})\s*月(?!\s*以?前)"
        rf"(?:份)?(?:\s*(?P<d>{_ZH_DAY})\s*[日号])?",
        # A year back after dates without a year: "March last year", "去年3月" are months.
        r"\blast\s+(?P<last>year)\b",
        r"(?P<zh_last>去年|前年)",
    )
]
_BEFORE = re.compile(
    r"(?:\b(?:back\s+in|in|on|during|throughout|as\s+of|as\s+at|at|around|from|since|until|"
    r"till|of)\s+|"
    r"(?:截至|截止到|截止|在)\s*)$",
    re.IGNORECASE,
)
_AFTER = re.compile(r"^\s*(?:的时候|时候|时|的)")
#: Every period :func:`period_in` understands has one of these (checked first, cheaply).
_MAYBE = re.compile(
    rf"[\d０-９]|yesterday|last|ago|昨天|上周|上个|去年|前年|前|月|\b(?:{_MONTH_WORDS})\b",
    re.IGNORECASE,
)
#: A word before a lower-case "may" or "march" with a day that makes it a month's name.
_PREPOSITION = re.compile(
    r"\b(?:on|in|of|since|until|till|by|before|after|from|during|as\s+of|around)\s+$",
    re.IGNORECASE,
)
#: The years back that ``last year``, ``this year``, ``去年``, ``今年``, ``前年`` name.
_YEARS_BACK = {"last": 1, "this": 0, "去年": 1, "今年": 0, "前年": 2}


@dataclass(frozen=True, slots=True)
class Period:
    """A span of time a question asks about.

    Attributes:
        start: Its first instant (UTC).
        end: The instant after its last one (UTC); ``end > start``.
        span: Where the phrase that names it stands in the question, as
            ``(start, end)`` offsets (its "in"/"as of"/"的时候" included).
    """

    start: datetime
    end: datetime
    span: tuple[int, int] = (0, 0)

    def share(self, since: datetime, until: datetime | None) -> float:
        """The share of this period covered by ``[since, until)`` (``None``: still
        holding), in [0, 1]."""
        stop = self.end if until is None else min(until, self.end)
        covered = (stop - max(since, self.start)).total_seconds()
        return max(covered, 0.0) / (self.end - self.start).total_seconds()


def point(at: datetime) -> Period:
    """The one-second period at ``at`` (what a search's ``until`` asks about)."""
    return Period(at, at + timedelta(seconds=1))


def _count(text: str) -> int:
    if text.isdigit():
        return int(text)
    if text.lower() in _COUNT_WORDS:
        return _COUNT_WORDS[text.lower()]
    value = 0  # Chinese numerals up to 99: 三, 十, 十二, 二十, 二十三
    if "十" in text:
        tens, _, ones = text.partition("十")
        value = (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10
        return value + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    return _ZH_DIGITS.get(text, 0)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _add_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    return _month_start(index // 12, index % 12 + 1)


def _back(now: datetime, unit: str, count: int) -> tuple[datetime, datetime]:
    """The calendar ``unit`` that lies ``count`` units before the one holding ``now``."""
    day = datetime(now.year, now.month, now.day, tzinfo=UTC)
    if unit == "day":
        start = day - timedelta(days=count)
        return start, start + timedelta(days=1)
    if unit == "week":
        start = day - timedelta(days=day.weekday() + 7 * count)
        return start, start + timedelta(days=7)
    if unit == "month":
        start = _add_months(now, -count)
        return start, _add_months(start, 1)
    start = datetime(now.year - count, 1, 1, tzinfo=UTC)
    return start, datetime(now.year - count + 1, 1, 1, tzinfo=UTC)


def _recent(
    now: datetime, month: int, day: int, *, back: int | None, before: bool
) -> tuple[datetime, datetime] | None:
    """The month (``day`` 0) or day without a year that ``now`` means: in the year ``back``
    years before ``now``'s when given; else its latest occurrence begun by ``now`` (ended by
    it when ``before``: "last March"). ``None`` for no such date (June 31, month 13)."""
    today = now.date()  # the asker's calendar day: ``now`` in its own time zone
    years = [today.year - back] if back is not None else range(today.year, today.year - 9, -1)
    for year in years:
        try:
            start = datetime(year, month, day or 1, tzinfo=UTC)
        except ValueError:
            if (month, day) == (2, 29):
                continue  # a leap day: the latest leap year's
            return None
        end = start + timedelta(days=1) if day else _add_months(start, 1)
        first, last = start.date(), (end - timedelta(days=1)).date()
        if back is None and (first > today or (before and last >= today)):
            continue
        return start, end
    return None


def _month_word_ok(match: re.Match[str], text: str) -> bool:
    """Whether a month's name without a year is meant as one (see the module's tables).
    Capitalised, it is (short names alone: not after "of", "a photo of Jan"); lower-case,
    ``may``/``march``/short names only with a day and "on", "in"… before
    (``on may 3``) or an ordinal or "of" (``3rd of may``), other names always."""
    groups = match.groupdict()
    token = groups.get("mn") or ""
    name = token.lower()
    full = len(name) > 3 or name == "may"
    if token[:1].isupper():
        return full or (groups.get("pre") or "").lower() != "of"
    if groups.get("d") is None:  # a month alone, lower-case
        return full and name not in ("may", "march")
    if full and name not in ("may", "march"):
        return True
    if match.start("mn") > match.start("d"):  # "3rd of may"
        return bool(groups.get("th") or groups.get("of"))
    return _PREPOSITION.search(text[: match.start()]) is not None  # "on may 3"


def _bounds(groups: dict[str, str | None], now: datetime) -> tuple[datetime, datetime] | None:
    """``(start, end)`` of a match's period; ``None`` for an impossible date."""
    try:
        if groups.get("y"):
            year = int(groups["y"] or 0)
            month_name = (groups.get("mn") or "").lower().rstrip(".")
            month = _MONTHS.get(month_name) or int(groups.get("m") or 0)
            if groups.get("d"):
                start = datetime(year, month, int(groups["d"] or 0), tzinfo=UTC)
                return start, start + timedelta(days=1)
            if month:
                start = _month_start(year, month)
                return start, _add_months(start, 1)
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
    except ValueError:
        return None  # 2024-02-30, month 13
    if groups.get("mn") or groups.get("m"):  # without a year
        month = _MONTHS.get((groups.get("mn") or "").lower()) or _count(groups.get("m") or "")
        year_word = (groups.get("rel") or groups.get("zrel") or "").lower()
        return _recent(
            now,
            month,
            _count(groups.get("d") or "0"),
            back=_YEARS_BACK.get(year_word),
            before=(groups.get("pre") or "").lower() == "last",
        )
    if groups.get("yesterday"):
        return _back(now, "day", 1)
    if groups.get("last"):
        return _back(now, (groups["last"] or "").lower(), 1)
    if groups.get("n"):
        return _back(now, _UNITS[(groups["unit"] or "").lower()], _count(groups["n"] or ""))
    if groups.get("zh_last"):
        word = groups["zh_last"] or ""
        unit = {"昨": "day", "上": "week", "去": "year", "前": "year"}[word[0]]
        if word == "上个月":
            unit = "month"
        return _back(now, unit, 2 if word == "前年" else 1)
    if groups.get("zn"):
        return _back(now, _ZH_UNITS[groups["zunit"] or ""], _count(groups["zn"] or ""))
    return None


def period_in(question: str, *, now: datetime | None = None) -> Period | None:
    """The past period ``question`` asks about, or ``None`` when it names none.

    The first date phrase found (in the order of the module's tables) is the one; a
    period starting after ``now`` is ignored (it is no question about the past).

    >>> at = datetime(2026, 6, 1, tzinfo=UTC)
    >>> p = period_in("Where did I live in March 2024?", now=at)
    >>> p.start.date().isoformat(), p.end.date().isoformat()
    ('2024-03-01', '2024-04-01')
    >>> period_in("What is the 2023 budget?", now=at) is None
    True
    >>> period_in("2024年3月我住在哪里？", now=at).start.date().isoformat()
    '2024-03-01'
    """
    if not _MAYBE.search(question):
        return None  # no digit and no relative word: the common case, answered at once
    now = now or datetime.now(UTC)
    text = unicodedata.normalize("NFKC", question)
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            groups = match.groupdict()
            if groups.get("mn") and not groups.get("y") and not _month_word_ok(match, text):
                continue
            bounds = _bounds(groups, now)
            if bounds is None or bounds[0].date() > now.date():  # on the asker's calendar
                continue
            start, end = match.span()
            before = _BEFORE.search(text[:start])
            if before is not None:
                start = before.start()
            after = _AFTER.match(text[end:])
            if after is not None:
                end += after.end()
            return Period(bounds[0], bounds[1], (start, end))
    return None


def without_period(question: str, period: Period) -> str:
    """``question`` without the phrase that names ``period`` (and the punctuation left
    dangling by it): ``"In March 2024, where did I live?"`` → ``"where did I live?"``."""
    text = unicodedata.normalize("NFKC", question)
    start, end = period.span
    rest = text[:start].rstrip() + " " + text[end:].lstrip()
    rest = re.sub(r"\s+([?？!！.。,，])", r"\1", rest)
    return rest.strip(" \t\n,，、:：;；")
