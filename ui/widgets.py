"""Small Streamlit widgets shared by the pages: header + glossary, explanations, errors, live job panel, KPIs."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping

import pandas as pd
import streamlit as st

from planning import viz
from planning.errors import PlanningError
from planning.jobs import JobRecord
from planning.result import HOURS_PER_MONTH, PlanResult, pricing_kinds_text
from ui.state import (
    FAST_FOR_SECONDS,
    FAST_POLL_SECONDS,
    POLL_SECONDS,
    cancel_job,
    find_job,
    init_state,
    keep_job_in_url,
    runner,
)

QUICK_DRAW_S = 5.0  # a job that ends within this is drawn by the run that started it (see await_job)
SO_FAR_AFTER_S = 3.0  # Home: from this on, a job's best plan so far ends that wait (coral-extended's first: 2-3 s)


def page(title: str, intro: str) -> None:
    """Page frame: config, session state, title, one-line intro and the glossary one click away."""
    st.set_page_config(page_title=f"{title} · planning", page_icon=":material/calculate:", layout="wide")
    init_state()
    head, side = st.columns([5, 1])
    head.title(title)
    head.caption(intro)
    with side:
        glossary()


def glossary() -> None:
    """The glossary (TTFT, TPOT, template, instance, prefill/decode, …) in a popover."""
    with st.popover("Glossary", icon=":material/menu_book:", width="stretch"):
        for term, meaning in viz.GLOSSARY.items():
            st.markdown(f"**{term}** — {meaning}")


def explain(key: str, fallback: str = "") -> None:
    """One or two sentences saying what a chart shows and why (from ``planning.viz.EXPLANATIONS``)."""
    text = viz.EXPLANATIONS.get(key, fallback)
    if text:
        st.caption(text)


def show_error(exc: PlanningError) -> None:
    """The engine's message as it is: the field, what is wrong, the fix."""
    text = f"**{exc.field}** — {exc.problem}"
    if exc.fix:
        text += f"\n\n**Fix:** {exc.fix}"
    st.error(text, icon=":material/error:")


def show_job_outcome(record: JobRecord) -> None:
    """Failed or cancelled jobs: say so (the app stays usable)."""
    if record.status == "failed":
        st.error(f"The {record.kind} job failed: {record.error}", icon=":material/error:")
        if record.error_detail:
            with st.expander("Details"):
                st.code(record.error_detail)
    elif record.status == "cancelled":
        st.warning(f"The {record.kind} job was cancelled. Submit it again to rerun it.")
    elif record.status == "lost":
        st.warning(f"The {record.kind} job was lost: {record.error} Submit it again to rerun it (an identical "
                   "request starts a fresh job).", icon=":material/warning:")


def job_result(record: JobRecord | None, label: str, key: str,
               watch: Callable[[], object] | None = None) -> JobRecord | None:
    """The finished job whose result a panel can draw, else None after drawing why there is none yet.

    No job → nothing drawn; queued or running → its progress bar with Cancel (``live_jobs``); failed, cancelled,
    lost or done without a result → ``show_job_outcome``.

    Parameters
    ----------
    record:
        The panel's job, or None when none was submitted.
    label:
        What the progress bar says the job is doing ("Comparing markets").
    key:
        Unique key of the panel on the page.
    watch:
        While the job runs, the page is drawn again when this value changes (see :func:`live_jobs`).

    Returns
    -------
    The record when it is done with a result, else None.
    """
    if record is None:
        return None
    if not record.is_terminal:
        live_jobs({label: record.id}, key=key, watch=watch)
        return None
    if record.status != "done" or record.result_json is None:
        show_job_outcome(record)
        return None
    return record


def _bar(record: JobRecord) -> float:
    """What a job's progress bar shows: its progress, never less than this session's bar showed for the same
    attempt. A timeline's progress is its share of the expected time (``planning.timeline.pace``), which falls when
    a step turns out slower than expected (0.29 → 0.15 as its look-ahead began); the time left is read from the
    progress itself, so it still says so, but a bar going backwards reads as work undone."""
    shown: dict[str, float] = st.session_state.setdefault("progress_shown", {})
    key = f"{record.id}:{record.attempt}"  # a retry starts again from 0
    value = max(min(1.0, max(0.0, float(record.progress or 0.0))), shown.get(key, 0.0))
    if key not in shown and len(shown) >= 64:
        shown.clear()  # a bound on a long session: at worst a bar shows one lower value once
    shown[key] = value
    return value


def _age(record: JobRecord) -> float:
    """Seconds since the job was submitted."""
    return time.time() - float(record.created)


