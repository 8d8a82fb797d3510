"""A deployed plan checked against what its instances measured: per instance measured vs predicted (TTFT, TPOT,
output tok/s, the SLOs), the instances that miss, and the perf model corrected by the measurements for a re-plan.

"Predicted" is the simulator's run of the measured setup and load (the same lengths, rate or clients, request
count) on the planner's own model; an instance *misses* when a latency is more than ``TOLERANCE`` above its
prediction, its throughput more than ``TOLERANCE`` below, or it misses the scenario's SLOs: when the file has
per-request latencies (``vllm bench serve --save-detailed``), fewer than ``ATTAINMENT_TARGET`` of its requests
within both SLOs (the share the planner's own checks hold a plan to); otherwise a measured mean above an SLO.
A mean hides a tail: 90 % of requests at 100 ms and 10 % at 900 ms average 180 ms, under a 200 ms SLO that one
request in ten misses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planning.checks import ATTAINMENT_TARGET
from planning.errors import PlanningError
from planning.measurements.fit import (
    Corrections,
    measured,
    predicted,
    simulate_point,
)
from planning.measurements.schema import Measurement
from planning.perf.model import PerfModel
from planning.result import PlanResult

TOLERANCE = 0.10


@dataclass(frozen=True)
class InstanceCheck:
    """One measured point of one plan instance beside the prediction and the SLOs."""

    instance: int
    point: Measurement
    ttft_ms: tuple[float | None, float]  # (measured, predicted)
    tpot_ms: tuple[float | None, float]
    output_tokens_per_s: tuple[float | None, float]
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None
    reasons: tuple[str, ...]
    slo_shares: tuple[float, float, float] | None = None  # within TTFT, TPOT, both (per-request files only)

    @property
    def misses(self) -> bool:
        return bool(self.reasons)

    def as_row(self) -> dict[str, Any]:
        return {"instance": self.instance, "model": self.point.model, "shape": f"{self.point.count}x{self.point.gpu}",
                "ttft_ms_measured": self.ttft_ms[0], "ttft_ms_predicted": self.ttft_ms[1],
                "tpot_ms_measured": self.tpot_ms[0], "tpot_ms_predicted": self.tpot_ms[1],
                "output_tokens_per_s_measured": self.output_tokens_per_s[0],
                "output_tokens_per_s_predicted": self.output_tokens_per_s[1], "slo_ttft_ms": self.slo_ttft_ms,
                "slo_tpot_ms": self.slo_tpot_ms,
                "slo_attainment_measured": self.slo_shares[2] if self.slo_shares else self.point.slo_attainment,
                "within_ttft_slo": self.slo_shares[0] if self.slo_shares else None,
                "within_tpot_slo": self.slo_shares[1] if self.slo_shares else None,
                "misses": self.misses, "reasons": "; ".join(self.reasons),
                "file": self.point.file}


def _slos(plan: PlanResult) -> dict[str, tuple[float | None, float | None]]:
    out = {}
    for m in (plan.scenario or {}).get("models", []) or []:
        slo = m.get("slo") or {}
        out[str(m.get("id"))] = (slo.get("prefill_ms"), slo.get("decode_ms"))
    return out


def match_instance(plan: PlanResult, m: Measurement) -> int:
    """The plan instance a point measured: its ``instance`` field, else the one instance of its model on its node.

    Raises
    ------
    PlanningError: an instance the plan does not have, or a point that fits no or several instances.
    """
    n = len(plan.instances)
    if m.instance:
        try:
            idx = int(m.instance)
        except ValueError:
            idx = -1
        if not 0 <= idx < n:
            raise PlanningError(f"{m.file}.instance", f"{m.instance!r} is not an instance of the plan (0 to {n - 1}).",
                                "measure with the command the plan's export wrote, or pass --instance N.")
        return idx
    hits = [i for i, inst in enumerate(plan.instances)
            if inst.model == m.model and dict(inst.gpus) == {m.gpu: m.count} and sum(inst.usage.values()) == 1]
    if len(hits) != 1:
        raise PlanningError(f"{m.file}.instance", f"{'several' if hits else 'no'} instance(s) of the plan serve "
                            f"{m.model} on {m.count}x{m.gpu}.", "pass --instance N (the plan's instance index).")
    return hits[0]


def _reasons(pairs: Mapping[str, tuple[float | None, float]], slo: tuple[float | None, float | None],
             shares: tuple[float, float, float] | None) -> list[str]:
    out = []
    for q, (y, yhat) in pairs.items():
        if y is None or yhat <= 0:
            continue
        worse = y / yhat - 1.0 if q != "output_tokens_per_s" else 1.0 - y / yhat
        if worse > TOLERANCE:
            out.append(f"{q} {100 * worse:.0f} % {'below' if q == 'output_tokens_per_s' else 'above'} the prediction")
    if shares is not None:  # per request: the share within the SLOs, not the mean
        if shares[2] < ATTAINMENT_TARGET:
            parts = [f"{q} {share:.1%}" for q, share, target in (("TTFT", shares[0], slo[0]),
                                                                 ("TPOT", shares[1], slo[1]))
                     if target and share < ATTAINMENT_TARGET]
            out.append(f"{shares[2]:.1%} of requests within the SLOs, under the {ATTAINMENT_TARGET:.0%} target"
                       + (f" (within SLO: {', '.join(parts)})" if parts else ""))
        return out
    for q, (y, _), target in (("TTFT", pairs["ttft_ms"], slo[0]), ("TPOT", pairs["tpot_ms"], slo[1])):
        if y is not None and target and y > target:
            out.append(f"{q} {y:.4g} ms misses the SLO {target:g} ms")
    return out


def check_instances(plan: PlanResult, points: Sequence[Measurement], perf: PerfModel) -> list[InstanceCheck]:
    """Every point beside the simulator's prediction for its instance's setup and load."""
    slos = _slos(plan)
    out = []
    for m in points:
        idx = match_instance(plan, m)
        run = simulate_point(m, perf)
        pairs = {q: (measured(m, q), predicted(run, q)) for q in ("ttft_ms", "itl_ms", "output_tokens_per_s")}
        pairs["tpot_ms"] = pairs.pop("itl_ms")
        slo = slos.get(m.model, (None, None))
        shares = m.slo_shares(*slo) if any(slo) else None
        out.append(InstanceCheck(idx, m, pairs["ttft_ms"], pairs["tpot_ms"], pairs["output_tokens_per_s"],
                                 slo[0], slo[1], tuple(_reasons(pairs, slo, shares)), shares))
    return out


def corrections_text(c: Corrections) -> str:
    """One line naming the corrections."""
    step = "" if math.isclose(c.step_ms, 0.0, abs_tol=1e-9) else f", step {c.step_ms:+.2f} ms"
    return f"prefill ×{c.prefill:.3f}, decode ×{c.decode:.3f}{step}"
