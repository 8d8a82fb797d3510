"""What-if page section "Move a slider": demand ×, prices %, SLOs ×, availability % → the plan and its diff.

A slider sends its value when it is let go (Streamlit's own debounce). Each position is planned in the background
warm from a finished position's plan (``api.solve_near``, the result cache first). While the user looks at a
position's plan, the positions one step away on every slider (``api.slider_neighbours``, at most eight) are planned
ahead in the job runner's background lane, which never delays anyone's job (``planning.jobs.fairshare``), so a move
to a neighbour finds its plan finished. A position still being planned shows its progress and, clearly labelled, its
own best plan so far once the solver has one (``planning.jobs.partials``), else the plan of the nearest position
already planned. A position is planned from the finished position whose plan proves it
(``api.nearest_base``: a price move after a demand move is the demand position's plan at the new prices, proven at
once), else from the nearest finished one's columns; a new position cancels the previous one's plan unless it is a
neighbour, a new base plan cancels everything planned ahead for the old one, and leaving the page cancels what is
still planned ahead (:func:`ui.state.stop_planning_ahead`). Work planned ahead is not listed on the Jobs page as the user's
(the store keeps it apart until the user asks for that position).
"""

from __future__ import annotations

import hashlib
import json

import streamlit as st

from planning import api, viz
from planning.errors import PlanningError
from planning.result import PlanResult
from planning.scenario import Scenario
from ui import state, widgets
from ui.jobs import near_job, near_request

LABELS = {"demand": "Demand ×", "price_pct": "Prices %", "slo": "SLOs ×", "availability_pct": "Availability %"}
HELP = {"demand": "Every model's demand times this factor.", "price_pct": "Every price changes by this percentage.",
        "slo": "Every latency target times this factor (below 1 tightens).",
        "availability_pct": "Available nodes as a percentage of today's (scarcity below 100)."}
KEEP_POSITIONS = 32  # positions whose jobs a session remembers (the store keeps the plans; this only finds them)
GONE = ("cancelled", "failed", "lost")  # a job of these is no plan and is submitted again when wanted
QUICK_WAIT_S = 1.0  # how long a position proven at once is waited for before its progress is drawn instead
FIRST_PLAN_WAIT_S = 0.8  # how long another position is waited for, for its end or its first plan (round 21)

Position = tuple[float, ...]


def slider_section(scenario: Scenario, base: PlanResult, base_id: str) -> None:
    """Four sliders; the plan of their position (its cost, status and diff against ``base``), its neighbours
    planned ahead, and while it runs, its progress and the nearest position already planned."""
    st.subheader("Move a slider")
    widgets.explain("whatif_sliders", "Each position is planned in the background from the base plan's templates. "
                    "The positions one step away are planned ahead, at a priority below everyone's own plans, "
                    "so moving a slider one step shows its plan at once; while a position is still being "
                    "planned, the nearest position already planned is shown, labelled as such.")
    cols = st.columns(len(api.VARIANT_SLIDERS))
    values: dict[str, float] = {}
    for col, (name, (low, high, neutral, step)) in zip(cols, api.VARIANT_SLIDERS.items(), strict=True):
        values[name] = col.slider(LABELS[name], min_value=low, max_value=high, value=neutral, step=step,
                                  key=f"slider_{name}", help=HELP[name])
    position = api.slider_position(**values)
    jobs = _positions(scenario, base_id)
    came_from = st.session_state["slider_key"]  # the position of the previous run (a tuple once one ran)
    current = _plan_position(scenario, base, position, jobs)
    if current is None:
        st.caption("The sliders are at the base scenario: move one to see its plan.")
    else:
        _draw(base, position, current, jobs)  # before planning ahead: the plan is on screen first
    ready = _plan_ahead(scenario, base, position, jobs, came_from if isinstance(came_from, tuple) else None)
    _forget_old(jobs, position)
    st.caption(f"Planned ahead: {ready} of {len(api.slider_neighbours(position))} positions one step away.")


def label(position: Position) -> str:
    """What a position changes ("demand ×2 (all models), prices −20 %"); "the base scenario" at rest."""
    changes = api.slider_variants(**api.slider_values(position))
    return ", ".join(api.variant_label(c) for c in changes) if changes else "the base scenario"


