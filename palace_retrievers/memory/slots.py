"""Slots: the subject and single-valued predicate a short memory sets, and its value.

``"I live in Lisbon"``, ``"I'm based in Lisbon"`` and ``"我住在里斯本"`` all set the slot
``i|lives_in`` to Lisbon; ``"We use MySQL for the orders database"`` sets
``order database|uses``; ``"The team standup is at 9am"`` sets ``team standup|time``.
Two memories on one slot with different values are an update of each other, whatever
their embedding similarity says (see :mod:`palace_retrievers.memory.learned.structural`).

A :class:`Statement` is found by patterns over the canonical wording of
:mod:`palace_retrievers.memory.wording`, in English and Chinese. Only predicates that hold one
value at a time are parsed (where one lives, works, what a thing runs on, a favourite, a
preference between two options, a name, an age, the time or date of an event, ``my X is
Y``); "I like hiking" sets no slot, since liking one thing does not undo another. A
sentence with more than the pattern (a subordinate clause, a long value) sets no slot:
precision comes before recall.

About 580 lines: the patterns of every predicate, English and Chinese side by side, which
read best together; the words they are matched against are :mod:`.wording`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from palace_retrievers.memory.wording import Token, clean, line, read, tokens, words

#: The predicates a statement can carry; each holds one value at a time per subject.
PREDICATES = frozenset(
    {
        "lives_in",
        "works_at",
        "works_as",
        "uses",
        "prefers",
        "name",
        "age",
        "time",
        "date",
        "drives",
        "is",
    }
)
#: Predicates made from a noun (``favourite_editor``, ``manager``) follow these forms.
NOUN_PREDICATES = ("favourite_<noun>", "default_<noun>", "<noun> (from 'my <noun> is ...')")

_PRONOUNS = {
    **{p: p for p in ("i", "we", "you", "he", "she", "they")},
    **{"我": "i", "我们": "we", "咱们": "we", "你": "you", "他": "he", "她": "she"},
    **{"他们": "they", "她们": "they"},
}
_PERSON = (
    r"(?:i|we|you|he|she|they|(?:my|our|your|his|her|their) [a-z]+(?: (?!is\b|not\b)[a-z]+)?"
    r"|(?!is\b)[a-z]+)"
)
_TAIL = (
    r"(?: (?:last|this|next) (?:week|month|year|summer|winter|spring|autumn|fall)"
    r"| yesterday| today| recently| in \d{4}| since \d{4}| a while ago"
    r"| \d+ (?:days?|weeks?|months?|years?) ago)?"
)
_V = r"(?P<v>[^,;.!?]{1,40}?)"
_DAY = r"(?:\d{4}-\d{2}-\d{2}|\d{2}-\d{2}|mon|tue|wed|thu|fri|sat|sun)"
_CLOCK = r"\d{2}:\d{2}"
_PART = r"(?: ?(?:上午|下午|晚上|早上|中午|morning|afternoon|evening|night)s?)?"  # of a day
_MOMENT = rf"(?:{_DAY}{_PART}(?: (?:at )?{_CLOCK})?|{_CLOCK}(?: (?:on )?{_DAY}{_PART})?)"
_WHEN = (
    r"(?P<v>(?:(?:next|every other|every|each|下|每|每个) ?)?"
    rf"{_MOMENT}(?: (?:and|or|to|-) {_MOMENT})?)"
)
_MOVE = (
    r"(?:is scheduled|scheduled|is planned|planned|is set|set|is due|due|was moved|"
    r"has been moved|is moved|moved|got moved|was pushed|is pushed|pushed|got pushed|"
    r"was rescheduled|is rescheduled|rescheduled|is moving|was changed|changed|"
    r"has changed|is|happens|happen|starts|start|takes place|runs|begins)"
)
#: An event's time is when it starts; when it ends is another slot ("sprint end").
_END = r"(?P<end>ends|end|is ending|finishes|finish|closes|close|is over|wraps up)"
_AT = r"(?:at|on|for|to|from|by|until|till|every|each)"
_GENERIC_SUBJECT = re.compile(
    r"\b(?:deadline|due date|date|time|schedule|day)\b|截止日期|日期|时间"
)
_KIN = (
    "妹妹|姐姐|哥哥|弟弟|太太|妻子|老婆|丈夫|老公|父母|爸妈|爸爸|妈妈|儿子|女儿|朋友|"
    "表哥|表姐|同事|室友|老板|经理"
)
_ZH_S = rf"(?P<s>我们|我(?:的)?(?:{_KIN})?|你|他|她|他们|她们)"
_ROLES = (
    r"(?:(?:[a-z]+ ){0,2}(?:lead|owner|manager|boss|head|admin|maintainer|captain|chair|"
    r"director|coordinator|contact|champion)|head of [a-z]+|ceo|cto|cfo|pm)"
)


@dataclass(frozen=True, slots=True)
class Statement:
    """What a short memory says about one slot.

    Attributes:
        subject: The canonical subject (``i``, ``we``, ``my sister``, ``order database``).
        predicate: A single-valued predicate (:data:`PREDICATES`, or a noun form).
        value: The value as written, in canonical wording (``lisbon``, ``09:00``).
        value_key: The value's comparable form (tokens' keys, stop words left out).
        negated: The memory says the opposite (``I don't live in Lisbon anymore``).
        span: Where the value is written in the prepared text the tokens came from
            (:func:`~palace_retrievers.memory.wording.read`), when parsed from tokens.
    """

    subject: str
    predicate: str
    value: str
    value_key: str
    negated: bool = False
    span: tuple[int, int] | None = None

    @property
    def slot(self) -> str:
        """``subject|predicate``: the key under which one value at a time is kept."""
        return f"{self.subject}|{self.predicate}"


def _subject(text: str) -> str:
    """The canonical key of a subject phrase."""
    text = text.strip().replace("的", "")
    if text in _PRONOUNS:
        return _PRONOUNS[text]
    words = [w for w in text.split() if w not in ("our", "the", "this", "that")]
    folded = [
        w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w for w in words
    ]
    return " ".join(folded)


def _value_key(value: str) -> str:
    return " ".join(t.key for t in tokens(value) if t.key not in _VALUE_STOP)


_VALUE_STOP = frozenset(
    words("i we my our the a an to in at on for of by with is be 的 在 是 做 用 来 到 个 一 名")
)
_GENERIC_MODIFIERS = frozenset(words("team daily weekly monthly morning usual regular main whole"))
_PREPOSITIONS = frozenset(words("in on at with not from off out away back up down under over"))
#: Words that make ``my X is ...`` a passing state of X, not a value of it ("due on the 1st").
_STATES = frozenset(
    words(
        "due overdue late early open closed busy free ready done sick ill broken down paid "
        "unpaid pending cancelled canceled delayed postponed empty full"
    )
)
Rule = tuple[str, re.Pattern[str]]


def _compile(*rules: tuple[str, str]) -> list[Rule]:
    return [(predicate, re.compile(pattern)) for predicate, pattern in rules]


def _any(options: str) -> str:
    """A non-capturing alternation of ``|``-separated options (white space trimmed)."""
    return "(?:" + "|".join(o.strip() for o in options.split("|")) + ")"


_NEG = r"(?:(?P<neg>not) )?"
_NOUN = r"[a-z][a-z ]{0,24}?"
_THING = r"[a-z][a-z ]{0,30}?"
_CALLS_ME = (
    _any("my name is | i is called | i is named | i go by")
    + "|"
    + (r"(?:(?:everyone|everybody|people|they|friends) )?calls? me")
)
_RESCHEDULE = _any("moved|move|rescheduled|reschedule|pushed|push|changed|change|shifted|shift")
_FAVOURITE = r"(?P<adj>favourite|favorite|preferred|default)"
_PREFER = _any("prefer|prefers|like|likes|love|loves|enjoy|enjoys")
_OVER = _any("over|to|more than|better than|rather than|instead of")
_USE = _any(
    "use|uses|using|is using|switched to|have switched to|moved to|migrated to|went with|"
    "chose|picked|rely on|relies on|standardized on|standardised on|go with|going with|"
    "is going with|stick with|settled on"
)
_MIGRATE = "(?:have |has )?" + _any("migrated|moved|switched|changed|ported|rewrote|rewritten")
_RUNS_ON = _any(
    "runs on|run on|is running on|is built on|is built with|is hosted on|is written in|uses|"
    "use|runs in|is stored in|is kept in|was rewritten in|is implemented in|lives on|"
    "was migrated to|has been migrated to|got migrated to|was moved to|has been moved to"
)
_HOST = _any("host|hosts|run|runs|deploy|deploys|keep|keeps|store|stores")
_LIVE = _any(
    "live|lives|living|is living|reside|resides|is based|based|have moved|has moved|moved|"
    "relocated|have relocated|is moving|moving"
)
_WORK = _any("work|works|working|is working")
_JOIN = _any(
    "joined|have joined|just joined|started at|started working at|started job at|got job at|"
    "took job at|is employed by|is employed at"
)
_JOB = _any("job|role|job title|title|position|profession|occupation")
_ZH_SET = "(?:是|换成|改成|改为|变成)"
#: People who hold a role, in Chinese (these take no 的: 我们组长, 我老板).
_ZH_ROLE = (
    "项目负责人|负责人|项目经理|产品经理|经理|组长|队长|主管|领导|老板|老师|导师|班主任|教练|"
    "医生|牙医|房东|律师|会计"
)
#: Holding a thing one person holds at a time: "Kenji owns the billing service".
_LEAD = (
    r"(?:leads|lead|owns|own|manages|manage|maintains|maintain|heads|head|chairs|chair|"
    r"coordinates|coordinate|is in charge of|is responsible for)"
)
_LED = r"(?:led|owned|managed|maintained|headed|chaired|coordinated|run)"
#: Taking a role over: "Marco took over as product owner".
_BECAME = (
    r"(?:took over as|takes over as|has taken over as|became|has become|becomes|"
    r"is appointed|was appointed|is named|was named|stepped in as|steps in as|is now)"
)
#: Verbs that set a new value of ``my X``: "My rent went up to $1,650".
_CHANGED_TO = (
    r"(?:(?:is |has |have )?(?:gone up|gone down|went up|went down|rose|risen|fell|fallen|"
    r"dropped|increased|decreased|raised|cut|reduced|lowered|changed|bumped) to)"
)
_ZH_DEV = "(?: ?(?:来|进行)?(?:开发|编写|实现|搭建|构建))?"
_ZH_OUR = "(?:我们的|我的)"
_ZH_MOVE = "(?:迁到|迁移到|搬到|换到|移到|部署到|放到|转到|挪到)"
_ZH_CHANGE = re.compile("改成|改到|改为|换成|挪到|推迟到|提前到")
_ZH_V = "(?P<v>.{1,20}?)"
_ZH_LIVE = "(?:住在|住|生活在|定居在|定居|搬到|搬去|搬回|搬家到)"
_ZH_USE = "(?:用|改用|换成|换用|迁移到|转到)"
_ZH_RUNS_ON = "(?:用的是|用|改用|换成|迁移到|跑在|运行在|部署在)"
_ZH_AT = "(?:改到|改在|改成|定在|安排在|挪到|推迟到|提前到|延期到|在|是|于)"
_OUR = "(?:my |our )?"
_INTO = "(?:to|onto|in|into)"
_AS_ROLE = rf"(?: as (?P<role>{_THING}))?"
_ZH_AS = "(?:做|作为|当|存储|存)"
_NOT_PRONOUN = r"(?!(?:i|we|you|he|she|they|it|this|that|there|what)\b)"


@functools.cache
def _rules() -> list[Rule]:
    """The statement patterns, compiled when a statement is first read: compiling them
    costs about 20 ms, which a one-shot command that reads none (``palace status``, most
    searches) need not pay."""
    return _compile(
        # English ------------------------------------------------------------------------
        ("name", rf"^(?:{_CALLS_ME}) {_V}$"),
        ("named", rf"^(?P<x>my [a-z]+(?: [a-z]+)?) (?:is called|is named|goes by) {_V}$"),
        ("age", r"^i is (?P<v>\d{1,3})(?: years? old| yo)?$"),
        ("when", rf"^(?:(?:we|i) )?{_RESCHEDULE} (?:my |our )?(?P<s>{_THING}) to {_WHEN}$"),
        (
            "when",
            rf"^(?:our )?(?P<s>[a-z][a-z0-9 ]{{0,40}}?)(?: {_END}| {_MOVE})?(?: {_AT})? {_WHEN}$",
        ),
        ("favourite", rf"^my {_FAVOURITE} (?P<x>{_NOUN}) is {_V}{_TAIL}$"),
        ("favourite", rf"^{_V} is my {_FAVOURITE} (?P<x>{_NOUN}){_TAIL}$"),
        ("prefers", rf"^(?P<s>{_PERSON}) {_NEG}{_PREFER} {_V} {_OVER} (?P<w>[^,;.]{{1,30}})$"),
        ("uses", rf"^(?P<s>{_PERSON}) {_NEG}{_USE} {_V} (?:for|as) {_OUR}(?P<p>{_THING}){_TAIL}$"),
        ("uses", rf"^for {_OUR}(?P<p>{_THING}),? (?P<s>{_PERSON}) (?:use|uses|is using) {_V}$"),
        ("uses", rf"^(?P<s>{_PERSON}) {_MIGRATE} (?P<p>(?:my )?{_THING}) {_INTO} {_V}{_TAIL}$"),
        ("uses", rf"^(?:my |our )?(?P<p>{_THING}) {_RUNS_ON} {_V}{_TAIL}$"),
        ("lives_in", rf"^(?P<s>{_PERSON}) {_NEG}{_LIVE}(?: back)? (?:in|to) {_V}{_TAIL}$"),
        ("works_at", rf"^(?P<s>{_PERSON}) {_NEG}{_WORK} (?:at|for) {_V}{_AS_ROLE}{_TAIL}$"),
        ("works_at", rf"^(?P<s>{_PERSON}) {_JOIN} {_V}{_TAIL}$"),
        ("works_at", rf"^my (?:employer|company) is {_V}$"),
        ("works_as", rf"^(?P<s>{_PERSON}) {_NEG}{_WORK} as {_V}{_TAIL}$"),
        ("works_as", rf"^my {_JOB} is {_V}$"),
        ("drives", rf"^(?P<s>{_PERSON}) {_NEG}(?:drive|drives|is driving) {_V}{_TAIL}$"),
        ("mine", rf"^{_V} is my (?P<x>{_NOUN}){_TAIL}$"),
        ("is", rf"^{_V} is (?:our )?(?P<x>{_ROLES}){_TAIL}$"),
        ("is", rf"^{_V} {_BECAME} (?:our )?(?P<x>{_ROLES}){_TAIL}$"),
        ("is", rf"^(?:our )?(?!(?:my|your|his|her|their) )(?P<x>{_ROLES}) is {_V}{_TAIL}$"),
        ("ours", rf"^{_V} is our (?P<x>{_NOUN}){_TAIL}$"),
        ("holds", rf"^{_V} {_LEAD} (?:our |my )?(?P<x>{_THING}){_TAIL}$"),
        ("holds", rf"^(?:our |my )?(?P<x>{_THING}) is {_LED} by {_V}{_TAIL}$"),
        ("uses", rf"^(?P<s>{_PERSON}) {_HOST} (?:my |our )?(?P<p>{_THING}) (?:on|in) {_V}{_TAIL}$"),
        ("mine", rf"^my (?P<x>{_NOUN}) (?:is|{_CHANGED_TO}) {_V}{_TAIL}$"),
        ("ours", rf"^our (?P<x>{_NOUN}) (?:is|{_CHANGED_TO}) {_V}{_TAIL}$"),
        ("thing", rf"^(?P<x>{_NOT_PRONOUN}[a-z][a-z0-9 ]{{0,30}}?) is {_V}$"),
        # Chinese ------------------------------------------------------------------------
        ("name", r"^(?:我叫|我的名字是|叫我)(?P<v>\S{1,12})$"),
        ("age", r"^我(?P<v>\d{1,3})岁$"),
        ("favourite", r"^我(?:的)?最喜欢的(?P<x>\S{1,8}?)是(?P<v>.{1,20})$"),
        ("favourite", r"^(?P<v>.{1,20}?)是我最喜欢的(?P<x>\S{1,8})$"),
        ("default", rf"^我(?:的)?默认的?(?P<x>.{{1,12}}?){_ZH_SET}(?P<v>.{{1,20}})$"),
        ("prefers", rf"^比起(?P<w>.{{1,12}}?)，?{_ZH_S}(?P<neg>不)?更喜欢(?P<v>.{{1,12}})$"),
        ("prefers", rf"^{_ZH_S}(?P<neg>不)?更喜欢(?P<v>.{{1,12}}?)胜过(?P<w>.{{1,12}})$"),
        ("lives_in", rf"^{_ZH_S}(?P<neg>不)?{_ZH_LIVE}(?P<v>[^，,。 ]{{1,12}})$"),
        ("works_at", rf"^{_ZH_S}(?P<neg>不)?在(?P<v>.{{1,12}}?)(?:工作|任职|实习)$"),
        ("works_at", rf"^{_ZH_S}(?:加入|入职|跳槽到|跳槽去)(?P<v>[^在]{{1,12}}?)(?:工作)?$"),
        ("drives", rf"^{_ZH_S}(?P<neg>不)?开(?:的是)?(?P<v>.{{1,12}})$"),
        ("works_as", rf"^{_ZH_S}(?:的)?(?:工作|职业|职位|岗位){_ZH_SET}(?P<v>.{{1,12}})$"),
        ("works_as", rf"^{_ZH_S}是一名(?P<v>.{{1,12}})$"),
        ("zh_role", rf"^(?P<s>我们|我)的?(?P<x>{_ZH_ROLE}){_ZH_SET}(?P<v>.{{1,12}})$"),
        ("zh_holder", rf"^(?P<x>{_ZH_ROLE}){_ZH_SET}(?P<v>.{{1,12}})$"),
        ("uses", rf"^(?P<s>我们|我)?{_ZH_USE}(?P<v>.{{1,20}}?)来?{_ZH_AS}(?P<p>.{{1,12}})$"),
        ("uses", rf"^(?P<p>[^我你他她 ][^ ]{{0,11}}?)是?{_ZH_RUNS_ON} ?{_ZH_V}{_ZH_DEV}$"),
        ("is", rf"^(?P<v>.{{1,12}}?)是(?P<x>{_ZH_ROLE})$"),
        ("mine", rf"^我的(?P<x>[^ ]{{1,8}}?){_ZH_SET}(?P<v>.{{1,20}})$"),
        ("mine", r"^(?P<v>.{1,12}?)是我的(?P<x>[^ ]{1,8})$"),
        ("ours", rf"^我们的(?P<x>[^ ]{{1,8}}?){_ZH_SET}(?P<v>.{{1,20}})$"),
        ("uses", rf"^{_ZH_OUR}(?P<p>[^ ]{{1,12}}?)是?{_ZH_RUNS_ON} ?{_ZH_V}{_ZH_DEV}$"),
        ("uses", rf"^{_ZH_OUR}?(?P<p>[^ ]{{1,12}}?)(?:在|放在|托管在|部署在|跑在) ?{_ZH_V} ?上$"),
        ("uses", rf"^(?:我们|我)?把(?P<p>[^ ]{{1,12}}?){_ZH_MOVE} ?{_ZH_V}$"),
        ("when", rf"^(?P<s>[^ ]{{1,12}}?){_ZH_AT} ?{_WHEN}$"),
        ("when", rf"^(?P<s>我们|我|[^ ]{{1,8}}?) ?{_WHEN} ?(?P<verb>[^ \d]{{1,8}})$"),
    )  # fmt: skip


def _build(predicate: str, match: re.Match[str]) -> Statement | None:
    groups = match.groupdict()
    value = (groups.get("v") or "").strip()
    if not value or len(value.split()) > 5:
        return None
    subject = groups.get("s") or "i"
    negated = bool(groups.get("neg"))
    if predicate in ("favourite", "default"):
        adj = "default" if groups.get("adj", predicate) == "default" else "favourite"
        predicate = f"{adj}_{_subject(groups['x']).replace(' ', '_')}"
        subject = "i"
    elif predicate == "prefers":
        options = sorted([_value_key(value), _value_key(groups["w"])])
        predicate = "prefers:" + "/".join(options)
    elif predicate == "uses" and (groups.get("p") or "").startswith("my "):
        subject, predicate = "i", _subject(groups["p"][3:]).replace(" ", "_")  # "my doctor"
    elif predicate == "uses":
        subject = groups["p"]
        if _subject(subject) in _PRONOUNS:
            return None  # "we use X": a team uses many things at once
    elif predicate in ("is", "holds", "zh_holder"):
        if predicate == "holds" and len(value.split()) > 3:
            return None  # a name holds it, not a clause
        subject, predicate = groups["x"], "holder"
    elif predicate == "zh_role":
        subject = groups["s"]
        predicate = groups["x"]
    elif predicate == "when":
        subject = subject + (groups.get("verb") or "") + (" end" if groups.get("end") else "")
        subject = _ZH_CHANGE.sub("", subject)  # "我改成每周四去健身房": the change is no subject
        if re.match(r"^(?:i|we|you|he|she|they)$", subject.strip()):
            return None
        subject = _GENERIC_SUBJECT.sub(" ", subject)
        predicate = "time" if re.search(r"\d{2}:\d{2}", value) else "date"
    elif predicate == "thing":
        if len(value.split()) > 3 or value.split()[0] in _PREPOSITIONS:
            return None
        subject, predicate = groups["x"], "is"
    elif predicate == "named":
        subject, predicate = "i", _subject(groups["x"][3:]).replace(" ", "_") + "_name"
    elif predicate in ("mine", "ours"):
        first = value.split()[0]
        if first in _PREPOSITIONS or (first in _STATES and len(value.split()) > 1):
            return None  # "my manager is on holiday": a state, not a value of the slot
        subject = "i" if predicate == "mine" else "we"
        predicate = _subject(groups["x"]).replace(" ", "_")
        if re.fullmatch(r"\d+ (?:years?|months?|weeks?) old", value):
            predicate += "_age"  # "our dog is 3 years old": its age, not which dog it is
    subject = _subject(subject)
    if not subject or not predicate:
        return None
    key = _value_key(value)
    return Statement(subject, predicate, value, key or value, negated) if key or value else None


def parse(text: str) -> Statement | None:
    """The single-valued statement ``text`` makes, or ``None`` when it makes none we know.

    The statement's ``span`` points into ``wording.read(text)[0]``.
    """
    ready, toks = read(text)
    return parse_tokens(toks, ready)


def parse_tokens(toks: list[Token], prepared: str | None = None) -> Statement | None:
    """:func:`parse` of already computed :func:`~palace_retrievers.memory.wording.tokens`
    (of ``prepared``, ``wording.read(text)[0]``: with it, "a bike" is told from "the
    bike", which the tokens leave out)."""
    text, where = line(toks)
    if not text or len(text) > 120:
        return None
    for predicate, pattern in _rules():
        match = pattern.match(text)
        if match is not None:
            if predicate == "holds" and _indefinite(match, toks, where, prepared):
                continue  # "I own a bike": many hold one, no slot
            statement = _build(predicate, match)
            if statement is not None:
                start, end = match.span("v")
                inside = [i for i, (a, b) in enumerate(where) if a < end and b > start]
                if inside:
                    span = (toks[inside[0]].start, toks[inside[-1]].end)
                    statement = dataclasses.replace(statement, span=span)
                return statement
    return None


def _indefinite(
    match: re.Match[str], toks: list[Token], where: list[tuple[int, int]], prepared: str | None
) -> bool:
    """The thing (group ``x``) comes after ``a``/``an``/``one`` in the prepared text."""
    if prepared is None:
        return False
    start = match.start("x")
    first = next((i for i, (a, _) in enumerate(where) if a >= start), None)
    if first is None:
        return False
    before = prepared[toks[first - 1].end if first else 0 : toks[first].start]
    return re.search(r"\b(?:a|an|one|some|another)\b", before, re.IGNORECASE) is not None


def slot_of(text: str) -> str | None:
    """``subject|predicate`` of the single-valued fact ``text`` states, if any.

    >>> slot_of("I live in Porto now"), slot_of("我现在住在波尔图")
    ('i|lives_in', 'i|lives_in')
    >>> slot_of("We use MySQL for the orders database")
    'order database|uses'
    >>> slot_of("I like hiking") is None
    True
    """
    statement = parse(text)
    return statement.slot if statement else None


def same_slot(a: Statement, b: Statement) -> bool:
    """One slot: the same predicate, and subjects equal or one a qualified form of the other.

    ``team standup``, ``daily standup`` and ``standup`` are one subject (same head word,
    one's words inside the other's once generic modifiers such as ``team`` and ``daily``
    are set aside); ``my sister`` and ``my brother`` are not, nor is anything whose owner
    differs (``my birthday``, ``my sister birthday``).
    """
    return slots_match(a.slot, b.slot)


def slots_match(a: str, b: str) -> bool:
    """:func:`same_slot` for two ``subject|predicate`` keys."""
    subject_a, _, predicate_a = a.rpartition("|")
    subject_b, _, predicate_b = b.rpartition("|")
    if predicate_a != predicate_b:
        return False
    if subject_a == subject_b:
        return True
    if predicate_a in ("time", "date") and _same_activity(subject_a, subject_b):
        return True
    if "my" in subject_a.split() + subject_b.split() or re.search(
        "[我你他她]", subject_a + subject_b
    ):
        return False  # whose it is matters: "my birthday" is not "my sister birthday"
    if re.search("[\u4e00-\u9fff]", subject_a + subject_b) and " " not in subject_a + subject_b:
        # the head comes last in Chinese: 团队站会 is a 站会
        return subject_a.endswith(subject_b) or subject_b.endswith(subject_a)
    wa = [w for w in subject_a.split() if w not in _GENERIC_MODIFIERS] or subject_a.split()
    wb = [w for w in subject_b.split() if w not in _GENERIC_MODIFIERS] or subject_b.split()
    if not wa or not wb or wa[-1] != wb[-1]:
        return False
    short, long = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return set(short) <= set(long)


#: Words around an activity that name no other activity: "my yoga class" is "yoga".
_ACTIVITY_NOISE = frozenset(words("class classes session sessions lesson lessons practice"))
#: What leads up to an activity: "I take my kids to swim practice" is the swim practice.
_LEAD_IN = re.compile(
    r"^(?:(?:i|we) (?:take|bring|drive) (?:my|our) (?:kid|kids|son|daughter|children|child) to "
    r"|(?:my |our )?(?:kid|kids|son|daughter|children) (?:have|has|go to|goes to) "
    r"|my |our |i do |we do |i have |we have |i go to |we go to |i take |we take )"
)

_PEOPLE = frozenset(
    words(
        "wife husband partner brother sister mom mum mother dad father parent son daughter "
        "kid kids child children friend colleague cousin aunt uncle boss manager"
    )
)


def _same_activity(a: str, b: str) -> bool:
    """Two subjects of a time or date naming one activity of the speaker's (``my yoga
    class`` / ``yoga`` / ``i do yoga``), no other person's."""
    if re.search("[\u4e00-\u9fff]", a + b):
        return False
    owners = [set(_LEAD_IN.sub("", x).split()) & _PEOPLE for x in (a, b)]
    if owners[0] != owners[1]:
        return False  # "my son's pottery class" is the son's
    wa, wb = (
        [w for w in _LEAD_IN.sub("", x).split() if w not in _GENERIC_MODIFIERS | _ACTIVITY_NOISE]
        for x in (a, b)
    )
    if not wa or not wb or wa[-1] != wb[-1]:
        return False
    short, long = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return set(short) <= set(long)


# -- questions ------------------------------------------------------------------------------

_Q_WHERE_LIVE = re.compile(
    r"^(?:where|which (?:city|town|country)|what (?:city|town|country))\b.*\b(?:i|we)\b.*"
    r"\b(?:live|living|lived|based|reside)\b|^where is home\b|^where am i based\b"
)
_Q_WHERE_WORK = re.compile(
    r"^(?:where|which (?:company|employer|firm)|what (?:company|employer|firm)|who)\b.*"
    r"\bi\b.*\b(?:work|working|worked|employed)\b(?! as)|^who is my employer\b"
)
_Q_JOB = re.compile(
    r"^what (?:do|did) i (?:do for a living|do for work|work as)\b|^what is my (?:job|role|"
    r"job title|title|position|profession|occupation)\b|^what (?:is|was) my job\b"
)
_Q_FAVOURITE = re.compile(
    r"^(?:what|which|who) (?:is|was) my (?P<adj>favourite|favorite|preferred|default) "
    r"(?P<x>[a-z][a-z ]{0,24}?)$|^which (?P<x2>[a-z][a-z ]{0,24}?) do i like best$"
)
_Q_USES = re.compile(
    r"^(?:what|which) (?:[a-z]+ )?(?:do|did) we use for (?:our )?(?P<p>[a-z][a-z ]{0,30}?)$"
    r"|^what (?:does|did) (?:our )?(?P<p2>[a-z][a-z ]{0,30}?) run on$"
)
_Q_WHEN = re.compile(
    r"^(?:what time|when|what day|which day) (?:is|was|are|were) (?:our )?"
    r"(?P<s>[a-z][a-z0-9 ]{0,30}?)(?: due| scheduled| held)?$"
)
_Q_WHO = re.compile(r"^who (?:is|was) my (?P<x>[a-z][a-z ]{0,24}?)$")
_Q_MINE = re.compile(r"^what (?:is|was) my (?P<x>[a-z][a-z ]{0,24}?)$")
_Q_HOLDER = re.compile(r"^who (?:is|was) (?:our )?(?P<x>" + _ROLES + r")$")
_Q_ZH = (
    ("i|lives_in", re.compile(r"^我(?:以前)?住(?:在)?(?:哪|什么地方)|^我(?:的)?家在哪")),
    ("i|works_at", re.compile(r"^我(?:以前)?在哪(?:里|儿)?(?:工作|上班)|^我的公司是")),
    ("i|works_as", re.compile(r"^我(?:的)?(?:工作|职业)是什么|^我是做什么的")),
)
_Q_ZH_FAVOURITE = re.compile(r"^我(?:以前)?最喜欢的(?P<x>\S{1,8}?)是(?:什么|谁|哪个)")
_Q_ZH_MINE = re.compile(r"^我的(?P<x>\S{1,8}?)是(?:什么|谁|多少)")
_Q_ZH_WHEN = re.compile(r"^(?P<s>\S{1,10}?)(?:以前)?(?:是|在)?(?:什么时候|几点|哪天)")


#: Every question :func:`question_slots` understands has one of these.
_Q_CUES = re.compile(
    r"\bwhere|\bmy\b|\buse\b|\brun on\b|\bwhat time\b|\b(?:what|which) day\b|\blike best\b"
    r"|\bwhen(?:'s|’s| is| was| are| were)\b|\bwho(?:'s|’s| is| was)\b|\bdo i do\b|\bwork as\b"
    r"|\b(?:which|what) (?:city|town|country|company|employer|firm)\b|我|什么时候|几点|哪天",
    re.IGNORECASE,
)


def question_slots(question: str) -> tuple[str, ...]:
    """The slots a question asks about: ``"Where do I live?"`` → ``("i|lives_in",)``.

    A recall stage can use them to find the memory that holds the answer even when it is
    worded unlike the question ("I moved to Porto" for "Where do I live?"). ``()`` when
    the question names no slot. Match a slot with :func:`slots_match`.

    >>> question_slots("Which database do we use for the orders database?")
    ('order database|uses',)
    >>> question_slots("我最喜欢的水果是什么？")
    ('i|favourite_水果',)
    """
    if not _Q_CUES.search(question):
        return ()  # no question word: no need to read it (a search asks this every time)
    line = clean(tokens(question)).strip()
    if not line:
        return ()
    if _Q_WHERE_LIVE.search(line):
        return ("i|lives_in",)
    if _Q_JOB.search(line):
        return ("i|works_as",)
    if _Q_WHERE_WORK.search(line):
        return ("i|works_at",)
    match = _Q_FAVOURITE.match(line)
    if match:
        adj = "default" if match.group("adj") == "default" else "favourite"
        noun = _subject(match.group("x") or match.group("x2")).replace(" ", "_")
        return (f"i|{adj}_{noun}",)
    match = _Q_USES.match(line)
    if match:
        return (f"{_subject(match.group('p') or match.group('p2'))}|uses",)
    match = _Q_WHEN.match(line)
    if match:
        subject = _subject(_GENERIC_SUBJECT.sub(" ", match.group("s")))
        return (f"{subject}|time", f"{subject}|date") if subject else ()
    match = _Q_WHO.match(line) or _Q_MINE.match(line)
    if match:
        return (f"i|{_subject(match.group('x')).replace(' ', '_')}",)
    match = _Q_HOLDER.match(line)
    if match:
        return (f"{_subject(match.group('x'))}|holder",)
    for slot, pattern in _Q_ZH:
        if pattern.search(line):
            return (slot,)
    match = _Q_ZH_FAVOURITE.match(line)
    if match:
        return (f"i|favourite_{_subject(match.group('x'))}",)
    match = _Q_ZH_MINE.match(line)
    if match:
        return (f"i|{_subject(match.group('x'))}",)
    match = _Q_ZH_WHEN.match(line)
    if match:
        subject = _subject(_GENERIC_SUBJECT.sub("", match.group("s")))
        return (f"{subject}|time", f"{subject}|date") if subject else ()
    return ()
