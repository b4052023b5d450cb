"""Issue 26.4, a team on one server: who owns each run, and the audit log of the actions taken on
runs (stop, cancel, resume, delete to the trash, restore, empty the trash) (schema version 5).

Runs registered before this revision have no owner (NULL): anyone signed in may act on them.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("owner", sa.Text))
    op.create_index("runs_owner", "runs", ["owner"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Float(53), nullable=False),        # Unix seconds
        sa.Column("actor", sa.Text, nullable=False),          # who (the signed-in user, or the OS user)
        sa.Column("action", sa.Text, nullable=False),         # stop, cancel, resume, trash, restore, delete
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("outcome", sa.Text, nullable=False),        # done, refused
        sa.Column("detail", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("audit_log_run", "audit_log", ["run_id"])
    op.execute("INSERT INTO schema_version (version) VALUES (5)")
