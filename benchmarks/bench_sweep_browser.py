"""A sweep on the What-if page in a real browser (issue 41's 10-point demand sweep, as a user runs it).

One ``streamlit run app.py`` per run (fresh ``PLANNING_HOME``), Debian Chromium through Playwright. The script plans
the preset from Home, opens What-if, types the factors (default the issue's ten, 0.5 … 5) and a time limit per
point, clicks "Run sweep" and times until:

- **first row**: the sweep's chart is on screen, "(so far)";
- **first look**: every point has had its first look ("…, N of them at a first look": each point's plan within
  ``api.FIRST_PASS_S``, without baselines, labelled with what it proved);
- **done**: the finished sweep's chart (every point solved as asked, with its baselines); ``--done-only`` times
  this alone (a tree without the first look).

Then it reads the job's rows from the server's job store and prints how many points had a plan and were proven
optimal at the first look and at the end. Printed per run, then the medians.

    python -m benchmarks.bench_sweep_browser --preset coral-extended --runs 3 [--busy 4] [--limit 20]

Needs /usr/bin/chromium and Playwright (the dev install; never ``playwright install``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._load import Busy, load_line
from benchmarks.bench_home_under_load import ARGS, CHROMIUM, _serve, _settled, open_preset

TEN = "0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5"
PLAN = "Plan (mixed templates)"  # ``api.PLAN_METHOD`` (spelled out: ``--done-only`` runs on trees without it)
PLAN_TIMEOUT_MS = 600_000


def one_run(preset: str, factors: str, limit: float, shot: Path | None, done_only: bool = False) -> dict[str, float]:
    """One fresh server: plan ``preset``, run the sweep, return the three times (seconds from the click)."""
    from playwright.sync_api import sync_playwright

    home = tempfile.mkdtemp(prefix="sweep-browser-")
    proc, url = _serve(home)
    n = len([f for f in factors.split(",") if f.strip()])
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            open_preset(page, url, preset)
            page.get_by_role("button", name="Plan it").click()
            page.get_by_test_id("stMetric").filter(has_text="Cost per hour").wait_for(timeout=PLAN_TIMEOUT_MS)
            page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="What-if").first.click()
            _settled(page)
            form = page.get_by_test_id("stForm").filter(has_text="Run sweep")
            form.get_by_label("Factors k").fill(factors)
            form.get_by_role("spinbutton", name="Time limit per point (s)").fill(f"{limit:g}")
            form.get_by_role("spinbutton", name="Time limit per point (s)").press("Tab")
            start = time.monotonic()
            form.get_by_role("button", name="Run sweep").click()
            first_row, first_look, looked = math.nan, math.nan, "no first look (--done-only)"
            estimates: list[tuple[float, float | None]] = []
            if not done_only:
                page.get_by_text("(so far)").first.wait_for(timeout=PLAN_TIMEOUT_MS)
                first_row = time.monotonic() - start
                page.get_by_text(f"{n} of them at a first look").first.wait_for(timeout=PLAN_TIMEOUT_MS)
                first_look = time.monotonic() - start
                looked = _first_look(home)
                if shot is not None:
                    page.get_by_text(f"{n} of them at a first look").first.scroll_into_view_if_needed()
                    page.screenshot(path=str(shot))
            estimates = _until_done(page, home, start)
            page.get_by_text(f"Sweep demand: {factors}").first.wait_for(timeout=PLAN_TIMEOUT_MS)
            done = time.monotonic() - start
            looked += "; " + _accuracy(estimates, done)
            browser.close()
    finally:
        proc.kill()
        proc.wait()
    print(f"  first row {first_row:.2f} s, first look ({n} points) {first_look:.2f} s, done {done:.2f} s; "
          f"{looked}; {_rows(home)}", flush=True)
    return {"first row": first_row, "first look": first_look, "done": done}


def _until_done(page: Any, home: str, start: float) -> list[tuple[float, float | None]]:
    """Until the sweep job ends: every second, its own estimate of the time left (what its progress line shows,
    ``JobRecord.time_left``), with the seconds since the click."""
    from planning.jobs import JobStore

    out: list[tuple[float, float | None]] = []
    store = JobStore(Path(home) / "jobs.sqlite")
    try:
        while (job := next((j for j in store.list_jobs(limit=20) if j.kind == "sweep"), None)) is None:
            time.sleep(0.2)
        while (record := store.get(job.id)) is not None and not record.is_terminal:
            out.append((time.monotonic() - start, record.time_left()))
            time.sleep(1.0)
    finally:
        store.close()
    return out


def _accuracy(estimates: list[tuple[float, float | None]], done: float) -> str:
    """The job's estimate of the time left at 25 / 50 / 75 % of the run, ÷ the time actually left."""
    said = []
    for share in (0.25, 0.5, 0.75):
        at = share * done
        before = [(t, e) for t, e in estimates if t <= at and e is not None]
        if before:
            t, e = before[-1]
            said.append(f"{e:.0f} s at {t:.0f} s ({e / max(done - t, 1e-9):.2f}x)")
        else:
            said.append(f"none at {at:.0f} s")
    return "time left said " + ", ".join(said)


