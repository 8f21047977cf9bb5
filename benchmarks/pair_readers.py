"""Pair readers the palace can load, side by side, per language, on the blind sets.

``train_pair_reader.py`` prints these tables for the reader it has just trained; this
prints them for readers already on disk (the shipped one, or one trained earlier), so a
new reader is compared with them on the same pairs: update and duplicate precision /
recall by threshold, for the reader alone, after the structural matcher, and with the
shipped pair model (:func:`train_pair_reader.table`).

Usage::

    .venv/bin/python benchmarks/pair_readers.py \\
        palace_retrievers/memory/learned/data/pair_reader.safetensors OTHER.safetensors \\
        --measure memory_pairs_heldout16.jsonl memory_pairs_heldout17.jsonl
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory import BLIND, load_pairs, reader_probabilities
from train_pair_reader import tables

from palace_retrievers.memory.learned import pair_reader


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readers", nargs="+", type=Path)
    parser.add_argument("--measure", nargs="+", default=list(BLIND), help="the sets measured")
    args = parser.parse_args(argv)
    test = [p for name in args.measure for p in load_pairs(name)]
    tables(
        test,
        {
            f"{path}, on {', '.join(args.measure)}": reader_probabilities(
                test, pair_reader.Reader(path)
            )
            for path in args.readers
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
