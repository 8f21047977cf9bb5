"""The memory page: a small web app where a person sees and corrects what the palace keeps.

``palace serve`` runs it (:func:`serve`); :func:`create_app` gives the Starlette app of an
open palace, for embedding or for tests.
"""

from palace_retrievers.web.app import create_app
from palace_retrievers.web.server import UnsafeBindError, serve

__all__ = ["UnsafeBindError", "create_app", "serve"]
