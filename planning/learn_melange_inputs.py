"""Which input differs: Mélange's printed figures set against its own public profile, in numbers.

Where a Mélange lesson does not reproduce a figure from the paper's public inputs (its measured Llama-2-7B profile,
its prices), these functions work out what the figure implies about the input and compare it with the profile:

- Fig. 9 (Sec. 4.4): the highlighted case (a A100 + b A10G, s₁ % cheaper than A100-only, s₂ % than A10G-only)
  fixes the single-type counts m = round(mix / (1 − s₁) / p_A100) and n = round(mix / (1 − s₂) / p_A10G); a rate r
  with ⌈r / T_A100⌉ = m, ⌈r / T_A10G⌉ = n and a·T_A100 < r ≤ a·T_A100 + b·T_A10G exists only when
  (n − 1 − b) / a < T_A100 / T_A10G < n / (m − 1). :func:`fig9_cases` compares that interval with the profile at
  the sizes the paper and its authors state, and with the throughputs the figure's own staircase shows.
- Fig. 3a (Sec. 4.2): the largest A100 advantage rests on one profile cell; :func:`rounding_span` gives the ratio's
  range within that cell's printed rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

from planning.allocate import AllocationProblem, Offer, TemplateOption, WorkloadClass, solve_allocation
from planning.result import savings_pct

SMALL, BIG = "A10G", "A100"


@dataclass(frozen=True)
class Fig9Implied:
    """What Fig. 9's highlighted case says about the two GPUs' throughputs at its request size."""

    a100_in_mix: int
    a10g_in_mix: int
    a100_only: int  # the A100-only GPUs its A100 saving implies
    a10g_only: int  # the A10G-only GPUs its A10G saving implies
    ratio_low: float  # T_A100 / T_A10G must be above this …
    ratio_high: float  # … and below this


@dataclass(frozen=True)
class Fig9Case:
    """One pair of throughputs at Fig. 9's mix: the rates the mix serves and its A100s alone do not, whether the
    solver finds the mix cheapest at the top of that range, and the savings there (where A10G-only needs the most
    GPUs)."""

    label: str
    a10g_rps: float
    a100_rps: float
    rate_low: float  # the mix serves rates in (rate_low, rate_high] that its A100s alone do not
    rate_high: float
    mix_is_cheapest: bool
    a100_only: int
    a10g_only: int
    saving_vs_a100_only: float
    saving_vs_a10g_only: float

    @property
    def ratio(self) -> float:
        return self.a100_rps / self.a10g_rps

    def row(self) -> dict[str, object]:
        """The case as a table row with readable headers."""
        return {"throughputs": self.label, "A10G req/s": self.a10g_rps, "A100 req/s": self.a100_rps,
                "A100 ÷ A10G": round(self.ratio, 2),
                "rates the mix serves, its A100s alone not (req/s)": f"{self.rate_low:.2f}–{self.rate_high:.2f}",
                "mix the cheapest plan at the top of that range": "yes" if self.mix_is_cheapest else "no",
                "A100-only GPUs there": self.a100_only, "A10G-only GPUs there": self.a10g_only,
                "mix saving vs A100-only there (%)": round(self.saving_vs_a100_only, 1),
                "mix saving vs A10G-only there (%)": round(self.saving_vs_a10g_only, 1)}


def side_by_side(cases: tuple[Fig9Case, ...]) -> tuple[dict[str, str], ...]:
    """The cases as columns (one per set of throughputs) and their quantities as rows, narrow enough for a page."""
    rows = [c.row() for c in cases]
    return tuple({"quantity": key, **{str(r["throughputs"]): f"{r[key]:g}" if isinstance(r[key], float) else
                                      str(r[key]) for r in rows}}
                 for key in rows[0] if key != "throughputs")


def fig9_implied(a100: int, a10g: int, saving_a100_pct: float, saving_a10g_pct: float,
                 prices: dict[str, float]) -> Fig9Implied:
    """The single-type counts and the throughput ratio Fig. 9's printed case implies at ``prices``."""
    mix = a100 * prices[BIG] + a10g * prices[SMALL]
    m = round(mix / (1 - saving_a100_pct / 100) / prices[BIG])
    n = round(mix / (1 - saving_a10g_pct / 100) / prices[SMALL])
    low = max((n - 1 - a10g) / a100, (n - 1) / m)
    high = n / (m - 1) if m > 1 else math.inf
    return Fig9Implied(a100, a10g, m, n, low, high)


def mix_problem(rate: float, thr: dict[str, float], prices: dict[str, float]) -> AllocationProblem:
    """``rate`` req/s of one request size on A10G and A100 GPUs serving ``thr`` req/s each at ``prices`` $/h (keys
    ``"A10G"``, ``"A100"``): the cheapest allocation is Mélange's ILP on a single bucket."""
    return AllocationProblem(
        (TemplateOption(SMALL, "llama-2-7b", {"1xA10G": 1}, {"req": thr[SMALL]}),
         TemplateOption(BIG, "llama-2-7b", {"1xA100-80G": 1}, {"req": thr[BIG]})),
        (Offer("cloud:r", "1xA10G", prices[SMALL], 10_000), Offer("cloud:r", "1xA100-80G", prices[BIG], 10_000)),
        (WorkloadClass("req", "llama-2-7b", rate),))


def _cheapest(rate: float, thr: dict[str, float], prices: dict[str, float]) -> dict[str, int]:
    return {t: n for (t, _r), n in solve_allocation(mix_problem(rate, thr, prices)).counts.items()}


def fig9_case(label: str, thr: dict[str, float], implied: Fig9Implied, prices: dict[str, float]) -> Fig9Case:
    """The figure's mix on throughputs ``thr`` (req/s per GPU): where it serves, checked by the solver at the top
    rate, and what A100-only and A10G-only cost there."""
    a, b = implied.a100_in_mix, implied.a10g_in_mix
    low, high = a * thr[BIG], a * thr[BIG] + b * thr[SMALL]
    counts = _cheapest(high, thr, prices)
    mix = a * prices[BIG] + b * prices[SMALL]
    m, n = math.ceil(high / thr[BIG] - 1e-9), math.ceil(high / thr[SMALL] - 1e-9)
    return Fig9Case(label, thr[SMALL], thr[BIG], low, high, counts == {BIG: a, SMALL: b}, m, n,
                    _pct(savings_pct(mix, m * prices[BIG])), _pct(savings_pct(mix, n * prices[SMALL])))


def _pct(saving: float | None) -> float:
    return math.nan if saving is None else saving


def best_ratio(profile: dict[str, dict[tuple[int, int], float]]) -> tuple[float, tuple[int, int]]:
    """The largest A100 ÷ A10G throughput of any bucket of the profile, and its bucket (input ≤, output ≤)."""
    cell = max(profile["A10G"], key=lambda k: profile["A100-80G"][k] / profile["A10G"][k])
    return profile["A100-80G"][cell] / profile["A10G"][cell], cell


def rounding_span(printed: str) -> tuple[float, float]:
    """The interval a number printed as ``printed`` stands for: ``"0.04"`` → (0.035, 0.045)."""
    value = Decimal(printed)
    half = Decimal(1).scaleb(value.as_tuple().exponent) / 2  # type: ignore[arg-type]
    return float(value - half), float(value + half)
