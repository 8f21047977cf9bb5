"""What every backend on a server must do when the server goes away (shared by the backend
tests): the palace keeps answering from the exact scan over its ledger, logs a warning,
``palace status`` says DEGRADED, and once the server is back ``palace reindex`` restores
the index."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from palace_retrievers import Palace
from palace_retrievers.cli import cli
from palace_retrievers.errors import IndexUnavailableError

TEXTS = {
    "boiler": "The boiler was serviced on Tuesday by the plumber from Porto.",
    "cat": "Alice adopted a grey cat called Miso from the shelter in May.",
    "deploy": "We deploy to production with a blue/green switch after the health checks.",
    "budget": "The quarterly budget for the greenhouse is 1,200 euros.",
}
QUERY = "who adopted a cat?"
THERMOSTAT = "The greenhouse thermostat is set to 21 degrees."


def palace_config(palace_dir: Path, backend: str, **options: Any) -> None:
    """Write a ``palace.toml`` selecting ``backend`` with ``[backends.<backend>]`` options."""
    palace_dir.mkdir(parents=True, exist_ok=True)
    lines = [f'backend = "{backend}"', "", f"[backends.{backend}]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in options.items()]  # TOML too
    (palace_dir / "palace.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def cli_status(palace_dir: Path) -> str:
    result = CliRunner().invoke(cli, ["--palace", str(palace_dir), "status"])
    assert result.exit_code == 0, result.output
    return str(result.output)


def check_degrades_and_recovers(
    palace_dir: Path,
    open_palace: Callable[..., Palace],
    caplog: pytest.LogCaptureFixture,
    *,
    breaks: Callable[[], None],
    repairs: Callable[[], None],
) -> None:
    """Fill a palace (real MiniLM), break its backend's server, search, repair, reindex."""
    palace = open_palace(palace_dir, fake=False)
    palace.add_texts(list(TEXTS.values()), ids=list(TEXTS))
    assert all(s.ok for s in palace.stats().indexes), palace.stats().indexes
    expected = [h.id for h in palace.search(QUERY, k=3)]
    assert expected[0] == "cat"
    assert "DEGRADED" not in cli_status(palace_dir)

    breaks()
    try:
        caplog.clear()
        hits = palace.search(QUERY, k=3)  # the backend's query fails: the exact scan answers
        assert [h.id for h in hits] == expected
        assert "degraded" in caplog.text
        assert "palace reindex" in caplog.text
        drawers = {s.collection: s for s in palace.stats().indexes}["drawers"]
        assert not drawers.ok
        assert drawers.detail
        assert "DEGRADED (run `palace reindex`)" in cli_status(palace_dir)
        assert [h.id for h in palace.search(QUERY, k=3)] == expected
        # A write reaches the ledger, then fails on the index with the palace's error.
        with pytest.raises(IndexUnavailableError, match="palace reindex"):
            palace.add_texts([THERMOSTAT], ids=["thermostat"])
        assert palace.search("what is the greenhouse thermostat set to?", k=1)[0].id == (
            "thermostat"
        )
    finally:
        repairs()

    assert palace.reindex() == sum(s.ledger_count for s in palace.stats().indexes)
    assert all(s.ok for s in palace.stats().indexes)
    assert palace.search(QUERY, k=3)[0].id == "cat"
    assert palace.search("what is the greenhouse thermostat set to?", k=1)[0].id == "thermostat"
    assert "DEGRADED" not in cli_status(palace_dir)
