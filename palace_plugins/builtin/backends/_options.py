"""The options of the server backends (``pgvector``, ``qdrant``): merged and checked.

Every check raises :class:`~palace_retrievers.errors.ConfigError` naming the backend and
the option, so a mistake in ``[backends.<name>]`` of ``palace.toml`` is found when the
index opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from palace_retrievers.embedder import options_check
from palace_retrievers.errors import ConfigError


def merged(
    backend: str, given: Mapping[str, Any], defaults: Mapping[str, Any], *, strings: Iterable[str]
) -> dict[str, Any]:
    """``given`` over ``defaults``, once it names only known options and ``strings`` are text.

    Raises:
        ConfigError: ``given`` names an option outside ``defaults``, or one of ``strings``
            is not a string.
    """
    options_check("backend", backend, given, set(defaults))
    options = {**defaults, **given}
    for name in strings:
        if not isinstance(options[name], str):
            raise ConfigError(f"backend {backend!r}: {name} must be a string")
    return options


def number(
    backend: str, options: Mapping[str, Any], name: str, *, minimum: float, whole: bool = True
) -> Any:
    """The option ``name``: a whole number (any number unless ``whole``) of at least ``minimum``.

    Raises:
        ConfigError: it is not such a number (a boolean is not a number).
    """
    value = options[name]
    valid = not isinstance(value, bool) and isinstance(value, int if whole else int | float)
    if not valid or float(value) < minimum:
        noun = "a whole number" if whole else "a number"
        raise ConfigError(f"backend {backend!r}: {name} must be {noun} >= {minimum}, got {value!r}")
    return value


def hnsw(backend: str, options: Mapping[str, Any], *, whole: bool = True) -> tuple[int, int, int]:
    """The HNSW options ``ef_search`` (at least 1), ``m`` (2) and ``ef_construction`` (4).

    Raises:
        ConfigError: one of them is not a number (a whole number when ``whole``) that large.
    """
    return (
        int(number(backend, options, "ef_search", minimum=1, whole=whole)),
        int(number(backend, options, "m", minimum=2, whole=whole)),
        int(number(backend, options, "ef_construction", minimum=4, whole=whole)),
    )
