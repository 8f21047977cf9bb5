"""Closets in a SQL ledger (tables ``closets`` and ``closet_drawers``).

A closet points only to drawers that exist, and one left pointing to none is deleted in
the same transaction that left it so (:func:`delete_orphan_closets`).
"""

from __future__ import annotations

from palace_retrievers.ledger.sql.store import Session


def delete_orphan_closets(db: Session) -> list[str]:
    """Delete the closets that point to no drawer; returns their ids, sorted."""
    rows = db.execute(
        "DELETE FROM closets WHERE NOT EXISTS "
        "(SELECT 1 FROM closet_drawers l WHERE l.closet_id = closets.id) RETURNING id"
    ).fetchall()
    return sorted(row[0] for row in rows)
