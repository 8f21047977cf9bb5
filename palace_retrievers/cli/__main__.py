"""``python -m palace_retrievers.cli``: the ``palace`` command."""

from palace_retrievers.cli import main

main()
