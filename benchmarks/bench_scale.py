"""Benchmark: wall time and peak memory as models × shapes × regions grow (coral-core → coral-extended → catalog-wide).

Run: ``python -m benchmarks.bench_scale [--runs 3] [--engines on-demand library] [--baselines]``.
Each case runs in its own subprocess with a fresh, empty PLANNING_HOME (cold template cache); the child reports
its wall time, CPU time (its own + pool workers'), the solve's timings and its peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``,
which includes numpy/HiGHS allocations, unlike tracemalloc). Prints a table of medians, writes the figure
``docs/scale.svg`` (log-scale time and memory per preset and engine; hand-written SVG, no plotting dependency)
and, with --json, the raw results. The library engine on catalog-wide (≈ 8.5 M templates) is skipped unless
named with ``--library-catalog`` (it ran out of time and memory before templates on demand).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PRESETS = ["coral-core", "coral-extended", "catalog-wide"]
CHILD = r"""
import json, resource, sys, time
from dataclasses import replace
from planning.api import load_preset_scenario, solve
preset, engine, baselines = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sc = load_preset_scenario(preset)
sc = replace(sc, options=replace(sc.options, templates=engine))
t0 = time.perf_counter()
r = solve(sc, with_baselines=baselines)
wall = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
print(json.dumps({"wall_seconds": wall, "cpu_seconds": cpu, "status": r.status, "cost_per_hour": r.cost_per_hour, "gap": r.mip_gap,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                  "timings": r.timings, "stats": r.stats, "models": len(sc.models), "regions": len(sc.regions),
                  "shapes": len(sc.shapes)}))
