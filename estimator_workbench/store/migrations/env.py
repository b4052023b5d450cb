"""alembic's environment for the run registry: migrations always run programmatically, on the
connection (and inside the transaction) that ``estimator_workbench.store.migrations.upgrade``
passes in ``config.attributes['connection']``; there is no alembic.ini."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
# Not alembic's default "alembic_version": Optuna's RDB storage keeps its own revision there when
# sweeps share the database.
context.configure(connection=connection, transactional_ddl=True,
                  version_table=context.config.attributes["version_table"])
with context.begin_transaction():  # the caller's transaction when one is open
    context.run_migrations()
