"""What a sweep is: its parameter space (``ParamSpec``) and its settings (``SweepSpec``), parsed
from the CLI's ``--param NAME=LOW:HIGH[:log|:int]`` / ``NAME=a,b,c`` strings or the Train page's
form, and checked against the template's ``PARAMS`` before any run exists.

Nothing here imports Optuna at module level: ``ParamSpec.distribution`` and ``make_sampler`` build
Optuna's objects when a study is made.

Example:
    >>> p = parse_param("learning_rate=0.0001:0.1:log")
    >>> (p.name, p.kind, p.low, p.high, p.log)
    ('learning_rate', 'float', 0.0001, 0.1, True)
    >>> parse_param("hidden_units=32,64,32").choices
    ('32', '64', '32')
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DIRECTIONS", "GRID_MAX_POINTS", "NAME_PATTERN", "SAMPLERS", "ParamSpec", "SweepSpec",
           "SweepSpecError", "check_metric", "default_direction", "grid_space", "make_pruner",
           "make_sampler", "parse_param", "resolve_params", "validate_name"]

SAMPLERS = ("tpe", "random", "grid")
DIRECTIONS = ("maximize", "minimize")
GRID_MAX_POINTS = 10_000  # an int range expands to its values on a grid; more than this is a mistake
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FLAGS = ("log", "int")


class SweepSpecError(ValueError):
    """A sweep request that cannot run (every problem in one message)."""


@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """One searched ``params`` entry: a range (``float``/``int``, optionally log-scaled) or a list
    of choices (``categorical``).

    Example:
        >>> ParamSpec("dropout", "float", low=0.0, high=0.5).to_text()
        'dropout=0.0:0.5'
    """

    name: str
    kind: str  # 'float' | 'int' | 'categorical'
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

    def to_text(self) -> str:
        """The ``--param`` form of this spec (round-trips through ``parse_param``)."""
        if self.kind == "categorical":
            return f"{self.name}=" + ",".join(str(c) for c in self.choices)
        flags = (":int" if self.kind == "int" else "") + (":log" if self.log else "")
        return f"{self.name}={self.low}:{self.high}{flags}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "low": self.low, "high": self.high,
                "log": self.log, "choices": list(self.choices)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ParamSpec:
        return cls(name=str(data["name"]), kind=str(data["kind"]), low=data.get("low"),
                   high=data.get("high"), log=bool(data.get("log")),
                   choices=tuple(data.get("choices") or ()))

    def distribution(self) -> Any:
        """The Optuna distribution of this spec."""
        from optuna.distributions import (
            CategoricalDistribution,
            FloatDistribution,
            IntDistribution,
        )

        if self.kind == "categorical":
            return CategoricalDistribution(list(self.choices))
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log)  # type: ignore[arg-type]
        return FloatDistribution(float(self.low), float(self.high), log=self.log)  # type: ignore[arg-type]


def _number(text: str) -> float | int | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_param(text: str) -> ParamSpec:
    """``NAME=LOW:HIGH[:log][:int]`` (a range) or ``NAME=a,b,c`` (choices) -> ``ParamSpec``.

    A range's kind is ``int`` with ``:int`` (or when the template says the param is an int, see
    ``resolve_params``), else ``float``. Raises ``SweepSpecError`` saying what to write instead.
    """
    if not isinstance(text, str) or "=" not in text:
        raise SweepSpecError(f"--param {text!r} must look like NAME=LOW:HIGH[:log|:int] or "
                             "NAME=a,b,c, e.g. learning_rate=0.0001:0.1:log or hidden_units=32,64,32.")
    name, _, value = (part.strip() for part in text.partition("="))
    if not name.isidentifier():
        raise SweepSpecError(f"--param {text!r}: {name!r} is not a param name (letters, digits, _).")
    if not value:
        raise SweepSpecError(f"--param {text!r} gives no values: write {name}=LOW:HIGH or {name}=a,b,c.")
    if ":" in value:
        if "," in value:
            raise SweepSpecError(f"--param {text!r} mixes a range (':') and a list (','): use one, "
                                 f"e.g. {name}=0.001:0.1 or {name}=0.001,0.01,0.1.")
        low_text, high_text, *flags = (part.strip() for part in value.split(":"))
        unknown = [f for f in flags if f not in _FLAGS]
        if unknown:
            raise SweepSpecError(f"--param {text!r}: unknown flag {unknown[0]!r}; a range takes "
                                 f":log and/or :int (e.g. {name}=0.0001:0.1:log).")
        low, high = _number(low_text), _number(high_text)
        if low is None or high is None:
            raise SweepSpecError(f"--param {text!r}: LOW and HIGH must be numbers, given "
                                 f"{low_text!r} and {high_text!r}.")
        log, as_int = "log" in flags, "int" in flags
        if as_int and (not isinstance(low, int) or not isinstance(high, int)):
            raise SweepSpecError(f"--param {text!r}: an :int range needs whole numbers, given "
                                 f"{low_text!r}:{high_text!r}.")
        if low >= high:
            raise SweepSpecError(f"--param {text!r}: LOW must be below HIGH, given {low} >= {high}; "
                                 f"swap them ({name}={high_text}:{low_text}) or list one value "
                                 f"({name}={low_text},).")
        if log and low <= 0:
            raise SweepSpecError(f"--param {text!r}: a log range needs LOW > 0, given {low}; "
                                 f"e.g. {name}=0.0001:{high_text}:log.")
        return ParamSpec(name, "int" if as_int else "float", low=low if as_int else float(low),
                         high=high if as_int else float(high), log=log)
    choices = tuple(c.strip() for c in value.split(",") if c.strip())
    if not choices:
        raise SweepSpecError(f"--param {text!r} lists no values: write {name}=a,b,c.")
    return ParamSpec(name, "categorical", choices=choices)


def _typed_choice(name: str, value: Any, schema: Mapping[str, Any]) -> Any:
    """A choice as the template's param type wants it (the CLI gives text)."""
    kind = schema.get("type")
    if not isinstance(value, str):
        return value
    if kind == "int":
        number = _number(value)
        if not isinstance(number, int):
            raise SweepSpecError(f"--param {name}: {value!r} is not an int (the template's {name} is an int).")
        return number
    if kind == "float":
        number = _number(value)
        if number is None:
            raise SweepSpecError(f"--param {name}: {value!r} is not a number (the template's {name} is a float).")
        return float(number)
    if kind == "bool":
        lowered = value.lower()
        if lowered not in ("true", "false", "1", "0"):
            raise SweepSpecError(f"--param {name}: {value!r} is not true or false.")
        return lowered in ("true", "1")
    return value