def await_job(job_id: str, label: str, seconds: float | None = None,
              until: Callable[[JobRecord], bool] | None = None) -> JobRecord | None:
    """The job's record after waiting in this run, its progress on screen, up to ``seconds`` (default
    :data:`QUICK_DRAW_S`) for it to end, or for ``until(record)`` to be true (a position with its first plan).

    The run that started a job calls it, so a plan that takes two seconds is drawn in that run instead of after
    :func:`live_jobs`' next poll and a second rerun of the page (0.7-1.0 s of a first coral-core plan's 3.7-4.1 s
    from "Plan it" to its KPIs, round 21). A job still running afterwards is left to :func:`live_jobs` (with its
    Cancel button); a click meanwhile ends the wait, as Streamlit stops this run at its next element."""
    slot = st.empty()
    deadline = time.monotonic() + (QUICK_DRAW_S if seconds is None else seconds)
    record = find_job(job_id)
    shown = ""
    while record is not None and not record.is_terminal and (left := deadline - time.monotonic()) > 0:
        if until is not None and until(record):
            break
        text = f"{label}: {str(record.message or record.status).partition(' · ')[0]} ({record.status})"
        if text != shown:
            slot.progress(_bar(record), text=text)
            shown = text
        with contextlib.suppress(PlanningError, KeyError):
            runner().wait(job_id, timeout=min(0.05 if until else 0.25, left))  # returns as soon as the job ends
        record = find_job(job_id)
    slot.empty()
    return record


def live_jobs(jobs: Mapping[str, str], key: str, watch: Callable[[], object] | None = None) -> None:
    """Progress bars with Cancel for running jobs; polls only while one runs, then reruns the whole page.

    Parameters
    ----------
    jobs:
        Label → job id of jobs that were queued or running when the page was drawn.
    key:
        Unique key of this panel on the page.
    watch:
        Polled with the progress: when its value differs from the one it had as the page was drawn, the whole
        page is drawn again (a job's best plan so far, ``ui.state.partial_plan``, drawn outside this panel).

    A job younger than ``FAST_FOR_SECONDS`` is polled every ``FAST_POLL_SECONDS`` (its end or its first plan
    comes within a second or two: a far slider move's first plan after 0.2-0.4 s), then every ``POLL_SECONDS``
    (one more rerun of the page switches over).
    """
    seen = None if watch is None else watch()
    fast = any(r is not None and _age(r) < FAST_FOR_SECONDS for r in map(find_job, jobs.values()))

    @st.fragment(run_every=FAST_POLL_SECONDS if fast else POLL_SECONDS)
    def _panel() -> None:
        keep_job_in_url(jobs.values())  # a reload mid-job finds the plan job even if the submit's URL update was lost
        records = {label: find_job(job_id) for label, job_id in jobs.items()}
        if (all(r is None or r.is_terminal for r in records.values()) or (watch is not None and watch() != seen)
                or (fast and all(r is None or _age(r) >= FAST_FOR_SECONDS for r in records.values()))):
            st.rerun()  # full rerun: the page draws the results and this fragment is no longer rendered
        for label, record in records.items():
            if record is None:
                continue
            cols = st.columns([6, 1])
            if record.is_terminal:
                cols[0].progress(1.0, text=f"{label}: {record.status}")
                continue
            fraction = _bar(record)
            step, _, best = str(record.message or record.status).partition(" · ")  # "… · best plan $X/h, gap Y %"
            text = f"{label}: {step} ({record.status})"
            if record.status == "queued" and (place := runner().place(record.id)) is not None:
                text += f" · {place.text()}"  # fair share: "2nd in your queue, 5 ahead overall"
            if record.attempt > 1:
                text += f" · attempt {record.attempt}, its first worker died"
            if attention := record.attention():
                text += f" · {attention}"
            elif left := record.time_left_text():
                text += f" · {left}"  # the job's pace so far, capped by its time limit
            cols[0].progress(fraction, text=text)
            if best:
                cols[0].caption(f"So far: {best}. The solver keeps improving it until it is proven optimal or "
                                "the time limit comes; then this plan is the answer.")
            if cols[1].button("Cancel", key=f"{key}-cancel-{record.id}"):
                cancel_job(record.id)  # this user's cancel: never another user's job
                after = find_job(record.id)
                if after is not None and not after.is_terminal and not after.cancel_requested:
                    st.toast("Cancelled for you. Another user asked for the same plan, so the job goes on for them.")

    _panel()


