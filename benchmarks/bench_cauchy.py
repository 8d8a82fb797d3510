"""Cauchy beside the other baselines (issue 27 §3): the plan against every baseline on coral-core and coral-extended.

Run: ``python benchmarks/bench_cauchy.py [--presets coral-core coral-extended]``.

Prints per preset the plan's status, proof and provisioning $/h (``comparable_cost``), then every baseline's $/h, served fraction and the
plan's ratio to it (the same components: provisioning of the nodes each buys), and the seconds the solve took; the
last line says whether the plan is ≤ every baseline that meets all demand, Cauchy included.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning import api


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--presets", nargs="+", default=["coral-core", "coral-extended"])
    args = ap.parse_args()
    print(f"# {platform.platform()}, python {platform.python_version()}, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    ok_all = True
    for name in args.presets:
        t0 = time.perf_counter()
        res = api.solve(api.load_preset_scenario(name))
        wall = time.perf_counter() - t0
        plan = res.comparable_cost  # provisioning (+ KV egress), as every baseline counts it
        print(f"{name}: plan ${plan:,.2f}/h provisioning (objective with the start-up penalty "
              f"${res.cost_per_hour:,.2f}/h), {res.status} ({res.proof()}); {wall:.1f} s")
        for b in res.baselines:
            ratio = b.cost_per_hour / plan if b.feasible and plan > 0 else float("nan")
            print(f"  {b.name:<16} ${b.cost_per_hour:>10,.2f}/h  served {b.served_fraction:6.1%}  "
                  f"{'plan ×' + format(ratio, '.2f') if b.feasible else 'short of demand'}")
        names = [b.name for b in res.baselines]
        cheaper = all(plan <= b.cost_per_hour + 1e-6 for b in res.baselines if b.feasible and b.ran)
        ok_all &= cheaper and "cauchy" in names
        print(f"  cauchy listed: {'cauchy' in names}; plan ≤ every baseline meeting demand: {cheaper}")
    print(f"# all presets: plan ≤ Cauchy and the others: {ok_all}")
    return 0 if ok_all else 1


if __name__ == "__main__":
    raise SystemExit(main())
