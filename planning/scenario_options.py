"""How to plan: search and solver options and the objective (cheapest plan, or most demand served)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planning.scenario_fields import _choice, _mapping, _number, _reject_unknown, _revalidate

SOLVERS = ("highs", "cbc")
SHARING_MODES = ("off", "kvpr", "exact")
SHARING_SPLITS = ("joint", "threshold")
KV_TRANSFER_MODES = ("same-region", "cross-region")
MEASUREMENTS_MODES = ("auto", "use", "ignore")


@dataclass(frozen=True)
class Options:
    """Search and solver options (Coral: Nmax = 6 nodes per template, ρ = 12 × model memory, K = 0.1)."""

    nmax: int = 6
    rho: float = 12.0
    K: float = 0.1
    max_stages: int = 6
    solver: str = "highs"
    time_limit_s: float = 60.0
    mip_rel_gap: float = 1e-3
    workers: int = 0  # processes for library builds; 0 = one per CPU core
    sharing: str = "off"  # off | kvpr | exact: pack low-rate models onto shared GPUs (planning.sharing)
    # "threshold" split: models below this mean rate share (None: every model that fits); "joint" split: models
    # at or above it are dedicated, a constraint on the joint model (None: no constraint)
    sharing_threshold_rps: float | None = 1.0
    sharing_split: str = "joint"  # joint: one model decides which models share (exact packing); threshold: the rule
    # "on-demand" (default): a priced search over node multisets, certified over all templates without listing them;
    # "library": enumerate and place every template (the oracle, and what the Templates explorer pages through)
    templates: str = "on-demand"
    # "same-region" (default): a model's prefill and decode are paired per region (the KV cache stays there);
    # "cross-region": a request's decode may run in another region, paying egress for its KV and the WAN delay
    kv_transfer: str = "same-region"
    # the timeline's look-ahead policy plans epoch t with the demand of epochs t .. t + H − 1 and commits only t
    lookahead_epochs: int = 3
    # plan on the perf model corrected by your trusted fits (`planning measurements fit`): "use", "ignore", or
    # "auto" (default) = use when trusted fits of the scenario's models are kept (planning.measurements.apply)
    measurements: str = "auto"

    def __post_init__(self) -> None:
        _revalidate(self, "options")

    @classmethod
    def from_dict(cls, data: Any, path: str) -> Options:
        d = _mapping(data or {}, path)
        _reject_unknown(d, path, cls)
        base = cls()
        return cls(
            nmax=_number(d.get("nmax", base.nmax), f"{path}.nmax", minimum=1, integer=True, bound="nmax"),
            rho=_number(d.get("rho", base.rho), f"{path}.rho", minimum=1, bound="rho"),
            K=_number(d.get("K", base.K), f"{path}.K", minimum=0, bound="K"),
            max_stages=_number(d.get("max_stages", base.max_stages), f"{path}.max_stages", minimum=1, integer=True,
                               bound="max_stages"),
            solver=_choice(d.get("solver", base.solver), f"{path}.solver", SOLVERS),
            time_limit_s=_number(d.get("time_limit_s", base.time_limit_s), f"{path}.time_limit_s", minimum=0,
                                 strict_min=True, bound="time_limit_s"),
            mip_rel_gap=_number(d.get("mip_rel_gap", base.mip_rel_gap), f"{path}.mip_rel_gap", minimum=0,
                                bound="mip_rel_gap"),
            workers=_number(d.get("workers", base.workers), f"{path}.workers", minimum=0, integer=True,
                            bound="workers"),
            sharing=_choice("off" if d.get("sharing") is False else d.get("sharing", base.sharing),  # YAML: off → False
                            f"{path}.sharing", SHARING_MODES),
            sharing_threshold_rps=_number(d.get("sharing_threshold_rps", base.sharing_threshold_rps),
                                          f"{path}.sharing_threshold_rps", minimum=0, allow_none=True,
                                          bound="rate_rps"),
            sharing_split=_choice(d.get("sharing_split", base.sharing_split), f"{path}.sharing_split", SHARING_SPLITS),
            templates=_choice(d.get("templates", base.templates), f"{path}.templates", ("library", "on-demand")),
            kv_transfer=_choice(d.get("kv_transfer", base.kv_transfer), f"{path}.kv_transfer", KV_TRANSFER_MODES),
            lookahead_epochs=_number(d.get("lookahead_epochs", base.lookahead_epochs), f"{path}.lookahead_epochs",
                                     minimum=1, integer=True, bound="lookahead_epochs"),
            measurements=_choice(d.get("measurements", base.measurements), f"{path}.measurements",
                                 MEASUREMENTS_MODES),
        )


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

