"""`make fuzz`: throw >= 10,000 mutated scenarios and import files (and ~80 CLI invocations) at the loaders.

Every case must end in a result or a clean ``PlanningError`` naming a field (message under 2,000 characters);
anything else is a crash. The CLI stage includes the issue-30 inputs (hostile Mélange numbers, unbounded trace
files); the cache stage damages every cached library of a library-path solve nine ways and requires the clean
plan each time. Prints a report: cases per target, crashes, the slowest cases, wall time. Exit code 1
when a crash was found.

    python tools/fuzz.py [--cases 10000] [--seed 0] [--validate 300] [--cli 24] [--show 5] [--no-cache]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fuzz.mutators import (  # noqa: E402  (the repository root must be importable first)
    Outcome,
    Report,
    cli_cases,
    corpus,
    hf_config_case,
    judge,
    profile_csv_case,
    run_cli,
    scenario_file_case,
    scenario_text_case,
    scenario_tree_case,
    template_cache_cases,
)

WEIGHTS = {"scenario-tree": 40, "scenario-text": 25, "scenario-file": 8, "hf-config": 15, "profile-csv": 12}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000, help="mutated inputs to try (default 10,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validate", type=int, default=300,
                        help="accepted scenarios also checked against the catalog with api.validate")
    parser.add_argument("--cli", type=int, default=24, help="random scenario files among the CLI invocations")
    parser.add_argument("--show", type=int, default=5, help="crashes and slow cases to print")
    parser.add_argument("--no-cache", dest="cache", action="store_false",
                        help="skip the template-cache corruption solves (~15 s)")
    args = parser.parse_args(argv)

    from planning import api
    from planning.scenario import Scenario

    rng = random.Random(args.seed)
    presets, texts, configs, csvs = corpus()
    report = Report()
    accepted: list[tuple[str, Scenario]] = []
    targets = list(WEIGHTS)
    weights = [WEIGHTS[t] for t in targets]
    t_start, c_start = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="planning-fuzz-") as tmp:
        folder = Path(tmp)
        os.environ.setdefault("PLANNING_HOME", str(folder / "home"))
        for i in range(args.cases):
            target = rng.choices(targets, weights)[0]
            if target == "scenario-tree":
                case = scenario_tree_case(rng, presets)
            elif target == "scenario-text":
                case = scenario_text_case(rng, texts)
            elif target == "scenario-file":
                case = scenario_file_case(rng, texts, folder)
            elif target == "hf-config":
                case = hf_config_case(rng, configs, folder)
            else:
                case = profile_csv_case(rng, csvs, folder)
            name, description, thunk = case
            holder: list[object] = []
            outcome = judge(name, description, lambda thunk=thunk, holder=holder: holder.append(thunk()))
            report.add(outcome)
            if outcome.kind == "ok" and name.startswith("scenario") and isinstance(holder[0], Scenario):
                accepted.append((description, holder[0]))
            if (i + 1) % 2000 == 0:
                print(f"  {i + 1:,} cases, {len(report.crashes)} crashes, {time.perf_counter() - t_start:.0f} s",
                      flush=True)
        t_inputs = time.perf_counter() - t_start

        # accepted scenarios go one step further: resolved against the catalog (offers, groups)
        t0 = time.perf_counter()
        for description, scenario in rng.sample(accepted, k=min(args.validate, len(accepted))):
            report.add(judge("validate", description, lambda s=scenario: api.validate(s)))
        t_validate = time.perf_counter() - t0

        t0 = time.perf_counter()
        for argv_case in cli_cases(folder / "cli", rng, n_random=args.cli):
            code, out, err, seconds = run_cli(argv_case)
            bad = code not in (0, 1, 2) or "Traceback" in out + err
            kind = "crash" if bad else ("ok" if code in (0, 1) else "rejected")
            report.add(Outcome("cli", kind, " ".join(a[-50:] for a in argv_case), seconds,
                               f"exit {code}: {err[-600:]}" if bad else f"exit {code}", seconds))
        t_cli = time.perf_counter() - t0

        # damaged, foreign and altered template-cache files: each solve must give the clean plan (issue 30)
        t0 = time.perf_counter()
        if args.cache:
            for target, description, thunk in template_cache_cases(folder / "cache"):
                report.add(judge(target, description, thunk))
        t_cache = time.perf_counter() - t0
    wall = time.perf_counter() - t_start

    by_target: dict[str, Counter[str]] = {}
    for o in report.outcomes:
        by_target.setdefault(o.target, Counter())[o.kind] += 1
    print(f"\nfuzz report (seed {args.seed})")
    print(f"{'target':<15}{'cases':>8}{'ok':>8}{'rejected':>10}{'crashes':>9}{'median ms':>11}{'max ms':>9}"
          f"{'max cpu ms':>12}")
    for target, counts in by_target.items():
        times = [o.seconds for o in report.outcomes if o.target == target]
        cpus = [o.cpu for o in report.outcomes if o.target == target]
        print(f"{target:<15}{sum(counts.values()):>8,}{counts['ok']:>8,}{counts['rejected']:>10,}"
              f"{counts['crash']:>9,}{1000 * statistics.median(times):>11.2f}{1000 * max(times):>9.1f}"
              f"{1000 * max(cpus):>12.1f}")
    total = len(report.outcomes)
    print(f"{'total':<15}{total:>8,}{'':>27}{len(report.crashes):>9,}")
    print(f"wall time {wall:.1f} s (inputs {t_inputs:.1f} s, validate {t_validate:.1f} s, CLI {t_cli:.1f} s, "
          f"cache {t_cache:.1f} s); "
          f"CPU {time.process_time() - c_start:.1f} s")
    slowest = sorted(report.outcomes, key=lambda o: o.cpu, reverse=True)[: args.show]
    print("slowest cases (by CPU time; wall time in brackets):")
    for o in slowest:
        print(f"  {1000 * o.cpu:9.1f} ms ({1000 * o.seconds:.0f})  {o.target:<14} {o.kind:<9} {o.description[:100]}")
    if report.crashes:
        print(f"\n{len(report.crashes)} CRASHES (first {args.show}):")
        for o in report.crashes[: args.show]:
            print(f"- {o.target}: {o.description}\n  {o.detail.strip()[:1500]}")
        return 1
    print("no crashes: every case gave a result or a clean PlanningError naming a field.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
