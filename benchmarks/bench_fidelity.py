"""Fidelity of the performance model on the shipped validation set (data/validation): errors, ordering, bands, plot.

Run: ``python -m benchmarks.bench_fidelity [--markdown] [--write-bands] [--plot docs/perf-fidelity.svg]``.
Prints per source and per quantity kind the median and p90 absolute relative error and the GPU-pair ordering
accuracy (same model and request size on different hardware: is the faster one predicted faster?).
``--write-bands`` writes data/perf_bands.csv (the uncertainty bands of PerfEstimate); ``--plot`` writes a
predicted-vs-measured log-log scatter as a dependency-free SVG.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from planning.perf import PerfModel  # noqa: E402
from planning.perf.bands import DEFAULT_BANDS_PATH  # noqa: E402
from planning.perf.validation import (  # noqa: E402
    Fidelity,
    ValidationPoint,
    band_rows,
    load_validation,
    predict,
    summarize,
)

TARGETS = {"ttft": 0.15, "tpot": 0.15, "saturation": 0.20}


def category(p: ValidationPoint) -> str:
    """The kind the issue's targets talk about: batch-1 latency, saturation throughput, or other."""
    single = p.batch == 1 or p.concurrency == 1
    if p.kind in ("ttft", "tpot") and single:
        return f"batch-1 {p.kind}"
    if p.kind == "throughput" and p.batch is None and p.concurrency is None:
        return "saturation throughput"
    if p.kind == "throughput" and p.batch is not None:
        return "static-batch throughput"
    return f"{p.kind} at concurrency"


def evaluate(pm: PerfModel | None = None) -> tuple[list[ValidationPoint], list[float]]:
    """Every validation point and the model's prediction for it."""
    pm = pm or PerfModel()
    points = load_validation()
    return points, [predict(pm, p) for p in points]


