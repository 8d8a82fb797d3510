"""Home → Plan it → a plan on screen, in a real browser, on a busy machine (issue 23's first target).

For each run: N CPU-burning processes start, then `streamlit run app.py` with a fresh PLANNING_HOME (cold job
store and caches, as a new user's first click), Debian Chromium opens Home, picks the preset and clicks
**Plan it**. Printed per run and as medians:

- ``first``: seconds from the click until the job panel shows a plan ("So far: best plan …"), or until the KPIs
  when the solve finished before the panel polled;
- ``kpis``: seconds until the "Cost per hour" KPI is on screen (the job finished);
- the KPI's status text (optimal, or feasible with its gap).

Run: ``python -m benchmarks.bench_home_under_load [--busy 8] [--preset coral-core] [--runs 3]``; needs
/usr/bin/chromium (``apt-get install -y chromium``) and Playwright (the dev install). Target: a plan on screen
within 10 s with 8 busy processes on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks._load import Busy, isolate, load_line

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(home: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--browser.gatherUsageStats", "false"], cwd=ROOT,
                            env={**os.environ, "PLANNING_HOME": home}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("streamlit did not start")


def _settled(page: Any, timeout: float = 180_000) -> None:
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def open_preset(page: Any, url: str, preset: str, timeout: float = 180_000) -> None:
    """Home at ``url`` with ``preset`` chosen in its first select box, the page settled (Plan it not pressed)."""
    page.goto(url)
    _settled(page, timeout)
    page.get_by_test_id("stSelectbox").first.click()
    page.get_by_role("option", name=preset, exact=True).click()
    _settled(page, timeout)


def _job_breakdown(home: str) -> str:
    """Where the click-to-KPIs time went, from the server's job store: queued → started → finished, and the
    solve's own first plan, allocation, baselines and total."""
    from planning.jobs import JobStore

    store = JobStore(Path(home) / "jobs.sqlite")
    try:
        jobs = [j for j in store.list_jobs(limit=5, with_result=True) if j.kind == "solve"]
    finally:
        store.close()
    if not jobs or jobs[0].started is None or jobs[0].finished is None:
        return "job: no finished solve job found"
    j = jobs[0]
    result = j.result or {}
    t, stats = result.get("timings") or {}, result.get("stats") or {}
    return (f"job: queued {j.started - j.created:.2f} s, ran {j.finished - j.started:.2f} s (solve total "
            f"{t.get('total_seconds', float('nan')):.2f} s: first plan {stats.get('anytime_first_plan_seconds', float('nan')):.2f}"
            f" s, allocation {t.get('allocation_seconds', float('nan')):.2f} s, baselines "
            f"{t.get('baselines_seconds', float('nan')):.2f} s)")


def one_run(pw: Any, preset: str, warm_s: float) -> tuple[float, float, str]:
    """(seconds to the first plan on screen, seconds to the KPIs, the status KPI's text)."""
    with tempfile.TemporaryDirectory() as home:
        proc, url = _serve(home)
        context = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = context.new_page(viewport={"width": 1400, "height": 1000})
            open_preset(page, url, preset)
            time.sleep(warm_s)  # the worker processes warm up at app start, as for a user reading the page
            start = time.monotonic()
            page.get_by_role("button", name="Plan it").click()
            first: float | None = None
            kpi = page.get_by_test_id("stMetric").filter(has_text="Cost per hour")
            so_far = page.get_by_text("So far: best plan")
            while time.monotonic() - start < 900:
                if first is None and so_far.count():
                    first = time.monotonic() - start
                if kpi.count():
                    break
                time.sleep(0.05)
            kpis = time.monotonic() - start
            status = page.get_by_test_id("stMetric").filter(has_text="Solver status").inner_text().replace("\n", " ")
            print("    " + _job_breakdown(home), flush=True)
            return (first if first is not None else kpis), kpis, status
        finally:
            context.close()
            proc.terminate()
            proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=8)
    parser.add_argument("--preset", default="coral-core")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warm", type=float, default=5.0, help="seconds on the page before the click")
    parser.add_argument("--isolate", action="store_true",
                        help="run in a heavily weighted CPU cgroup (root): the cores as if nothing else ran")
    args = parser.parse_args()
    if args.isolate:
        print(isolate())
    from playwright.sync_api import sync_playwright

    rows = []
    with Busy(args.busy):
        print(load_line(args.busy), flush=True)
        with sync_playwright() as pw:
            for i in range(args.runs):
                first, kpis, status = one_run(pw, args.preset, args.warm)
                rows.append((first, kpis))
                print(f"run {i + 1}: {args.busy} busy processes, {args.preset}: plan on screen {first:.2f} s, "
                      f"KPIs {kpis:.2f} s ({status})", flush=True)
    print(f"median of {len(rows)}: plan on screen {statistics.median(r[0] for r in rows):.2f} s, "
          f"KPIs {statistics.median(r[1] for r in rows):.2f} s ({os.cpu_count()} cores, {args.busy} busy processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
