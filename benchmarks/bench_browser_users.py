"""N browser users on one Streamlit server, each planning a different scenario through the real pages (issue 43).

One ``streamlit run app.py`` (fresh ``PLANNING_HOME``: cold job store and caches), one Debian Chromium driven by
Playwright's async API, one browser *context* per user (its own cookies and websocket: without sign-in each
context is its own Streamlit session, so its own user of the fair share, ``ui.state.fair_key``).

- The heavy user (``--heavy 5``) comes first: five times it uploads a **coral-extended variant** (demand ×1.02 …
  ×1.22, the YAML of the Scenario page's *Upload a scenario*), goes Home and presses **Plan it**: five heavy jobs.
- Then N light users (``--users 30``) arrive ``--spread`` seconds apart. A light user opens Home, fills the
  **Quick estimate** with its own traffic (2.0, 2.5, 3.0 … requests/s of llama-3-8b: every request differs, so no
  two users share a job) and presses *Estimate monthly cost*: the cheapest real path to a plan of one's own.
  ``--light upload``: each light user instead uploads a **coral-core variant** (demand ×1.02, ×1.07, …) on the
  Scenario page, goes Home and presses **Plan it** (its job from the page's ``?job=`` link).
- Each light user's time is from its click to the "Cost per hour" KPI on its screen.

Printed: the load average before and after, per user the seconds to its plan, median / p90 / max, how many got
their plan, and from the server's job store (read after the run) each light user's wait in the queue and how many
heavy jobs started while a light user's first job waited (target 0). The whole run stops after ``--cap`` seconds
(default 20 min); the server and the browser are shut down in ``finally``.

    python -m benchmarks.bench_browser_users                      # 30 users, 1 heavy user with 5 jobs
    python -m benchmarks.bench_browser_users --users 4 --heavy 0  # a quick look
    python -m benchmarks.bench_browser_users --users 5 --heavy 0 --light upload --cap 400

Needs /usr/bin/chromium and Playwright (the dev install; never ``playwright install``). ``BENCH_SHOTS=DIR``
saves the heavy user's page as ``DIR/heavy.png`` when it is done queuing (or gave up).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.async_api import TimeoutError as PlaywrightTimeout

from benchmarks.bench_fair_share import percentile
from benchmarks.bench_home_under_load import ARGS, CHROMIUM, _serve

PLAN_KPI = "Cost per hour"
RETRY_S = 30.0  # a click with no effect after this long is tried again
SETTLED = '[data-testid="stApp"][data-test-script-state="notRunning"]'


@dataclass
class Row:
    """One user's outcome: its job id (from the page's ?job= link), seconds from the click to the plan on
    screen (None: not within the cap) and what went wrong, if anything."""

    user: str
    scenario: str
    job_id: str | None = None
    seconds: float | None = None
    problem: str = ""
    jobs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    """What travels to every user: the server's URL, the browser, the run's deadline and PLANNING_HOME."""

    url: str
    browser: Any
    deadline: float
    home: str


def _left_ms(run: Run) -> float:
    return max(1_000.0, (run.deadline - time.monotonic()) * 1000)


async def _settled(page: Any, run: Run) -> None:
    await page.wait_for_selector(SETTLED, timeout=_left_ms(run))


def _job_of(page: Any) -> str | None:
    values = parse_qs(urlparse(page.url).query).get("job")
    return values[0] if values else None


async def _nav(page: Any, title: str, run: Run) -> None:
    await page.get_by_test_id("stSidebarNav").get_by_role("link").filter(has_text=title).first.click()
    await _settled(page, run)


async def _upload(page: Any, path: Path, run: Run) -> None:
    """Scenario page → Load, save, download, upload → Upload a scenario → Load file, then back Home. A click
    that lands while the page reruns (a job panel's finishing rerun) can be lost: tried again until the page
    says it works on the file."""
    await _nav(page, "Scenario", run)
    loaded = page.get_by_text(f"upload:{path.name}")
    while not await loaded.count():
        button = page.get_by_role("button", name="Load file")
        if not await button.is_visible():  # the expander is closed (a click on it would close an open one)
            await page.get_by_text("Load, save, download, upload").click()
            await button.wait_for(state="visible")
        await page.get_by_test_id("stFileUploaderDropzoneInput").first.set_input_files(str(path))
        await button.click()
        await _settled(page, run)
        with contextlib.suppress(PlaywrightTimeout):
            await loaded.wait_for(timeout=RETRY_S * 1000)
    await _nav(page, "Home", run)


def _solve_jobs(home: str) -> list[str]:
    """The server's solve jobs, oldest first, read from its job store (read-only: the server owns the file)."""
    db = Path(home) / "jobs.sqlite"
    if not db.exists():
        return []
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM jobs WHERE kind = 'solve' ORDER BY created")]


async def _plan_it(page: Any, run: Run) -> str | None:
    """Press Plan it on Home; the new solve job's id once the server has stored it. (From the store, not the
    page's ?job= link: after a page switch it reached the URL only later in our runs, with the plan.) A lost click
    is pressed again after RETRY_S: an identical request would join the same job, never queue a second."""
    before = set(_solve_jobs(run.home))
    clicked = 0.0
    while time.monotonic() < run.deadline:
        if time.monotonic() - clicked > RETRY_S:
            await page.get_by_role("button", name="Plan it").click()
            clicked = time.monotonic()
        new = [j for j in _solve_jobs(run.home) if j not in before]
        if new:
            return new[-1]
        await asyncio.sleep(0.2)
    return None


async def heavy_user(run: Run, files: list[Path], row: Row) -> None:
    """Queue one heavy job per file (upload, Home, Plan it) without waiting for any of them."""
    context = await run.browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(_left_ms(run))  # a busy server: every wait may take until the cap
    page = await context.new_page()
    await page.goto(run.url)
    await _settled(page, run)
    t0 = time.monotonic()
    try:
        for path in files:
            await _upload(page, path, run)
            job = await _plan_it(page, run)
            if job is not None:
                row.jobs.append(job)
            print(f"  heavy user: {path.stem} queued as job {job} after {time.monotonic() - t0:.1f} s", flush=True)
            await _settled(page, run)
    finally:
        if os.environ.get("BENCH_SHOTS"):
            await page.screenshot(path=os.path.join(os.environ["BENCH_SHOTS"], "heavy.png"), full_page=True)


async def _estimate(page: Any, run: Run) -> None:
    """Press Estimate monthly cost until the page links a job (?job=): a click lost in a rerun is pressed again
    (the same request joins the same job)."""
    kpi = page.get_by_test_id("stMetric").filter(has_text=PLAN_KPI).first
    while time.monotonic() < run.deadline and _job_of(page) is None:
        await page.get_by_role("button", name="Estimate monthly cost").click()
        with contextlib.suppress(PlaywrightTimeout):
            await kpi.wait_for(timeout=RETRY_S * 1000)


async def light_user(run: Run, row: Row, rate: float, delay: float) -> None:
    """Arrive after ``delay`` s, ask for one plan (the quick estimate at ``rate`` req/s) and time the click →
    the plan's KPI on screen."""
    await asyncio.sleep(delay)
    context = await run.browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(_left_ms(run))  # a busy server: every wait may take until the cap
    try:
        page = await context.new_page()
        await page.goto(run.url, timeout=_left_ms(run))
        await _settled(page, run)
        await page.get_by_label("Traffic (requests/s)").fill(f"{rate:g}")
        start = time.monotonic()
        await _estimate(page, run)
        await page.get_by_test_id("stMetric").filter(has_text=PLAN_KPI).first.wait_for(timeout=_left_ms(run))
        row.seconds = time.monotonic() - start
        row.job_id = _job_of(page)
    except Exception as exc:  # a user's failure is a figure of the run, not the end of it
        row.problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        await context.close()


async def light_upload_user(run: Run, row: Row, path: Path, delay: float) -> None:
    """Arrive after ``delay`` s, upload ``path`` on the Scenario page, go Home, press Plan it and time the click →
    the plan's KPI on screen (the job from the page's ?job= link, there while the job runs)."""
    await asyncio.sleep(delay)
    context = await run.browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(_left_ms(run))
    try:
        page = await context.new_page()
        await page.goto(run.url, timeout=_left_ms(run))
        await _settled(page, run)
        await _upload(page, path, run)
        start = time.monotonic()
        await page.get_by_role("button", name="Plan it").click()
        await page.wait_for_url("**/?job=*")
        row.job_id = _job_of(page)
        await page.get_by_test_id("stMetric").filter(has_text=PLAN_KPI).first.wait_for(timeout=_left_ms(run))
        row.seconds = time.monotonic() - start
    except Exception as exc:  # a user's failure is a figure of the run, not the end of it
        row.problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        await context.close()


def variant_files(folder: Path, preset: str, prefix: str, count: int) -> list[Path]:
    """``count`` variants of ``preset`` (demand ×1.02, ×1.07, …) as YAML files to upload: the heavy user's
    coral-extended ones and, with ``--light upload``, the light users' coral-core ones."""
    from planning import api

    base = api.load_preset_scenario(preset)
    files = []
    for i in range(count):
        path = folder / f"{prefix}-{i}.yaml"
        path.write_text(base.with_demand_scaled(round(1.02 + 0.05 * i, 3)).to_yaml(), encoding="utf-8")
        files.append(path)
    return files


async def drive(args: argparse.Namespace, url: str, home: str, folder: Path) -> tuple[Row, list[Row]]:
    """The heavy user queues its jobs, then the light users arrive; every row, finished or not, by the cap."""
    from playwright.async_api import async_playwright

    heavy_files = variant_files(folder, "coral-extended", "heavy", args.heavy)
    heavy = Row("heavy", f"{args.heavy} x coral-extended variant")
    rates = [2.0 + 0.5 * i for i in range(args.users)]
    uploads = variant_files(folder, "coral-core", "light", args.users) if args.light == "upload" else []
    rows = [Row(f"user{i:02d}", uploads[i].stem if uploads else f"estimate {rate:g} req/s")
            for i, rate in enumerate(rates)]
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            run = Run(url, browser, time.monotonic() + args.cap, home)
            if heavy_files:
                try:
                    await asyncio.wait_for(heavy_user(run, heavy_files, heavy), timeout=args.cap)
                except Exception as exc:  # said in the report
                    heavy.problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            print(f"heavy user queued {len(heavy.jobs)} job(s) {heavy.problem}", flush=True)
            tasks = [light_upload_user(run, row, uploads[i], i * args.spread) if uploads else
                     light_user(run, row, rates[i], i * args.spread) for i, row in enumerate(rows)]
            try:
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=args.cap + 60)
            except TimeoutError:  # the report still says who got a plan before the cap
                print(f"safety cap: the users still waiting stopped after {args.cap + 60:.0f} s", flush=True)
        finally:
            await browser.close()
    return heavy, rows