def resolve_params(specs: Sequence[ParamSpec], schema: Mapping[str, Mapping[str, Any]]) -> list[ParamSpec]:
    """Checks every spec against the template's ``PARAMS`` schema and types it: an int param's
    range becomes an int range, choices take the param's type, bounds must lie within the
    schema's ``min``/``max``. Collects every problem into one ``SweepSpecError``."""
    from estimator_workbench import templates

    problems: list[str] = []
    resolved: list[ParamSpec] = []
    seen: set[str] = set()
    known = sorted(k for k in schema if k != "task")
    for spec in specs:
        if spec.name in seen:
            problems.append(f"--param {spec.name} is given twice; give each param once.")
            continue
        seen.add(spec.name)
        entry = schema.get(spec.name)
        if entry is None or spec.name == "task":
            problems.append(f"--param {spec.name}: the template has no param {spec.name!r}; "
                            f"its params are {known}.")
            continue
        kind = entry.get("type")
        try:
            if spec.kind == "categorical":
                typed = tuple(_typed_choice(spec.name, c, entry) for c in spec.choices)
                for choice in typed:
                    templates.validate_params({spec.name: dict(entry)}, {spec.name: choice})
                resolved.append(dataclasses.replace(spec, choices=tuple(dict.fromkeys(typed))))
                continue
            if kind not in ("int", "float"):
                raise SweepSpecError(f"--param {spec.name}: the template's {spec.name} is a {kind}, "
                                     f"not a number: list values instead ({spec.name}=a,b,c).")
            if kind == "int":
                if not (float(spec.low).is_integer() and float(spec.high).is_integer()):  # type: ignore[arg-type]
                    raise SweepSpecError(f"--param {spec.to_text()}: the template's {spec.name} is an "
                                         "int; give whole bounds.")
                spec = dataclasses.replace(spec, kind="int", low=int(spec.low), high=int(spec.high))  # type: ignore[arg-type]
            elif spec.kind == "int":
                spec = dataclasses.replace(spec, kind="float", low=float(spec.low), high=float(spec.high))  # type: ignore[arg-type]
            for bound in (spec.low, spec.high):
                templates.validate_params({spec.name: dict(entry)}, {spec.name: bound})
            resolved.append(spec)
        except ValueError as exc:
            text = str(exc)
            problems.append(text if text.startswith("--param") else f"--param {spec.to_text()}: {text}")
    if problems:
        raise SweepSpecError("Invalid sweep: " + " ".join(problems))
    return resolved


