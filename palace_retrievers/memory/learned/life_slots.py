"""Life slots: common single-valued facts of a person's life and work, in other words.

A small lexicon for :mod:`palace_retrievers.memory.learned.paraphrase`. Each :class:`Concept` is one
slot people restate in many structures ("I report to Susan" / "my manager is Susan" /
"我向王总汇报"), with the cues that name it in English and Chinese and the kind of value
it takes (a person or a name, an amount, a time of day, a count, one of a closed class
of options, an e-mail address, or the remaining words). The lexicon names slots, never
values: which dentist, which city or which car is read from the text itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from palace_retrievers.memory.wording import words

#: Value kinds: ``name`` (a name or a thing named: capitalised words in English, the
#: words left once the cue is set aside in Chinese), ``person`` (a name of a person),
#: ``amount`` (money, not an ordinal), ``count`` (any number), ``digits`` (a phone
#: number), ``time`` (a time of day), ``when`` (times and days), ``mode`` (one of the
#: concept's options), ``email``, ``words`` (content words left once the cue is set aside).
KINDS = frozenset(
    {
        *("name", "person", "amount", "count", "digits", "time", "when", "mode", "email"),
        *("words", "times"),
    }
)


@dataclass(frozen=True)
class Concept:
    """One slot of a life, as the texts that set it name it.

    Attributes:
        name: The slot's key (``manager``, ``commute``, ``event:standup``).
        kind: The kind of value (:data:`KINDS`).
        single: One value at a time (a new one replaces the old) or many at once.
        en: Cue over the lower-case English text, or ``None``.
        zh: Cue over the Chinese text, or ``None``; a group ``v`` (or ``v2``, ``v3``)
            marks where the value stands when the cue knows it.
        verb: The English cue is a verb whose subject must be the speaker (``i``/``we``).
        noise: Words of the frame itself, never a value (``allergic``, ``reaction``).
        modes: For kind ``mode``: (pattern, option) pairs, longer phrases first.
        unless: A text that matches this names another thing (``my tablet is a Pixel``).
        strict: Qualifiers must agree exactly (a work and a personal e-mail are two slots);
            otherwise only two qualifiers that clash (a month and a year) part them.
        personal: An English text must name the speaker (``I``, ``my``, ``we``...): "The
            server runs in UTC" sets no one's time zone.
    """

    name: str
    kind: str
    single: bool = True
    en: re.Pattern[str] | None = None
    zh: re.Pattern[str] | None = None
    verb: bool = False
    noise: frozenset[str] = frozenset()
    modes: tuple[tuple[re.Pattern[str], str], ...] = field(default=())
    unless: re.Pattern[str] | None = None
    strict: bool = False
    personal: bool = False


def _re(pattern: str | None) -> re.Pattern[str] | None:
    return re.compile(pattern) if pattern else None


def _modes(*pairs: tuple[str, str]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(p), option) for p, option in pairs)


def _concept(
    name: str,
    kind: str,
    en: str | None = None,
    zh: str | None = None,
    *,
    single: bool = True,
    verb: bool = False,
    noise: str = "",
    modes: tuple[tuple[re.Pattern[str], str], ...] = (),
    unless: str | None = None,
    strict: bool = False,
    personal: bool = True,
) -> Concept:
    return Concept(
        name, kind, single, _re(en), _re(zh), verb, frozenset(noise.split()), modes,
        _re(unless), strict, personal,
    )  # fmt: skip


_COMMUTE = _modes(
    (r"\be-?bikes?\b|\belectric (?:bike|bicycle|scooter)s?\b|电动车|电瓶车|电驴", "ebike"),
    (r"\bbus(?:es)?\b|公交车?|巴士", "bus"),
    (r"\bsubway\b|\bmetro\b|\btube\b|\bunderground\b|地铁", "metro"),
    (r"\btrains?\b|\brail\b|火车|高铁|城铁", "train"),
    (r"\btrams?\b|\bstreetcars?\b|有轨电车", "tram"),
    (r"\bbikes?\b|\bbicycles?\b|\bcycl(?:e|es|ing)\b|\bbiking\b|自行车|骑车|单车", "bike"),
    (r"\bwalk(?:s|ing)?\b|\bon foot\b|走路|步行", "walk"),
    (r"\bdriv(?:e|es|ing)\b|\bcar\b|开车|自驾", "car"),
    (r"\bscooters?\b", "scooter"),
    (r"\bferry\b|轮渡", "ferry"),
    (r"\btaxi\b|\bcab\b|\buber\b|打车|出租车|网约车", "taxi"),
    (r"\bcarpool(?:ing)?\b|拼车", "carpool"),
    (r"\bmotor(?:bike|cycle)s?\b|摩托", "motorbike"),
)  # fmt: skip
_DIET = _modes(
    (
        r"\b(?:do not|don't|does not|doesn't|never|no longer) eats? (?:any )?meat\b"
        r"|不吃肉|吃素|素食",
        "vegetarian",
    ),
    (r"\bplant-based\b|\bvegan\b|纯素", "vegan"),
    (r"\bvegetarian\b", "vegetarian"),
    (r"\bpescatarian\b|\bonly eat fish\b", "pescatarian"),
    (r"\beats? (?:any )?meat\b|吃肉", "omnivore"),
    (r"\bketo\b|生酮", "keto"),
)
_SHIFTS = _modes(
    (r"\bnight shifts?\b|\bnights\b|\bgraveyard\b|夜班|晚班", "night"),
    (r"\bday shifts?\b|\bdays\b|白班", "day"),
    (r"\bevening shifts?\b|\bswing shifts?\b|\bevenings\b|中班", "evening"),
    (r"\bearly shifts?\b|早班", "early"),
    (r"\blate shifts?\b", "late"),
)
_TIMEZONES = _modes(
    (r"\bpacific\b|\bpst\b|\bpdt\b", "pacific"),
    (r"\beastern\b|\best\b|\bedt\b", "eastern"),
    (r"\bcentral european\b|\bcet\b|\bcest\b", "cet"),
    (r"\bcentral\b|\bcst\b|\bcdt\b", "central"),
    (r"\bmountain\b|\bmst\b|\bmdt\b", "mountain"),
    (r"\butc\b|\bgmt\b", "utc"),
    (r"\bbst\b|\buk time\b|\blondon time\b", "uk"),
    (r"\bjst\b|\btokyo time\b", "japan"),
    (r"北京时间|东八区", "china"),
)
#: English nouns of people one has one of at a time ("my dentist is Dr. Patel").
_PROVIDERS = {
    "dentist": r"dentists?|orthodontists?",
    "doctor": r"doctors?|gp|physicians?|family doctor",
    "therapist": r"therapists?|counsell?ors?|psychologists?",
    "hairdresser": r"hairdressers?|barbers?|hair stylists?",
    "vet": r"vets?|veterinarians?",
    "accountant": r"accountants?",
    "lawyer": r"lawyers?|attorneys?",
    "landlord": r"landlords?|landlady",
    "trainer": r"personal trainers?",
    "tutor": r"tutors?",
    "mechanic": r"mechanics?",
}
_ZH_PROVIDERS = {
    "dentist": "牙医",
    "doctor": "家庭医生|主治医生",
    "landlord": "房东",
    "lawyer": "律师",
    "accountant": "会计",
    "hairdresser": "理发师|发型师|理发|剪头发|剪头",
    "trainer": "私人教练|私教|健身教练",
}
#: Meetings and rituals of a team, each its own slot of times and days.
_EVENTS = {
    "planning": (r"sprint planning|planning meeting|planning session", "计划会|规划会"),
    "standup": (r"stand-?ups?|daily scrum", "站会|晨会"),
    "retro": (r"retros?|retrospectives?", "复盘会|回顾会"),
    "one_on_one": (r"one-on-ones?|1:1s?|1-on-1s?", "一对一"),
    "all_hands": (r"all-hands|town hall", "全员会|全体会"),
    "weekly_meeting": (r"weekly meeting|weekly sync|team meeting", "周会|例会|周例会|组会"),
    "review": (r"sprint review|design review|review meeting", "评审会"),
}
#: What a favourite is of, folded: "favourite band" and "the band I like best" are one slot.
FAVOURITE_NOUNS = {
    **dict.fromkeys(words("food foods dish dishes meal cuisine 吃 食物 菜 美食 吃的"), "food"),
    **dict.fromkeys(words("band bands group artist artists singer musician 听 歌手 乐队"), "music"),
    **dict.fromkeys(words("film films movie movies 电影"), "film"),
    **dict.fromkeys(words("drink drinks beverage 喝 饮料"), "drink"),
    **dict.fromkeys(words("book books novel novels author writer 书 作家"), "book"),
    **dict.fromkeys(words("colour color 颜色"), "colour"),
    **dict.fromkeys(words("song songs track tracks 歌"), "song"),
    **dict.fromkeys(words("fruit fruits 水果"), "fruit"),
    **dict.fromkeys(words("sport sports 运动"), "sport"),
    **dict.fromkeys(words("show shows series 剧"), "show"),
    **dict.fromkeys(words("game games 游戏"), "game"),
    **dict.fromkeys(words("restaurant restaurants 餐厅 饭店"), "restaurant"),
    **dict.fromkeys(words("city cities 城市"), "city"),
    **dict.fromkeys(words("team teams 球队"), "team"),
}
_FAV_EN = (
    r"\b(?:favou?rite|fave) (?P<n>\w+)"
    r"|\b(?P<n2>\w+) (?:that |which )?(?:i|we) (?:like|love|enjoy|prefer)(?: the)? (?:best|most)\b"
)
_FAV_ZH = r"最(?:喜欢|爱)(?P<verb>吃|喝|听|看|玩)?(?:的(?P<n>[^是，。,]{0,3}?)(?=是|$|[，。,]))?"

CONCEPTS: tuple[Concept, ...] = (
    _concept(
        "home",
        "name",
        r"\b(?:live[sd]?|living|reside[sd]?|based|moved to|moving to|relocated to"
        r"|rent(?:s|ing|ed)? (?:an? |the |our )?(?:apartment|flat|house|place|room)"
        r"|(?:bought|own|owns) (?:an? |the )?(?:house|flat|apartment|place|home)"
        r"|(?:home|address) is)\b",
        r"住在|住|搬到|搬去|搬家到|(?<!老)家在|定居",
        verb=True,
    ),
    _concept(
        "employer",
        "name",
        r"\b(?:work(?:s|ing|ed)? (?:at|for)|joined|employed (?:at|by)|started (?:at|working at)"
        r"|hired (?:at|by)|(?:employer|company) is)\b",
        r"在(?P<v>[^，。,在]{2,10}?)(?:工作|任职|实习|做)"
        r"|(?:入职|跳槽(?:去|到)|加入)(?P<v2>[^，。,]{2,10}?)(?=[，。,]|$|工作|做)"
        r"|是(?P<v3>[^，。,的]{2,10})的(?:员工|产品经理|经理|工程师|设计师|程序员|产品|运营|销售|会计|律师|护士|老师|医生)",
        verb=True,
    ),
    _concept(
        "manager",
        "person",
        r"\bmy (?:new |direct |line )?(?:manager|boss|supervisor)\b"
        r"|\breport(?:s|ing|ed)? (?:directly )?to\b|\bmanages me\b",
        r"直属领导|领导|上司|主管|老板|汇报",
        verb=True,
    ),
    _concept(
        "phone",
        "name",
        r"\b(?:smart|cell ?|mobile )?phone\b(?! (?:number|screen|bill|plan|case|charger|battery))"
        r"|\b(?:iphone|pixel|galaxy|oneplus)\b",
        r"手机(?!号|没电|屏|壳|套餐|费)",
        unless=r"\b(?:tablet|laptop|watch|camera|tv|ipad|computer|kindle|headphones|earbuds)\b"
        r"|平板|电脑|手表|相机",
        strict=True,
    ),
    _concept(
        "phone_number",
        "digits",
        r"\b(?:phone|cell|mobile|contact) number\b|\bnumber is\b|\bcall me (?:at|on)\b",
        r"手机号|电话|号码|换号",
        strict=True,
    ),
    _concept(
        "email",
        "email",
        r"\be-?mail\b|\breach me at\b|\bwrite to me at\b",
        r"邮箱|邮件",
        strict=True,
    ),
    _concept(
        "car",
        "name",
        r"\bdriv(?:e|es|ing)\b|\bmy (?:new )?car\b(?! (?!is\b|was\b)[a-z]+)|\bcar is\b",
        r"车是|开(?:一辆|的是|着|辆)|(?:买|换)了?(?:一辆|辆)",
        verb=True,
    ),
    _concept(
        "commute", "mode", r"\bto work\b|\bcommut(?:e|es|ed|ing)\b", r"工作|通勤", modes=_COMMUTE
    ),
    _concept(
        "diet",
        "mode",
        r"\b(?:vegetarian|vegan|pescatarian|keto|plant-based)\b|\beats? (?:any )?meat\b",
        r"吃素|素食|吃肉|纯素|生酮",
        modes=_DIET,
    ),
    _concept(
        "wake",
        "time",
        r"\b(?:wake|wakes|woke|waking) up\b|\b(?:get|gets|got|getting) up\b|\bwake at\b|\balarm\b",
        r"起床|起来|才起|醒来",
    ),
    _concept(
        "bedtime",
        "time",
        r"\b(?:go|goes|went|going) to (?:bed|sleep)\b|\bbedtime\b|\bfall(?:s|ing)? asleep\b"
        r"|\bhit the (?:sack|hay)\b",
        r"睡觉|入睡|上床",
    ),
    _concept(
        "salary",
        "amount",
        r"\b(?:salary|income|wages?|paycheck|earn(?:s|ing)?|raise|pay rise|pay is|get paid)\b",
        r"月薪|年薪|工资|薪水|薪资|收入|涨薪|加薪|底薪",
    ),
    _concept("rent", "amount", r"\brent\b(?! (?:a|an|the|out|our|my)\b)", r"房租|租金"),
    _concept(
        "bank",
        "name",
        r"\bbank(?:s|ing)? (?:with|at)\b|\b(?:my|our) bank\b|\bbank is\b",
        r"(?P<v>[\u4e00-\u9fff]{2,4})银行(?!当|上班|工作|做|实习)",
        strict=True,
    ),
    _concept(
        "desk",
        "count",
        r"\bmy desk\b|\bi sit\b|\bmy (?:seat|cubicle) is\b",
        r"工位|座位",
        strict=True,
    ),
    *(
        _concept(
            f"meal:{meal}",
            "words",
            rf"\bfor {meal}\b|\b{meal} is\b|\b(?:eat|have|had|grab) {meal}\b",
            zh,
            noise=f"{meal} for eat eats have has usually",
        )
        for meal, zh in (
            ("breakfast", "早饭|早餐"),
            ("lunch", "午饭|午餐|中饭"),
            ("dinner", "晚饭|晚餐"),
        )
    ),
    _concept(
        "age",
        "count",
        r"^i(?:'m| am) \d{1,3}\b|\bturned \d{1,3}\b|\bmy age\b|\b\d{1,3} years old\b",
        r"\d{1,3}岁",
    ),
    _concept(
        "shift",
        "mode",
        r"\bshifts?\b|\bwork (?:nights|days|evenings)\b",
        r"夜班|白班|晚班|早班|中班",
        modes=_SHIFTS,
    ),
    _concept(
        "learning",
        "words",
        r"\b(?:learn(?:s|ing|ed|t)?|study(?:ing)?|studies)\b",
        r"(?:在|正在|开始)学(?!校|生|期)|学习",
        single=False,
        noise="learn learns learning learned learnt study studying studies to",
    ),
    _concept(
        "plays",
        "words",
        r"\bplay(?:s|ing)?\b",
        single=False,
        noise="play plays playing on weekends weekend every week sometimes",
    ),
    _concept(
        "allergy",
        "words",
        r"\ballerg(?:ic|y|ies)\b",
        r"过敏",
        single=False,
        noise="allergic allergy allergies reaction reactions give gives gave to me severe mild",
    ),
    _concept(
        "how_coffee",
        "words",
        r"\b(?:take|takes|drink|drinks|have|has|like|likes) my coffee\b"
        r"|\bmy coffee (?:is )?(?:black|with)\b",
        noise="take takes drink drinks have has like likes coffee with",
    ),
    _concept(
        "how_tea",
        "words",
        r"\b(?:take|takes|drink|drinks|have|has|like|likes) my tea\b"
        r"|\bmy tea (?:is )?(?:black|with)\b",
        noise="take takes drink drinks have has like likes tea with",
    ),
    _concept(
        "school",
        "name",
        r"\bschools?\b|\battends?\b|\benrolled\b|\bgoes to\b|\bstudies at\b",
        r"上学|读书|就读|学校|转学|念书",
    ),
    _concept(
        "weight",
        "count",
        r"\bweigh(?:s|ed|ing)?\b|\bweight\b|\b\d+(?:\.\d+)? ?(?:kg|kilos?|kilograms?|lbs?)\b",
        r"体重|公斤|\d斤",
        unless=r"\b(?:suitcase|bag|luggage|package|parcel|box|baby|dog|cat|bike)\b|行李|箱子|宝宝",
    ),
    _concept(
        "gym",
        "name",
        r"\bgym\b|\bwork(?:s|ed|ing)? out at\b|\bexercise at\b|\bfitness club\b",
        None,
    ),
    _concept(
        "workout",
        "times",
        r"\bwork(?:s|ing)? out\b|\bexercise\b|\bgo to the gym\b|\bhit the gym\b",
        r"健身|锻炼|去健身房",
    ),
    _concept("internet", "name", r"\binternet\b|\bbroadband\b|\bisp\b", r"宽带", strict=True),
    _concept(
        "timezone",
        "mode",
        r"\btime ?zone\b|\b(?:pst|pdt|est|edt|cst|cdt|mst|utc|gmt|cet|bst|jst)\b"
        r"|\b(?:pacific|eastern|central|mountain|london|tokyo|uk) (?:standard |daylight )?time\b",
        r"时区|北京时间|东八区",
        modes=_TIMEZONES,
    ),
    _concept(
        "nickname",
        "name",
        r"\bnickname\b|\busername\b|\bhandle\b|\bscreen name\b|\bgamertag\b",
        r"微信昵称|微信名|昵称|网名|用户名",
        strict=True,
    ),
    _concept(
        "deploys", "name", r"\bdeploy(?:s|ed|ing|ments?)?\b|\bci/cd\b|\bci\b", r"部署|上线",
        personal=False,
    ),
    _concept(
        "backend", "name", r"\bback-?end\b|\bback end\b|\bserver side\b", r"后端|后台",
        personal=False,
    ),
    _concept("frontend", "name", r"\bfront-?end\b|\bfront end\b", r"前端", personal=False),
    _concept("database", "name", r"\bdatabase\b|\bdb\b", r"数据库", personal=False),
    *(
        _concept(f"provider:{k}", "person", rf"\b(?:{v})\b", _ZH_PROVIDERS.get(k))
        for k, v in _PROVIDERS.items()
    ),
    *(
        _concept(f"event:{k}", "when", rf"\b(?:{en})\b", zh, strict=True, personal=False)
        for k, (en, zh) in _EVENTS.items()
    ),
)  # fmt: skip

#: The favourite-of-a-kind slot, handled apart: its key depends on the noun named.
FAVOURITE_EN = re.compile(_FAV_EN)
FAVOURITE_ZH = re.compile(_FAV_ZH)
