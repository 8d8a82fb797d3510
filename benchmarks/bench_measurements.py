"""Fitting on half of a setting's measured concurrencies: the simulator's median error on the other half, before and
after (issue 40 target: cut at least in half, or below 5 %), on every split printed.

Run: ``python -m benchmarks.bench_measurements``. Two cases:
  synthetic  Llama-3-8B on one A10G, a "truth" 30 % slower in decode with 4 ms more per step (the simulator under
             those corrections), concurrencies 1…128; fit on 1, 4, 16, 64 and score 2, 8, 32, 128.
  published  the shipped Llama-3-8B A10G vLLM 0.4.3 closed-loop series (data/validation/closed_loop.csv, llmperf):
             every measured TTFT, ITL and output tok/s at 1…64 clients, each level run at the mean requests its
             clients kept in flight (its notes' Little's-law figure, 3.9, 7.3, 12.9, 18.9, 20.4: ``in_flight``;
             ``--rounded`` runs them at that figure rounded, as before); four splits into halves: every other
             concurrency (1/8/32 and 4/16/64, each fitted and scored on the other) and the low and high halves
             (1/4/8 and 16/32/64, each way). The split is blind: :func:`split_fit` fits on the training half alone
             (``tests/measurements/test_bench_split.py``).
Prints per split the median |predicted / measured − 1| on the held-out half before and after, the corrections
(which are free: ``free_corrections``), whether the fit is trusted (leave-one-out on the training half beats the
model there) and the held-out error as planned (the fit when trusted, else the model); then the count of splits
that meet the target, and the leave-one-out error over all points. ``--per-point`` also prints every held-out
quantity's error before and after; ``--published-only`` skips the synthetic case.
"""

from __future__ import annotations

import math
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from planning.measurements.fit import (  # noqa: E402
    Corrections,
    PointError,
    corrected_perf,
    fit_corrections,
    free_corrections,
    leave_one_out,
    median_error,
    point_errors,
    simulate_point,
)
from planning.measurements.schema import Measurement  # noqa: E402
from planning.perf.model import PerfModel  # noqa: E402
from planning.simulate.validation import load_closed_loop  # noqa: E402

SOURCE = "philschmid-llmperf-a10g"
FIELD = {"ttft_ms": "ttft_ms_mean", "itl_ms": "itl_ms_mean", "output_tokens_per_s": "output_tokens_per_s"}


def synthetic(perf: PerfModel) -> list[Measurement]:
    slow = corrected_perf(perf, "A10G", Corrections(prefill=1.0, decode=0.7, step_ms=4.0))
    out = []
    for c in (1, 2, 4, 8, 16, 32, 64, 128):
        base = Measurement(model="llama-3-8b", gpu="A10G", count=1, tp=1, engine="vllm", engine_version="0.9.2",
                           dtype="bf16", input_len=512, output_len=128, concurrency=c, request_rate=None,
                           requests=max(48, 3 * c), output_tokens_per_s=1.0, source="synthetic")
        r = simulate_point(base, slow)
        out.append(replace(base, ttft_ms_mean=r.ttft_ms_mean, itl_ms_mean=r.itl_ms_mean,
                           output_tokens_per_s=r.output_tokens_per_s))
    return out


IN_FLIGHT = re.compile(r"(\d+(?:\.\d+)?) requests in flight on average")


def published(rounded: bool = False) -> list[Measurement]:
    """The published series, one point a level (``file`` = ``c<clients>``), each with the requests its clients
    kept in flight when its notes state them (rounded to a whole closed loop when ``rounded``)."""
    frame = load_closed_loop()
    frame = frame[frame["source"] == SOURCE]
    out = []
    for conc, g in frame.groupby("concurrency"):
        rec = g.iloc[0]
        values: dict[str, Any] = {FIELD[str(q)]: float(v) for q, v in zip(g["quantity"], g["value"], strict=True)}
        found = IN_FLIGHT.search(str(rec["notes"]))
        busy = min(float(found.group(1)), int(str(conc))) if found else None
        clients = int(str(conc)) if busy is None or not rounded else max(1, round(busy))
        out.append(Measurement(model=str(rec["model"]), gpu=str(rec["gpu"]), count=int(str(rec["n_gpus"])),
                               tp=int(str(rec["tp"])), engine="vllm", engine_version="0.4.3", dtype=str(rec["dtype"]),
                               input_len=float(str(rec["input_len"])), output_len=float(str(rec["output_len"])),
                               concurrency=clients, in_flight=None if rounded else busy, request_rate=None,
                               requests=100, source=SOURCE, file=f"c{conc}", **values))
    return out