def grid_space(specs: Sequence[ParamSpec]) -> dict[str, list[Any]]:
    """The grid sampler's search space: choices as given, int ranges expanded; a float range has
    no grid (``SweepSpecError`` saying to list values)."""
    space: dict[str, list[Any]] = {}
    problems = []
    for spec in specs:
        if spec.kind == "categorical":
            space[spec.name] = list(spec.choices)
        elif spec.kind == "int" and not spec.log and int(spec.high) - int(spec.low) < GRID_MAX_POINTS:  # type: ignore[arg-type]
            space[spec.name] = list(range(int(spec.low), int(spec.high) + 1))  # type: ignore[arg-type]
        else:
            problems.append(f"--param {spec.to_text()} is a continuous range, which a grid cannot "
                            f"enumerate: list the values to try, e.g. {spec.name}="
                            + ",".join(_example_values(spec)) + ", or choose --sampler tpe or random.")
    if problems:
        raise SweepSpecError("Invalid sweep: " + " ".join(problems))
    return space


def _example_values(spec: ParamSpec) -> list[str]:
    low, high = float(spec.low), float(spec.high)  # type: ignore[arg-type]
    if spec.log:
        values = [low, math.sqrt(low * high), high]
    else:
        values = [low, (low + high) / 2, high]
    return [f"{int(v)}" if spec.kind == "int" else f"{v:.3g}" for v in values]


def default_direction(metric: str) -> str:
    """``minimize`` for names with 'loss' or 'error' in them, else ``maximize``."""
    lowered = metric.lower()
    return "minimize" if "loss" in lowered or "error" in lowered else "maximize"


def check_metric(metric: str, produced: Sequence[str], template: str) -> None:
    """Refuses a metric the template's evaluation does not produce (``produced``: eval metric keys,
    ``loss`` included)."""
    if metric not in produced:
        raise SweepSpecError(f"--metric {metric!r}: the template {template!r} does not produce it on "
                             f"this dataset; its evaluation gives {sorted(produced)}.")


