"""Issue 24: the heartbeat on the clock since boot too (guards.uptime), which a step of the wall
clock does not move (schema version 4).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("heartbeat_uptime", sa.Float(53)))
    op.execute("INSERT INTO schema_version (version) VALUES (4)")
