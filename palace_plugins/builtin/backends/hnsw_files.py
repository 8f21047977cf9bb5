"""A structural check of an HNSW index on disk, read without loading it.

Embedded Chroma keeps each collection's HNSW graph (hnswlib, in the form its fork writes
when it persists on write) in a folder named after the vector segment, as four files:

- ``header.bin``: a format version (``int32``, 1) then the index's shape: level-0 offset,
  capacity, element count, bytes per element, label offset, data offset (six ``uint64``),
  top level (``int32``), entry point (``uint32``), ``maxM``, ``maxM0``, ``M`` (three
  ``uint64``), the level multiplier (``float64``) and ``ef_construction`` (``uint64``):
  100 bytes, packed, little-endian;
- ``data_level0.bin``: per element, its level-0 links (a count, then ``maxM0`` slots), its
  vector and its label, ``size_data_per_element`` bytes each;
- ``length.bin``: a ``float32`` norm per element;
- ``link_lists.bin``: per element, a ``uint32`` byte count and the links of its upper
  levels (``maxM`` slots and a count per level).

Chroma answers from a truncated ``data_level0.bin`` without an error (wrong neighbours),
and reading some damaged files crashes the process, so the palace must notice damage
without ever letting Chroma load the files: :func:`hnsw_problem` checks the header's
shape for consistency, each file's length against it, walks the upper-level link sizes,
and samples a few elements' labels (distinct) and link counts (within bounds). It reads
the header, ``link_lists.bin`` and a few dozen small slices of ``data_level0.bin``.

The files lag the index by up to Chroma's sync threshold, and a writer rewrites the header
before the data, so a check that fails is tried again a moment later before it counts.
"""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

HEADER = struct.Struct("<i6QiI3QdQ")
VERSION = 1
FILES = ("header.bin", "data_level0.bin", "length.bin", "link_lists.bin")
#: Elements of ``data_level0.bin`` whose label and link count are read.
SAMPLES = 64
#: Attempts, and seconds between them, before a problem counts (a writer mid-flush).
ATTEMPTS = 3
PAUSE = 0.2


def hnsw_problem(folder: Path, *, attempts: int = ATTEMPTS, pause: float = PAUSE) -> str | None:
    """What is wrong with the HNSW files in ``folder``, or ``None`` if they hold together.

    A problem is reported only when it is still there after ``attempts`` readings
    ``pause`` seconds apart.
    """
    problem = _check(folder)
    for _ in range(attempts - 1):
        if problem is None:
            return None
        time.sleep(pause)
        problem = _check(folder)
    return None if problem is None else f"HNSW files in {folder}: {problem}"


def _check(folder: Path) -> str | None:
    sizes: dict[str, int] = {}
    for name in FILES:
        try:
            sizes[name] = (folder / name).stat().st_size
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as exc:
            return f"{name} cannot be read ({exc})"
    if sizes["header.bin"] < HEADER.size:
        return f"header.bin holds {sizes['header.bin']} bytes, fewer than {HEADER.size}"
    try:
        with open(folder / "header.bin", "rb") as f:
            fields = HEADER.unpack(f.read(HEADER.size))
    except OSError as exc:
        return f"header.bin cannot be read ({exc})"
    (version, _, capacity, count, per_element, label_at, data_at) = fields[:7]
    (top_level, entry, max_m, max_m0, m, _, _) = fields[7:]
    if version != VERSION:
        return f"header.bin has format version {version}, not {VERSION}"
    shape = _shape_problem(
        capacity, count, per_element, label_at, data_at, top_level, entry, max_m, max_m0, m
    )
    if shape:
        return f"header.bin is inconsistent ({shape})"
    if sizes["data_level0.bin"] < count * per_element:
        return (
            f"data_level0.bin holds {sizes['data_level0.bin']} bytes; the header's "
            f"{count} elements need {count * per_element}"
        )
    if sizes["length.bin"] < count * 4:
        return f"length.bin holds {sizes['length.bin']} bytes; {count} elements need {count * 4}"
    problem = _links_problem(folder / "link_lists.bin", count, max_m, top_level)
    if problem:
        return problem
    return _sample_problem(folder / "data_level0.bin", count, per_element, label_at, max_m0)


def _shape_problem(
    capacity: int,
    count: int,
    per_element: int,
    label_at: int,
    data_at: int,
    top_level: int,
    entry: int,
    max_m: int,
    max_m0: int,
    m: int,
) -> str | None:
    if not 0 < m <= max_m <= max_m0 <= 0xFFFF:
        return f"M {m}, maxM {max_m}, maxM0 {max_m0}"
    if data_at != max_m0 * 4 + 4 or not data_at < label_at or per_element != label_at + 8:
        return f"offsets {data_at}/{label_at} and {per_element} bytes per element"
    if count > capacity:
        return f"{count} elements in a capacity of {capacity}"
    if count and not (0 <= top_level < 64 and entry < count):
        return f"top level {top_level}, entry point {entry} of {count} elements"
    return None


def _links_problem(path: Path, count: int, max_m: int, top_level: int) -> str | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"link_lists.bin cannot be read ({exc})"
    per_level = max_m * 4 + 4
    at = 0
    for element in range(count):
        if at + 4 > len(data):
            return f"link_lists.bin ends at element {element} of {count} ({len(data)} bytes)"
        (size,) = struct.unpack_from("<I", data, at)
        at += 4 + size
        if size % per_level or size // per_level > max(top_level, 0):
            return f"link_lists.bin gives element {element} {size} bytes of links"
    if at > len(data):
        return f"link_lists.bin holds {len(data)} bytes; its {count} elements need {at}"
    return None


def _sample_problem(
    path: Path, count: int, per_element: int, label_at: int, max_m0: int
) -> str | None:
    if count == 0:
        return None
    step = max(1, count // SAMPLES)
    labels: set[int] = set()
    picked = range(0, count, step)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return f"data_level0.bin cannot be read ({exc})"
    try:
        for element in picked:
            start = element * per_element
            head = os.pread(fd, 4, start)
            label = os.pread(fd, 8, start + label_at)
            if len(head) < 4 or len(label) < 8:
                return f"data_level0.bin ends inside element {element}"
            links = int.from_bytes(head[:2], "little")
            if links > max_m0:
                return f"data_level0.bin gives element {element} {links} links (> {max_m0})"
            labels.add(int.from_bytes(label, "little"))
    except OSError as exc:
        return f"data_level0.bin cannot be read ({exc})"
    finally:
        os.close(fd)
    if len(labels) < len(picked):
        repeated = len(picked) - len(labels)
        return f"data_level0.bin: {repeated} of {len(picked)} sampled labels repeat"
    return None