def table(points: Sequence[ValidationPoint], pred: Sequence[float], key: str) -> list[Fidelity]:
    """Fidelity per group (``key``: 'source', 'category' or 'source/category')."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(points):
        name = {"source": p.source, "category": category(p), "source/category": f"{p.source} / {category(p)}"}[key]
        groups.setdefault(name, []).append(i)
    return [summarize(g, [points[i] for i in ix], [pred[i] for i in ix]) for g, ix in sorted(groups.items())]


def markdown(rows: list[Fidelity]) -> str:
    """Markdown table of fidelity rows."""
    out = ["| group | n | model says infeasible | median abs error | p90 abs error | GPU pairs | ordering right |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for f in rows:
        acc = "–" if math.isnan(f.ordering_accuracy) else f"{100 * f.ordering_accuracy:.0f} %"
        out.append(f"| {f.group} | {f.n} | {f.infeasible} | {100 * f.median_abs_error:.1f} % | "
                   f"{100 * f.p90_abs_error:.1f} % | {f.pairs} | {acc} |")
    return "\n".join(out)


def write_bands(pm: PerfModel, points: Sequence[ValidationPoint], pred: Sequence[float], path: Path) -> None:
    """data/perf_bands.csv from the validation errors."""
    lines = ["gpu_class,dtype_class,kind,p90_abs_error,median_abs_error,n"]
    lines += [f"{r.gpu_class},{r.dtype_class},{r.kind},{r.p90},{r.median},{r.n}" for r in band_rows(pm, points, pred)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def svg_plot(points: Sequence[ValidationPoint], pred: Sequence[float], path: Path) -> None:
    """Predicted vs measured, log-log, one colour per quantity kind, with the y = x line and ±20 % lines."""
    w, h, m = 640, 560, 60
    vals = [v for p, q in zip(points, pred, strict=True) for v in (p.value, q) if q == q and q > 0]
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))

    def x(v: float) -> float:
        return m + (math.log10(v) - lo) / (hi - lo) * (w - 2 * m)

    def y(v: float) -> float:
        return h - m - (math.log10(v) - lo) / (hi - lo) * (h - 2 * m)

    colour = {"ttft": "#d62728", "tpot": "#1f77b4", "throughput": "#2ca02c"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="24" text-anchor="middle" font-size="15">Predicted vs published (log-log), '
             f'{len(points)} points</text>']
    for k in range(lo, hi + 1):
        v = 10.0 ** k
        parts.append(f'<line x1="{x(v):.1f}" y1="{h - m}" x2="{x(v):.1f}" y2="{m}" stroke="#eee"/>')
        parts.append(f'<line x1="{m}" y1="{y(v):.1f}" x2="{w - m}" y2="{y(v):.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{x(v):.1f}" y="{h - m + 16}" text-anchor="middle">1e{k}</text>')
        parts.append(f'<text x="{m - 6}" y="{y(v) + 4:.1f}" text-anchor="end">1e{k}</text>')
    a, b = 10.0 ** lo, 10.0 ** hi
    parts.append(f'<line x1="{x(a):.1f}" y1="{y(a):.1f}" x2="{x(b):.1f}" y2="{y(b):.1f}" stroke="black"/>')
    for f in (0.8, 1.2):
        parts.append(f'<line x1="{x(a):.1f}" y1="{y(a * f):.1f}" x2="{x(b / f):.1f}" y2="{y(b):.1f}" '
                     'stroke="#999" stroke-dasharray="4 3"/>')
    for p, q in zip(points, pred, strict=True):
        if q == q and q > 0:
            parts.append(f'<circle cx="{x(p.value):.1f}" cy="{y(q):.1f}" r="4" fill="{colour[p.kind]}" '
                         f'fill-opacity="0.7"><title>{p.id}: {p.model} {p.n_gpus}x{p.gpu} {p.dtype} {p.quantity} '
                         f'measured {p.value:g}, predicted {q:.4g}</title></circle>')
    parts.append(f'<text x="{w / 2}" y="{h - 16}" text-anchor="middle">measured (ms or tokens/s)</text>')
    parts.append(f'<text x="16" y="{h / 2}" text-anchor="middle" transform="rotate(-90 16 {h / 2})">predicted</text>')
    for i, (kind, c) in enumerate(colour.items()):
        parts.append(f'<circle cx="{m + 16}" cy="{m + 10 + 18 * i}" r="5" fill="{c}"/>'
                     f'<text x="{m + 26}" y="{m + 14 + 18 * i}">{kind}</text>')
    parts.append(f'<text x="{m + 16}" y="{m + 70}" fill="#666">dashed: ±20 %</text></svg>')
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print markdown tables (for docs/perf-model.md)")
    parser.add_argument("--write-bands", action="store_true", help=f"write {DEFAULT_BANDS_PATH.name}")
    parser.add_argument("--plot", type=Path, default=None, help="write the log-log scatter (SVG) here")
    args = parser.parse_args(argv)
    pm = PerfModel()
    start = time.perf_counter()
    points, pred = evaluate(pm)
    seconds = time.perf_counter() - start
    for key in ("category", "source", "source/category"):
        rows = table(points, pred, key)
        if args.markdown:
            print(f"\n**per {key}**\n\n" + markdown(rows))
        else:
            print(f"\nper {key}:")
            for f in rows:
                acc = "  -" if math.isnan(f.ordering_accuracy) else f"{100 * f.ordering_accuracy:3.0f}%"
                print(f"  {f.group:58s} n={f.n:3d}  median {100 * f.median_abs_error:5.1f}%  "
                      f"p90 {100 * f.p90_abs_error:5.1f}%  ordering {acc} of {f.pairs} pairs"
                      + (f"  ({f.infeasible} infeasible in the model)" if f.infeasible else ""))
    overall = summarize("all", points, pred)
    print(f"\nall {overall.n} points: median {100 * overall.median_abs_error:.1f}%, ordering "
          f"{100 * overall.ordering_accuracy:.0f}% of {overall.pairs} GPU pairs, {overall.infeasible} measured settings "
          f"the model calls infeasible; predicted in {seconds:.2f} s")
    if args.write_bands:
        write_bands(pm, points, pred, DEFAULT_BANDS_PATH)
        print(f"wrote {DEFAULT_BANDS_PATH}")
    if args.plot:
        svg_plot(points, pred, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
