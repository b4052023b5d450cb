"""Issue 14: the owning attempt (fencing token), the pid's start time, training progress
(schema version 2).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("attempt", sa.Integer, nullable=False, server_default="0"))
    op.add_column("runs", sa.Column("pid_started", sa.Float(53)))
    op.add_column("runs", sa.Column("last_step", sa.BigInteger))
    op.add_column("runs", sa.Column("last_step_at", sa.Float(53)))
    op.execute("INSERT INTO schema_version (version) VALUES (2)")
