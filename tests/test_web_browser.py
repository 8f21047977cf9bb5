"""The memory page in a real browser: Debian's chromium, driven by Selenium through the
system chromedriver, against the real app served by uvicorn on a loopback port, over a
palace with the real model, real Chroma and real SQLite.

Each test searches, edits or deletes through the page as a person would, then checks
that the palace (re-opened from disk where it matters) agrees with what the page showed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from palace_retrievers import Palace
from palace_retrievers.embedder import Embedder
from palace_retrievers.web import create_app
from palace_retrievers.web.screenshots import (
    CHROMEDRIVER,
    SCRIPT_TEXT,
    WIDTH,
    Demo,
    capture,
    chromium,
    pages,
    seed_demo,
)
from palace_retrievers.web.server import running

pytestmark = pytest.mark.slow

if not (Path(CHROMEDRIVER).exists() and shutil.which("chromium")):
    if os.environ.get("CI"):
        pytest.fail("the browser tests need Debian's chromium and chromium-driver (.ci/run)")
    pytest.skip(
        "no chromium/chromedriver: apt-get install -y chromium chromium-driver",
        allow_module_level=True,
    )

from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

QUESTION = "which database do we use for orders?"


@dataclass(frozen=True)
class Site:
    """A seeded palace and its memory page, served on a loopback port."""

    palace: Palace
    demo: Demo
    url: str


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    browser = chromium()
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder) -> tuple[Path, Demo]:
    """A demo palace (real model, real Chroma) built once; tests that write copy it."""
    path = tmp_path_factory.mktemp("web") / "palace"
    with Palace.open(path, embedder=real_embedder) as palace:
        demo = seed_demo(palace)
        palace.remember("Bob keeps his bike in the basement", user_id="bob")
    return path, demo


@pytest.fixture(scope="module")
def site(seeded: tuple[Path, Demo], real_embedder: Embedder) -> Iterator[Site]:
    """A copy of the demo palace and its page, shared by the tests that only read."""
    path = seeded[0].parent / "site"
    shutil.copytree(seeded[0], path)
    with Palace.open(path, embedder=real_embedder) as palace, running(create_app(palace)) as url:
        yield Site(palace=palace, demo=seeded[1], url=url)


def wait_for(driver: WebDriver, css: str, *, text: str | None = None) -> WebElement:
    """The first element matching ``css`` (holding ``text``), once the page shows it."""
    wait = WebDriverWait(driver, 10)
    if text is not None:
        wait.until(ec.text_to_be_present_in_element((By.CSS_SELECTOR, css), text))
    return wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def gone(element: WebElement) -> Callable[[WebDriver], bool]:
    """A wait condition: ``element``'s page has been replaced. Chromium says so either as a
    stale element or, when the check lands mid-navigation, as "does not belong to the
    document" (a plain WebDriverException that ``ec.staleness_of`` lets through)."""

    def check(_: WebDriver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    return check


def click(driver: WebDriver, label: str) -> None:
    """Press the button labelled ``label`` and wait for the next page."""
    button = driver.find_element(By.XPATH, f"//button[normalize-space()='{label}']")
    button.click()
    WebDriverWait(driver, 10).until(gone(button))


def test_search_shows_what_the_palace_finds_with_score_parts(driver: WebDriver, site: Site) -> None:
    expected = site.palace.search(QUESTION, k=10, user_id=site.demo.user)
    driver.get(f"{site.url}/search?user={site.demo.user}")
    box = wait_for(driver, "#q")
    box.send_keys(QUESTION)
    box.submit()
    wait_for(driver, "ol.hits li.hit")
    shown = driver.find_elements(By.CSS_SELECTOR, "ol.hits li.hit")
    assert any("PostgreSQL 15" in element.text for element in shown[:3])
    # A recall raises the heat of the memories found, so a memory's score moves a little
    # from one search to the next; a drawer's does not.
    assert len(shown) == len(expected) > 0
    by_text = {hit.text.strip(): hit for hit in expected}
    scores = []
    for element in shown:
        hit = by_text[element.find_element(By.CSS_SELECTOR, "pre.text").text]
        score = element.find_element(By.CSS_SELECTOR, ".score").text
        parts = element.find_elements(By.CSS_SELECTOR, "table.parts th")
        values = element.find_elements(By.CSS_SELECTOR, "table.parts td")
        assert [p.text for p in parts][-1] == "final"
        assert {p.text for p in parts} == set(hit.scores)
        assert values[-1].text == score
        assert ("is-memory" in (element.get_attribute("class") or "")) == hit.is_memory
        if not hit.is_memory:
            assert score == f"{hit.score:.3f}"
        scores.append(float(score))
    assert scores == sorted(scores, reverse=True)


def test_stored_markup_stays_text_and_users_stay_apart(driver: WebDriver, site: Site) -> None:
    demo = site.demo
    driver.get(f"{site.url}/drawers/{demo.script_drawer}?user={demo.user}")
    assert wait_for(driver, "pre.text").text == SCRIPT_TEXT
    assert driver.execute_script("return window.pwned === undefined") is True

    driver.get(f"{site.url}/memories?user={demo.user}")
    table = wait_for(driver, "table.memories").text
    assert "The team standup is at 10am" in table
    assert "Bob keeps his bike" not in table
    who = driver.find_element(By.ID, "who-user")
    who.clear()
    who.send_keys("bob")
    click(driver, "Switch")
    assert wait_for(driver, "#current-user").text == "bob"
    table = wait_for(driver, "table.memories").text
    assert "Bob keeps his bike" in table
    assert "standup" not in table


def test_every_page_is_captured(driver: WebDriver, site: Site, tmp_path: Path) -> None:
    saved = capture(driver, site.url, site.demo, tmp_path / "shots")
    assert [p.stem for p in saved] == [name for name, _ in pages(site.demo)]
    for png in saved:
        head = png.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n", png
        assert int.from_bytes(head[16:20], "big") == WIDTH, png
        assert png.stat().st_size > 10_000, png  # a rendered page, not a blank


def test_edit_pin_and_delete_in_the_browser_then_the_palace_agrees(
    driver: WebDriver,
    seeded: tuple[Path, Demo],
    real_embedder: Embedder,
    tmp_path: Path,
) -> None:
    path = tmp_path / "palace"
    shutil.copytree(seeded[0], path)
    demo = seeded[1]
    palace = Palace.open(path, embedder=real_embedder)
    try:
        (joana,) = [m for m in palace.memories(user_id=demo.user) if m.text.startswith("Joana")]
        edited = "Joana and Rui own the iOS release"
        with running(create_app(palace)) as url:
            driver.get(f"{url}/memories?user={demo.user}")
            driver.find_element(By.LINK_TEXT, joana.text).click()
            text = wait_for(driver, "#edit-text")
            text.clear()
            text.send_keys(edited)
            click(driver, "Save")
            assert wait_for(driver, ".notice").text == "Saved."
            assert wait_for(driver, "#memory-text").text == edited
            assert palace.memory(joana.id, user_id=demo.user).text == edited

            click(driver, "Pin (importance 1.0)")
            assert wait_for(driver, ".notice").text.startswith("Pinned")
            assert driver.find_element(By.ID, "memory-importance").text == "1.00"

            click(driver, "Delete")
            assert wait_for(driver, ".notice").text.startswith("Deleted")
            assert driver.find_element(By.CSS_SELECTOR, "h1 .badge").text == "archived"
            assert driver.find_elements(By.XPATH, "//button[normalize-space()='Restore']")

            driver.get(f"{url}/memories?user={demo.user}")
            assert edited not in wait_for(driver, "main").text
            driver.get(f"{url}/memories?status=archived&user={demo.user}")
            assert edited in wait_for(driver, "table.memories").text
            driver.get(f"{url}/search?q=who+owns+the+iOS+release&user={demo.user}")
            assert "Retro" in wait_for(driver, "li.hit").text  # the drawer stays
            memory_hits = driver.find_elements(By.CSS_SELECTOR, "li.hit.is-memory")
            assert all(edited not in hit.text for hit in memory_hits)
    finally:
        palace.close()  # what the page did must be on disk: read it back from there
    with Palace.open(path, embedder=real_embedder, create=False) as reopened:
        memory = reopened.memory(joana.id, user_id=demo.user)
        assert (memory.text, memory.importance, memory.status) == (edited, 1.0, "archived")
        assert joana.id not in [m.id for m in reopened.memories(user_id=demo.user)]
        events = [e.event for e in reopened.history(joana.id, user_id=demo.user)]
        assert events[0] == "add"
        assert "update" in events
        assert events[-1] in ("archive", "delete")
        hits = reopened.search(edited, k=10, user_id=demo.user)
        assert joana.id not in [h.memory.id for h in hits if h.memory is not None]
