"""The built-in ``regex`` closet extractor passes the suite third-party extractors subclass."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from palace_plugins.builtin.extractors.regex_closets import RegexClosetExtractor
from palace_plugins.testing import ClosetExtractorTests
from palace_plugins.testing.closets import ClosetExtractorFactory, drawers
from palace_retrievers.closets import ClosetEntry, ClosetExtractor
from palace_retrievers.errors import PluginError
from palace_retrievers.records import Drawer


class TestRegexClosetExtractor(ClosetExtractorTests):
    languages = ("en", "zh")

    @pytest.fixture
    def extractor_factory(self) -> ClosetExtractorFactory:
        return RegexClosetExtractor

    def test_the_sample_gives_names_and_dates(self, extractor: ClosetExtractor) -> None:
        given = drawers(["On 12 March 2026 Alice Moreau moved the backups to S3."])
        (found,) = extractor.extract(drawers=given)
        assert {"12 March 2026", "Alice Moreau"} <= set(found.entities)


# The suite must fail an extractor that breaks the contract, or it proves nothing.


class _PointsElsewhere(ClosetExtractor):
    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        return [ClosetEntry(topic="t", entities=(), drawer_ids=("not-given",))] if drawers else []


class _Counter(ClosetExtractor):
    """Keeps state between calls: the n-th call says n."""

    def __init__(self) -> None:
        self.calls = 0

    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        self.calls += 1
        if not drawers:
            return []
        return [ClosetEntry(topic=f"call {self.calls}", entities=(), drawer_ids=(drawers[0].id,))]


class _InventsTopics(ClosetExtractor):
    def extract(self, *, drawers: Sequence[Drawer]) -> list[ClosetEntry]:
        return [ClosetEntry(topic="something", entities=(), drawer_ids=(d.id,)) for d in drawers]


suite = ClosetExtractorTests()


def test_the_suite_rejects_pointers_to_drawers_not_given() -> None:
    given = drawers(["Alice met Bob."])
    with pytest.raises(AssertionError, match="not given"):
        suite.assert_well_formed(_PointsElsewhere().extract(drawers=given), given)
    with pytest.raises(PluginError):
        suite.build(_PointsElsewhere(), given, per_closet=1)


def test_the_suite_rejects_state_between_calls() -> None:
    counter = _Counter()
    with pytest.raises(AssertionError):
        suite.test_no_state_between_calls(counter, drawers(["Alice met Bob."]))


def test_the_suite_rejects_closets_made_of_nothing() -> None:
    with pytest.raises(AssertionError):
        suite.test_blank_drawers_give_no_closets(_InventsTopics())
