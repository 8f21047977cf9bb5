"""Terms: the words a lexical stage compares, in English and Chinese.

Latin-script text is lower-cased and split into words; stop words are dropped and a
light, deterministic suffix stemmer folds ``cats``/``cat`` and ``painted``/``paint``.
Chinese (and other CJK) text has no spaces: each run is cut at stop characters and
turned into overlapping character bigrams (a lone character stays a unigram).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_CJK_RUN = re.compile(f"({_CJK.pattern}+)")

#: English stop words: function words and the chat fillers that carry no topic.
ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have
    haven't having he he'd he'll he's her here here's hers herself him himself his how how's
    i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my
    myself no nor not of off on once only or other ought our ours ourselves out over own same
    shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this
    those through to too under until up very was wasn't we we'd we'll we're we've were weren't
    what what's when when's where where's which while who who's whom why why's with won't
    would wouldn't you you'd you'll you're you've your yours yourself yourselves
    also just really yeah yes oh hey hi hello okay ok well like got get gets will would
    s t d ll m re ve
    """.split()  # noqa: SIM905 - a word list reads better as text
)

#: Chinese stop characters: particles, pronouns and copulas that split a run into words.
CHINESE_STOP_CHARS = frozenset("的了是在我你他她它们这那和与也都就不有吗呢吧啊么个之而及或被把给对")


def stem(word: str) -> str:
    """A light English stemmer: plural, past, gerund and adverb endings, nothing clever."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("edly", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + keep
            if keep == "" and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> run, stopped -> stop
            return word
    if word.endswith("ly") and len(word) > 5:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def _cjk_terms(run: str, *, stop_words: bool) -> list[str]:
    pieces = [run]
    if stop_words:
        pieces = re.split("[" + "".join(sorted(CHINESE_STOP_CHARS)) + "]", run)
    out: list[str] = []
    for piece in pieces:
        if len(piece) == 1:
            out.append(piece)
        out.extend(piece[i : i + 2] for i in range(len(piece) - 1))
    return out


def terms(text: str, *, stop_words: bool = True, stemming: bool = True) -> list[str]:
    """The terms of ``text``, in order, with repeats (for BM25 and term counting).

    Args:
        text: Any text, in any mix of scripts.
        stop_words: Drop English stop words and split Chinese runs at stop characters.
        stemming: Fold English inflections with :func:`stem`.
    """
    out: list[str] = []
    for piece in _CJK_RUN.split(text.lower()):
        if not piece:
            continue
        if _CJK.match(piece):
            out.extend(_cjk_terms(piece, stop_words=stop_words))
            continue
        for match in _WORD.finditer(piece):
            word = match.group().replace("’", "'")
            if stop_words and word in ENGLISH_STOP_WORDS:
                continue
            word = word.removesuffix("'s")
            out.append(stem(word) if stemming else word)
    return out
