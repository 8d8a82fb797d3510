"""Infeasible said at once (issue 37 §4): an SLO below what any offered GPU reaches is answered ``infeasible`` with
the bound and the fix before any library is built; the bound is a true lower bound (never refuses what a template
serves: every preset passes, and on seeded random SLOs a refusal always means the T̂ tables admit no template)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from planning import api, pipeline
from planning.cli import main
from planning.perf import Workload
from planning.precheck import refusals, slo_bound
from planning.resolve import resolve_scenario
from planning.scenario import Scenario

IMPOSSIBLE = {
    "name": "impossible-tpot",
    "regions": ["aws:us-east-1", "aws:us-east-2"],
    "models": [{"id": "llama-3-70b", "slo": {"prefill_ms": 2000, "decode_ms": 1},
                "demand": {"rate_rps": 2, "input_len": 1024, "output_len": 256}}],
    "options": {"time_limit_s": 60},
}


def _no_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("a refused scenario must not reach the templates")

    monkeypatch.setattr(pipeline, "build_template_sets", boom)
    monkeypatch.setattr(pipeline, "on_demand_allocation", boom)
    monkeypatch.setattr(pipeline, "quick_template_sets", boom)


def test_tpot_1ms_on_a_70b_model_is_infeasible_with_the_bound_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solve returns status infeasible without building anything; the message names the SLO, the bound, the
    fastest offer, the field to relax and a value at or above the bound."""
    _no_library(monkeypatch)
    res = api.solve(Scenario.from_dict(IMPOSSIBLE))
    assert res.status == "infeasible" and not res.has_plan
    assert res.message.startswith("infeasible: TPOT 1 ms < the ")
    assert "llama-3-70b" in res.message and "models[0].slo.decode_ms to ≥ " in res.message
    bound = float(res.message.split("the ", 1)[1].split(" ms", 1)[0])
    assert bound > 1
    offer = res.message.split("fastest offer (", 1)[1].split(")", 1)[0]
    assert offer in resolve_scenario(Scenario.from_dict(IMPOSSIBLE), api.engine_context().catalog).shapes
    assert any("llama-3-70b/decode" in d for d in res.diagnostics)


def test_the_ttft_is_checked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TTFT of 1 ms for a 1024-token prompt on a 70B model is refused, naming prefill_ms."""
    _no_library(monkeypatch)
    d = json.loads(json.dumps(IMPOSSIBLE))
    d["models"][0]["slo"] = {"prefill_ms": 1, "decode_ms": 200}
    res = api.solve(Scenario.from_dict(d))
    assert res.status == "infeasible" and "TTFT 1 ms <" in res.message and "slo.prefill_ms" in res.message


def test_the_served_objective_is_not_refused() -> None:
    """With the served objective the solve plans what it can: the precheck stays out (None refusal result)."""
    from planning.precheck import precheck

    d = json.loads(json.dumps(IMPOSSIBLE))
    d["objective"] = {"kind": "served"}
    assert precheck(Scenario.from_dict(d), api.engine_context()) is None
    assert precheck(Scenario.from_dict(IMPOSSIBLE), api.engine_context()) is not None


def test_a_group_with_explicit_templates_is_not_checked() -> None:
    """Explicit templates carry the user's throughputs (not the perf model's): their group is left to the solve."""
    d = json.loads(json.dumps(IMPOSSIBLE))
    d["explicit_templates"] = [{"id": "given", "model": "llama-3-70b", "phase": "decode", "usage": {"8xH100": 1},
                                "throughput": {"llama-3-70b/decode": 5000.0}}]
    ctx = api.engine_context()
    scenario = Scenario.from_dict(d)
    assert [b.group for b in refusals(ctx, resolve_scenario(scenario, ctx.catalog))] == []
    assert [b.group for b in refusals(ctx, resolve_scenario(replace(scenario, explicit_templates=()), ctx.catalog))] \
        == ["llama-3-70b/decode"]


def test_the_cli_answers_infeasible_with_exit_code_1(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """``planning solve`` prints the infeasible message and exits 1 (no plan), as docs/architecture.md says."""
    path = tmp_path / "impossible.json"
    path.write_text(json.dumps(IMPOSSIBLE))
    assert main(["solve", str(path)]) == 1
    out = capsys.readouterr().out
    assert "infeasible: TPOT 1 ms <" in out and "decode_ms to ≥" in out


@pytest.mark.parametrize("name", api.list_presets())
def test_every_preset_passes_the_precheck(name: str) -> None:
    """No shipped preset is refused: each is served by the full solve (docs/benchmarks.md)."""
    scenario = api.load_preset_scenario(name)
    ctx = api.engine_context()
    assert refusals(ctx, resolve_scenario(scenario, ctx.catalog)) == []


def _template_exists(tables: np.ndarray, layers: int) -> bool:
    """The T̂ oracle: some S ≤ S_max and layer split j_1 + … + j_S = L with every stage's entry positive on some
    offered shape (a template's rate is the min over its stages of their summed entries)."""
    for S in range(1, tables.shape[1] + 1):
        ok = np.nonzero((tables[:, S - 1, :] > 0).any(axis=0))[0] + 1
        reach = np.zeros(layers + 1, dtype=bool)
        reach[0] = True
        for _ in range(S):
            nxt = np.zeros_like(reach)
            for j in ok:
                nxt[j:] |= reach[: layers + 1 - j]
            reach = nxt
        if reach[layers]:
            return True
    return False


MODELS = ["llama-3-8b", "llama-3-70b", "qwen3-32b", "gpt-oss-20b", "mixtral-8x7b", "phi-4"]


@pytest.mark.parametrize("seed", range(6))
def test_a_refusal_means_no_template_meets_the_slo(seed: int) -> None:
    """Seeded random (model, offered shapes, request size, SLO around the bound): whenever the bound refuses the
    SLO, the perf model's T̂ tables of every offered shape admit no template at that SLO; and the refusals do
    happen (the test is not vacuous)."""
    rng = np.random.default_rng(seed)
    ctx = api.engine_context()
    base = Scenario.from_dict(IMPOSSIBLE)
    refused = 0
    for _ in range(4):
        model = MODELS[int(rng.integers(len(MODELS)))]
        inp, out = float(rng.choice([128, 1024, 4096])), float(rng.choice([1, 32, 256]))
        m = replace(base.models[0], id=model, demand=replace(base.models[0].demand, input_len=inp, output_len=out))
        resolved = resolve_scenario(replace(base, models=(m,)), ctx.catalog)
        keep = sorted(rng.choice(len(resolved.shapes), size=int(rng.integers(1, 6)), replace=False))
        shapes = [resolved.shapes[k] for k in keep]
        resolved = replace(resolved, shapes=tuple(shapes))
        for g in resolved.groups:
            b = slo_bound(ctx, resolved, g, inp, out)
            assert b is not None
            slo = b.bound_ms * float(rng.uniform(0.3, 1.0))
            spec = resolved.specs[model]
            tables = np.asarray(ctx.perf.stage_tables(spec, shapes, g.phase, slo, Workload(inp, out), 6))
            assert not _template_exists(tables, spec.layers), (model, g.phase, shapes, slo, b)
            refused += 1
    assert refused == 8
