"""alembic's environment for the run registry: migrations always run programmatically, on the
connection (and inside the transaction) that ``estimator_workbench.store.migrations.upgrade``
passes in ``config.attributes['connection']``; there is no alembic.ini."""

from __future__ import annotations

from alembic import context


def run_migrations() -> None:
    connection = context.config.attributes["connection"]
    # Not alembic's default "alembic_version": Optuna's RDB storage keeps its own revision there
    # when sweeps share the database.
    context.configure(connection=connection, transactional_ddl=True,
                      version_table=context.config.attributes["version_table"])
    with context.begin_transaction():  # the caller's transaction when one is open
        context.run_migrations()


if hasattr(context, "config"):  # run by alembic (a plain import, e.g. a layering check, is a no-op)
    run_migrations()
