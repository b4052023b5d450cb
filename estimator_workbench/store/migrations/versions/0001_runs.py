"""The runs table (schema version 1).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    columns = [
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("dataset_json", sa.Text, nullable=False),
        sa.Column("dataset_fingerprint", sa.Text),
        sa.Column("template_name", sa.Text),
        sa.Column("template_code", sa.Text),
        sa.Column("params_json", sa.Text, nullable=False),
        sa.Column("run_config_json", sa.Text, nullable=False),
        sa.Column("schedule_json", sa.Text, nullable=False, server_default="{}"),
        sa.Column("parent_run_id", sa.Text),
        sa.Column("parent_relation", sa.Text),
        sa.Column("checkpoint_path", sa.Text),
        sa.Column("num_processes", sa.Integer, nullable=False, server_default="1"),
        sa.Column("pid", sa.Integer),
        sa.Column("heartbeat_at", sa.Float(53)),
        sa.Column("created_at", sa.Float(53), nullable=False),
        sa.Column("started_at", sa.Float(53)),
        sa.Column("finished_at", sa.Float(53)),
        sa.Column("error", sa.Text),
        sa.Column("traceback", sa.Text),
        sa.Column("summary_json", sa.Text, nullable=False, server_default="{}"),
        sa.Column("tags_json", sa.Text, nullable=False, server_default="[]"),
        sa.Column("note", sa.Text, nullable=False, server_default=""),
    ]
    if op.get_bind().dialect.name != "sqlite":
        # SQLite's implicit rowid made explicit: the insertion order that breaks ties of
        # created_at in RunRegistry.list_runs (ORDER BY created_at, rowid).
        columns.append(sa.Column("rowid", sa.BigInteger, sa.Identity(), nullable=False, unique=True))
    op.create_table("runs", *columns)
    op.create_index("runs_status", "runs", ["status"])
    op.create_index("runs_created", "runs", ["created_at"])
    op.create_table("schema_version", sa.Column("version", sa.Integer, nullable=False),
                    if_not_exists=True)
    op.execute("INSERT INTO schema_version (version) VALUES (1)")
