"""What-if variants: frozen change specs in, new validated Scenarios out (pages, CLI ``--variant`` and notebooks).

Each spec is one change to a scenario; :func:`apply_variants` applies several in order. Text form, as on the
command line (``planning solve --preset coral-core --variant demand=2 --variant drop-gpu=L40S``):

==========================  ==========================================================
``demand=K[@MODEL]``        demand × K (all models, or one)
``drop-gpu=GPU``            never rent this GPU type
``drop-region=REGION``      remove a region (and its explicit offers)
``price=PCT``               every price changes by PCT percent (``-20`` = 20 % cheaper)
``availability=K``          node availability × K (scarcity below 1)
``slo=K``                   every SLO × K (tighter below 1)
``budget=USD``              objective "served" within USD per hour
``term=YEARS``              every reservation's term (published prices for it)
``interruptions=K``         spot interruption rates × K
==========================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from planning.errors import PlanningError, quote
from planning.result import PlanResult
from planning.scenario import Scenario


@dataclass(frozen=True)
class DemandScale:
    """Demand × ``factor`` for ``model`` (``None`` = every model)."""

    factor: float
    model: str | None = None


@dataclass(frozen=True)
class DropGpu:
    """Never rent GPU type ``gpu``."""

    gpu: str


@dataclass(frozen=True)
class DropRegion:
    """Remove ``region`` (and the explicit offers in it)."""

    region: str


@dataclass(frozen=True)
class PriceChange:
    """Every price changes by ``pct`` percent (``-20`` = 20 % cheaper)."""

    pct: float


@dataclass(frozen=True)
class AvailabilityScale:
    """Available nodes × ``factor``."""

    factor: float


@dataclass(frozen=True)
class SloScale:
    """Every SLO × ``factor`` (below 1 tightens)."""

    factor: float


@dataclass(frozen=True)
class Budget:
    """Maximise the served fraction within ``per_hour`` $/h."""

    per_hour: float


@dataclass(frozen=True)
class TermChange:
    """Every reservation's term becomes ``years`` (published prices: that term's discount)."""

    years: float


@dataclass(frozen=True)
class InterruptionScale:
    """Spot interruption rates × ``factor``."""

    factor: float


Variant = (DemandScale | DropGpu | DropRegion | PriceChange | AvailabilityScale | SloScale | Budget | TermChange
           | InterruptionScale)

KINDS: dict[str, str] = {
    "demand": "Demand × k",
    "remove_gpu": "Remove a GPU type",
    "remove_region": "Remove a region",
    "prices": "Prices ± %",
    "availability": "Availability × k (scarcity)",
    "slo": "SLOs × k (tighten < 1 < loosen)",
    "budget": "Budget ($/h, max served)",
    "term": "Reservation term (years)",
    "interruptions": "Spot interruption rates × k",
}


def label(variant: Variant) -> str:
    """A short human label, e.g. ``"demand ×2 (all models)"``, ``"without L40S"``."""
    match variant:
        case DemandScale(factor, model):
            return f"demand ×{factor:g} ({model or 'all models'})"
        case DropGpu(gpu):
            return f"without {gpu}"
        case DropRegion(region):
            return f"without {region}"
        case PriceChange(pct):
            return f"prices {pct:+g} %"
        case AvailabilityScale(factor):
            return f"availability ×{factor:g}"
        case SloScale(factor):
            return f"SLOs ×{factor:g}"
        case Budget(per_hour):
            return f"budget ${per_hour:,.0f}/h"
        case TermChange(years):
            return f"{years:g}-year reservations"
        case InterruptionScale(factor):
            return f"spot interruptions ×{factor:g}"
    raise PlanningError("variant", f"{quote(variant)} is not a what-if variant.", f"use one of {', '.join(KINDS)}.")


def apply_variant(scenario: Scenario, variant: Variant) -> Scenario:
    """``scenario`` with one change (the input is unchanged; the result is validated).

    Raises
    ------
    PlanningError
        A factor ≤ 0 (or < 0 for availability), a price change ≤ −100 %, a budget ≤ 0, an unknown model, or
        removing the last region.
    """
    match variant:
        case DemandScale(factor, model):
            _positive(factor, "demand")
            if model is not None and model not in {m.id for m in scenario.models}:
                raise PlanningError("demand", f"{quote(model)} is not a model of this scenario.",
                                    f"use one of {', '.join(m.id for m in scenario.models)}.")
            return scenario.with_demand_scaled(factor, model)
        case DropGpu(gpu):
            if not gpu:
                raise PlanningError("drop-gpu", "is empty.", "name the GPU type to remove, e.g. drop-gpu=L40S.")
            return replace(scenario, exclude_gpus=tuple(dict.fromkeys((*scenario.exclude_gpus, gpu))))
        case DropRegion(region):
            regions = tuple(r for r in scenario.regions if r != region)
            offers = tuple(o for o in scenario.offers if o.region != region)
            if not regions and not offers:
                raise PlanningError("drop-region", f"{quote(region)} is the only region of this scenario.",
                                    "add another region on the Scenario page (or in the file) first.")
            return replace(scenario, regions=regions, offers=offers)
        case PriceChange(pct):
            factor = 1 + pct / 100
            if factor <= 0:
                raise PlanningError("price", f"a change of {pct:g} % makes prices ≤ 0.", "use a change above -100 %.")
            return replace(scenario, price_scale=scenario.price_scale * factor)
        case AvailabilityScale(factor):
            if factor < 0:
                raise PlanningError("availability", f"factor {factor:g} is negative.", "use a factor ≥ 0, e.g. 0.5.")
            return replace(scenario, availability_scale=scenario.availability_scale * factor)
        case SloScale(factor):
            _positive(factor, "slo")
            return scenario.with_slo_scaled(factor)
        case Budget(per_hour):
            if not per_hour > 0:
                raise PlanningError("budget", f"must be > 0 $/h, got {per_hour:g}.", "give a positive hourly budget.")
            objective = replace(scenario.objective, kind="served", budget_per_hour=float(per_hour))
            return replace(scenario, objective=objective)
        case TermChange(years):
            if not scenario.reservations:
                raise PlanningError("term", "the scenario has no reservations.", "add reservations first.")
            return replace(scenario, reservations=tuple(replace(r, term_years=float(years))
                                                        for r in scenario.reservations))
        case InterruptionScale(factor):
            if factor < 0:
                raise PlanningError("interruptions", f"factor {factor:g} is negative.", "use a factor ≥ 0, e.g. 2.")
            spot = replace(scenario.spot, interruption_scale=scenario.spot.interruption_scale * factor)
            return replace(scenario, spot=spot)
    raise PlanningError("variant", f"{quote(variant)} is not a what-if variant.", f"use one of {', '.join(KINDS)}.")


def apply_variants(scenario: Scenario, variants: Sequence[Variant]) -> Scenario:
    """``scenario`` with every change applied in order, renamed ``"name (label, label)"``.

    Raises
    ------
    PlanningError
        See :func:`apply_variant`.
    """
    out = scenario
    for v in variants:
        out = apply_variant(out, v)
    if variants:
        out = replace(out, name=f"{scenario.name} ({', '.join(label(v) for v in variants)})")
    return out


def _positive(value: float, field: str) -> None:
    if not value > 0:
        raise PlanningError(field, f"factor {value:g} must be > 0.", "use a positive factor, e.g. 2 or 0.5.")


def _number(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise PlanningError(field, f"{quote(text)} is not a number.", f"write e.g. {field}=2.") from None


_ALIASES = {"remove-gpu": "drop-gpu", "remove-region": "drop-region", "prices": "price"}
_TEXT_KINDS = ("demand", "drop-gpu", "drop-region", "price", "availability", "slo", "budget", "term",
               "interruptions")


def parse_variant(text: str) -> Variant:
    """One variant from its text form ``kind=value`` (see the module docstring).

    Raises
    ------
    PlanningError
        Unknown kind or a value that is not a number, with the accepted forms.
    """
    kind, sep, value = text.partition("=")
    kind, value = kind.strip().lower().replace("_", "-"), value.strip()
    kind = _ALIASES.get(kind, kind)
    if not sep or not value:
        raise PlanningError("variant", f"{quote(text)} is not of the form kind=value.",
                            "write e.g. demand=2, drop-gpu=L40S, price=-20, budget=100.")
    if kind == "demand":
        factor, _, model = value.partition("@")
        return DemandScale(_number(factor, "demand"), model.strip() or None)
    if kind == "drop-gpu":
        return DropGpu(value)
    if kind == "drop-region":
        return DropRegion(value)
    if kind == "price":
        return PriceChange(_number(value.rstrip("%"), "price"))
    if kind == "availability":
        return AvailabilityScale(_number(value, "availability"))
    if kind == "slo":
        return SloScale(_number(value, "slo"))
    if kind == "budget":
        return Budget(_number(value.lstrip("$"), "budget"))
    if kind == "term":
        return TermChange(_number(value.rstrip("y"), "term"))
    if kind == "interruptions":
        return InterruptionScale(_number(value, "interruptions"))
    raise PlanningError("variant", f"{quote(kind)} is not a what-if kind.", f"use one of {', '.join(_TEXT_KINDS)}.")


def make_variant(kind: str, *, k: float = 1.0, model: str | None = None, gpu: str = "", region: str = "",
                 pct: float = 0.0, budget: float = 0.0, years: float = 1.0) -> Variant:
    """The variant of one of :data:`KINDS` from form fields (the What-if page's form).

    Raises
    ------
    PlanningError
        Unknown kind.
    """
    specs: Mapping[str, Variant] = {
        "demand": DemandScale(k, model or None), "remove_gpu": DropGpu(gpu), "remove_region": DropRegion(region),
        "prices": PriceChange(pct), "availability": AvailabilityScale(k), "slo": SloScale(k), "budget": Budget(budget),
        "term": TermChange(years), "interruptions": InterruptionScale(k),
    }
    if kind not in specs:
        raise PlanningError("kind", f"{quote(kind)} is not a what-if kind.", f"use one of {', '.join(KINDS)}.")
    return specs[kind]


SLIDERS: dict[str, tuple[float, float, float, float]] = {  # name → (min, max, neutral, step) on the What-if page
    "demand": (0.25, 4.0, 1.0, 0.25),
    "price_pct": (-50.0, 100.0, 0.0, 5.0),
    "slo": (0.5, 2.0, 1.0, 0.1),
    "availability_pct": (10.0, 200.0, 100.0, 10.0),
}


def slider_variants(demand: float = 1.0, price_pct: float = 0.0, slo: float = 1.0,
                    availability_pct: float = 100.0) -> list[Variant]:
    """The changes four sliders stand for (demand ×, prices ± %, SLOs ×, availability %), the neutral ones left
    out (so the sliders at rest are the base scenario itself)."""
    out: list[Variant] = []
    if demand != 1.0:
        out.append(DemandScale(float(demand)))
    if price_pct != 0.0:
        out.append(PriceChange(float(price_pct)))
    if slo != 1.0:
        out.append(SloScale(float(slo)))
    if availability_pct != 100.0:
        out.append(AvailabilityScale(float(availability_pct) / 100.0))
    return out


SliderPosition = tuple[float, ...]  # one value per slider, in the order of SLIDERS


def slider_position(**values: float) -> SliderPosition:
    """The sliders' values as a position (neutral where not given), in :data:`SLIDERS` order, on their steps.

    Raises
    ------
    PlanningError
        For a name that is no slider, naming the sliders there are.
    """
    unknown = sorted(set(values) - set(SLIDERS))
    if unknown:
        raise PlanningError("slider", f"{unknown[0]!r} is no slider.", f"use one of {', '.join(SLIDERS)}.")
    return tuple(_on_step(name, values.get(name, neutral)) for name, (_, _, neutral, _) in SLIDERS.items())


def _on_step(name: str, value: float) -> float:
    """``value`` on its slider's grid (so 0.1 + 0.2 and 0.3 name one position)."""
    low, _, _, step = SLIDERS[name]
    return round(low + round((float(value) - low) / step) * step, 6)


def slider_values(position: SliderPosition) -> dict[str, float]:
    """A position as keyword values for :func:`slider_variants`."""
    return dict(zip(SLIDERS, position, strict=True))


def slider_steps(a: SliderPosition, b: SliderPosition) -> int:
    """How many slider steps apart two positions are (the sum over the sliders)."""
    return sum(round(abs(x - y) / step) for x, y, (_, _, _, step) in zip(a, b, SLIDERS.values(), strict=True))


def slider_neighbours(position: SliderPosition, came_from: SliderPosition | None = None) -> list[SliderPosition]:
    """The positions one step from ``position`` (each slider up and down, within its range): what the What-if page
    plans ahead while the user looks at ``position``'s plan. In slider order, up before down; when the user just
    came from ``came_from``, the step that goes on the same way on the slider that moved most comes first."""
    out: list[SliderPosition] = []
    for index, (name, (low, high, _, step)) in enumerate(SLIDERS.items()):
        for direction in (1, -1):
            value = _on_step(name, position[index] + direction * step)
            if low - 1e-9 <= value <= high + 1e-9:
                out.append((*position[:index], value, *position[index + 1:]))
    if came_from is None or came_from == position:
        return out
    steps = [(abs(p - c) / s[3], i) for i, (p, c, s) in enumerate(zip(position, came_from, SLIDERS.values(),
                                                                         strict=True))]
    _, moved = max(steps)
    onward = [n for n in out if (n[moved] - position[moved]) * (position[moved] - came_from[moved]) > 0]
    return onward + [n for n in out if n not in onward]


# ------------------------------------------------------------------------------------------------------------
# comparing variants' plans


COMPARISON_COLUMNS = ["variant", "method", "cost_per_hour", "served_fraction", "status", "savings_pct", "prices"]


def comparison_frame(results: Mapping[str, PlanResult]) -> pd.DataFrame:
    """One row per (variant, method): cost/h, served fraction, and the plan's savings against that method
    (``PlanResult.savings_vs``: None when the two do not serve the same demand)."""
    rows = []
    for name, result in results.items():
        # a spot figure never sits unlabelled next to on-demand ones
        prices = "spot" if str((result.scenario or {}).get("pricing", "on_demand")) == "spot" else "on-demand"
        plan = result.has_plan  # no plan: no cost and no served fraction, the status says why ("no plan (…)")
        rows.append({"variant": name, "method": "Plan (mixed)",
                     "cost_per_hour": result.comparable_cost if plan else float("nan"),
                     "served_fraction": result.served_fraction if plan else float("nan"),
                     "status": result.status if plan else f"no plan ({result.status})", "savings_pct": None,
                     "prices": prices})
        for b in result.baselines:
            ran = b.ran
            rows.append({"variant": name, "method": b.name, "cost_per_hour": b.cost_per_hour if ran else float("nan"),
                         "served_fraction": b.served_fraction if ran else float("nan"),
                         "status": b.note if not ran else "meets demand" if b.feasible else "falls short",
                         "savings_pct": result.savings_vs(b), "prices": prices})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


def chart_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The comparison frame for ``planning.viz.whatif_figure``: a method that falls short gets no bar (NaN)."""
    out = frame.copy()
    short = out["status"].isin(["falls short", "infeasible", "error", "cancelled"])
    missing = out["status"].astype(str).str.startswith(("no plan", "not run"))
    out.loc[short | missing, "cost_per_hour"] = float("nan")
    return out


def diff_lines(result: PlanResult) -> list[dict[str, object]]:
    """A plan's instances as ``planning.viz.plan_diff`` lines (cost and GPUs as totals over all copies)."""
    return [{"template_id": f"{i.model}/{i.phase}/{i.template_id}", "region": i.region, "count": i.count,
             "cost_per_hour": i.cost_per_hour, "gpus": {g: n * i.count for g, n in i.gpus.items()}}
            for i in result.instances]