def _summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: none"
    return (f"{name}: median {statistics.median(values):.1f} s, p90 {percentile(values, 0.9):.1f} s, "
            f"max {max(values):.1f} s (n={len(values)})")


def _records(home: str, ids: list[str]) -> dict[str, Any]:
    """The job store's records of ``ids`` (created / started / finished / status), read after the run."""
    from planning.jobs import JobStore

    store = JobStore(Path(home) / "jobs.sqlite")
    try:
        return {job_id: record for job_id in ids if (record := store.find(job_id)) is not None}
    finally:
        store.close()


def report(args: argparse.Namespace, home: str, heavy: Row, rows: list[Row]) -> int:
    """Print the figures; 0 when every light user got its plan and no heavy job started ahead of a waiting one."""
    # a light user's job from its page's ?job= link; if one is missing, every solve job not the heavy user's
    light_ids = ([r.job_id for r in rows if r.job_id] if all(r.job_id for r in rows)
                 else [j for j in _solve_jobs(home) if j not in heavy.jobs])
    records = _records(home, light_ids + heavy.jobs)
    for row in rows:
        record = records.get(row.job_id or "")
        wait = (f"queued {record.started - record.created:.1f} s" if record is not None and record.started
                else "never started")
        shown = f"{row.seconds:.1f} s" if row.seconds is not None else f"no plan ({row.problem or 'cap'})"
        print(f"  {row.user} {row.scenario}: plan on screen {shown}, job {row.job_id} {wait}")
    light = [records[j] for j in light_ids if j in records]
    heavy_records = [records[j] for j in heavy.jobs if j in records]
    overtaken = sum(1 for job in light for h in heavy_records if job.started is not None and h.started is not None
                    and job.created < h.started < job.started)
    planned = [r.seconds for r in rows if r.seconds is not None]
    print(f"load average before/after: {args.load_before} / {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} cores)")
    print(f"{args.users} browser users ({args.light}), arrivals every {args.spread} s; heavy user: {len(heavy.jobs)} "
          f"job(s) queued first; PLANNING_MAX_JOBS_PER_USER={args.per_user}, 2 workers")
    print(f"users with their plan on screen: {len(planned)}/{len(rows)}")
    print(_summary("click → plan on screen", planned))
    print(_summary("light jobs' wait in the queue", [j.started - j.created for j in light if j.started is not None]))
    print(f"heavy jobs: statuses {[h.status for h in heavy_records]}, started after "
          f"{[round(h.started - h.created, 1) if h.started else None for h in heavy_records]} s in the queue")
    print(f"heavy jobs started while a light user's first job waited: {overtaken} (target 0)")
    return 0 if len(planned) == len(rows) and overtaken == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--heavy", type=int, default=5, help="jobs the heavy user queues first (0: no heavy user)")
    parser.add_argument("--spread", type=float, default=0.3, help="seconds between two light users' arrivals")
    parser.add_argument("--per-user", type=int, default=1, help="PLANNING_MAX_JOBS_PER_USER for the server")
    parser.add_argument("--cap", type=float, default=1200.0, help="safety cap of the whole run, seconds")
    parser.add_argument("--light", choices=("estimate", "upload"), default="estimate",
                        help="how light users plan: Home's quick estimate, or a coral-core variant uploaded on the "
                             "Scenario page, then Home → Plan it")
    args = parser.parse_args(argv)
    args.load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    os.environ["PLANNING_MAX_JOBS_PER_USER"] = str(args.per_user)  # the server's environment (_serve copies it)
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as folder:
        proc, url = _serve(home)
        try:
            t0 = time.monotonic()
            heavy, rows = asyncio.run(drive(args, url, home, Path(folder)))
            print(f"run: {time.monotonic() - t0:.0f} s", flush=True)
            return report(args, home, heavy, rows)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