@dataclass(frozen=True)
class SplitFit:
    """One blind split: the corrections fitted on the training half, and the held-out half's errors."""

    corrections: Corrections
    before: list[PointError]
    after: list[PointError]
    fit_s: float


def split_fit(train: list[Measurement], test: list[Measurement], perf: PerfModel) -> SplitFit:
    """Fit on ``train`` alone, then score ``test`` under the model and under the fit. The held-out points reach
    only :func:`point_errors`, after the fit is done: the split stays blind."""
    t0 = time.perf_counter()
    c = fit_corrections(train, perf)
    fit_s = time.perf_counter() - t0
    return SplitFit(c, point_errors(test, perf), point_errors(test, perf, c), fit_s)


def meets(before: float, after: float) -> bool:
    """The issue's target: the held-out error at least halved, or below 5 %."""
    return after <= before / 2 or after < 0.05


def report(name: str, train: list[Measurement], test: list[Measurement], perf: PerfModel,
           per_point: bool = False) -> tuple[bool, bool]:
    """Print one split; return whether the fit and the fit as planned meet the target."""
    sf = split_fit(train, test, perf)
    c = sf.corrections
    before, after = median_error(sf.before), median_error(sf.after)
    free = "/".join(n for n, f in zip(("prefill", "decode", "step"), free_corrections(train), strict=True) if f)
    print(f"{name:<36} held-out median error {100 * before:5.1f} % -> {100 * after:5.1f} %  "
          f"({'meets' if meets(before, after) else 'MISSES'} the target)  prefill x{c.prefill:.3f} "
          f"decode x{c.decode:.3f} step {c.step_ms:+.2f} ms (free: {free or 'none'})  fit {sf.fit_s:.1f} s")
    if per_point:
        for b, a in zip(sf.before, sf.after, strict=True):
            print(f"{'':<38}{b.point.file:>5} {b.quantity:<20} measured {b.measured:8.2f}  "
                  f"{100 * b.rel_error:+6.1f} % -> {100 * a.rel_error:+6.1f} %")
    # what a plan uses: the fit only when its leave-one-out error on the training half beats the model's
    loo, own = leave_one_out(train, perf), median_error(point_errors(train, perf))
    used = c if loo < own else Corrections()
    guarded = median_error(point_errors(test, perf, used))
    print(f"{'':<36} trusted: {loo < own} (leave-one-out {100 * loo:.1f} % vs {100 * own:.1f} % before) -> "
          f"held-out error as planned {100 * guarded:.1f} % "
          f"({'meets' if meets(before, guarded) else 'misses'} the target)", flush=True)
    return meets(before, after), meets(before, guarded)


SPLITS = (("1/8/32", "4/16/64"), ("4/16/64", "1/8/32"), ("1/4/8", "16/32/64"), ("16/32/64", "1/4/8"))


def halves(pub: list[Measurement]) -> dict[str, list[Measurement]]:
    """The published series' halves by name (levels 1, 4, 8, 16, 32, 64 in order)."""
    return {"1/8/32": pub[::2], "4/16/64": pub[1::2], "1/4/8": pub[:3], "16/32/64": pub[3:]}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    per_point, rounded = "--per-point" in args, "--rounded" in args
    perf = PerfModel()
    results = []
    if "--published-only" not in args:
        syn = synthetic(perf)
        results.append(report("synthetic, fit 1/4/16/64", syn[::2], syn[1::2], perf, per_point))
    pub = published(rounded)
    print("published series:", ", ".join(f"c{m.file[1:]}->{m.in_flight or m.concurrency:g} in flight" for m in pub))
    splits = halves(pub)
    for train, test in SPLITS:
        results.append(report(f"published, fit {train} score {test}", splits[train], splits[test], perf, per_point))
    print(f"target met on {sum(r[0] for r in results)} of {len(results)} splits by the fit, "
          f"{sum(r[1] for r in results)} of {len(results)} as planned")
    loo = leave_one_out(pub, perf)
    print(f"published, all points: median error {100 * median_error(point_errors(pub, perf)):.1f} % before, "
          f"leave-one-out {100 * loo:.1f} %" if not math.isnan(loo) else "")


if __name__ == "__main__":
    main()
