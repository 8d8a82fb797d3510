"""Histogram demand: class ids are entries as written, no cap, explicit templates for 64 buckets are exact,
validate builds what solve builds, and the vectorised per-class evaluation equals the per-template one."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import linprog

from planning import api
from planning.cli import main
from planning.errors import PlanningError
from planning.groups import plan_groups
from planning.scenario import Scenario
from planning.templates.sets import _per_class
from planning.templates.stages import evaluate_stages, stages_from_placement


def _hist_scenario(rates: list[float], templates: list[dict[str, Any]], prices: dict[str, float]) -> dict[str, Any]:
    return {
        "name": "hist", "mode": "aggregated", "regions": ["test:r"],
        "models": [{"id": "llama-2-7b", "slo": {"decode_ms": 120},
                    "demand": {"histogram": [{"input_len": 10 + i, "output_len": 20 + i, "rate_rps": r}
                                             for i, r in enumerate(rates)]}}],
        "offers": [{"region": "test:r", "shape": s, "price_per_hour": p, "available": 50} for s, p in prices.items()],
        "explicit_templates": templates, "generate_templates": False, "options": {"nmax": 1, "K": 0},
    }


def test_class_ids_are_positions_as_written_zero_rate_kept() -> None:
    rates = [0.0, 3.0, 0.0, 1.0, 5.0]
    (g,) = plan_groups(Scenario.from_dict(_hist_scenario(rates, [], {"1xL4": 1.0})))
    assert [c.id for c in g.classes] == [f"llama-2-7b/aggregated/b{i}" for i in range(5)]
    assert [c.rate for c in g.classes] == rates  # not sorted, zero-rate entries stay (empty)
    assert [c.input_len for c in g.classes] == [10, 11, 12, 13, 14]


def test_one_bucket_histogram_uses_b0_and_plain_demand_has_no_suffix() -> None:
    (g,) = plan_groups(Scenario.from_dict(_hist_scenario([2.0], [], {"1xL4": 1.0})))
    assert [c.id for c in g.classes] == ["llama-2-7b/aggregated/b0"]
    plain = _hist_scenario([1.0], [], {"1xL4": 1.0})
    plain["models"][0]["demand"] = {"rate_rps": 2, "input_len": 100, "output_len": 50}
    (g,) = plan_groups(Scenario.from_dict(plain))
    assert [c.id for c in g.classes] == ["llama-2-7b/aggregated"]


def test_disaggregated_histogram_ids_per_phase() -> None:
    data = _hist_scenario([1.0, 0.0, 2.0], [], {"1xL4": 1.0})
    data["mode"] = "disaggregated"
    data["models"][0]["slo"] = {"prefill_ms": 1000, "decode_ms": 100}
    groups = plan_groups(Scenario.from_dict(data))
    assert [c.id for c in groups[0].classes] == [f"llama-2-7b/prefill/b{i}" for i in range(3)]
    assert [c.rate for c in groups[1].classes] == [1.0 * 20, 0.0, 2.0 * 22]  # output tok/s per bucket


def _routable(counts: np.ndarray, lam: np.ndarray, thr: np.ndarray) -> bool:
    idx = np.argwhere((thr > 0) & (lam[None, :] > 0))
    a_eq = np.zeros((len(lam), len(idx)))
    a_ub = np.zeros((thr.shape[0], len(idx)))
    for v, (g, q) in enumerate(idx):
        a_eq[q, v], a_ub[g, v] = 1.0, 1.0 / thr[g, q]
    keep = lam > 0
    if np.any(~a_eq[keep].any(axis=1)):
        return False
    res = linprog(np.zeros(len(idx)), A_ub=a_ub, b_ub=counts.astype(float), A_eq=a_eq[keep], b_eq=lam[keep],
                  bounds=(0, None), method="highs")
    return bool(res.status == 0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_64_bucket_explicit_templates_are_exact_vs_brute_force(seed: int) -> None:
    """64 buckets (some empty) on three GPU types: the planner's cost equals the enumerated integer optimum."""
    rng = np.random.default_rng(seed)
    n = 64
    lam = np.where(rng.random(n) < 0.2, 0.0, rng.uniform(0.05, 0.4, n))
    shapes = {"1xL4": 0.7, "1xA10G": 1.01, "1xA100-80G": 3.67}
    thr = np.array([rng.uniform(0.5, 4.0, n), rng.uniform(1.0, 6.0, n), rng.uniform(3.0, 20.0, n)])
    thr[0, rng.random(n) < 0.1] = 0.0  # the L4 cannot serve some buckets
    templates = [{"id": s.split("x")[1], "model": "llama-2-7b", "phase": "aggregated", "usage": {s: 1},
                  "throughput": {f"llama-2-7b/aggregated/b{q}": float(thr[g, q]) for q in range(n) if thr[g, q] > 0}}
                 for g, s in enumerate(shapes)]
    res = api.solve(Scenario.from_dict(_hist_scenario(lam.tolist(), templates, shapes)), with_baselines=False)
    assert res.status == "optimal"
    prices = np.array(list(shapes.values()))
    ours = np.array([res.gpus_by_type().get(s.split("x")[1], 0) for s in shapes])
    assert _routable(ours, lam, thr)
    assert res.cost_per_hour == pytest.approx(float(ours @ prices))
    best = min(float(np.dot(v, prices)) for v in itertools.product(*(range(int(res.cost_per_hour // p) + 2) for p in prices))
               if _routable(np.array(v), lam, thr))
    assert res.cost_per_hour == pytest.approx(best, abs=1e-6)


def test_validate_builds_explicit_templates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thr = {f"llama-2-7b/aggregated/b{q}": 1.0 for q in range(40)}
    good = _hist_scenario([0.1] * 40, [{"id": "L4", "model": "llama-2-7b", "phase": "aggregated",
                                        "usage": {"1xL4": 1}, "throughput": thr}], {"1xL4": 0.7})
    api.validate(Scenario.from_dict(good))  # b16…b39 are classes (no 16-class cap)
    bad = json.loads(json.dumps(good))
    bad["explicit_templates"][0]["throughput"]["llama-2-7b/aggregated/b40"] = 1.0
    with pytest.raises(PlanningError, match="b40") as err:
        api.validate(Scenario.from_dict(bad))
    assert "b0" in err.value.fix and "b39" in err.value.fix
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["validate", str(path)]) == 2
    assert "explicit_templates[0].throughput.llama-2-7b/aggregated/b40" in capsys.readouterr().err
    one = _hist_scenario([2.0], [{"id": "L4", "model": "llama-2-7b", "phase": "aggregated", "usage": {"1xL4": 1},
                                  "throughput": {"llama-2-7b/aggregated": 1.0}}], {"1xL4": 0.7})
    with pytest.raises(PlanningError, match="aggregated/b0"):
        api.validate(Scenario.from_dict(one))


def test_vectorised_per_class_equals_per_template_loop() -> None:
    rng = np.random.default_rng(7)
    shapes = ["1xL4", "2xL4", "1xA100-80G"]
    layers = 10
    tables = [rng.uniform(0, 100, (len(shapes), 4, layers)) * (rng.random((len(shapes), 4, layers)) > 0.1)
              for _ in range(5)]
    placements = []
    for _ in range(200):
        s = int(rng.integers(1, 6))  # some deeper than the tables (4 stages): throughput 0
        cuts = np.sort(rng.choice(np.arange(1, layers), size=min(s, layers) - 1, replace=False))
        sizes = np.diff(np.concatenate(([0], cuts, [layers])))
        placements.append(json.dumps([{"layers": int(j), "shapes": [shapes[int(k)] for k in rng.integers(0, 3, rng.integers(1, 3))]}
                                      for j in sizes]))
    placements.append("")
    got = _per_class(placements, tables, shapes)
    index = {s: k for k, s in enumerate(shapes)}
    for i, text in enumerate(placements):
        stages = stages_from_placement(json.loads(text)) if text else ()
        for c, t in enumerate(tables):
            assert got[i, c] == pytest.approx(evaluate_stages(stages, t, index))
