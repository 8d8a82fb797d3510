"""Mélange's own inputs through the public interfaces (import-melange → scenario file → solve), checked against
an independent brute-force integer optimum, the fractional (LP) bound and Mélange's recorded answers.

Formulations compared (all over the same buckets, prices and per-GPU throughput tables):
- fractional bound: GPU counts continuous, every bucket on its cheapest GPU per request:
  Σ_q λ_q · min_g p_g / T_gq (the LP relaxation; $4.13/h on example.json);
- exact optimum (what the planner must return): integer GPU counts, each bucket's rate split fractionally
  across GPUs, Σ_q x_gq / T_gq ≤ n_g ($4.68/h on example.json: 1 A100 + 1 A10G);
- Mélange's answer: integer counts with each bucket cut into ``slice_factor`` slices, each slice on one GPU
  type (a restriction of the exact problem, so never cheaper; $6.70/h on example.json with slice_factor 1).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy.optimize import linprog

from planning import api
from planning.cli import main
from planning.melange_import import GPU_ALIASES, import_melange, melange_to_scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "melange"


def _problem(data: dict[str, Any], rate: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """(rates λ_q, prices p_g, throughputs T[g, q], catalog GPU ids) read straight from a Mélange input."""
    total = float(rate if rate is not None else data["total_request_rate"])
    lam = np.array(data["workload_distribution"], dtype=float).ravel() * total
    n_in, n_out = np.array(data["workload_distribution"]).shape
    names = list(data["gpu_info"])
    prices = np.array([data["gpu_info"][g]["cost"] for g in names], dtype=float)
    thr = np.array([np.array(data["gpu_info"][g]["tputs"], dtype=float)[:n_in, :n_out].ravel() for g in names])
    return lam, prices, thr, [GPU_ALIASES.get(g, g) for g in names]


def _routable(counts: np.ndarray, lam: np.ndarray, thr: np.ndarray) -> bool:
    """Whether integer GPU counts can carry every bucket with fractional routing (an LP feasibility check)."""
    g_n, q_n = thr.shape
    ok = (thr > 0) & (lam[None, :] > 0)
    idx = np.argwhere(ok)
    if np.any((lam > 0) & ~ok.any(axis=0)):
        return False
    n_var = len(idx)
    a_eq = np.zeros((q_n, n_var))
    a_ub = np.zeros((g_n, n_var))
    for v, (g, q) in enumerate(idx):
        a_eq[q, v] = 1.0
        a_ub[g, v] = 1.0 / thr[g, q]
    keep = lam > 0
    res = linprog(np.zeros(n_var), A_ub=a_ub, b_ub=counts.astype(float), A_eq=a_eq[keep], b_eq=lam[keep],
                  bounds=(0, None), method="highs")
    return bool(res.status == 0)


def _maximal_vectors(prices: np.ndarray, upper: float):  # type: ignore[no-untyped-def]
    """Every count vector costing ≤ upper that cannot take one more GPU of the cheapest type (the last axis
    after sorting by price): feasibility is monotone in the counts, so these are the only ones to check."""
    order = np.argsort(-prices)  # cheapest type last: it has the largest range
    p = prices[order]
    bounds = [int((upper + 1e-9) // x) for x in p[:-1]]
    for head in itertools.product(*(range(b + 1) for b in bounds)):
        spent = float(np.dot(head, p[:-1]))
        if spent > upper + 1e-9:
            continue
        vec = np.zeros(len(prices), dtype=int)
        vec[order] = [*head, int((upper - spent + 1e-9) // p[-1])]
        yield vec


def brute_force_optimum(lam: np.ndarray, prices: np.ndarray, thr: np.ndarray, upper: float) -> tuple[float, np.ndarray]:
    """Cheapest integer GPU counts that carry the demand among all vectors costing ≤ upper (full enumeration)."""
    best_cost, best = math.inf, np.zeros(len(prices), dtype=int)
    for vec in itertools.product(*(range(int((upper + 1e-9) // x) + 1) for x in prices)):
        counts = np.array(vec)
        cost = float(np.dot(counts, prices))
        if cost <= upper + 1e-9 and cost < best_cost - 1e-9 and _routable(counts, lam, thr):
            best_cost, best = cost, counts
    return best_cost, best


def no_cheaper_plan(lam: np.ndarray, prices: np.ndarray, thr: np.ndarray, cost: float) -> int:
    """Brute-force optimality certificate: every maximal count vector costing < cost is infeasible.
    Returns the number of vectors checked; raises AssertionError on a cheaper feasible one."""
    checked = 0
    for vec in _maximal_vectors(prices, cost - 1e-6):
        checked += 1
        assert not _routable(vec, lam, thr), f"cheaper feasible plan {vec.tolist()} at {float(np.dot(vec, prices)):.2f}"
    return checked


def fractional_bound(lam: np.ndarray, prices: np.ndarray, thr: np.ndarray) -> float:
    """LP relaxation (continuous GPU counts): each bucket on its cheapest GPU per request."""
    with np.errstate(divide="ignore"):
        per_req = np.where(thr > 0, prices[:, None] / np.where(thr > 0, thr, 1), np.inf)
    return float(np.sum(lam * per_req.min(axis=0)))


def _solve_file(tmp_path: Path, src: Path, rate: float | None = None) -> dict[str, Any]:
    out = tmp_path / f"{src.stem}-{rate}.yaml"
    argv = ["import-melange", str(src), "--out", str(out)] + (["--rate", str(rate)] if rate is not None else [])
    assert main(argv) == 0
    assert main(["validate", str(out)]) == 0
    res_file = tmp_path / f"{src.stem}-{rate}.json"
    assert main(["solve", str(out), "--json", "--out", str(res_file)]) == 0
    return dict(json.loads(res_file.read_text()))


def _gpus(result: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for inst in result["instances"]:
        for gpu, n in inst["gpus"].items():
            out[gpu] = out.get(gpu, 0) + int(n) * int(inst["count"])
    return out


def test_example_json_subprocess_gives_the_exact_optimum(tmp_path: Path) -> None:
    """The shipped example.json through the real command line: $4.68/h (1 A100 + 1 A10G), not Mélange's $6.70."""
    src = DATA / "example.json"
    scen = tmp_path / "example.yaml"
    env_cmd = [sys.executable, "-m", "planning.cli"]
    run = subprocess.run([*env_cmd, "import-melange", str(src), "--out", str(scen)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    solved = subprocess.run([*env_cmd, "solve", str(scen), "--json"], capture_output=True, text=True, timeout=300,
                            check=False)
    assert solved.returncode == 0, solved.stderr
    result = json.loads(solved.stdout)
    data = json.loads(src.read_text())
    lam, prices, thr, gpus = _problem(data)
    exact, counts = brute_force_optimum(lam, prices, thr, data["_melange_answer"]["cost_per_hour"])
    assert exact == pytest.approx(4.68)
    assert no_cheaper_plan(lam, prices, thr, exact) > 0
    assert result["status"] == "optimal"
    assert result["cost_per_hour"] == pytest.approx(exact, abs=1e-6)
    assert result["served_fraction"] == pytest.approx(1.0, abs=1e-6)
    assert _gpus(result) == {g: int(n) for g, n in zip(gpus, counts, strict=True) if n}
    assert fractional_bound(lam, prices, thr) == pytest.approx(4.12875)  # continuous GPUs
    assert fractional_bound(lam, prices, thr) <= result["cost_per_hour"] < data["_melange_answer"]["cost_per_hour"]


def test_example_bucket_order_is_the_grid_order(tmp_path: Path) -> None:
    """Bucket (i, j) is class b{i·n_out+j}: the A10G's 5 req/s belongs to bucket (1, 0), the one it is best at."""
    scen = import_melange(DATA / "example.json")
    (a10g,) = [t for t in scen.explicit_templates if t.id == "A10G"]
    assert a10g.throughput["llama-2-7b/aggregated/b2"] == 5.0
    assert [b.rate_rps for b in scen.model("llama-2-7b").demand.histogram] == pytest.approx([6, 3, 15, 6])


def test_toy_example_is_fully_served(tmp_path: Path) -> None:
    """Mélange's toy example (main.py): the old sorted class ids left 30 % unserved; now exact and served."""
    data = json.loads((DATA / "toy.json").read_text())
    result = _solve_file(tmp_path, DATA / "toy.json")
    lam, prices, thr, _ = _problem(data)
    exact, _counts = brute_force_optimum(lam, prices, thr, data["_melange_answer"]["cost_per_hour"])
    assert result["served_fraction"] == pytest.approx(1.0, abs=1e-6)
    for s in result["service"]:
        assert s["served"] >= s["demanded"] * (1 - 1e-6)
    assert result["cost_per_hour"] == pytest.approx(exact, abs=1e-6)
    assert fractional_bound(lam, prices, thr) <= exact <= data["_melange_answer"]["cost_per_hour"] + 1e-9


@pytest.mark.parametrize("case", [0, 1, 2], ids=["rate1", "rate4", "rate32"])
def test_arena_cases_match_brute_force_and_never_exceed_melange(tmp_path: Path, case: int) -> None:
    """Arena 6×6 on the Feb-2024 Llama-2-7B profiles at 1, 4, 32 req/s (Mélange recorded 1.71, 4.37, 32.39).

    Mélange's slice assignment is a restriction of the exact problem on the same inputs, so its answer is an
    upper bound; the fractional bound is a lower bound; the planner must hit the brute-force optimum."""
    src = DATA / "arena_llama2_7b_feb2024.json"
    data = json.loads(src.read_text())
    answer = data["_melange_answers"][case]
    rate = answer["total_request_rate"]
    result = _solve_file(tmp_path, src, rate)
    lam, prices, thr, gpus = _problem(data, rate)
    melange_counts = np.array([answer["gpus"][g] for g in data["gpu_info"]])
    assert float(np.dot(melange_counts, prices)) == pytest.approx(answer["cost_per_hour"])
    assert _routable(melange_counts, lam, thr)  # Mélange's plan is feasible in the exact problem
    ours = np.array([_gpus(result).get(g, 0) for g in gpus])
    cost = float(result["cost_per_hour"])
    assert result["status"] == "optimal"
    assert cost == pytest.approx(float(np.dot(ours, prices)), abs=1e-6)
    assert _routable(ours, lam, thr)  # the plan carries every bucket
    assert no_cheaper_plan(lam, prices, thr, cost) > 0  # and nothing cheaper does: the exact optimum
    assert fractional_bound(lam, prices, thr) <= cost + 1e-9 <= answer["cost_per_hour"] + 2e-9


def test_import_rejects_bad_inputs_with_field_and_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = json.loads((DATA / "example.json").read_text())
    cases = [
        ({**base, "workload_distribution": [[0.5, 0.5], [0.5]]}, "workload_distribution[1]"),
        ({**base, "total_request_rate": -1}, "total_request_rate"),
        ({**base, "total_request_rate": 10**400}, "total_request_rate"),
        ({**base, "bucket_edges": [0, 5, 3]}, "bucket_edges"),
        ({**base, "gpu_info": {"A10G": {"cost": 1.0, "tputs": [["x", 1], [1, 1]]}}}, "gpu_info.A10G.tputs[0][0]"),
        ({**base, "gpu_info": {"A10G": {"cost": 1.0, "tputs": [[1, 1]]}}}, "gpu_info.A10G.tputs"),
        ({k: v for k, v in base.items() if k != "gpu_info"}, "gpu_info"),
        ({**base, "gpu_info": {"Z9": {"cost": 1.0, "tputs": [[1, 1], [1, 1]]}}}, "gpu_info.Z9"),
    ]
    for i, (data, field) in enumerate(cases):
        path = tmp_path / f"bad{i}.json"
        path.write_text(json.dumps(data))
        assert main(["import-melange", str(path)]) == 2
        err = capsys.readouterr().err
        assert field in err and "Fix:" in err
    (tmp_path / "notjson.json").write_text("{oops")
    assert main(["import-melange", str(tmp_path / "notjson.json")]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_import_round_trips_through_yaml_and_api_agrees_with_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-melange", str(DATA / "example.json")]) == 0
    text = capsys.readouterr().out
    from planning.scenario import Scenario

    from_cli = Scenario.from_dict(yaml.safe_load(text))
    assert from_cli == import_melange(DATA / "example.json")
    raw = melange_to_scenario(json.loads((DATA / "example.json").read_text()))
    assert raw["generate_templates"] is False
    assert api.solve(from_cli).cost_per_hour == pytest.approx(4.68)


def test_8x8_grid_with_empty_buckets_through_the_cli_is_exact(tmp_path: Path) -> None:
    """64 buckets (an 8×8 grid with bucket_edges, a fifth of them empty) posed as a Mélange input file."""
    rng = np.random.default_rng(11)
    wl = np.where(rng.random((8, 8)) < 0.2, 0.0, rng.random((8, 8)))
    data = {
        "bucket_edges": [0, 16, 32, 64, 128, 256, 512, 1024, 2048],
        "workload_distribution": (wl / wl.sum()).round(6).tolist(),
        "total_request_rate": 6.0,
        "gpu_info": {"L4": {"cost": 0.7, "tputs": rng.uniform(0.3, 3.0, (8, 8)).round(3).tolist()},
                     "A10G": {"cost": 1.01, "tputs": rng.uniform(0.5, 5.0, (8, 8)).round(3).tolist()},
                     "A100": {"cost": 3.67, "tputs": rng.uniform(2.0, 20.0, (8, 8)).round(3).tolist()}},
    }
    src = tmp_path / "grid8.json"
    src.write_text(json.dumps(data))
    result = _solve_file(tmp_path, src)
    lam, prices, thr, gpus = _problem(data)
    ours = np.array([_gpus(result).get(g, 0) for g in gpus])
    assert result["status"] == "optimal"
    assert len(result["service"]) == 1 and result["served_fraction"] == pytest.approx(1.0, abs=1e-6)
    assert _routable(ours, lam, thr)
    assert result["cost_per_hour"] == pytest.approx(float(ours @ prices))
    assert no_cheaper_plan(lam, prices, thr, result["cost_per_hour"]) > 0


def test_unknown_model_is_refused_with_the_closest_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-melange", str(DATA / "example.json"), "--model", "llama-9"]) == 2
    err = capsys.readouterr().err
    assert "--model" in err and "llama-9" in err and "did you mean" in err


def test_fractions_not_summing_to_one_are_said_or_normalized(capsys: pytest.CaptureFixture[str]) -> None:
    """Mélange's toy sums to 1.25: used as given (Mélange's rule) the demand is 1.25 × the rate, and the import
    says so on stderr and in the description; --normalize scales the histogram to the stated rate."""
    data = json.loads((DATA / "toy.json").read_text())
    assert main(["import-melange", str(DATA / "toy.json")]) == 0
    out = capsys.readouterr()
    from planning.scenario import Scenario

    as_given = Scenario.from_dict(yaml.safe_load(out.out))
    assert "sums to 1.25" in out.err and "--normalize" in out.err
    assert "sum to 1.25" in as_given.description
    total = data["total_request_rate"]
    assert sum(b.rate_rps for b in as_given.models[0].demand.histogram) == pytest.approx(1.25 * total)
    scaled = import_melange(DATA / "toy.json", normalize=True)
    assert sum(b.rate_rps for b in scaled.models[0].demand.histogram) == pytest.approx(total)
    assert "scaled to 1" in scaled.description
    assert main(["import-melange", str(DATA / "example.json")]) == 0
    assert capsys.readouterr().err == ""  # a file summing to 1 gets no note