def kpis(result: PlanResult) -> None:
    """Cost/h, savings vs the best baseline, served fraction, status; GPUs by type and regions.

    The savings label says "homogeneous" only when the cheapest baseline is one (memP mixes GPU types).
    """
    if not result.has_plan:
        no_plan(result)
        return
    best = result.best_baseline()
    bill = result.bill
    kinds = pricing_kinds(result)
    # two rows of three: at five abreast (1280 px and wider alike, the page is centred) the labels and the
    # status ("Savings vs best ho…", "optimal…") were cut; the status takes two columns for "(gap not bounded)"
    cols = [*st.columns(3), *st.columns([1, 2])]
    cols[0].metric("Cost per hour", bill.hour_text,
                   help=f"What is paid per hour at {kinds} prices, {bill.words}: owned capacity at its amortised "
                        "rate, operations and power, reservations at their fee whether used or not, on-demand and "
                        "spot nodes as used. The same figure in the report, the bill CSV and the JSON.")
    cols[1].metric("Cost per month", bill.month_text,
                   help=f"{HOURS_PER_MONTH:g} h a month; per year: {bill.year_text}.")
    label = "Savings vs best homogeneous" if best is None or best.homogeneous else "Savings vs best baseline"
    saving = result.savings_vs(best) if best is not None else None
    if best is not None and saving is not None:
        cols[2].metric(label, f"{saving / 100:.1%}", help=f"The design hour's full cost, ${result.comparable_cost:,.2f}/h, "
                       f"against the best baseline, {best.name}, at ${best.cost_per_hour:,.2f}/h (both count the "
                       "same components).")
    elif best is not None:
        cols[2].metric(label, "not comparable",
                       help=f"The plan and {best.name} serve different fractions of the demand.")
    else:
        cols[2].metric(label, "—", help="No baseline meets all demand with the available GPUs.")
    cols[3].metric("Served fraction", f"{result.served_fraction:.1%}")
    cols[4].metric("Solver status", status_badge(result),
                   help=f"This plan is {result.proof()}. optimal: proven cheapest, gap 0; feasible: the best plan "
                        "found, at most the gap shown above the cheapest possible (the time limit or "
                        "options.mip_rel_gap stopped the proof)."
                        + (f" Stopped at: {result.stopped_at}." if result.stopped_at else ""))
    if "spot" in kinds:
        st.badge("Spot prices: nodes can be reclaimed at short notice", icon=":material/bolt:", color="orange")
    gpus = result.gpus_by_type()
    gpu_text = ", ".join(f"{n}× {g}" for g, n in gpus.items()) or "none"
    st.markdown(f"**GPUs by type:** {gpu_text}  \n**Regions used:** {', '.join(result.regions_used()) or 'none'}"
                f"  \n**Prices:** {kinds}")
    penalty = (f" The optimizer also charged a start-up allowance of ${result.penalty_per_hour:,.2f}/h (initialization "
               "penalty: K × the hourly price of each newly started node, so plans do not churn); it is not part of "
               "the bill and no comparison includes it.") if result.penalty_per_hour > 0 else ""
    st.markdown(bill.headline() + (" " + bill.design_hour_text() if bill.design_hour_text() else "") + penalty)
    if result.message:
        st.info(result.message)
    unique = list(dict.fromkeys(result.diagnostics))  # one box, no repeated lines
    if unique and result.has_plan and result.served_fraction >= 1 - 1e-9:
        st.caption("Solver notes: " + " · ".join(unique))  # informational on a plan that serves everything
    elif unique:
        st.warning("\n".join(f"- {line}" for line in unique))


CANNOT = "cannot meet demand"


def baselines_table(result: PlanResult) -> pd.DataFrame:
    """The plan (its design hour's full cost) and every baseline as text for people: a baseline that cannot meet
    demand says so instead of a cost (never "$0.00/h", "$0/month" or an empty cell) and names the models it serves
    short; one that did not run says "not run"."""
    rows = []
    if result.has_plan:
        full = result.comparable_cost
        rows.append({"plan": "this plan (design hour, full cost)", "$/h": f"${full:,.2f}",
                     "$/month": f"${full * HOURS_PER_MONTH:,.0f}", "served": f"{result.served_fraction:.1%}",
                     "plan saves": "—", "note": result.status})
    for b in result.baselines:
        if not b.ran:
            rows.append({"plan": b.name, "$/h": "not run", "$/month": "not run", "served": "—", "plan saves": "—",
                         "note": b.note})
        elif not b.feasible:
            rows.append({"plan": b.name, "$/h": CANNOT, "$/month": CANNOT,
                         "served": f"{b.served_fraction:.1%} (worst model)", "plan saves": "—",
                         "note": f"serves {b.shortfall}; {b.note}" if b.shortfall else b.note})
        else:
            saving = result.savings_vs(b)
            rows.append({"plan": b.name, "$/h": f"${b.cost_per_hour:,.2f}",
                         "$/month": f"${b.cost_per_hour * HOURS_PER_MONTH:,.0f}", "served": f"{b.served_fraction:.1%}",
                         "plan saves": "not comparable" if saving is None else f"{saving:.1f} %", "note": b.note})
    return pd.DataFrame(rows, columns=["plan", "$/h", "$/month", "served", "plan saves", "note"])