"""


def run_case(preset: str, engine: str, baselines: bool, timeout_s: float) -> dict[str, object]:
    """One cold solve in a fresh subprocess (empty PLANNING_HOME, so no cached library or tables)."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PLANNING_HOME": home}
        out = subprocess.run([sys.executable, "-c", CHILD, preset, engine, "1" if baselines else "0"], env=env,
                             capture_output=True, text=True, timeout=timeout_s, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _svg(rows: list[dict[str, object]], path: Path) -> None:
    """Two log-scale panels (wall s, peak MB) with one polyline per engine over the presets."""
    import math

    width, height, pad = 760, 300, 60
    colors = {"on-demand": "#1f77b4", "library": "#d62728"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             'font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']
    panels = [("wall_seconds", "cold wall time (s)", 0.1, 1000.0), ("max_rss_mb", "peak memory (MB)", 100.0, 10000.0)]
    pw = (width - 3 * pad) / 2
    for p, (key, title, lo, hi) in enumerate(panels):
        x0 = pad + p * (pw + pad)
        y0, y1 = pad - 20, height - pad

        def ypos(v: float, lo: float = lo, hi: float = hi, y0: float = y0, y1: float = y1) -> float:
            return y1 - (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (y1 - y0)

        parts.append(f'<text x="{x0 + pw / 2}" y="{y0 - 8}" text-anchor="middle" font-weight="bold">{title}</text>')
        parts.append(f'<line x1="{x0}" y1="{y1}" x2="{x0 + pw}" y2="{y1}" stroke="black"/>')
        parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="black"/>')
        e = math.log10(lo)
        while e <= math.log10(hi) + 1e-9:
            y = ypos(10**e)
            parts.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + pw}" y2="{y}" stroke="#ddd"/>')
            parts.append(f'<text x="{x0 - 4}" y="{y + 4}" text-anchor="end">{10**e:g}</text>')
            e += 1
        for i, preset in enumerate(PRESETS):
            x = x0 + (i + 0.5) * pw / len(PRESETS)
            parts.append(f'<text x="{x}" y="{y1 + 16}" text-anchor="middle">{preset}</text>')
        for engine, color in colors.items():
            pts = []
            for i, preset in enumerate(PRESETS):
                hit = [r for r in rows if r["preset"] == preset and r["engine"] == engine and key in r]
                if hit:
                    pts.append((x0 + (i + 0.5) * pw / len(PRESETS), ypos(float(hit[0][key]))))  # type: ignore[arg-type]
            if pts:
                parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                             + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
                parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/>' for x, y in pts)
    for j, (engine, color) in enumerate(colors.items()):
        parts.append(f'<rect x="{pad + j * 130}" y="{height - 22}" width="12" height="12" fill="{color}"/>')
        parts.append(f'<text x="{pad + j * 130 + 16}" y="{height - 12}">{engine} templates</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--library-runs", type=int, default=1, help="runs of the (slow) library engine")
    parser.add_argument("--presets", nargs="+", default=PRESETS)
    parser.add_argument("--engines", nargs="+", default=["on-demand", "library"])
    parser.add_argument("--baselines", action="store_true", help="also run the baselines (the full `planning solve`)")
    parser.add_argument("--library-catalog", action="store_true", help="also run the library engine on catalog-wide")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--figure", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "scale.svg")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    rows: list[dict[str, object]] = []
    for preset in args.presets:
        for engine in args.engines:
            if engine == "library" and preset == "catalog-wide" and not args.library_catalog:
                continue
            runs = []
            for i in range(args.library_runs if engine == "library" else args.runs):
                r = run_case(preset, engine, args.baselines, args.timeout)
                print(f"{preset} {engine} run {i + 1}: " + json.dumps({k: v for k, v in r.items() if k != "timings"},
                                                                      default=str), flush=True)
                runs.append(r)
            ok = [r for r in runs if "error" not in r]
            if not ok:
                rows.append({"preset": preset, "engine": engine, "error": runs[-1].get("error")})
                continue
            rows.append({"preset": preset, "engine": engine, "runs": len(ok),
                         "wall_seconds": statistics.median(float(r["wall_seconds"]) for r in ok),  # type: ignore[arg-type]
                         "max_rss_mb": statistics.median(float(r["max_rss_mb"]) for r in ok),  # type: ignore[arg-type]
                         "cpu_seconds": statistics.median(float(r.get("cpu_seconds", "nan")) for r in ok),  # type: ignore[arg-type]
                         "status": ok[-1]["status"], "cost_per_hour": ok[-1]["cost_per_hour"], "gap": ok[-1]["gap"],
                         "certified": bool(dict(ok[-1]["stats"]).get("reduction_certified")),  # type: ignore[call-overload]
                         "templates": dict(ok[-1]["stats"]).get("templates_total"),  # type: ignore[call-overload]
                         "in_ilp": dict(ok[-1]["stats"]).get("templates_in_ilp"),  # type: ignore[call-overload]
                         "size": f"{ok[-1]['models']}×{ok[-1]['shapes']}×{ok[-1]['regions']}"})
    print()
    print("| preset (models × shapes × regions) | engine | cold wall (median) | CPU (process + pool) | peak RSS | status | "
          "$/h | certified | templates placed | in ILP |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['preset']} | {r['engine']} | failed: {r['error']} | | | | | | | |")
            continue
        print(f"| {r['preset']} ({r['size']}) | {r['engine']} | {float(r['wall_seconds']):.1f} s | "  # type: ignore[arg-type]
              f"{float(r['cpu_seconds']):.1f} s | "  # type: ignore[arg-type]
              f"{float(r['max_rss_mb']):.0f} MB | {r['status']} | {float(r['cost_per_hour']):.2f} | "  # type: ignore[arg-type]
              f"{'yes' if r['certified'] else 'no'} | {int(float(r['templates'] or 0)):,} | "  # type: ignore[arg-type]
              f"{int(float(r['in_ilp'] or 0)):,} |")  # type: ignore[arg-type]
    _svg(rows, args.figure)
    print(f"\nfigure: {args.figure}")
    if args.json:
        print(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
