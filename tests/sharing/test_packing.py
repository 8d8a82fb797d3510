"""The exact packing MILP equals brute force on tiny seeded instances; the KVPR pool is feasible and never cheaper."""

from __future__ import annotations

import random

import pytest

from planning.errors import PlanningError
from planning.sharing.packing import (
    NodeType,
    TailModel,
    brute_force_packing,
    exact_packing,
    fits,
    kvpr_packing,
)

TYPES = [NodeType("r 1xH100", 4.3, 3, 72.0), NodeType("r 1xL40S", 1.86, 4, 43.0), NodeType("r 1xL4", 0.80, 6, 21.6)]


def _models(seed: int) -> list[TailModel]:
    rng = random.Random(seed)
    out = []
    for k in range(rng.randint(2, 6)):
        w = rng.choice([6.4, 16.1, 16.1, 29.3])
        kv = rng.uniform(0.5, 6.0)
        base = rng.uniform(0.02, 0.5)
        load = {t.key: base * f for t, f in zip(TYPES, (1.0, 2.2, 5.0), strict=True) if base * f <= 1.5}
        if seed % 2:  # half the instances also carry the (ttft) rows: decode shares and prefill shares
            decode = {key: 0.8 * u for key, u in load.items()}
            prefill = {key: rng.uniform(0.05, 0.6) for key in load}
            out.append(TailModel(f"m{k}", w, kv, rng.uniform(0.01, 2.0), load, decode, prefill))
        else:
            out.append(TailModel(f"m{k}", w, kv, rng.uniform(0.01, 2.0), load))
    return out


def _valid(packing, models, types) -> None:  # type: ignore[no-untyped-def]
    by_id = {m.id: m for m in models}
    by_key = {t.key: t for t in types}
    placed = [m for n in packing.nodes for m in n.models]
    assert sorted(placed) == sorted(by_id)
    for n in packing.nodes:
        assert fits([by_id[m] for m in n.models], by_key[n.type])
    for t in types:
        assert sum(n.type == t.key for n in packing.nodes) <= t.available
    assert packing.cost_per_hour == pytest.approx(sum(by_key[n.type].price_per_hour for n in packing.nodes))


def test_exact_packing_equals_brute_force_on_40_seeded_instances() -> None:
    checked = heuristic_worse = infeasible = 0
    for seed in range(40):
        models = _models(seed)
        brute = brute_force_packing(models, TYPES)
        if not brute.feasible:  # a model fits nowhere alone (an instruction) or availability is short
            try:
                assert not exact_packing(models, TYPES).feasible
            except PlanningError as exc:
                assert "fits on no shared node type" in str(exc)
            infeasible += 1
            continue
        exact = exact_packing(models, TYPES, time_limit_s=20)
        heur = kvpr_packing(models, TYPES)
        assert exact.status == "optimal"
        assert exact.cost_per_hour == pytest.approx(brute.cost_per_hour, rel=1e-6), seed
        _valid(exact, models, TYPES)
        if heur.feasible:
            _valid(heur, models, TYPES)
            assert heur.cost_per_hour >= exact.cost_per_hour - 1e-9
            heuristic_worse += heur.cost_per_hour > exact.cost_per_hour + 1e-9
        checked += 1
    assert checked >= 25 and checked + infeasible == 40


def test_memory_and_compute_both_bind() -> None:
    t = [NodeType("r 1xX", 1.0, 10, 40.0)]
    mem = [TailModel(f"m{i}", 15.0, 4.0, 1.0, {"r 1xX": 0.1}) for i in range(4)]  # 2 per node by memory
    cpu = [TailModel(f"c{i}", 1.0, 1.0, 1.0, {"r 1xX": 0.45}) for i in range(4)]  # 2 per node by compute
    assert exact_packing(mem, t).cost_per_hour == pytest.approx(2.0)
    assert exact_packing(cpu, t).cost_per_hour == pytest.approx(2.0)
    assert len(kvpr_packing(mem, t).nodes) == 2


def test_ttft_rows_separate_models_that_would_fit_by_memory_and_compute() -> None:
    t = [NodeType("r 1xX", 1.0, 10, 40.0)]
    # two models: together 0.6 load (fits), but each one's prefill needs the decode share of the other below 0.5
    a = TailModel("a", 5.0, 1.0, 1.0, {"r 1xX": 0.3}, {"r 1xX": 0.3}, {"r 1xX": 0.5})
    b = TailModel("b", 5.0, 1.0, 1.0, {"r 1xX": 0.3}, {"r 1xX": 0.3}, {"r 1xX": 0.5})
    assert not fits([a, b], t[0]) and fits([a], t[0])
    assert exact_packing([a, b], t).cost_per_hour == pytest.approx(2.0)
    assert brute_force_packing([a, b], t).cost_per_hour == pytest.approx(2.0)


def test_model_that_fits_nowhere_is_an_instruction() -> None:
    with pytest.raises(PlanningError, match="dedicated"):
        kvpr_packing([TailModel("big", 90.0, 5.0, 1.0, {"r 1xH100": 0.1})], TYPES)


def test_kvpr_spills_over_when_the_cheapest_type_is_scarce() -> None:
    """Twelve models whose cheapest type (L40S per model) has room for ten at most: neither one pool of one type nor each model on
    its cheapest type fits the availability; the spill-over pools do, are valid, and the exact packing (which
    can only be cheaper) confirms the instance is feasible."""
    types = [NodeType("r 1xL4", 0.80, 2, 21.6), NodeType("r 1xL40S", 1.86, 2, 43.0),
             NodeType("r 1xH100", 4.3, 1, 72.0)]
    models = [TailModel(f"m{k}", 6.4, 2.0, 0.1, {"r 1xL4": 0.45, "r 1xL40S": 0.2, "r 1xH100": 0.1})
              for k in range(12)]
    heur = kvpr_packing(models, types)
    assert heur.feasible and "spilled over" in heur.notes[0]
    _valid(heur, models, types)
    assert len({n.type for n in heur.nodes}) >= 2  # no one type holds them all
    exact = exact_packing(models, types)
    assert exact.feasible and exact.cost_per_hour <= heur.cost_per_hour + 1e-9
