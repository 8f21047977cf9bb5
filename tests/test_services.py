"""The rule of ``tests/services.py``: a missing service skips a test, except in CI."""

from __future__ import annotations

import pytest
from services import in_ci, service_absent


@pytest.mark.parametrize(
    ("value", "ci"),
    [("", False), ("0", False), ("false", False), ("1", True), ("true", True), ("yes", True)],
)
def test_ci_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, ci: bool
) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_a_missing_service_is_skipped_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL is not installed"):
        service_absent("PostgreSQL")


def test_a_missing_service_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI must run every backend test"):
        service_absent("PostgreSQL")