def pricing_kinds(result: PlanResult) -> str:
    """The pricing kinds the plan pays ("owned, reserved, on-demand and spot"), as the report says them."""
    return pricing_kinds_text(result.cost_by_pricing_kind, str(result.scenario.get("pricing", "on_demand")))


def best_so_far(result: PlanResult) -> None:
    """A running solve's best plan so far (``ui.state.partial_plan``) in one box: its bill, its gap when found and
    its GPUs, said to be unproven; never the KPIs' "Cost per hour", which only a finished plan shows."""
    gpus = ", ".join(f"{n}× {g}" for g, n in result.gpus_by_type().items()) or "none"
    st.info(f"**Best plan found so far: {result.bill.hour_text} per hour** ({result.bill.month_text} per month), "
            f"{status_badge(result)} when found; GPUs: {gpus}. The solver is still proving it (the progress line "
            "has its gap now); the proven plan, with the baselines to compare against, replaces it when it is done.",
            icon=":material/hourglass_top:")


def status_badge(result: PlanResult) -> str:
    """The status as the KPI shows it, read from the proven gap: "optimal (gap 0)", "feasible (gap 0.42 %)",
    "feasible (gap not bounded)"; never "optimal" or "certified" for a plan whose gap is not 0."""
    if result.status == "optimal":
        return "optimal (gap 0)"
    if result.mip_gap is not None and math.isfinite(result.mip_gap):
        return f"{result.status} (gap {result.mip_gap:.2%})"
    return f"{result.status} (gap not bounded)" if result.status == "feasible" else result.status


def no_plan(result: PlanResult) -> None:
    """The KPIs of a result without a plan: "no plan", the reason and the fix, never $0 or 0 % as if a result."""
    reason = {"time_limit": "time limit reached before any plan was found", "infeasible": "no plan meets the demand",
              "cancelled": "cancelled", "error": "solver error"}.get(result.status, result.status)
    cols = st.columns(3)
    cols[0].metric("Cost per hour", "no plan", help="Nothing to rent: the solve returned no plan (see below).")
    cols[1].metric("Served fraction", "no plan", help="No plan, so nothing is served; not a 0 % result.")
    cols[2].metric("Solver status", "no plan", help=f"Status {result.status}: {reason}.")
    problem, _, fix = (result.message or f"No plan: {reason}.").partition(" Fix: ")
    st.error(f"**No plan** — {problem}" + (f"\n\n**Fix:** {fix}" if fix else ""), icon=":material/block:")
    unique = list(dict.fromkeys(result.diagnostics))
    if unique:
        st.warning("\n".join(f"- {line}" for line in unique))


def uncertainty_band(source: str) -> float | None:
    """The widest ±N % in a provenance text ("calibrated (±40% prefill, ±65% decode)" → 65.0); None if none."""
    import re

    bands = [float(x) for x in re.findall(r"±\s*(\d+(?:\.\d+)?)\s*%", str(source))]
    return max(bands) if bands else None


def badge_colour(source: str) -> str:
    """Colour by how uncertain the number is (band width), not by its method's name: a ±57 % calibrated figure
    must not look more trustworthy than a ±13 % roofline one. Measured with no band is green."""
    band = uncertainty_band(source)
    if band is None:
        return "green" if str(source).lower().startswith("measured") else "gray"
    if band <= 15:
        return "green"
    if band <= 30:
        return "blue"
    if band <= 50:
        return "orange"
    return "red"


def provenance_badges(provenance: Mapping[str, str]) -> None:
    """Where performance numbers came from (measured / calibrated / roofline) and how uncertain they are: one badge
    per source, coloured by the width of its error band (green ≤ ±15 %, blue ≤ ±30 %, orange ≤ ±50 %, red above)."""
    if not provenance:
        return
    cols = st.columns(min(4, len(provenance)))
    for i, (what, source) in enumerate(sorted(provenance.items())):
        band = uncertainty_band(source)
        icon = ":material/warning:" if band is not None and band > 30 else ":material/speed:"
        with cols[i % len(cols)]:
            st.badge(f"{what}: {source}", color=badge_colour(source), icon=icon)  # type: ignore[arg-type]
