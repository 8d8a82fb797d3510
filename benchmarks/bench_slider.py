"""A What-if slider in a real browser: seconds from a slider change to its plan on screen (issue 41's browser target).

One ``streamlit run app.py`` per preset and load (fresh ``PLANNING_HOME``), Debian Chromium through Playwright. The
script plans the preset from Home, opens What-if, and then, three times each:

- **neighbour**: waits until the position one step up on the Demand slider has been planned ahead (the page plans
  every position one step away in the background lane; read from the server's job store), presses ArrowRight on
  that slider and times until "Sliders: <that position>." is on screen;
- **far**: presses End or Home on another slider (a position nobody planned ahead) and times until something is on
  screen for it (the nearest planned position's plan, labelled as such, or the progress), until its own plan is
  (its best plan so far, labelled as such, while the solver still proves it; round 21) and until its proven plan
  is.

Printed per preset and load: the load line (``benchmarks._load``), how long planning ahead took after the base plan
was on screen, each sample and the medians of 3.

    python -m benchmarks.bench_slider                                  # coral-core, quiet
    python -m benchmarks.bench_slider --preset coral-extended --busy 4

Needs /usr/bin/chromium and Playwright (the dev install; never ``playwright install``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._load import Busy, load_line
from benchmarks.bench_home_under_load import ARGS, CHROMIUM, _serve, _settled, open_preset

CAP_S = 1200.0  # a bound on a hang per wait, not on speed
FAR_MOVES = (("Prices %", "End", "price_pct", 100.0), ("SLOs ×", "End", "slo", 2.0),
             ("Availability %", "Home", "availability_pct", 10.0))


@dataclass
class Session:
    """The page, the server's PLANNING_HOME and where the sliders stand."""

    page: Any
    home: str
    values: dict[str, float] = field(default_factory=dict)


def _label(values: dict[str, float]) -> str:
    from planning import api

    changes = api.slider_variants(**values)
    return ", ".join(api.variant_label(c) for c in changes)


def _request_demand(record: Any) -> float:
    return float(record.request["scenario"]["models"][0]["demand"]["rate_rps"])


def _wait_planned_ahead(s: Session, values: dict[str, float], base_rate: float) -> float:
    """Seconds until the position ``values`` is a finished job in the store: before the far moves this script
    moves only Demand, and of the positions one step away only Demand up has that first model's rate."""
    from planning.jobs import JobStore

    start = time.monotonic()
    store = JobStore(Path(s.home) / "jobs.sqlite")
    want = round(base_rate * values["demand"], 9)
    try:
        while time.monotonic() - start < CAP_S:
            jobs = [j for j in store.list_jobs(limit=200) if j.kind == "solve" and j.status == "done"]
            if any(abs(_request_demand(j) - want) < 1e-6 for j in jobs):
                return time.monotonic() - start
            time.sleep(0.2)
    finally:
        store.close()
    raise RuntimeError(f"position {values} was not planned ahead within {CAP_S:.0f} s")


def _press(s: Session, slider: str, key: str) -> None:
    thumb = s.page.get_by_test_id("stSlider").filter(has_text=slider).get_by_role("slider")
    thumb.focus()
    thumb.press(key)


def _time_until(s: Session, text: str, also: str | None = None,
                proving: str = "The best plan found so far") -> tuple[float, float, float]:
    """Seconds from now until ``also`` (if given), until ``text`` and until ``text`` without ``proving`` (the
    position's proven plan) are on screen; the first two are the next one's when it comes first."""
    start, first, own = time.monotonic(), None, None
    target = s.page.get_by_text(text, exact=True)
    early = s.page.get_by_text(also) if also else None
    partial = s.page.get_by_text(proving)
    while time.monotonic() - start < CAP_S:
        if first is None and early is not None and early.count():
            first = time.monotonic() - start
        if target.count():
            own = time.monotonic() - start if own is None else own
            if not partial.count():
                seen = time.monotonic() - start
                return (own if first is None else first), own, seen
        time.sleep(0.02)
    raise RuntimeError(f"{text!r} not on screen within {CAP_S:.0f} s")


def session(pw: Any, preset: str, busy: int) -> dict[str, list[float]]:
    """One server and browser: the base plan, then three neighbour and three far slider moves."""
    from planning import api

    base_rate = float(api.load_preset_scenario(preset).models[0].demand.rate_rps)
    out: dict[str, list[float]] = {"neighbour": [], "far_first": [], "far_own": [], "far": [], "ahead": []}
    with tempfile.TemporaryDirectory() as home:
        proc, url = _serve(home)
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(CAP_S * 1000)
            open_preset(page, url, preset)
            page.get_by_role("button", name="Plan it").click()
            page.get_by_test_id("stMetric").filter(has_text="Cost per hour").wait_for(timeout=CAP_S * 1000)
            page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text="What-if").first.click()
            page.get_by_role("heading", name="Move a slider").wait_for(timeout=CAP_S * 1000)
            _settled(page, timeout=CAP_S * 1000)
            s = Session(page, home, dict(zip(api.VARIANT_SLIDERS, api.slider_position(), strict=True)))
            for run in range(3):
                after = {**s.values, "demand": s.values["demand"] + 0.25}
                out["ahead"].append(_wait_planned_ahead(s, after, base_rate))
                _press(s, "Demand ×", "ArrowRight")
                s.values = after
                out["neighbour"].append(_time_until(s, f"Sliders: {_label(s.values)}.")[2])
                _settled(page, timeout=CAP_S * 1000)
                print(f"  {preset} busy {busy} run {run + 1}: planned ahead after {out['ahead'][-1]:.1f} s of "
                      f"waiting; neighbour ({_label(s.values)}) on screen after {out['neighbour'][-1]:.2f} s",
                      flush=True)
            for slider, key, name, value in FAR_MOVES:
                _press(s, slider, key)
                s.values = {**s.values, name: value}
                first, own, seen = _time_until(s, f"Sliders: {_label(s.values)}.", also="Nearest planned position")
                out["far_first"].append(first)
                out["far_own"].append(own)
                out["far"].append(seen)
                _settled(page, timeout=CAP_S * 1000)
                print(f"  {preset} busy {busy} far ({_label(s.values)}): something on screen after {first:.2f} s,"
                      f" its own plan after {own:.2f} s, proven after {seen:.2f} s", flush=True)
        finally:
            browser.close()
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # a server still stopping its workers on a busy machine
                proc.kill()
                proc.wait(timeout=30)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="coral-core")
    parser.add_argument("--busy", type=int, default=0)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with Busy(args.busy):
        print(load_line(args.busy), flush=True)
        with sync_playwright() as pw:
            out = session(pw, args.preset, args.busy)
        print(load_line(args.busy), flush=True)
    med = {k: statistics.median(v) for k, v in out.items()}
    print(f"medians of 3 ({args.preset}, --busy {args.busy}): slider change → plan on screen, neighbour (planned "
          f"ahead) {med['neighbour']:.2f} s; far: proven {med['far']:.2f} s, its own plan (best so far) "
          f"{med['far_own']:.2f} s, something shown after {med['far_first']:.2f} s; waited {med['ahead']:.1f} s for the neighbour to be planned ahead",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
