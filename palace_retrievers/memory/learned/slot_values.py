"""Slot values: what a reading holds for one life slot, by the slot's kind.

When a slot of :mod:`palace_retrievers.memory.learned.life_slots` is named in a memory (its cue
matched),
:func:`slot_values` picks the values of the slot's kind from the
:class:`~palace_retrievers.memory.learned.reading.Reading`: an e-mail address, a long number, an
amount of money ("5万", "$85,000"), a count, a time of day or a date, how often ("three
times a week"), one of the slot's closed set of options (its modes, negated or not), the
clause's other words, a person (王总, 小李), or the names the text holds.
:mod:`palace_retrievers.memory.learned.frames` makes frames of them.
"""

from __future__ import annotations

import re

from palace_retrievers.memory.learned.life_slots import Concept
from palace_retrievers.memory.learned.reading import (
    CHANGE,
    STOP,
    Reading,
    proper_runs,
    zh_words,
)
from palace_retrievers.memory.wording import lemma, zh_number

__all__ = ["slot_values"]


_ZH_PERSON = re.compile(
    "[小老][王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯]|[王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏"
    "魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵"
    "钱严覃武戴莫孔汤](?:总|经理|老师|医生|教授|主任|老板|主管|组长|工|阿姨|叔叔|师傅)"
)


_ZH_AMOUNT = re.compile(
    r"(\d+(?:\.\d+)?|[一二两三四五六七八九十]+)\s*(万|千)([一二三四五六七八九])?(?![个月年天次])"
)


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
    return zh_words(clause)


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


def slot_values(t: Reading, concept: Concept, match: re.Match[str]) -> list[str]:
    """The values of ``concept``'s kind in ``t``, as written (lower case).

    Args:
        t: The memory, read.
        concept: The slot its words name.
        match: Where the slot's cue matched (its clause, or its value groups in Chinese).

    Returns:
        The values found, possibly none.
    """
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
            return [w.lower() for w in latin] or zh_words(groups[0])
        return _zh_residual(t, match)
    return [" ".join(run) for run in proper_runs(t)]