def _first_look(home: str) -> str:
    """What the first look proved, from the running sweep's rows so far in the server's job store."""
    import json

    from planning.jobs import JobStore
    from planning.jobs.partials import read_partial

    store = JobStore(Path(home) / "jobs.sqlite")
    try:
        job = next(j for j in store.list_jobs(limit=20) if j.kind == "sweep")
        found = read_partial(store, job.id)
    finally:
        store.close()
    if found is None:
        return "first look: ended before it was read"
    plans = [r for r in json.loads(found[1])["rows"] if r["method"] == PLAN]
    gaps = [r["proven_gap"] for r in plans if r["cost_per_hour"] is not None and r["proven_gap"] is not None]
    return (f"first look {sum(r['cost_per_hour'] is not None for r in plans)} of {len(plans)} points with a plan, "
            f"{sum(r['status'] == 'optimal' for r in plans)} proven optimal, largest proven gap "
            f"{max(gaps, default=float('nan')):.1%}")


def _rows(home: str) -> str:
    """What the finished sweep proved, from the server's job store."""
    from planning.jobs import JobStore

    store = JobStore(Path(home) / "jobs.sqlite")
    try:
        job = next(j for j in store.list_jobs(limit=20, with_result=True) if j.kind == "sweep")
    finally:
        store.close()
    plans = [r for r in (job.result or {}).get("rows", []) if r["method"] == PLAN]
    return (f"at the end {sum(r['cost_per_hour'] is not None for r in plans)} of {len(plans)} points with a plan, "
            f"{sum(r['status'] == 'optimal' for r in plans)} proven optimal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="coral-extended")
    parser.add_argument("--factors", default=TEN)
    parser.add_argument("--limit", type=float, default=20.0, help="the time limit per point (s)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--done-only", action="store_true",
                        help="time the finished sweep only (a tree without the first look, e.g. main before it)")
    parser.add_argument("--screenshot", type=Path, default=None, help="a PNG of the page at the first look")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    with Busy(args.busy):
        busy = args.busy
        print(f"{args.preset}, factors {args.factors}, {args.limit:g} s per point; {load_line(busy)}", flush=True)
        for i in range(args.runs):
            got = one_run(args.preset, args.factors, args.limit, args.screenshot if i == 0 else None, args.done_only)
            for k, v in got.items():
                samples.setdefault(k, []).append(v)
        print(f"medians of {args.runs}: " + ", ".join(f"{k} {statistics.median(v):.2f} s "
                                                    f"({', '.join(f'{x:.2f}' for x in v)})"
                                                    for k, v in samples.items()) + f"; {load_line(busy)}")


if __name__ == "__main__":
    main()
