"""Walking a folder the way ``git`` sees it: what a tree-reading source should look at.

:func:`walk` yields the files under a root in sorted order without following symlinks.
It leaves out hidden files and folders, the usual dependency and build folders
(:data:`SKIP_DIRS`), and whatever a ``.gitignore`` names: the root's and every nested one,
each applying to its own folder and below with git's rules (a pattern with a slash is
anchored to the folder of its ``.gitignore``, a deeper file's ``!pattern`` can re-include
what a shallower one ignored, and nothing inside an ignored folder comes back).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_retrievers.sources import Skipped

SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", ".venv", "dist", "build"})


@dataclass(frozen=True, slots=True)
class _Rules:
    """One ``.gitignore``: the folder it sits in (relative to the root) and its patterns."""

    base: str
    spec: Any  # pathspec.GitIgnoreSpec


def _rules(folder: Path, base: str) -> tuple[_Rules | None, list[str]]:
    """The rules of ``folder``'s ``.gitignore``, and the patterns in it that are invalid.

    As ``git`` does, an invalid pattern (a lone ``!``, a trailing backslash) is ignored
    and the others still apply.
    """
    ignore = folder / ".gitignore"
    if not ignore.is_file():
        return None, []
    import pathspec

    try:
        lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None, []
    try:
        return _Rules(base, pathspec.GitIgnoreSpec.from_lines(lines)), []
    except Exception:  # pathspec's GitIgnorePatternError (a ValueError) and kin
        pass
    valid: list[str] = []
    invalid: list[str] = []
    for line in lines:
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except Exception:
            invalid.append(line)
        else:
            valid.append(line)
    return _Rules(base, pathspec.GitIgnoreSpec.from_lines(valid)), invalid


def _ignored(chain: list[_Rules], rel: str) -> bool:
    """Whether the nearest ``.gitignore`` with a say over ``rel`` ignores it."""
    verdict: bool | None = None
    for rules in chain:
        local = rel[len(rules.base) + 1 :] if rules.base else rel
        include = rules.spec.check_file(local).include
        if include is not None:
            verdict = include
    return bool(verdict)


def walk(root: Path, *, want: Callable[[str], bool] | None = None) -> Iterator[Path | Skipped]:
    """The regular files under ``root`` (a resolved directory), as git would list them.

    Args:
        root: The folder to walk.
        want: Keeps only the files whose name it accepts (default: every file).

    Yields a :class:`Skipped` note for a symlink or another non-regular file, and for a
    ``.gitignore`` with invalid patterns (which are ignored, the others applied).
    """
    chains: dict[str, list[_Rules]] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        rel_here = here.relative_to(root).as_posix()
        base = "" if rel_here == "." else rel_here
        parent = base.rpartition("/")[0]
        chain = list(chains.get(parent, [])) if base else []
        local, invalid = _rules(here, base)
        if local is not None:
            chain.append(local)
        if invalid:
            shown = ", ".join(repr(line) for line in invalid[:3])
            yield Skipped(str(here / ".gitignore"), f"invalid patterns ignored: {shown}")
        chains[base] = chain

        def rel(name: str, base: str = base) -> str:
            return f"{base}/{name}" if base else name

        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in SKIP_DIRS and not _ignored(chain, rel(d) + "/")
        )
        for name in sorted(files):
            if name.startswith(".") or _ignored(chain, rel(name)):
                continue
            if want is not None and not want(name):
                continue
            file = here / name
            if file.is_symlink() or not file.is_file():
                yield Skipped(str(file), "not a regular file")
            else:
                yield file