def validate_name(name: str) -> str:
    """A sweep name is also a folder name: letters, digits, '_', '.', '-' (64 at most)."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SweepSpecError(f"Sweep name {name!r} must start with a letter or digit and hold only "
                             "letters, digits, '_', '.', '-' (64 characters at most), e.g. lr-search.")
    return name


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """A sweep: a study of ``trials`` runs of ``template`` on ``dataset`` for ``steps`` steps each,
    ``parallel`` at once, their ``params`` drawn by ``sampler`` from ``space`` and judged by the
    final evaluation's ``metric`` (``direction``). Stored as the study's ``sweep`` user attribute.

    Args:
        name: the study name (and the folder ``<workspace>/sweeps/<name>``).
        dataset: a DatasetSpec dict with its fingerprint (as a run takes it).
        template: ``{'name', 'code'}``.
        base_params: params every trial starts from (the template's defaults, or the form's).
        space: the searched params.
        steps: ``max_steps`` of each trial; evaluations every ``eval_every`` steps feed the pruner.
        sampler: ``tpe``, ``random`` or ``grid``.
        pruner: ``median`` (Optuna's MedianPruner) or ``none``.
        prune_after: trials that must finish before pruning starts (MedianPruner's n_startup_trials).
        seed: the ``tf_random_seed`` of every trial (same for all: differences come from params)
            and the sampler's seed.
        run_config / schedule: extra RunConfig fields and schedule keys of every trial.

    Example:
        >>> spec = SweepSpec(name="lr", dataset={}, template={"name": "t", "code": ""},
        ...                  base_params={}, space=(parse_param("learning_rate=0.001:0.1:log"),),
        ...                  steps=100, trials=8, parallel=2, metric="accuracy")
        >>> spec.direction, spec.eval_every
        ('maximize', 20)
    """

    name: str
    dataset: Mapping[str, Any]
    template: Mapping[str, Any]
    base_params: Mapping[str, Any]
    space: tuple[ParamSpec, ...]
    steps: int
    trials: int
    parallel: int
    metric: str
    direction: str = ""
    sampler: str = "tpe"
    pruner: str = "median"
    prune_after: int = 5
    eval_every: int = 0
    seed: int = 0
    run_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    schedule: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.direction:
            object.__setattr__(self, "direction", default_direction(self.metric))
        if not self.eval_every and isinstance(self.steps, int) and self.steps > 0:
            object.__setattr__(self, "eval_every", max(1, self.steps // 5))
        problems = []
        try:
            validate_name(self.name)
        except SweepSpecError as exc:
            problems.append(str(exc))
        for field, least in (("steps", 1), ("trials", 1), ("parallel", 1), ("eval_every", 1),
                             ("prune_after", 0)):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                problems.append(f"--{field.replace('_', '-')} must be an int >= {least}, given {value!r}.")
        if self.sampler not in SAMPLERS:
            problems.append(f"--sampler must be one of {list(SAMPLERS)}, given {self.sampler!r}.")
        if self.direction not in DIRECTIONS:
            problems.append(f"--direction must be one of {list(DIRECTIONS)}, given {self.direction!r}.")
        if self.pruner not in ("median", "none"):
            problems.append(f"--pruner must be 'median' or 'none', given {self.pruner!r}.")
        if not isinstance(self.metric, str) or not self.metric:
            problems.append(f"--metric must name an eval metric (e.g. accuracy or loss), given {self.metric!r}.")
        if not self.space:
            problems.append("A sweep needs at least one --param to search, e.g. "
                            "--param learning_rate=0.0001:0.1:log.")
        if problems:
            raise SweepSpecError("Invalid sweep: " + " ".join(problems))
        if self.sampler == "grid":
            grid_space(self.space)

    @property
    def grid_size(self) -> int | None:
        """Points of the grid (``sampler='grid'``), else None."""
        if self.sampler != "grid":
            return None
        return math.prod(len(values) for values in grid_space(self.space).values())

    @property
    def planned_trials(self) -> int:
        """``trials``, at most the grid's size."""
        size = self.grid_size
        return self.trials if size is None else min(self.trials, size)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["space"] = [p.to_dict() for p in self.space]
        for key in ("dataset", "template", "base_params", "run_config", "schedule"):
            out[key] = dict(out[key])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepSpec:
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["space"] = tuple(ParamSpec.from_dict(p) for p in data.get("space") or ())
        return cls(**values)


def make_sampler(spec: SweepSpec) -> Any:
    """Optuna's sampler for ``spec.sampler`` (seeded with ``spec.seed``). TPE uses the constant
    liar so that trials running in parallel are not proposed the same point."""
    import optuna

    if spec.sampler == "grid":
        class AskTellGridSampler(optuna.samplers.GridSampler):
            """Optuna's grid for the driver's ask/tell loop. GridSampler.after_trial calls
            ``study.stop()`` once the grid is used up, which only ``study.optimize`` accepts:
            the driver's last ``tell`` raised RuntimeError and the sweep failed. The driver
            stops by itself after ``planned_trials`` (at most the grid's size)."""

            def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
                pass

        return AskTellGridSampler(grid_space(spec.space), seed=spec.seed)
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=spec.seed)
    return optuna.samplers.TPESampler(seed=spec.seed, constant_liar=True,
                                      n_startup_trials=min(10, max(2, spec.trials // 3)))


def make_pruner(spec: SweepSpec) -> Any:
    """``MedianPruner`` (pruning after ``prune_after`` finished trials, never before a trial's
    first evaluation) or ``NopPruner``."""
    import optuna

    if spec.pruner == "none":
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(n_startup_trials=spec.prune_after, n_warmup_steps=0)
