"""Pending purge approvals (URL-mode elicitation) and the archived set a purge binds.

A purge's round 1 stores the exact archived set here with the SHA-256 of a one-time link secret;
the approval page (any worker, any instance) spends the link once and records the approval; the
purge's round 2 reads the row inside its own write transaction. Wrong credentials typed on the
page are counted on the row, so the limit holds across workers and instances. Portable Core
only: none of this is on a hot path. Callers pass the connection and own the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, delete, select, update

from notes_server.store.models import notes_table as notes
from notes_server.store.models import purge_approvals_table as approvals
from notes_server.store.notes import COLUMNS, NoteRecord

MAX_ATTEMPTS = 5
"""Wrong sign-ins after which an approval is locked: it can never be completed."""

Item = tuple[str, int, str]
"""(note id, version, title) of one archived note in the bound set."""


@dataclass(frozen=True, slots=True)
class Approval:
    id: str
    principal: str
    workspace: str
    items: tuple[Item, ...]
    set_digest: str
    expires_at: datetime
    link_used: bool
    approved_at: datetime | None
    failed_sign_ins: int

    @property
    def locked(self) -> bool:
        return self.failed_sign_ins >= MAX_ATTEMPTS


def archived_notes(conn: Connection, workspace: str) -> list[NoteRecord]:
    """Every archived note in the workspace, oldest id first (a stable order for the digest)."""
    query = (
        select(*COLUMNS)
        .where(notes.c.workspace == workspace, notes.c.archived.is_(True))
        .order_by(notes.c.id)
    )
    return [NoteRecord.from_row(row) for row in conn.execute(query)]


def create(
    conn: Connection,
    *,
    approval_id: str,
    principal: str,
    workspace: str,
    link_hash: str,
    items: Sequence[Item],
    set_digest: str,
    now: datetime,
    expires_at: datetime,
) -> None:
    conn.execute(
        approvals.insert().values(
            id=approval_id,
            principal=principal,
            workspace=workspace,
            link_hash=link_hash,
            link_used=False,
            items_json=json.dumps([list(item) for item in items]),
            set_digest=set_digest,
            created_at=now,
            expires_at=expires_at,
            approved_at=None,
        )
    )


def get(conn: Connection, approval_id: str) -> Approval | None:
    row = conn.execute(select(approvals).where(approvals.c.id == approval_id)).mappings().first()
    if row is None:
        return None
    items = tuple((str(i), int(v), str(t)) for i, v, t in json.loads(row["items_json"]))
    return Approval(
        id=row["id"],
        principal=row["principal"],
        workspace=row["workspace"],
        items=items,
        set_digest=row["set_digest"],
        expires_at=row["expires_at"],
        link_used=bool(row["link_used"]),
        approved_at=row["approved_at"],
        failed_sign_ins=int(row["failed_sign_ins"]),
    )


def spend_link(conn: Connection, approval_id: str, link_hash: str, now: datetime) -> bool:
    """Mark the one-time link used; False if it is wrong, already used or expired."""
    result = conn.execute(
        update(approvals)
        .where(
            approvals.c.id == approval_id,
            approvals.c.link_hash == link_hash,
            approvals.c.link_used.is_(False),
            approvals.c.expires_at > now,
        )
        .values(link_used=True)
    )
    return result.rowcount == 1


def count_failed_sign_in(conn: Connection, approval_id: str, now: datetime) -> int | None:
    """Count one wrong credential for a pending approval in a single atomic UPDATE (two pages
    racing on two instances both count); the new count, `MAX_ATTEMPTS` exactly once for the
    refusal that locks it. None when there is nothing left to guard: the approval is gone,
    expired, already approved or already locked."""
    row = conn.execute(
        update(approvals)
        .where(
            approvals.c.id == approval_id,
            approvals.c.approved_at.is_(None),
            approvals.c.expires_at > now,
            approvals.c.failed_sign_ins < MAX_ATTEMPTS,
        )
        .values(failed_sign_ins=approvals.c.failed_sign_ins + 1)
        .returning(approvals.c.failed_sign_ins)
    ).first()
    return None if row is None else int(row[0])


def approve(conn: Connection, approval_id: str, principal: str, now: datetime) -> bool:
    """Record the page's approval once, for the principal that started the purge, unless the
    approval was locked by wrong sign-ins meanwhile."""
    result = conn.execute(
        update(approvals)
        .where(
            approvals.c.id == approval_id,
            approvals.c.principal == principal,
            approvals.c.link_used.is_(True),
            approvals.c.approved_at.is_(None),
            approvals.c.expires_at > now,
            approvals.c.failed_sign_ins < MAX_ATTEMPTS,
        )
        .values(approved_at=now)
    )
    return result.rowcount == 1


def discard(conn: Connection, approval_id: str) -> None:
    conn.execute(delete(approvals).where(approvals.c.id == approval_id))


def prune(conn: Connection, *, expired_before: datetime) -> int:
    result = conn.execute(delete(approvals).where(approvals.c.expires_at < expired_before))
    return result.rowcount