def _positions(scenario: Scenario, base_id: str) -> dict[Position, str]:
    """This session's position → job map for this base; a new base (plan or scenario) cancels every unfinished
    job of the old one (planned ahead or current) and starts an empty map."""
    text = json.dumps(scenario.to_dict(), sort_keys=True, default=str)
    key = f"{base_id}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    jobs: dict[Position, str] = st.session_state["slider_jobs"]
    if st.session_state["slider_base"] != key:
        for job_id in jobs.values():
            state.cancel_if_running(job_id)
        jobs.clear()
        st.session_state["slider_base"], st.session_state["slider_job"] = key, None
    return jobs


def _plan_position(scenario: Scenario, base: PlanResult, position: Position, jobs: dict[Position, str]) -> str | None:
    """The job of the sliders' position (None at rest): the one already asked for, else a user's job (which
    joins, and promotes, the same position's job planned ahead). The previous position's unfinished job is
    cancelled unless it is one step away (then it is what planning ahead would run anyway)."""
    previous = st.session_state["slider_job"]
    if previous and st.session_state["slider_key"] == position:
        return str(previous)
    old = _position_of(jobs, str(previous)) if previous else None
    if previous and old not in api.slider_neighbours(position):
        state.cancel_if_running(str(previous))
    st.session_state["slider_job"], st.session_state["slider_key"] = None, position
    changes = api.slider_variants(**api.slider_values(position))
    if not changes:
        return None
    try:
        variant = api.apply_variants(scenario, changes)
    except PlanningError as exc:
        widgets.show_error(exc)
        return None
    known = state.find_job(jobs.get(position))
    quick = False
    if known is not None and known.status not in GONE:  # its own request again: joins (and promotes) that job
        request = json.loads(known.request_json)
    else:
        start = _start_from(variant, position, _done(jobs, base, but=position))
        request, quick = near_request(variant, start), api.proven_at_once(variant, start)
    job_id = state.submit("solve", request, near_job)
    st.session_state["slider_quick"] = job_id if quick else None  # _draw waits for it briefly
    jobs.pop(position, None)
    jobs[position] = job_id  # the latest at the end: the map's order is its age
    st.session_state["slider_job"] = job_id
    return job_id


def _plan_ahead(scenario: Scenario, base: PlanResult, position: Position, jobs: dict[Position, str],
                came_from: Position | None) -> int:
    """Submit the positions one step away that have no plan or job yet to the background lane (the step going on
    from ``came_from`` first, then in slider order); cancel the unfinished ones no longer one step away. Returns
    how many of the neighbours are planned."""
    near = api.slider_neighbours(position, came_from)
    done = _done(jobs, base)
    ready = 0
    for other in near:
        changes = api.slider_variants(**api.slider_values(other))
        record = state.find_job(jobs.get(other))
        if not changes or (record is not None and record.status == "done"):
            ready += 1  # the base scenario's plan is the base plan
            continue
        if record is not None and record.status not in GONE:
            continue
        try:
            variant = api.apply_variants(scenario, changes)
        except PlanningError:
            continue  # a position that is no valid scenario: the user sees why when they move there
        start = _start_from(variant, other, done)
        jobs[other] = state.submit("solve", near_request(variant, start), near_job, background=True)
    for other, job_id in list(jobs.items()):
        if other != position and other not in near:
            state.cancel_if_running(job_id)
    return ready


def _forget_old(jobs: dict[Position, str], position: Position) -> None:
    """Keep the map to :data:`KEEP_POSITIONS` entries: the oldest go first, never the current or a neighbour."""
    keep = {position, *api.slider_neighbours(position)}
    for other in list(jobs):
        if len(jobs) <= KEEP_POSITIONS:
            return
        if other not in keep:
            del jobs[other]


