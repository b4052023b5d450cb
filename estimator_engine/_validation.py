"""Argument checks shared by the Estimator and the train_and_evaluate specs."""

from __future__ import annotations

import numbers
from typing import Any


def step_count(name: str, value: Any, none_text: str = "") -> int | None:
    """``value`` as an int > 0 (or None): numpy ints and whole floats pass, as TF only checks ``> 0``.

    ``none_text`` is added to the message when None is allowed and worth saying (" or None").
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"Must specify {name} as a whole number > 0{none_text}, given: {value!r}")
    # typeshed's numbers.Real declares no __int__; every Real that reaches here (int, float, numpy, Fraction) has it.
    whole = int(value)  # type: ignore[call-overload]
    if value != whole:
        raise ValueError(f"Must specify {name} as a whole number > 0{none_text}, given: {value!r}")
    if value <= 0:
        raise ValueError(f"Must specify {name} > 0{none_text}, given: {value!r}")
    return whole
