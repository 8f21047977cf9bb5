"""A FAKE embedder and throw-away plugins for pure-logic tests.

:class:`HashingEmbedder` hashes a bag of words into 64 dimensions. It knows nothing of
meaning; it exists so that tests of configuration, plugins, mining bookkeeping and
filters run in milliseconds. Tests of search quality use the real model instead.
"""

from __future__ import annotations

import hashlib
import re
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from palace_plugins import hookimpl
from palace_retrievers.embedder import Embedder, Vectors

FAKE_MODEL = "fake/hashing-bag-of-words-64"
FAKE_DIMENSION = 64
_TOKEN = re.compile(r"\w+")


class HashingEmbedder(Embedder):
    """A FAKE embedder for pure-logic tests: a hashed bag of words, normalised.

    Each lower-cased word adds ±1 to one of 64 dimensions chosen by its sha256, so texts
    that share words are close and the same text always gets the same vector. It has no
    notion of meaning: never use it to test search quality.
    """

    @property
    def model_name(self) -> str:
        return FAKE_MODEL

    @property
    def dimension(self) -> int:
        return FAKE_DIMENSION

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), FAKE_DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _TOKEN.findall(text.lower()) or ["<no words>"]:
                digest = hashlib.sha256(word.encode("utf-8")).digest()
                column = int.from_bytes(digest[:4], "little") % FAKE_DIMENSION
                out[row, column] += 1.0 if digest[4] & 1 else -1.0
            if not out[row].any():
                out[row, 0] = 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def make_fake_embedder(
    *, model: str | None = None, options: Mapping[str, Any] | None = None
) -> HashingEmbedder:
    return HashingEmbedder()


def _plugin(name: str, **hooks: Callable[..., None]) -> types.ModuleType:
    """A plugin object named ``name`` (pluggy names a module plugin by ``__name__``)."""
    module = types.ModuleType(name)
    for hook, function in hooks.items():
        setattr(module, hook, hookimpl(function))
    return module


def make_plugin(name: str, **hooks: Callable[..., None]) -> types.ModuleType:
    """Build a throw-away plugin: ``make_plugin("acme", palace_register_backends=f)``."""
    return _plugin(name, **hooks)


def _register_fake(register: Callable[[str, Any], None]) -> None:
    register("fake", make_fake_embedder)


FAKE_PLUGIN = _plugin("palace-test-fake-embedder", palace_register_embedders=_register_fake)
