"""Search filters as SQL: :func:`where_sql`."""

from __future__ import annotations

from typing import Any

from palace_retrievers.records import Filter


def where_sql(where: Filter | None, alias: str = "") -> tuple[str, list[Any]]:
    """A condition (written with ``?``) and its parameters for ``where`` over a
    drawers-like table (``alias``: the table's alias in the statement)."""
    if where is None:
        return "TRUE", []
    p = f"{alias}." if alias else ""
    clauses = [f"{p}user_id = ?"]
    params: list[Any] = [where.owner]
    for column in ("wing", "room", "kind"):
        value = getattr(where, column)
        if value is not None:
            clauses.append(f"{p}{column} = ?")
            params.append(value)
    if where.since is not None:
        clauses.append(f"{p}ts >= ?")
        params.append(where.since.timestamp())
    if where.until is not None:
        clauses.append(f"{p}ts <= ?")
        params.append(where.until.timestamp())
    return " AND ".join(clauses), params
