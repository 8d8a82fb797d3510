"""How to plan: search and solver options and the objective (cheapest plan, or most demand served).

Every option carries its own description as field metadata (an :class:`OptionSpec`: minimum, maximum through
``scenario_fields.BOUNDS``, choices, unit, label and help). The validator (:meth:`Options.from_dict`), the JSON
schema (:func:`option_schema`, used by ``scenario_schema``) and the Scenario page's widgets (``ui/options_form.py``)
are all derived from it, so a new option is one field with its metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from planning.scenario_fields import BOUNDS, _choice, _mapping, _number, _reject_unknown, _revalidate

SOLVERS = ("highs", "cbc")
SHARING_MODES = ("off", "kvpr", "exact")
SHARING_SPLITS = ("joint", "threshold")
TEMPLATE_MODES = ("library", "on-demand")
KV_TRANSFER_MODES = ("same-region", "cross-region")
MEASUREMENTS_MODES = ("auto", "use", "ignore")


@dataclass(frozen=True)
class OptionSpec:
    """What one option accepts and how a person sets it: a number in ``[minimum, BOUNDS[bound][0]]`` (``> minimum``
    with ``strict_min``; whole with ``integer``; ``None`` allowed with ``allow_none``) or one of ``choices``.
    ``label``, ``help``, ``unit``, ``step`` and ``choice_labels`` are for the widgets; ``false_means`` is the
    choice a YAML ``false`` stands for (``sharing: off`` parses as false)."""

    label: str
    help: str = ""
    unit: str = ""
    minimum: float | None = None
    strict_min: bool = False
    integer: bool = False
    allow_none: bool = False
    bound: str | None = None
    choices: tuple[str, ...] = ()
    choice_labels: tuple[tuple[str, str], ...] = ()
    step: float | None = None
    false_means: str | None = None

    @property
    def maximum(self) -> float | None:
        """The largest accepted value (``BOUNDS[bound]``), or ``None`` without a bound."""
        return BOUNDS[self.bound][0] if self.bound is not None else None

    def parse(self, value: Any, field_path: str) -> Any:
        """``value`` checked against this spec: a :class:`~planning.errors.PlanningError` names ``field_path``."""
        if self.choices:
            return _choice(self.false_means if value is False and self.false_means else value, field_path,
                           self.choices)
        return _number(value, field_path, minimum=self.minimum, strict_min=self.strict_min, integer=self.integer,
                       allow_none=self.allow_none, bound=self.bound)


def option(default: Any, spec: OptionSpec) -> Any:
    """A dataclass field holding ``default``, described by ``spec`` (``field(metadata={"option": spec})``)."""
    return field(default=default, metadata={"option": spec})


def option_specs(cls: type | None = None) -> dict[str, OptionSpec]:
    """Every option of ``cls`` (default :class:`Options`) with its spec, in field order."""
    return {f.name: f.metadata["option"] for f in fields(cls or Options)}


def option_schema(cls: type | None = None) -> dict[str, Any]:
    """The JSON-schema ``properties`` of the options, derived from their specs."""
    props: dict[str, Any] = {}
    for name, spec in option_specs(cls).items():
        if spec.choices:
            props[name] = {"enum": list(spec.choices)}
            continue
        kind = "integer" if spec.integer else "number"
        prop: dict[str, Any] = {"type": [kind, "null"] if spec.allow_none else kind}
        if spec.minimum is not None:
            prop["exclusiveMinimum" if spec.strict_min else "minimum"] = spec.minimum
        if spec.maximum is not None:
            prop["maximum"] = spec.maximum
        props[name] = prop
    return props


_SHARING_HELP = ("Pack low-rate models onto shared GPUs: off, kvpr (KV-pressure packing) or exact "
                 "(planning.sharing).")


@dataclass(frozen=True)
class Options:
    """Search and solver options (Coral: Nmax = 6 nodes per template, ρ = 12 × model memory, K = 0.1)."""

    nmax: int = option(6, OptionSpec(
        "Nmax (nodes/template)", "Nmax: the most nodes one serving template (one model replica's pipeline) may span. "
        "Larger allows more mixed pipelines but builds many more templates.", "nodes", minimum=1, integer=True,
        bound="nmax"))
    rho: float = option(12.0, OptionSpec(
        "ρ (memory × model)", "ρ: a template's GPUs may hold at most ρ × the model's weight size in memory, which "
        "prunes oversized templates (Coral's memory-redundancy bound).", "× model weights", minimum=1, bound="rho",
        step=1.0))
    K: float = option(0.1, OptionSpec(
        "K (init penalty)", "K: the optimizer charges K × the hourly price of every newly started node so plans do "
        "not churn; it is not billed and no comparison includes it.", "× hourly price", minimum=0, bound="K",
        step=0.05))
    max_stages: int = option(6, OptionSpec(
        "Max pipeline stages", "The most pipeline stages one template may have.", "stages", minimum=1, integer=True,
        bound="max_stages"))
    solver: str = option("highs", OptionSpec(
        "Solver", "The MILP solver: HiGHS (default, faster) or CBC.", choices=SOLVERS))
    time_limit_s: float = option(60.0, OptionSpec(
        "Time limit (s)", "Wall-clock limit of the allocation ILP; past it the best plan found so far is returned "
        "with its MIP gap.", "s", minimum=0, strict_min=True, bound="time_limit_s", step=10.0))
    mip_rel_gap: float = option(1e-3, OptionSpec(
        "MIP relative gap", "The solver stops once the plan is within this fraction of the best bound.", "fraction",
        minimum=0, bound="mip_rel_gap"))
    workers: int = option(0, OptionSpec(
        "Workers", "Processes for library builds; 0 = one per CPU core.", "processes", minimum=0, integer=True,
        bound="workers"))
    sharing: str = option("off", OptionSpec("GPU sharing", _SHARING_HELP, choices=SHARING_MODES, false_means="off"))
    # "threshold" split: models below this mean rate share (None: every model that fits); "joint" split: models
    # at or above it are dedicated, a constraint on the joint model (None: no constraint)
    sharing_threshold_rps: float | None = option(1.0, OptionSpec(
        "Sharing threshold (req/s)", "Threshold split: models below this mean rate share (empty: every model that "
        "fits); joint split: models at or above it are dedicated (empty: no constraint).", "req/s", minimum=0,
        allow_none=True, bound="rate_rps"))
    sharing_split: str = option("joint", OptionSpec(
        "Sharing split", "joint: one model decides which models share (exact packing); threshold: the rate rule.",
        choices=SHARING_SPLITS))
    templates: str = option("on-demand", OptionSpec(
        "Templates", "on-demand (default): a priced search over node multisets, certified over all templates "
        "without listing them; library: enumerate and place every template (the oracle, and what the Templates "
        "explorer pages through).", choices=TEMPLATE_MODES))
    kv_transfer: str = option("same-region", OptionSpec(
        "KV transfer (disaggregated)", "KV transfer: a request's KV cache goes from its prefill node to a decode "
        "node. Same region (default) plans both phases in the same regions; cross-region lets the optimizer send it "
        "to another region, paying that cloud's egress $/GB and the WAN delay (data/egress.csv, data/wan.csv).",
        choices=KV_TRANSFER_MODES,
        choice_labels=(("same-region", "same region: prefill and decode paired per region"),
                       ("cross-region", "cross-region allowed: egress priced, WAN delay added"))))
    lookahead_epochs: int = option(3, OptionSpec(
        "Look-ahead (epochs)", "The timeline's look-ahead policy plans epoch t with the demand of epochs t .. "
        "t + H − 1 and commits only t.", "epochs", minimum=1, integer=True, bound="lookahead_epochs"))
    measurements: str = option("auto", OptionSpec(
        "Measurements", "Plan on the perf model corrected by your trusted fits (`planning measurements fit`): use, "
        "ignore, or auto (default) = use when trusted fits of the scenario's models are kept.",
        choices=MEASUREMENTS_MODES))

    def __post_init__(self) -> None:
        _revalidate(self, "options")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Options:
        """Options read from a mapping, each value checked by its field's :class:`OptionSpec` (missing → default)."""
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        values = {f.name: f.metadata["option"].parse(d.get(f.name, f.default), f"{path}.{f.name}")
                  for f in fields(cls)}
        return cls(**values)


@dataclass(frozen=True)
class Objective:
    """``cost``: cheapest plan meeting all demand. ``served``: largest uniform served fraction α ≤ 1
    (optionally within ``budget_per_hour``), then the cheapest plan at that α."""

    kind: str = "cost"
    budget_per_hour: float | None = None

    def __post_init__(self) -> None:
        _revalidate(self, "objective")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Objective:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        return cls(kind=_choice(d.get("kind", "cost"), f"{path}.kind", ("cost", "served")),
                   budget_per_hour=_number(d.get("budget_per_hour"), f"{path}.budget_per_hour", minimum=0,
                                           strict_min=True, allow_none=True, bound="budget_per_hour"))