def _draw(base: PlanResult, position: Position, job_id: str, jobs: dict[Position, str]) -> None:
    """The position's plan when done; else its progress (or why it has none) and its own best plan so far when the
    solver has one (drawn again as a better one comes), else the nearest finished position's. A position its start
    plan proves at once (a price move, an unused option dropped) is waited for up to ``QUICK_WAIT_S``, and any
    other up to ``FIRST_PLAN_WAIT_S`` for its end or its first plan, with its progress on screen, so that plan
    is drawn in this run rather than after the next progress poll and another run of the page (a coral-core
    position's first plan came 0.5 s after its run began and reached the screen after 1.1-1.5 s, round 21)."""
    found = state.find_job(job_id)
    if found is not None and not found.is_terminal:
        quick = st.session_state.get("slider_quick") == job_id
        found = widgets.await_job(job_id, f"Planning {label(position)}", QUICK_WAIT_S if quick else FIRST_PLAN_WAIT_S,
                                  until=None if quick else lambda _: state.partial_stamp(job_id) is not None)
    record = widgets.job_result(found, f"Planning {label(position)}", key="sliders",
                                watch=lambda: state.partial_stamp(job_id))
    result = None if record is None else state.result_of(record)
    if result is not None:
        _show(label(position), base, result, current=True)
        return
    running = state.find_job(job_id)
    if running is None or running.is_terminal:
        return
    partial = state.partial_plan(job_id)
    if partial is not None:
        gap = partial[1].mip_gap
        st.info(f"The best plan found so far for **{label(position)}**"
                + (f", within {gap:.1%} of the best bound when it was found" if gap is not None else "")
                + ". The solver is still proving it (the progress line has its gap now); the proven plan replaces "
                "it when it is done.")
        _show(label(position), base, partial[1], current=True)
        return
    nearest = _nearest_finished(position, jobs, base)
    if nearest is None:
        return
    other, other_result = nearest
    steps = api.slider_steps(position, other)
    st.info(f"While **{label(position)}** is being planned, this is the plan of the nearest position already "
            f"planned: **{label(other)}** ({steps} slider step{'s' if steps != 1 else ''} away), not of the "
            "sliders' position.")
    _show(label(other), base, other_result, current=False)


Done = list[tuple[Position, PlanResult]]  # finished positions with their plans, the base scenario's first


def _done(jobs: dict[Position, str], base: PlanResult, but: Position | None = None) -> Done:
    """The finished positions (the base scenario first, with ``base``) and their plans, except ``but``."""
    found: Done = [(api.slider_position(), base)]
    for other, job_id in jobs.items():
        record = state.find_job(job_id) if other != but else None
        result = None if record is None else state.result_of(record)
        if result is not None:
            found.append((other, result))
    return found


def _by_steps(position: Position, done: Done) -> Done:
    """``done`` fewest slider steps from ``position`` first (stable: among equals, the base, then by age)."""
    return sorted(done, key=lambda d: api.slider_steps(position, d[0]))


def _nearest_finished(position: Position, jobs: dict[Position, str],
                      base: PlanResult) -> tuple[Position, PlanResult] | None:
    """The finished position fewest slider steps from ``position`` (the base scenario counts), with its plan."""
    return _by_steps(position, _done(jobs, base, but=position))[0]


def _start_from(variant: Scenario, position: Position, done: Done) -> PlanResult:
    """The plan a position is planned from: a finished position whose plan proves it by a relation (a price move
    after a demand move is the demand position's plan at the new prices, at once), else the nearest finished one
    (its columns the nearest warm start; the base plan when nothing nearer is done)."""
    return api.nearest_base(variant, [result for _, result in _by_steps(position, done)])


def _position_of(jobs: dict[Position, str], job_id: str) -> Position | None:
    return next((p for p, j in jobs.items() if j == job_id), None)


def _show(text: str, base: PlanResult, result: PlanResult, *, current: bool) -> None:
    """Cost, status and the plan diff of a position against the base plan; ``current``: the sliders' position
    (captioned "Sliders: …"), else the nearest finished one (captioned "Nearest planned position: …")."""
    cols = st.columns(3)
    cols[0].metric("Plan at the sliders" if current else "Plan of the nearest planned position",
                   f"${result.comparable_cost:,.2f}/h" if result.has_plan else "no plan",
                   delta=f"{result.comparable_cost - base.comparable_cost:+,.2f} $/h" if result.has_plan else None,
                   delta_color="inverse")
    cols[1].metric("Status", result.status)
    cols[2].metric("Demand served", f"{result.served_fraction:.1%}")
    st.caption(f"Sliders: {text}." if current else f"Nearest planned position: {text}.")
    if not result.has_plan:
        for line in result.diagnostics[:3]:
            st.caption(line)
        return
    before, after = api.diff_lines(base), api.diff_lines(result)
    st.markdown(viz.diff_summary(before, after))
    diff = viz.plan_diff(before, after)
    st.plotly_chart(viz.plan_diff_figure(diff, base.comparable_cost), width="stretch", key="slider_diff")
    st.dataframe(diff, hide_index=True, width="stretch", key="slider_diff_table")
