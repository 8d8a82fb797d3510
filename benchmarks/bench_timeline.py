"""Timeline benchmark: epoch re-planning of a preset over the shipped day-long demand samples.

Run: ``python benchmarks/bench_timeline.py [--preset coral-core] [--days 1] [--repeats 3] [--baselines homo homo-ilp]``.
The first run builds (or loads) the template libraries; the timed repeats then re-plan every epoch on them.
Prints, per repeat, wall and CPU seconds of the epoch loop and the medians, plus the day's saving vs the static
peak plan and the churn. Demand: each model gets the daily shape of the Azure code or conversation day (alternating), at the
preset's request sizes, scaled so its peak equals the preset's rate.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planning import api
from planning.timeline import TimelineOptions, load_demand
from planning.timeline.demand import DemandSeries

DATA = Path(__file__).resolve().parents[1] / "data" / "demand"


def day_demand(scenario: api.Scenario, days: int, hours: int = 24) -> list[DemandSeries]:
    out = []
    for i, m in enumerate(scenario.models):
        s = load_demand(m.id, DATA / ("azure_code_day.csv" if i % 2 == 0 else "azure_conv_day.csv"), 1.0)
        # the sample's daily shape at the preset's peak rate and request sizes (so the preset's libraries apply)
        s = replace(s.scaled(m.demand.rate_rps / s.peak_rate), input_len=(m.demand.input_len,) * len(s),
                    output_len=(m.demand.output_len,) * len(s))
        if days > 1:
            s = replace(s, rate_rps=s.rate_rps * days, input_len=s.input_len * days, output_len=s.output_len * days,
                        labels=())
        if hours < 24 * days:  # the first ``hours`` epochs only (per-epoch timing on large presets)
            s = replace(s, rate_rps=s.rate_rps[:hours], input_len=s.input_len[:hours], output_len=s.output_len[:hours],
                        labels=())
        out.append(s)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--preset", default="coral-core")
    ap.add_argument("--days", type=int, default=1)
    ap.add_argument("--hours", type=int, default=0, help="only the first N hourly epochs (0 = all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baselines", nargs="*", default=["homo", "homo-ilp"])
    ap.add_argument("--K", type=float, nargs="*", default=[])
    args = ap.parse_args()
    scenario = api.load_preset_scenario(args.preset)
    demand = day_demand(scenario, args.days, args.hours or 24 * args.days)
    print(f"# {platform.platform()}, python {platform.python_version()}; {args.preset}, {len(demand[0])} "
          f"hourly epochs, baselines {args.baselines}")
    t0 = time.perf_counter()
    first = api.timeline(scenario, demand, options=TimelineOptions(baselines=tuple(args.baselines)))
    print(f"first run (libraries built or loaded): {time.perf_counter() - t0:.1f} s wall; "
          f"templates {first.timings['templates_seconds']:.1f} s, epochs {first.timings['epochs_seconds']:.1f} s")
    walls, cpus = [], []
    result = first
    for r in range(args.repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        result = api.timeline(scenario, demand, options=TimelineOptions(baselines=tuple(args.baselines)))
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        print(f"repeat {r}: {walls[-1]:.2f} s wall, {cpus[-1]:.2f} s CPU (templates {result.timings['templates_seconds']:.2f} s, "
              f"epochs {result.timings['epochs_seconds']:.2f} s, static {result.timings['static_seconds']:.2f} s)")
    print(f"median: {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU for "
          f"{len(result.epochs)} epochs ({statistics.median(cpus) / len(result.epochs):.2f} s CPU per epoch)")
    d = result.to_dict()
    print(f"adaptive ${d['total_cost']:.2f} vs static peak ${d['static_peak_total_cost']:.2f} "
          f"({d['saving_vs_static_pct']:.1f} % saved); month ${d['total_cost_month']:,.0f} vs "
          f"${d['static_peak_total_cost_month']:,.0f}; churn {d['nodes_started']} starts / {d['nodes_stopped']} stops; "
          f"baselines {({k: round(v, 2) for k, v in d['baselines_total_cost'].items()})}")
    for K in args.K:
        res = api.timeline(scenario, demand, options=TimelineOptions(K=K, baselines=()))
        print(f"K = {K:g}: total ${res.total_cost:.2f}, provisioning ${sum(e.provisioning_per_hour for e in res.epochs):.2f}, "
              f"{res.nodes_started} starts / {res.nodes_stopped} stops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
