"""The names a palace's collections take on a server that several palaces may share.

An embedded index lives inside the palace's own folder, so its collections can be called
plainly ``palace_drawers``. A server (PostgreSQL, a ``chroma run`` server, a Qdrant
server) may hold the indexes of many palaces, so there each palace's collections carry a
*namespace*: the ``namespace`` option when it is set, else one derived from the palace's
directory, ``palace_<folder name>_<8 hex digits of the resolved path's hash>``. A palace
whose folder moves therefore gets a new (empty) namespace: it answers by exact scan, says
so in ``palace status``, and ``palace reindex`` fills the new namespace. Palaces that
several machines open through different paths must set ``namespace`` to share one index.
"""

from __future__ import annotations

import re
from pathlib import Path

from palace_retrievers.errors import ConfigError
from palace_retrievers.ids import palace_name

#: Longest namespace: PostgreSQL names are at most 63 bytes, and a table and its indexes
#: append up to 20 characters.
MAX_LENGTH = 40
_VALID = re.compile(r"^[a-z][a-z0-9_]*$")


def namespace(palace_dir: Path, option: object, *, backend: str) -> str:
    """The namespace to use: the ``namespace`` option, checked, or the default.

    Raises:
        ConfigError: the option is not a lower-case identifier of at most 40 characters.
    """
    if option is None or option == "":
        return palace_name(palace_dir)
    if not isinstance(option, str) or not _VALID.match(option) or len(option) > MAX_LENGTH:
        raise ConfigError(
            f"backend {backend!r}: namespace must be a lower-case name of letters, digits "
            f"and _ starting with a letter, at most {MAX_LENGTH} characters; got {option!r}"
        )
    return option
