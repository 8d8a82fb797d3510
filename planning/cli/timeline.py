"""CLI: ``planning timeline SCENARIO|--preset NAME --demand MODEL=FILE … [--availability FILE] [--epoch 1h]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from planning.errors import PlanningError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg, unused-ignore]
    p = sub.add_parser("timeline", help="re-plan epoch by epoch over a day of demand; compare with static/homogeneous")
    from planning.cli.commands import scenario_args

    scenario_args(p)  # SCENARIO | --preset NAME, and --variant what-ifs, as for `planning solve`
    p.add_argument("--demand", action="append", default=[], metavar="MODEL=FILE",
                   help="demand of one model: an Azure/Mooncake trace or an epoch table "
                        "(epoch_start,rate_rps,input_len,output_len); repeat per model")
    p.add_argument("--match", choices=("peak", "mean", "absolute"), default="peak",
                   help="how a series meets the scenario's demand: peak (default: its shape with the busiest epoch "
                        "at the scenario's rate_rps, request sizes at the scenario's means), mean (its mean rate at "
                        "rate_rps) or absolute (the trace's own rates and token counts)")
    p.add_argument("--rate-scale", type=float, default=1.0, metavar="K",
                   help="multiply every demand rate by K (after --match)")
    p.add_argument("--availability", type=Path, metavar="FILE",
                   help="node counts over time: timestamp,region,shape,nodes[,pricing]")
    p.add_argument("--epoch", default="1h", help="epoch length, e.g. 1h, 30m (default 1h)")
    p.add_argument("--K", type=float, default=None, help="initialization penalty factor (default: the scenario's)")
    p.add_argument("--histogram", action="store_true", help="plan trace demand as Mélange request-size buckets")
    p.add_argument("--spot", action="store_true", help="also offer spot nodes at a risk-adjusted price")
    p.add_argument("--preemption", type=float, default=0.05, metavar="Q", help="spot preemptions per node-hour")
    p.add_argument("--restart", type=float, default=0.25, metavar="H", help="hours until a preempted node serves again")
    p.add_argument("--no-baselines", action="store_true", help="skip the homogeneous baselines")
    p.add_argument("--policy", action="append", choices=("myopic", "lookahead", "offline"), default=None,
                   help="how epochs are planned, repeatable: myopic (each epoch alone, Coral's; the default), "
                        "lookahead (rolling horizon of --horizon epochs), offline (every epoch at once: the optimum, "
                        "a lower bound on every policy). The first plans the epochs in detail, the others are "
                        "compared beside it (JSON: policies)")
    p.add_argument("--horizon", type=int, default=None, metavar="H",
                   help="look-ahead epochs (default: the scenario's options.lookahead_epochs, 3)")
    p.add_argument("--offline-time-limit", type=float, default=600.0, metavar="S",
                   help="seconds for the offline multi-epoch MILP (default 600; past it the best plan and its gap)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="with K = 0 the epochs do not chain: solve their distinct problems on N processes "
                        "(0: one per core; with --backend ray, as Ray tasks). Default 1: here, one after another")
    p.add_argument("--templates", choices=("auto", "on-demand", "library"), default="auto",
                   help="serving templates: priced on demand per distinct epoch demand, or every group's full "
                        "library (default auto: on demand unless the libraries are small or --policy offline)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the result as JSON")
    fmt.add_argument("--csv", action="store_true", help="print one row per (epoch, model) as CSV")
    p.set_defaults(func=_timeline)


def parse_demand_args(items: list[str]) -> list[tuple[str, Path]]:
    """``MODEL=FILE`` pairs.

    Raises
    ------
    PlanningError
        An item without ``=``.
    """
    out = []
    for item in items:
        model, sep, path = item.partition("=")
        if not sep or not model.strip() or not path.strip():
            raise PlanningError("--demand", f"{item!r} is not MODEL=FILE.", "write e.g. --demand qwen3-32b=day.csv.")
        out.append((model.strip(), Path(path.strip())))
    return out


def _timeline(args: argparse.Namespace) -> int:
    from planning import api
    from planning.cli.commands import scenario_from_args
    from planning.timeline import SpotOptions, TimelineOptions, load_demand, load_series, parse_duration_hours

    scenario = scenario_from_args(args)
    if not args.demand:
        raise PlanningError("--demand", "no demand series given.",
                            "pass --demand MODEL=FILE per model, e.g. data/demand/azure_conv_day.csv.")
    hours = parse_duration_hours(args.epoch)
    demand = [load_demand(m, f, hours, histogram=args.histogram) for m, f in parse_demand_args(args.demand)]
    n = max(len(d) for d in demand)
    availability = (load_series(args.availability, n, hours, demand[0].start_hour)
                    if args.availability is not None else None)
    options = TimelineOptions(K=args.K, rate_scale=args.rate_scale,
                              baselines=() if args.no_baselines else TimelineOptions().baselines,
                              spot=SpotOptions(enabled=args.spot, preemption_per_hour=args.preemption,
                                               restart_hours=args.restart),
                              policies=tuple(args.policy or ("myopic",)), horizon=args.horizon,
                              offline_time_limit_s=args.offline_time_limit, workers=args.workers,
                              templates=args.templates)
    result = api.timeline(scenario, demand, availability=availability, options=options, demand_match=args.match)
    if args.json:
        sys.stdout.write(result.to_json() + "\n")
    elif args.csv:
        sys.stdout.write(result.to_csv())
    else:
        sys.stdout.write(result.summary_text())
    return 0
