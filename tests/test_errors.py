"""One error hierarchy: every error class lives in :mod:`palace_retrievers.errors`, is a
:class:`~palace_retrievers.PalaceError` and can be caught from the package; the modules
that raise them keep their old names as re-exports."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import palace_retrievers
from palace_retrievers import errors

ROOT = Path(__file__).resolve().parent.parent


def test_every_error_is_a_palace_error_exported_from_the_package() -> None:
    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    assert len(classes) >= 20
    for error in classes:
        assert issubclass(error, palace_retrievers.PalaceError), error
        assert getattr(palace_retrievers, error.__name__) is error
        assert error.__name__ in palace_retrievers.__all__
        assert error.__doc__, error


def test_no_error_class_is_defined_outside_errors_py() -> None:
    outside = []
    for package in ("palace_retrievers", "palace_plugins"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "palace_retrievers" / "errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                    outside.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert outside == []


def test_the_old_import_paths_still_work() -> None:
    from palace_plugins.builtin.embedders import onnx_embedding
    from palace_retrievers.ledger.postgres.connection import LedgerUnavailableError
    from palace_retrievers.transfer import BadRecordError
    from palace_retrievers.web import UnsafeBindError
    from palace_retrievers.web.pages import PageError
    from palace_retrievers.web.server import UnsafeBindError as ServerUnsafeBindError

    assert LedgerUnavailableError is errors.LedgerUnavailableError
    assert BadRecordError is errors.BadRecordError
    assert issubclass(BadRecordError, errors.InvalidQueryError)
    assert UnsafeBindError is ServerUnsafeBindError is errors.UnsafeBindError
    assert PageError is errors.PageError
    assert onnx_embedding.UnsupportedError is errors.OnnxUnsupportedError
    page = PageError(404, "no drawer 'x' for this user")
    assert (page.status, page.message, str(page)) == (
        404,
        "no drawer 'x' for this user",
        page.message,
    )
