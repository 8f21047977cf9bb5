"""Screenshots of the memory page: the real app, a real browser, a demo palace.

``python -m palace_retrievers.web.screenshots [OUT_DIR]`` (default ``docs/screenshots``)
builds a small demo palace in a temporary folder with the configured embedder (the real
all-MiniLM-L6-v2 by default), serves its memory page on a free loopback port, opens each
page in headless chromium (Debian's ``chromium`` and ``chromium-driver``, through
Selenium, a dev dependency) and saves one PNG a page. The browser tests use the same
demo palace and the same driver.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from palace_retrievers.palace import Palace
from palace_retrievers.web.app import create_app
from palace_retrievers.web.server import running

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

log = logging.getLogger(__name__)

CHROMEDRIVER = "/usr/bin/chromedriver"
DEMO_USER = "ana"
WIDTH = 1280


@dataclass(frozen=True, slots=True)
class Demo:
    """What the demo palace holds that a page or a test wants to point at."""

    user: str
    standup: str  # the current memory of a supersede chain
    database: str  # a decision
    archived: str  # a deleted (archived) memory
    drawer: str  # a drawer in work / infra
    script_drawer: str  # a drawer whose text is markup


DRAWERS = {
    ("work", "infra"): [
        "Orders DB migration notes: we moved the orders database from MySQL 8 to PostgreSQL 15 "
        "on 3 March. Replication lag stayed under 200 ms during the cut-over.",
        "The nightly backup of the orders database runs at 02:00 UTC and is kept for 35 days.",
        "Grafana alert: p99 latency of the checkout service above 800 ms for 10 minutes.",
    ],
    ("work", "meetings"): [
        "Standup moved: from next Monday the team standup is at 10am instead of 9am, "
        "so that the Lisbon and Berlin people can both make it.",
        "Retro: the release checklist lives in the wiki; Joana owns the iOS release.",
    ],
    ("home", "garden"): [
        "Plant the tomatoes after the last frost, around mid-April; water every other day.",
        "The lemon tree needs a bigger pot before the summer.",
    ],
}

SCRIPT_TEXT = "Pasted from a web page: <script>window.pwned = true</script> (stored as text)"


def seed_demo(palace: Palace, *, user: str = DEMO_USER) -> Demo:
    """Fill ``palace`` with a small life of ``user``: drawers, memories and graph facts."""
    drawer_ids: list[str] = []
    for (wing, room), texts in DRAWERS.items():
        drawer_ids += palace.add_texts(texts, wing=wing, room=room, user_id=user)
    (script_drawer,) = palace.add_texts([SCRIPT_TEXT], wing="web", room="clips", user_id=user)
    database = palace.remember(
        "We moved the orders database to PostgreSQL 15",
        kind="decision",
        tags=("database", "orders"),
        source_ids=(drawer_ids[0],),
        wing="work",
        user_id=user,
    ).memory.id
    palace.remember(
        "The team standup is at 9am", kind="fact", importance=0.6, wing="work", user_id=user
    )
    standup = palace.remember(
        "The team standup is at 10am",
        kind="fact",
        importance=0.6,
        source_ids=(drawer_ids[3],),
        wing="work",
        user_id=user,
    ).memory.id
    palace.remember(
        "I prefer short written status updates to meetings",
        kind="preference",
        importance=0.8,
        user_id=user,
    )
    palace.remember("Joana owns the iOS release", kind="fact", importance=0.5, user_id=user)
    palace.remember("Release 2.4 ships on 12 March", kind="event", importance=0.7, user_id=user)
    archived = palace.remember(
        "The office wifi password is on the fridge", kind="fact", importance=0.2, user_id=user
    ).memory.id
    palace.archive_memory(archived, user_id=user)
    kg = palace.kg
    kg.add("Ana", "works_at", "Acme", valid_from="2021-02-01", user_id=user)
    kg.add("Ana", "lives_in", "Lisbon", valid_from="2019-09-01", user_id=user)
    kg.add("Ana", "works_at", "Globex", valid_from="2025-09-01", user_id=user)
    kg.add("Ana", "lives_in", "Porto", valid_from="2025-10-15", user_id=user)
    kg.add("Ana", "uses", "Neovim", valid_from="2023-05-01", confidence=0.8, user_id=user)
    kg.invalidate("Ana", "uses", "Neovim", ended="2026-01-10", user_id=user)
    kg.add("Ana", "uses", "Helix", valid_from="2026-01-10", confidence=0.9, user_id=user)
    return Demo(
        user=user,
        standup=standup,
        database=database,
        archived=archived,
        drawer=drawer_ids[0],
        script_drawer=script_drawer,
    )


def pages(demo: Demo) -> list[tuple[str, str]]:
    """``(name, path)`` of each page to capture."""
    user = f"user={quote(demo.user)}"
    return [
        ("search", f"/search?q=which+database+do+we+use+for+orders%3F&k=5&{user}"),
        ("wings", f"/wings?{user}"),
        ("browse", f"/browse?wing=work&room=infra&{user}"),
        ("drawer", f"/drawers/{demo.drawer}?{user}"),
        ("memories", f"/memories?{user}"),
        ("memories-archived", f"/memories?status=archived&{user}"),
        ("memory", f"/memories/{demo.standup}?{user}"),
        ("timeline", f"/timeline?entity=Ana&{user}"),
        ("escaping", f"/drawers/{demo.script_drawer}?{user}"),
    ]


def chromium(*, width: int = WIDTH, height: int = 900) -> WebDriver:
    """Headless chromium driven through Debian's ``/usr/bin/chromedriver``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    chromium_binary = shutil.which("chromium")
    if chromium_binary:
        options.binary_location = chromium_binary
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def screenshot(driver: WebDriver, path: Path, *, width: int = WIDTH, most: int = 2400) -> Path:
    """Save the whole page (up to ``most`` pixels tall) as a PNG."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    chrome = int(driver.execute_script("return window.outerHeight - window.innerHeight"))
    driver.set_window_size(width, min(max(height, 400), most) + chrome)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


def capture(driver: WebDriver, base_url: str, demo: Demo, out_dir: Path) -> list[Path]:
    """Open each page of :func:`pages` and save it as ``<out_dir>/<name>.png``."""
    saved = []
    for name, path in pages(demo):
        driver.set_window_size(WIDTH, 900)
        driver.get(base_url + path)
        saved.append(screenshot(driver, out_dir / f"{name}.png"))
    return saved


def main(argv: Sequence[str] | None = None) -> int:
    """Build the demo palace, serve it and capture every page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out_dir", nargs="?", default="docs/screenshots", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    with (
        tempfile.TemporaryDirectory(prefix="palace-screenshots-") as scratch,
        Palace.open(Path(scratch) / "palace") as palace,
    ):
        demo = seed_demo(palace)
        driver = chromium()
        try:
            with running(create_app(palace)) as base_url:
                saved = capture(driver, base_url, demo, args.out_dir)
        finally:
            driver.quit()
    for path in saved:
        log.info("saved %s", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
