"""Sharing benchmark: KVPR vs exact min-max KVPR, Moore–Hodgson vs FCFS, and dedicated vs shared on long-tail.

Run: ``python3 benchmarks/bench_sharing.py [--runs 3] [--time-limit 60] [--simulate 3600]``.

Prints (1) Alg. 1 against the exact min-max-KVPR placement on 200 seeded instances (the App. A.1 bound factor
and how often they tie), (2) late requests of Moore–Hodgson vs FCFS on seeded queues, (3) on the ``long-tail``
preset: the dedicated plan (allocation ILP, every model its own instances), the shared plan with the KVPR pool
and with the exact packing MILP — cost, GPUs, solve time (median of ``--runs``) — and the same on an H100-only
variant (Prism's setting: identical H100 GPUs); with ``--simulate S``, each shared plan's shared nodes simulated
request by request for S seconds (seeds 0–2, Moore–Hodgson and FCFS).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning import api
from planning.scenario import AvailabilityOverride, Scenario
from planning.sharing import QueuedRequest, fcfs, moore_hodgson, solve_shared
from planning.sharing.kvpr import KvprModel, exact_kvpr_placement, kvpr_placement


def kvpr_vs_exact(n: int) -> None:
    ties, ratios, factors = 0, [], []
    for seed in range(n):
        rng = random.Random(seed)
        gpus = rng.choice([2, 3, 4])
        models = [KvprModel(f"m{k}", 10.0 / (k + 1) ** 1.1 * rng.uniform(0.5, 1.5) / rng.choice([0.5, 1, 2, 5]),
                            rng.uniform(2, 16)) for k in range(rng.randint(3, 8))]
        h, o = kvpr_placement(models, gpus, 80.0), exact_kvpr_placement(models, gpus, 80.0)
        assert h.max_kvpr <= o.max_kvpr * h.bound_factor + 1e-12
        ties += math.isclose(h.max_kvpr, o.max_kvpr, rel_tol=1e-9)
        ratios.append(h.max_kvpr / o.max_kvpr)
        factors.append(h.bound_factor)
    print(f"KVPR Alg. 1 vs exact min-max KVPR, {n} instances: equal on {ties} ({ties / n:.0%}); "
          f"heuristic/optimal median {statistics.median(ratios):.3f}, max {max(ratios):.3f}; "
          f"App. A.1 bound factor median {statistics.median(factors):.2f} (all within the bound)")


def admission(n: int) -> None:
    mh = ff = 0
    total = 0
    for seed in range(n):
        rng = random.Random(seed)
        reqs = [QueuedRequest.from_prompt(j, -rng.uniform(0, 2), rng.choice([0.5, 1, 2, 5]),
                                          rng.choice([128, 512, 2048, 8192]), rng.choice([4000.0, 16000.0]))
                for j in range(40)]
        mh += len(moore_hodgson(reqs).late)
        ff += len(fcfs(reqs).late)
        total += len(reqs)
    print(f"Moore–Hodgson vs FCFS, {n} queues of 40 requests: late {mh / total:.1%} vs {ff / total:.1%}")


SIMULATE_S = 0.0


def timed(fn, runs: int):  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def plans(name: str, s: Scenario, runs: int) -> None:
    ded, t_ded = timed(lambda: api.solve(s, with_baselines=False), runs)
    n_ded = sum(ded.gpus_by_type().values())
    print(f"\n{name}: {len(s.models)} models")
    print(f"  dedicated       {ded.status:9s} ${ded.cost_per_hour:8.2f}/h  {n_ded:3d} GPUs {ded.gpus_by_type()}  "
          f"{t_ded:6.1f} s")
    for method in ("kvpr", "exact"):
        res, t = timed(lambda m=method: solve_shared(s, method=m), runs if method == "kvpr" else 1)
        att = [m.attainment_estimate for n in res.shared_nodes for m in n.models]
        gap = f", gap {res.shared_gap:.1%}" if res.shared_gap is not None else ""
        print(f"  shared {method:6s}   {res.status:9s} ${res.cost_per_hour:8.2f}/h  {res.n_gpus:3d} GPUs {res.gpus()}  "
              f"{t:6.1f} s  (shared part ${res.shared_cost_per_hour:.2f}/h on {len(res.shared_nodes)} GPUs, "
              f"{res.shared_status}{gap}; est. TTFT attainment min {min(att, default=1):.1%})")
        if res.n_gpus and ded.status in ("optimal", "feasible"):
            print(f"      saving vs dedicated: {n_ded / res.n_gpus:.2f}x fewer GPUs, "
                  f"{ded.cost_per_hour / res.cost_per_hour:.2f}x lower cost")
        if SIMULATE_S and res.shared_nodes:  # request-level check of the shared part, 3 seeds
            for adm in ("moore-hodgson", "fcfs"):
                sims = [api.simulate_shared(res, s, duration_s=SIMULATE_S, seed=k, admission=adm) for k in range(3)]
                worst = [min(sim.models, key=lambda m: m.attainment) for sim in sims]
                print(f"      simulated {SIMULATE_S:.0f} s, {adm:13s}: shared requests within SLO "
                      + " / ".join(f"{sim.attainment:.2%}" for sim in sims) + "; worst model "
                      + " / ".join(f"{w.model} {w.attainment:.1%}" for w in worst)
                      + f"; GPU busy max {max(max(sim.node_busy) for sim in sims):.2f}")
                if adm == "moore-hodgson":
                    dedicated_part(res, sims)


def dedicated_part(res, shared_sims) -> None:  # type: ignore[no-untyped-def]
    """The popular models' dedicated instances of a shared plan, simulated with the same window and seeds, and
    the whole plan's attainment (request-weighted over both parts)."""
    if res.dedicated is None or not res.dedicated.instances:
        return
    sims = [api.simulate(res.dedicated, duration_s=SIMULATE_S, seed=k) for k in range(3)]
    whole = [(sh.attainment * sh.requests + d.attainment * d.requests) / (sh.requests + d.requests)
             for sh, d in zip(shared_sims, sims, strict=True)]
    worst = [min(d.models, key=lambda m: m.attainment) for d in sims]
    print("      dedicated part (" + ", ".join(m.model for m in sims[0].models) + "): within SLO "
          + " / ".join(f"{d.attainment:.2%}" for d in sims) + "; worst "
          + " / ".join(f"{w.model} {w.attainment:.1%}" for w in worst)
          + "; whole plan " + " / ".join(f"{w:.2%}" for w in whole))


