"""CLI adapter: ``planning import-melange FILE [--out scenario.yaml]`` (the converter is
:mod:`planning.melange_import`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from planning.errors import PlanningError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg, unused-ignore]
    p = sub.add_parser("import-melange", help="turn a Mélange solver input (JSON) into a scenario")
    p.add_argument("file", type=Path, help="Mélange input: workload_distribution, total_request_rate, gpu_info")
    p.add_argument("--tputs", type=Path, help="throughput file whose gpu_info replaces the input's")
    p.add_argument("--rate", type=float, help="total request rate (req/s) instead of the file's")
    p.add_argument("--model", default="llama-2-7b", help="catalog model id of the profiles (default llama-2-7b)")
    p.add_argument("--normalize", action="store_true",
                   help="scale workload_distribution to sum to 1 (default: used as given, as Mélange does)")
    p.add_argument("--gpu", action="append", default=[], metavar="NAME=ID",
                   help="map a GPU name of the file to a catalog GPU id (repeatable)")
    p.add_argument("--out", type=Path, help="write the scenario here (YAML, or JSON for .json) instead of stdout")
    p.set_defaults(func=_import_melange)


def _import_melange(args: argparse.Namespace) -> int:
    import sys

    from planning.melange_import import import_melange
    from planning.scenario import save_scenario

    gpu_map = {}
    for item in args.gpu:
        name, sep, gid = str(item).partition("=")
        if not sep or not name or not gid:
            raise PlanningError("--gpu", f"{str(item)[:60]!r} is not NAME=ID.", "e.g. --gpu A100-PCIe=A100-80G.")
        gpu_map[name] = gid
    scenario = import_melange(args.file, tputs=args.tputs, rate=args.rate, model=args.model, gpu_map=gpu_map,
                              normalize=args.normalize)
    _, said, rest = scenario.description.partition("; fractions sum to ")
    if said:
        print(f"note: workload_distribution sums to {rest}", file=sys.stderr)
    if args.out is not None:
        save_scenario(scenario, args.out)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(scenario.to_yaml())
    return 0
