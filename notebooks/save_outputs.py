"""Run notebooks top to bottom and save them with their outputs, for readers on GitHub.

    .venv/bin/python notebooks/save_outputs.py notebooks/*.ipynb

`make test` executes the notebooks (nbmake) but never writes them; run this after
changing a notebook, or what it shows, and commit the result. It uses nbclient (which
nbmake brings) rather than nbconvert, which the project does not install. Timing
metadata is left out and each cell's printed lines are kept as one block, so a re-run
changes only what really changed; the notebook's own metadata is kept as it was.

It stops on an output that would read badly on GitHub: anything written to stderr (a
warning, a progress bar) and any path of this machine (a temporary folder, the
checkout). Print paths relative to the corpus or export a notebook reads instead.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

#: A path that belongs to the machine the notebook ran on, not to the reader's.
MACHINE_PATH = re.compile(r"/tmp/|/var/folders/|/home/|/Users/|/work/|\btmp[a-z0-9_]{8}\b")


def merged(outputs: list[Any]) -> list[Any]:
    """Consecutive stream outputs of one name joined, as a reader sees them."""
    out: list[Any] = []
    for item in outputs:
        last = out[-1] if out else None
        if (
            last is not None
            and item.output_type == "stream" == last.output_type
            and item.name == last.name
        ):
            last.text += item.text
        else:
            out.append(item)
    return out


def problems(nb: Any) -> list[str]:
    """What would read badly: stderr outputs and machine paths, by cell."""
    found = []
    for index, cell in enumerate(nb.cells):
        for item in cell.get("outputs", []):
            text = item.get("text") or str(item.get("data", {}).get("text/plain", ""))
            if item.get("name") == "stderr":
                found.append(f"cell {index}: stderr: {text[:200]!r}")
            for match in MACHINE_PATH.finditer(text):
                around = text[max(0, match.start() - 60) : match.end() + 60]
                found.append(f"cell {index}: a path of this machine: {around!r}")
    return found


def save(path: Path) -> list[str]:
    """Execute ``path`` in its own folder and write it back with its outputs."""
    nb = nbformat.read(path, as_version=4)
    metadata = nb.metadata
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    nb.metadata = metadata
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = merged(cell.outputs)
    found = problems(nb)
    if not found:
        nbformat.write(nb, path)
    return found


def main(paths: list[str]) -> int:
    failed = False
    for name in paths:
        path = Path(name).resolve()
        found = save(path)
        for problem in found:
            print(f"{path.name}: {problem}", file=sys.stderr)
        print(f"{path.name}: {'NOT saved' if found else 'saved'}")
        failed = failed or bool(found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
