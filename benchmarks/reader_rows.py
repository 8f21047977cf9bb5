"""``judge_rows.py``'s rows as another pair reader would have made them, without regathering.

A row's ``learned`` probabilities are the mean of the pair model's and the pair reader's
(:mod:`palace_retrievers.memory.learned.judge`). The reader is the cheap part of a row
to recompute (one forward pass a candidate; the pair model embeds a dozen derived texts),
so for each candidate the judges read this reads ``(old, new)`` with the ``--before``
reader, the one the rows were gathered with, and the ``--after`` reader, and writes

- ``learned + (after - before) / 2``: the rows of the pair model with the ``--after``
  reader; or, with ``--alone``,
- ``after``: the rows of the ``--after`` reader alone (no pair model), as a palace with
  ``pair_model = false`` in ``[memory_judges.learned]`` would read them.

The structural verdicts, cosines, ranks and texts are kept; ``verdict`` (the pair judges'
combined call, which the list-wise model does not read) is left as it was. Then
``train_listwise.py`` trains and replays a list-wise model on the new rows.

Usage::

    .venv/bin/python benchmarks/reader_rows.py rows_train.jsonl rows_train_reader.jsonl \\
        --before palace_retrievers/memory/learned/data/pair_reader.safetensors \\
        --after palace_retrievers/memory/learned/data/pair_reader.safetensors --alone
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from palace_retrievers.memory.learned import pair_reader

BATCH = 64


def read_all(path: Path, asked: Sequence[tuple[str, str]]) -> list[dict[str, float]]:
    """The reader in ``path``'s probabilities for every pair of ``asked``."""
    reader = pair_reader.Reader(path)
    return [
        row
        for i in range(0, len(asked), BATCH)
        for row in reader.probabilities(asked[i : i + BATCH])
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--before", type=Path, required=True, help="the rows' reader")
    parser.add_argument("--after", type=Path, required=True, help="the reader wanted")
    parser.add_argument("--alone", action="store_true", help="the --after reader alone")
    args = parser.parse_args(argv)
    with args.rows.open(encoding="utf-8") as stream:
        rows = [json.loads(line) for line in stream if line.strip()]
    judged = [c for row in rows for c in row["candidates"] if c["learned"] is not None]
    asked = [
        (c["text"], row["new"])
        for row in rows
        for c in row["candidates"]
        if c["learned"] is not None
    ]
    after = read_all(args.after, asked)
    before = after if args.alone else read_all(args.before, asked)
    for c, new, old in zip(judged, after, before, strict=True):
        if args.alone:
            c["learned"] = {label: round(float(new[label]), 5) for label in c["learned"]}
        else:
            c["learned"] = {
                label: round(c["learned"][label] + (new[label] - old[label]) / 2, 5)
                for label in c["learned"]
            }
    with args.out.open("w", encoding="utf-8") as stream:
        for row in rows:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(judged)} candidates of {len(rows)} rows read again")
    return 0


if __name__ == "__main__":
    sys.exit(main())
