"""Paraphrase: one life slot set in other structures (pure logic, no model).

The texts here are unlike those of ``benchmarks/data/memory_pairs*.jsonl`` on purpose:
other people, places, values and slots, so that the rules are tested, not the sets.
"""

from __future__ import annotations

import pytest

from palace_retrievers.memory.learned.paraphrase import frames, judge
from palace_retrievers.memory.learned.structural import compare


def _verdict(old: str, new: str) -> str | None:
    found = judge(old, new)
    return found.verdict if found else None


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My boss is Priya Raman", "I report to Priya Raman"),
        ("I walk to work", "I go to work on foot"),
        ("I wake up at 5:45", "I get up at 5:45 every day"),
        ("Our retro is on Fridays at 4pm", "We hold the retrospective at 4pm on Fridays"),
        ("My salary is $70,000 a year", "I earn $70,000 a year"),
        ("I'm learning Korean", "I'm studying Korean"),
        ("My favourite film is Alien", "Alien is the movie I like best"),
        ("我住在成都高新区", "我家在成都高新区"),
        ("我每天开车上班", "我上班通勤开车"),
        ("我年薪三十万", "我的年薪是三十万"),
    ],
)
def test_the_same_slot_and_value_in_another_structure_is_a_duplicate(old: str, new: str) -> None:
    assert _verdict(old, new) == "duplicate"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My boss is Priya Raman", "I report to Omar Haddad since March"),
        ("I walk to work", "I take the train to work now"),
        ("I wake up at 5:45", "These days I get up at 7"),
        ("Our retro is on Fridays at 4pm", "The retro moved to Thursdays at 3pm"),
        ("My salary is $70,000 a year", "I got a raise, I earn $78,000 a year"),
        ("My doctor is Dr. Alvarez", "I switched doctors, Dr. Nguyen is my doctor now"),
        ("My favourite film is Alien", "These days my favourite movie is Arrival"),
        ("I'm allergic to penicillin", "I'm no longer allergic to penicillin"),
        ("I'm vegan", "I eat meat again"),
        ("我住在成都高新区", "我上周搬到了武侯区"),
        ("我每天开车上班", "我现在坐公交上班"),
        ("我年薪三十万", "我涨薪了，年薪三十五万"),
        ("我们组的例会在周五下午两点", "例会改到周三上午十一点"),
    ],
)
def test_the_same_slot_with_another_value_is_an_update(old: str, new: str) -> None:
    assert _verdict(old, new) == "update"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I drive a Subaru Outback", "Sold the Outback, I bike everywhere"),
        ("I'm taking Italian classes, I study Italian", "I dropped Italian this spring"),
        ("Kenji Sato leads the design team", "Ines replaced Kenji Sato as design lead"),
        ("我开一辆宝马X5", "我把宝马卖了"),
        ("我们组长是刘工", "刘工调走了"),
    ],
)
def test_a_new_text_that_ends_the_old_value_is_an_update(old: str, new: str) -> None:
    assert _verdict(old, new) == "update"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # someone else's fact
        ("I walk to work", "My sister walks to work"),
        ("My boss is Priya Raman", "Priya Raman reports to the CFO"),
        ("我每天开车上班", "我老公每天坐公交上班"),
        # a qualifier that parts two slots of one kind
        ("My personal email is ana@example.org", "My work email is ana@corp.example"),
        ("My salary is $70,000 a year", "My salary is $6,000 a month"),
        ("我年薪三十万", "我月薪三万"),
        # another slot, or no value of the slot's kind
        ("I wake up at 5:45", "I go to bed at 11pm"),
        ("My doctor is Dr. Alvarez", "My doctor appointment is on Monday"),
        ("My phone is a Fairphone 4", "My tablet is a Fairphone 4"),
        # an end cue on the old text's subject, nothing else shared
        ("Kenji runs the design team", "I left Kenji a voicemail"),
    ],
)
def test_no_decision_when_owner_qualifier_or_value_kind_differ(old: str, new: str) -> None:
    assert _verdict(old, new) is None


def test_a_slot_that_holds_many_values_gains_one_rather_than_changing() -> None:
    assert _verdict("I'm allergic to penicillin", "I'm also allergic to latex") == "new"
    assert _verdict("I play chess on Sundays", "I play squash") == "new"


def test_same_value_but_a_changed_time_beside_it_is_no_duplicate() -> None:
    assert _verdict("I play chess on Sundays", "I play chess on Tuesdays now") is None


def test_frames_read_the_slot_whatever_the_structure() -> None:
    assert set(frames("I report to Omar Haddad")) == {"manager"}
    assert "manager" in frames("Omar Haddad is my manager")
    assert set(frames("My wife is vegan")) == {"wife/diet"}  # her slot, not the speaker's
    assert set(frames("我妈的手机号是13500001111")) == {"mother/phone_number"}
    assert frames("He is vegan") == {}  # someone not named: no slot at all
    found = frames("I take the tram to work")["commute"]
    assert found.shown == "tram"
    assert found.single


def test_compare_asks_paraphrase_only_when_structure_says_new() -> None:
    match = compare("I walk to work", "I take the train to work now", similarity=0.4)
    assert match.verdict == "update"
    assert compare("I walk to work", "My sister walks to work", similarity=0.8).verdict == "new"
    # the structural verdict stands when it decides
    assert compare("I live in Lisbon", "I live in Porto now", similarity=0.69).verdict == "update"


