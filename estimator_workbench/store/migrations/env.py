"""alembic's environment for the run registry: migrations always run programmatically, on the
connection (and inside the transaction) that ``estimator_workbench.store.migrations.upgrade``
passes in ``config.attributes['connection']``; there is no alembic.ini."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, transactional_ddl=True)
with context.begin_transaction():  # the caller's transaction when one is open
    context.run_migrations()
