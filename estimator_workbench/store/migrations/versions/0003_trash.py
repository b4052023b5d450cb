"""The trash (estimator_workbench.store.trash): when a run was moved there (schema version 3).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("trashed_at", sa.Float(53)))
    op.execute("INSERT INTO schema_version (version) VALUES (3)")