def many(s: Scenario, runs: int) -> None:
    """A 104-model scenario (the preset plus 60 more variants): validate and the KVPR shared plan, timed."""
    extra = tuple(replace(m, id=f"{m.id}-b", demand=m.demand.scaled(0.5)) for m in s.models if m.base is not None)
    extra += tuple(replace(m, id=f"{m.id}-c", demand=m.demand.scaled(0.25)) for m in s.models if m.base is not None)
    big = replace(s, name="long-tail x104", models=s.models + extra[:60])
    _, t_val = timed(lambda: api.validate(big), runs)
    res, t_kvpr = timed(lambda: solve_shared(big, method="kvpr"), runs)
    print(f"\n{len(big.models)} models: validate {t_val:.2f} s; shared kvpr plan {t_kvpr:.1f} s "
          f"(${res.cost_per_hour:.2f}/h, {res.n_gpus} GPUs, {len(res.shared_models)} shared on "
          f"{len(res.shared_nodes)} GPUs)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--h100-only", action="store_true", help="only the H100-only variant")
    ap.add_argument("--simulate", type=float, default=0.0, help="seconds of arrivals to simulate each shared plan")
    args = ap.parse_args()
    global SIMULATE_S
    SIMULATE_S = args.simulate
    t0 = time.perf_counter()
    s = api.load_preset_scenario("long-tail")
    api.validate(s)
    print(f"\nlong-tail load + validate: {time.perf_counter() - t0:.2f} s")
    s = replace(s, options=replace(s.options, time_limit_s=args.time_limit))
    # Prism's setting: identical H100 GPUs, enough of them that a dedicated plan exists (one per model at least)
    h100 = replace(s, name="long-tail H100 only", exclude_gpus=("L40S", "L4"),
                   availability_overrides=(AvailabilityOverride("aws:us-east-1", "1xH100", 100),),
                   options=replace(s.options, rho=24.0))  # Coral's ρ = 12 prunes a 1xH100 for a 6.4 GB 3B model
    if "--h100-only" in sys.argv:
        plans("long-tail, H100 only (Prism's setting)", h100, args.runs)
        return
    kvpr_vs_exact(200)
    admission(200)
    many(s, args.runs)
    plans("long-tail (H100, L40S, L4)", s, args.runs)
    plans("long-tail, H100 only (Prism's setting)", h100, args.runs)


if __name__ == "__main__":
    main()
