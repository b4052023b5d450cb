"""The words of a dataset spec: column roles and types, and what becomes of a missing value or of
a date or text column. Kept free of pandas, so the CLI's parser can list them in ``--help``
without importing it (0.2 s before a ``run`` could start its runner).

Example:
    >>> from estimator_workbench.data.choices import ROLES
    >>> ROLES
    ('feature', 'label', 'ignore', 'weight')
"""

from __future__ import annotations

__all__ = ["CATEGORICAL", "CATEGORICAL_MISSING", "DATE", "DATE_ENCODINGS", "DTYPES", "FEATURE", "IGNORE", "LABEL",
           "LABEL_MISSING", "NUMERIC", "NUMERIC_MISSING", "ROLES", "TEXT_ENCODINGS", "WEIGHT"]

FEATURE, LABEL, IGNORE, WEIGHT = "feature", "label", "ignore", "weight"

ROLES = (FEATURE, LABEL, IGNORE, WEIGHT)

NUMERIC, CATEGORICAL, DATE = "numeric", "categorical", "date"

#: A column's type; what becomes of a date or text column is its encoding (below).
DTYPES = (NUMERIC, CATEGORICAL, DATE)

# Missing values: numbers take the training mean, zero, or drop their rows; categories become
# one more category; a missing label is an error or drops its row.
NUMERIC_MISSING = ("mean", "zero", "drop")
CATEGORICAL_MISSING = ("missing-token",)
LABEL_MISSING = ("error", "drop")

#: What becomes of a date column: its year, month and day of week as numeric features, or nothing.
DATE_ENCODINGS = ("expand", "ignore")

#: What becomes of a categorical feature: a vocabulary lookup (the default), hash buckets, a
#: vocabulary lookup that is always embedded (also in one-hot models), or nothing.
TEXT_ENCODINGS = ("vocabulary", "hash", "embedding", "ignore")
