"""Deterministic ids: the same source and chunk give the same id on every machine."""

from __future__ import annotations

import hashlib

import pytest

from palace_retrievers.ids import content_hash, digest, drawer_id, text_id

BASE = {"wing": "larkspur", "source_key": "docs/onboarding.md", "chunk_index": 0, "text": "hi"}


def test_drawer_id_is_stable_across_machines_and_versions() -> None:
    # A fixed value: if this changes, every palace ever mined would be re-filed.
    assert (
        drawer_id(
            wing="larkspur", source_key="docs/onboarding.md", chunk_index=0, text="# Onboarding\n"
        )
        == "d_dc79109a26d6c81862663680"
    )
    assert text_id(text="Alice adopted a cat", wing="a", user_id=None) == (
        "t_15010939c7e73ae5b014fc99"
    )


def test_drawer_id_is_deterministic() -> None:
    assert drawer_id(**BASE) == drawer_id(**dict(BASE))


@pytest.mark.parametrize(
    "change",
    [
        {"wing": "other"},
        {"source_key": "docs/roadmap.md"},
        {"chunk_index": 1},
        {"text": "hi!"},
        {"text": "hi "},
    ],
)
def test_drawer_id_differs_by_each_field(change: dict[str, object]) -> None:
    assert drawer_id(**{**BASE, **change}) != drawer_id(**BASE)


def test_fields_cannot_bleed_into_each_other() -> None:
    assert digest("a|b", "c") != digest("a", "b|c")
    assert digest("ab", "c") != digest("a", "bc")
    a = drawer_id(wing="w", source_key="a", chunk_index=1, text="2x")
    b = drawer_id(wing="w", source_key="a1", chunk_index=2, text="x")
    assert a != b


def test_id_shape() -> None:
    value = drawer_id(**BASE)
    assert value.startswith("d_")
    assert len(value) == 2 + 24
    int(value[2:], 16)
    assert len(digest("x", length=10)) == 10


def test_text_id_depends_on_wing_user_and_text() -> None:
    base = text_id(text="Alice adopted a cat", wing="a", user_id=None)
    assert base == text_id(text="Alice adopted a cat", wing="a", user_id="")
    assert base != text_id(text="Alice adopted a cat", wing="b", user_id=None)
    assert base != text_id(text="Alice adopted a cat", wing="a", user_id="u1")
    assert base != text_id(text="Alice adopted a dog", wing="a", user_id=None)
    assert base.startswith("t_")


def test_unicode_text_ids() -> None:
    one = drawer_id(wing="北京", source_key="笔记/会议.md", chunk_index=0, text="数据存储 🦜")
    two = drawer_id(wing="北京", source_key="笔记/会议.md", chunk_index=0, text="数据存储 🐦")
    assert one != two


def test_content_hash_is_full_sha256() -> None:
    assert content_hash(b"hello") == hashlib.sha256(b"hello").hexdigest()
    assert content_hash(b"hello") != content_hash(b"hello\n")


def test_unowned_ids_are_what_they_always_were() -> None:
    # The formula of every palace mined before owners were part of ids.
    for user_id in (None, ""):
        assert drawer_id(**BASE, user_id=user_id) == "d_" + digest(
            "larkspur", "docs/onboarding.md", "0", "hi"
        )
    assert (
        drawer_id(
            wing="larkspur",
            source_key="docs/onboarding.md",
            chunk_index=0,
            text="# Onboarding\n",
            user_id=None,
        )
        == "d_dc79109a26d6c81862663680"
    )


def test_owned_ids_name_their_owner() -> None:
    alice = drawer_id(**BASE, user_id="alice")
    bob = drawer_id(**BASE, user_id="bob")
    assert len({alice, bob, drawer_id(**BASE)}) == 3
    assert alice == drawer_id(**BASE, user_id="alice")
    assert alice == "d_" + digest("owned", "alice", "larkspur", "docs/onboarding.md", "0", "hi")
    # An owner cannot be smuggled in through another field, nor another field through it.
    assert drawer_id(**{**BASE, "wing": "alice\x1flarkspur"}) != alice
    assert drawer_id(**BASE, user_id="alice\x1flarkspur") != drawer_id(
        **{**BASE, "wing": "x"}, user_id="alice"
    )
