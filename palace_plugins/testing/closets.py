"""The conformance suite of closet extractors: :class:`ClosetExtractorTests`.

An extractor reads a run of consecutive drawers of one source and returns
:class:`~palace_retrievers.closets.ClosetEntry` items; the palace renders each as a closet
line ``topic|entities|→drawer_ids`` (see :mod:`palace_retrievers.closets`). The suite
checks what the palace relies on: entries point only to the drawers given (each run's
to its own when a source's runs come together), the same drawers always give the same
entries, nothing in gives nothing out, any text (unicode, separators, one huge drawer,
hundreds of drawers) gives lines that fit, and one extractor can serve several threads
at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import ClassVar

import pytest

from palace_plugins.factories import ClosetExtractorFactory
from palace_retrievers.closets import (
    MAX_CLOSET_CHARS,
    Closet,
    ClosetEntry,
    ClosetExtractor,
    build_closets,
)
from palace_retrievers.errors import ConfigError
from palace_retrievers.ids import drawer_id
from palace_retrievers.records import Drawer

__all__ = ["SAMPLES", "ClosetExtractorFactory", "ClosetExtractorTests", "drawers"]

#: A run of consecutive chunks per language, each naming people, places, dates and things.
SAMPLES: dict[str, tuple[str, ...]] = {
    "en": (
        "# Release planning\n\nOn 12 March 2026 Alice Moreau and Bob Chen agreed to ship "
        "Larkspur 2.0 to the Berlin office before the audit.",
        "The migration to PostgreSQL 15 took 3 weeks. Carol wrote the runbook and moved "
        "the nightly backups to S3.",
        '"Never deploy on Fridays" is still the rule; the on-call rota at Northwind '
        "changes every Monday.",
    ),
    "zh": (
        "2023年5月7日，王芳在上海参加了《人工智能与未来》研讨会。",
        "会议讨论了数据安全和隐私保护，李明负责整理会议纪要。",
        "下周三团队将在北京发布「星火」项目的第二个版本。",
    ),
    "de": (
        "Am 3. Mai 2024 hat Jürgen Müller das Büro in München eröffnet.",
        "Die Migration auf PostgreSQL dauerte drei Wochen; Anna Schäfer schrieb das Handbuch.",
    ),
}

#: Text that tests an extractor's handling of unicode and of the closet line's separators.
ODD_TEXTS: tuple[str, ...] = (
    "Zoë Ångström met Σωκράτης in Zürich — naïve café talk ☕🦜 at 9 p.m.",
    "مرحبا بالعالم. שלום עולם. Mixed RTL with Latin: Amira & Noam.",
    "Pipes | and semicolons ; and arrows → inside a drawer: a|b;c→d.",
    "Zero\u200bwidth, com\u0301bining marks, tabs\tand\r\nwindows line ends, NUL-free.",
    "👩‍👩‍👧 family emoji, flags 🇯🇵🇫🇷, and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 letters outside the BMP.",
)

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def drawers(
    texts: Sequence[str], *, source: str = "test://sample", wing: str = "w", room: str = "r"
) -> list[Drawer]:
    """``texts`` as consecutive drawers of one source, with the ids the miner would give."""
    return [
        Drawer(
            id=drawer_id(wing=wing, source_key=source, chunk_index=i, text=text),
            text=text,
            wing=wing,
            room=room,
            source=source,
            chunk_index=i,
            filed_at=_EPOCH,
        )
        for i, text in enumerate(texts)
    ]


def _varied_text(n: int) -> str:
    """A different, plausible paragraph for every ``n``."""
    names = ("Alice", "Bob", "Carol", "Dmitri", "Eun-ji", "Farah", "Gustavo", "Hana")
    places = ("Lisbon", "Osaka", "Nairobi", "Toronto", "Tromsø", "Hobart")
    things = ("the billing service", "PostgreSQL 15", "the search index", "Kubernetes")
    return (
        f"On {1 + n % 28} May 2026 {names[n % 8]} visited {places[n % 6]} and fixed "
        f"{things[n % 4]} (ticket #{1000 + n}). {names[(n + 3) % 8]} reviewed it."
    )


class ClosetExtractorTests:
    """The contract of a closet extractor (:class:`~palace_retrievers.closets.ClosetExtractor`).

    Subclass it and provide the ``extractor_factory`` fixture: the callable the plugin
    registers (``factory(options) -> ClosetExtractor``). Override ``sample_drawers`` when
    the extractor looks for something the default English sample does not hold (use
    :func:`drawers` to build them), and set :attr:`languages` to the languages it reads.
    """

    #: Languages the extractor claims to read (keys of :data:`SAMPLES`): it must find
    #: something in each one's sample. None by default: an extractor that looks for
    #: something special (tickets, hashtags) is checked on its ``sample_drawers`` alone.
    languages: ClassVar[tuple[str, ...]] = ()
    #: Consecutive drawers per call (the palace's ``closets.drawers_per_closet``).
    drawers_per_closet: ClassVar[int] = 3
    #: Drawers in the large-batch test.
    batch_size: ClassVar[int] = 600
    #: Threads sharing one extractor in the concurrency test.
    threads: ClassVar[int] = 4

    # -- fixtures -----------------------------------------------------------------------

    @pytest.fixture
    def extractor_factory(self) -> ClosetExtractorFactory:
        """Override: return the factory the plugin registers."""
        raise NotImplementedError(
            "a ClosetExtractorTests subclass must provide `extractor_factory`"
        )

    @pytest.fixture
    def extractor(self, extractor_factory: ClosetExtractorFactory) -> ClosetExtractor:
        return extractor_factory({})

    @pytest.fixture
    def sample_drawers(self) -> list[Drawer]:
        """Drawers the extractor finds something in (default: the English sample)."""
        return drawers(SAMPLES["en"])

    # -- helpers ------------------------------------------------------------------------

    @staticmethod
    def assert_well_formed(entries: object, given: Sequence[Drawer]) -> None:
        """A list of entries, each pointing to some of the ``given`` drawers only."""
        assert isinstance(entries, list), f"extract returned {type(entries).__name__}"
        ids = {d.id for d in given}
        for found in entries:
            assert isinstance(found, ClosetEntry)
            assert isinstance(found.topic, str)
            assert isinstance(found.entities, tuple)
            assert all(isinstance(e, str) for e in found.entities)
            assert isinstance(found.drawer_ids, tuple)
            assert found.drawer_ids, "an entry points to no drawer"
            assert set(found.drawer_ids) <= ids, "an entry points to a drawer not given"
            for text in (found.topic, *found.entities):
                text.encode("utf-8")  # no lone surrogates: the ledger stores UTF-8

    @staticmethod
    def build(
        extractor: ClosetExtractor,
        given: Sequence[Drawer],
        *,
        per_closet: int,
        max_chars: int = MAX_CLOSET_CHARS,
    ) -> list[Closet]:
        """The closets the palace would file for ``given``, each line checked."""
        closets = build_closets(
            given,
            extractor=extractor,
            extractor_name="under-test",
            drawers_per_closet=per_closet,
            max_chars=max_chars,
        )
        by_id = {d.id: d for d in given}
        for closet in closets:
            assert len(closet.line) <= max_chars
            assert closet.line.rsplit("|", 1)[1] == "→" + ",".join(closet.drawer_ids)
            assert closet.line.startswith(closet.text)
            run = [by_id[i] for i in closet.drawer_ids]
            assert len({(d.wing, d.source, d.user_id) for d in run}) == 1
            assert len(run) <= per_closet
        return closets

    # -- the contract -------------------------------------------------------------------

    def test_is_a_closet_extractor(self, extractor: ClosetExtractor) -> None:
        assert isinstance(extractor, ClosetExtractor)

    def test_an_unknown_option_is_a_config_error(
        self, extractor_factory: ClosetExtractorFactory
    ) -> None:
        with pytest.raises(ConfigError):
            extractor_factory({"no_such_option": 1})

    def test_finds_something_in_the_sample(
        self, extractor: ClosetExtractor, sample_drawers: list[Drawer]
    ) -> None:
        entries = extractor.extract(drawers=sample_drawers)
        self.assert_well_formed(entries, sample_drawers)
        assert any(e.topic.strip() or any(x.strip() for x in e.entities) for e in entries)
        closets = self.build(extractor, sample_drawers, per_closet=len(sample_drawers))
        assert closets

    def test_finds_something_in_each_language(self, extractor: ClosetExtractor) -> None:
        unknown = sorted(set(self.languages) - set(SAMPLES))
        assert not unknown, f"no sample for {unknown}; samples: {sorted(SAMPLES)}"
        for language in self.languages:
            given = drawers(SAMPLES[language], source=f"test://{language}")
            entries = extractor.extract(drawers=given)
            self.assert_well_formed(entries, given)
            found = [x for e in entries for x in (e.topic, *e.entities) if x.strip()]
            assert found, f"nothing found in the {language!r} sample"

    def test_deterministic(
        self,
        extractor: ClosetExtractor,
        extractor_factory: ClosetExtractorFactory,
        sample_drawers: list[Drawer],
    ) -> None:
        first = extractor.extract(drawers=sample_drawers)
        assert extractor.extract(drawers=list(sample_drawers)) == first
        assert extractor_factory({}).extract(drawers=sample_drawers) == first

    def test_no_state_between_calls(
        self, extractor: ClosetExtractor, sample_drawers: list[Drawer]
    ) -> None:
        first = extractor.extract(drawers=sample_drawers)
        other = drawers([_varied_text(n) for n in range(5)], source="test://other")
        self.assert_well_formed(extractor.extract(drawers=other), other)
        assert extractor.extract(drawers=sample_drawers) == first

    def test_no_drawers_give_no_entries(self, extractor: ClosetExtractor) -> None:
        assert extractor.extract(drawers=[]) == []
        assert extractor.extract_runs(runs=[]) == []

    def test_the_runs_of_a_source_together(
        self, extractor: ClosetExtractor, sample_drawers: list[Drawer]
    ) -> None:
        """``extract_runs`` (how the palace calls it): one list per run, each pointing to
        its own run's drawers only, the same as each run alone for the same drawers."""
        given = [*sample_drawers, *drawers([_varied_text(n) for n in range(4)], source="x")]
        runs = [given[i : i + 2] for i in range(0, len(given), 2)] + [drawers(["", " "])]
        found = extractor.extract_runs(runs=runs)
        assert isinstance(found, list)
        assert len(found) == len(runs)
        for run, entries in zip(runs, found, strict=True):
            self.assert_well_formed(entries, run)
        assert extractor.extract_runs(runs=runs) == found
        assert [extractor.extract(drawers=run) for run in runs] == found

    def test_blank_drawers_give_no_closets(self, extractor: ClosetExtractor) -> None:
        blank = drawers(["", "   ", "\n\n\t  \n"], source="test://blank")
        self.assert_well_formed(extractor.extract(drawers=blank), blank)
        assert self.build(extractor, blank, per_closet=3) == []

    def test_unicode_and_separators(self, extractor: ClosetExtractor) -> None:
        given = drawers(ODD_TEXTS, source="test://ünïcødé/会议 ☕")
        self.assert_well_formed(extractor.extract(drawers=given), given)
        self.build(extractor, given, per_closet=self.drawers_per_closet)
        self.build(extractor, given, per_closet=1, max_chars=120)

    def test_lines_fit_a_small_limit(
        self, extractor: ClosetExtractor, sample_drawers: list[Drawer]
    ) -> None:
        for max_chars in (MAX_CLOSET_CHARS, 400, 200):
            self.build(extractor, sample_drawers, per_closet=1, max_chars=max_chars)

    def test_one_huge_drawer(self, extractor: ClosetExtractor) -> None:
        huge = drawers([" ".join(_varied_text(n) for n in range(400))], source="test://huge")
        self.assert_well_formed(extractor.extract(drawers=huge), huge)
        self.build(extractor, huge, per_closet=1)

    def test_a_large_batch(self, extractor: ClosetExtractor, sample_drawers: list[Drawer]) -> None:
        """Hundreds of drawers from many sources, cut into runs as the palace does."""
        sample = [d.text for d in sample_drawers]
        given: list[Drawer] = []
        for s in range(max(2, self.batch_size // (len(sample) + 2))):
            texts = [*sample, _varied_text(2 * s), _varied_text(2 * s + 1)]
            given += drawers(texts, source=f"test://batch/{s:03d}", wing=f"w{s % 3}")
        closets = self.build(extractor, given, per_closet=self.drawers_per_closet)
        assert closets, "the sample, repeated in many sources, gave no closet"
        sources = {c.source for c in closets}
        assert len(sources) > 1

    def test_one_extractor_serves_several_threads(self, extractor: ClosetExtractor) -> None:
        runs = [
            drawers([_varied_text(10 * r + n) for n in range(3)], source=f"test://t/{r}")
            for r in range(16)
        ]
        alone = [extractor.extract(drawers=run) for run in runs]
        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            together = list(pool.map(lambda run: extractor.extract(drawers=run), runs * 3))
        assert together == alone * 3