@pytest.mark.parametrize(
    ("old", "new", "verdict"),
    [
        # a relative's slot compares with the same relative's only
        ("My son is vegetarian", "My son eats meat now", "update"),
        ("My son is vegetarian", "My daughter eats meat now", None),
        ("我女儿在育英中学读书", "我女儿转学到了东方中学", "update"),
        # a number and what it counts, in the same context
        ("We have 3 cats", "We have 4 cats now", "update"),
        ("We have 3 cats", "We've got 3 cats", "duplicate"),
        ("We have 3 cats", "There are 3 cats in our house", None),  # more said: no call
        ("I drink 2 cups of tea a day", "I drink 3 cups of coffee a day", None),
        ("I swim 20 laps every morning", "I walk 20 laps around the park", None),
        ("我们部门有二十个人", "部门扩到了三十个人", "update"),
        # any "my X is Y" / "Y is my X", not only the lexicon's nouns
        ("My electricity supplier is Octopus", "Octopus is our electricity supplier", "duplicate"),
        (
            "My electricity supplier is Octopus",
            "We switched, EDF is our electricity supplier",
            "update",
        ),
    ],
)
def test_owners_quantities_and_any_noun(old: str, new: str, verdict: str | None) -> None:
    assert _verdict(old, new) == verdict


def test_a_thing_s_slot_is_not_the_speaker_s() -> None:
    assert _verdict("My timezone is CET", "My laptop's timezone is CET") is None
    assert _verdict("My timezone is CET", "The build server runs on CET") is None


@pytest.mark.parametrize(
    ("old", "new", "verdict"),
    [
        # "moved ... from X": X has ended
        ("My VPN is Mullvad", "I moved my VPN from Mullvad to Proton", "update"),
        # another name on the same topic with a change cue, no lexicon needed
        (
            "I buy my running shoes at Decathlon",
            "I get my running shoes from REI these days",
            "update",
        ),
        # ... but not an event, a liked thing, or a name that is the subject
        ("I visited Kyoto in 2019", "I'm visiting Osaka now", None),
        ("I like Pixar films", "I now like Ghibli films", None),
        ("Marta is on leave", "Jonas is on leave now", None),
        ("I buy my running shoes at Decathlon", "I buy my groceries at Lidl now", None),
        # Chinese counts, numerals included, in the same context
        ("我每天喝三杯茶", "我现在每天只喝一杯茶", "update"),
        ("我每天喝三杯茶", "我每天喝三杯水", None),
        # any 我的X是Y, with a noun that begins the other (邮政编码 / 邮政)
        ("我的邮编是100080", "我邮编是100080", "duplicate"),
        ("我的邮编是100080", "我换了新邮编，100190", "update"),
        # 不…了: no longer
        ("我在学日语", "我不学日语了", "update"),
        ("我在学日语", "我在学法语", "new"),
    ],
)
def test_third_round(old: str, new: str, verdict: str | None) -> None:
    assert _verdict(old, new) == verdict


def test_an_activity_s_time_is_one_slot_however_it_is_named() -> None:
    match = compare("My pottery class is on Wednesdays", "Pottery moved to Fridays", similarity=0.7)
    assert match.verdict == "update"
    match = compare(
        "My pottery class is on Wednesdays", "I do pottery on Wednesdays", similarity=0.9
    )
    assert match.verdict == "duplicate"
    # another person's class is another slot
    match = compare(
        "My pottery class is on Wednesdays", "My son's pottery class is on Fridays", similarity=0.8
    )
    assert match.verdict == "new"


@pytest.mark.parametrize(
    ("old", "new", "verdict"),
    [
        # function characters go only where a phrase starts: 成都 stays 成都
        ("我住在成都", "我搬到了西安", "update"),
        ("我住在成都", "我家在成都", "duplicate"),
        # letters and digits together are a value; "the X" and "changed the X to" too
        ("My locker code is k7x9", "I changed the locker code to m2p4", "update"),
        ("My locker code is k7x9", "The locker code is k7x9", "duplicate"),
        # the same names and topic words rearranged, but not when the order means something
        ("I buy my tea from Harney", "Harney is where I get my tea", "duplicate"),
        ("I prefer Vim over Emacs", "I prefer Emacs over Vim", None),
        # 我家的X叫Y / X的名字是Y; where a thing is
        ("我家的兔子叫团团", "我们家兔子的名字是团团", "duplicate"),
        ("我家的兔子叫团团", "我家的乌龟叫团团", None),
        ("我们工作室在静安", "工作室搬到了徐汇", "update"),
        # a meal's usual dish
        ("I have oatmeal for breakfast", "These days I eat eggs for breakfast", "update"),
        ("我早饭吃馒头", "我早餐吃馒头", "duplicate"),
    ],
)
def test_fourth_round(old: str, new: str, verdict: str | None) -> None:
    assert _verdict(old, new) == verdict


def test_rearranged_names_need_the_embeddings_to_agree() -> None:
    old, new = "I buy my tea from Harney", "Harney is where I get my tea"
    assert judge(old, new, agreement=False) is None
    assert compare(old, new, similarity=0.6).verdict == "new"
    assert compare(old, new, similarity=0.9).verdict == "duplicate"


def test_a_quality_or_a_lead_in_is_no_new_value() -> None:
    assert compare("My flight is 6 hours", "My flight is awful", similarity=0.7).verdict == "new"
    match = compare(
        "I take my daughter to ballet on Tuesdays", "Ballet is on Thursdays now", similarity=0.7
    )
    assert match.verdict == "update"


def test_a_month_is_no_name_and_a_compound_is_another_thing() -> None:
    assert _verdict("My gym membership is with Anytime", "My gym membership renews in May") is None
    assert _verdict("My car is a Mazda 3", "My car insurance is with Aviva") is None
    assert _verdict("My car is a Mazda 3", "My new car is a Kia Niro") == "update"
