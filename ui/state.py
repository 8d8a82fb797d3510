"""Session state from one defaults table, who the user is (workspace), the job-runner singleton, cached pure loads,
saved scenarios."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.errors import StreamlitSecretNotFoundError

from planning import api
from planning.errors import PlanningError
from planning.jobs import JobRecord, JobRunner, Workspace, default_runner, local_workspace, user_workspace
from planning.jobs.partials import partial_written, read_partial
from planning.result import PlanResult
from planning.scenario import Scenario, load_scenario, save_scenario

DEFAULT_PRESET = "coral-core"
POLL_SECONDS = 1.0
FAST_POLL_SECONDS = 0.25  # a job younger than FAST_FOR_SECONDS is polled this often (its first plan comes early)
FAST_FOR_SECONDS = 5.0

# Everything a session keeps. Unsaved edits live here (per browser session), never in module globals.
DEFAULTS: dict[str, Any] = {
    "owner": None,  # the workspace id (ui.state.workspace): "local" without sign-in, tags and finds one's jobs
    "session_key": None,  # this browser session: its own user of the fair share without sign-in (fair_key)
    "preset": DEFAULT_PRESET,  # the Home picker's last choice
    "scenario": None,  # the working Scenario (frozen); edits replace it
    "scenario_origin": "",  # "preset:NAME", "saved:NAME", "upload:FILE", "job:ID", or "edited"
    "solve_job": None,  # job id of the current plan
    "library_job": None,  # job id of the template-library build
    "whatif_jobs": {},  # variant label -> job id
    "sweep_jobs": {},  # sweep label -> job id
    "slider_job": None,  # job id of the What-if sliders' current position (ui.sliders)
    "slider_key": "",  # that position (a tuple of the slider values), to tell a new position from a rerun
    "slider_jobs": {},  # slider position -> job id: the current one, those planned ahead, those visited
    "slider_base": "",  # the base plan and scenario those positions are variants of
    "sim_jobs": {},  # plan job id -> simulation job id (Plan page "Check with simulation")
    "whatif_sim_jobs": {},  # variant label -> simulation job id
    "shared_jobs": {},
    "market_jobs": {},  # plan job id -> market-comparison job id  # plan job id -> GPU-sharing job id
}


def init_state() -> None:
    """Fill missing session keys from :data:`DEFAULTS` (idempotent; every page calls it first)."""
    for key, value in DEFAULTS.items():
        if key not in st.session_state:
            st.session_state[key] = copy.deepcopy(value)
    st.session_state["owner"] = workspace().id  # every run: signing out and in as another user changes it


# --- who the user is -------------------------------------------------------------------------------------------
def sign_in_configured() -> bool:
    """Whether ``.streamlit/secrets.toml`` (or ``secrets.files``) has an ``[auth]`` section: sign-in is on."""
    try:
        return bool(st.secrets.load_if_toml_exists() and "auth" in st.secrets)
    except (FileNotFoundError, StreamlitSecretNotFoundError):
        return False


def signed_in() -> bool:
    """Whether the user got past sign-in: always without ``[auth]``, else when the provider signed them in with
    an ID token that names them (``iss`` and ``sub``: their workspace)."""
    if not sign_in_configured():
        return True
    try:
        workspace()
    except PlanningError:
        return False
    return True


def workspace() -> Workspace:
    """This user's workspace: the local one without sign-in, else theirs from the ID token's ``iss`` + ``sub``.

    Raises
    ------
    PlanningError
        When sign-in is on and nobody is signed in (``app.py`` shows the sign-in page before any page runs).
    """
    if not sign_in_configured():
        return local_workspace(planning_home())
    user = st.user
    if not user.get("is_logged_in"):
        raise PlanningError("user", "nobody is signed in.", "Sign in first (the workbench asks on every page).")
    label = str(user.get("name") or user.get("email") or user.get("preferred_username") or "")
    return user_workspace(planning_home(), str(user.get("iss") or ""), str(user.get("sub") or ""), label)


# --- where things live ---------------------------------------------------------------------------------------
def planning_home() -> Path:
    """``$PLANNING_HOME`` or ``~/.cache/planning``: job store and saved scenarios (same folder as the engine's)."""
    return Path(api.planning_home()).expanduser()


def scenarios_dir() -> Path:
    """This workspace's saved scenarios (``PLANNING_HOME/scenarios`` without sign-in, as before)."""
    return workspace().scenarios_dir


@st.cache_resource(max_entries=4)
def _runner(store_path: str) -> JobRunner:
    # Jobs run in worker processes (not threads of the server, where a solve competes with page reruns for the
    # GIL); PLANNING_JOB_PROCESSES=0 keeps them in threads (in-process AppTests, debugging).
    # Workers warm up with what a solve imports lazily too (solver modules, HiGHS: 0.3 s on a quiet machine, ten
    # times that on a busy one), so the first click's time goes to solving.
    # All workers start at once, warm one after another, the first with its baselines' pool (``fill``): a user's
    # first plan then finds no warm-up running beside it (round 21: a first coral-core job 2.1 → 1.35 s, 2 cores).
    return default_runner(store_path, processes=os.environ.get("PLANNING_JOB_PROCESSES", "1") != "0",
                          warm_modules=("planning.api", "ui.jobs", *api.SOLVE_MODULES), fill=True)


def runner() -> JobRunner:
    """The process-wide job runner for this PLANNING_HOME (read-only singleton shared by all sessions)."""
    return _runner(str(planning_home() / "jobs.sqlite"))


def fair_key() -> str | None:
    """Who this session is to the fair share: its workspace with sign-in (None: the owner); without it, every
    session shares the one local workspace, so each browser session is a user of its own ("local:<session>")."""
    if workspace().private:
        return None
    if not st.session_state.get("session_key"):
        st.session_state["session_key"] = uuid.uuid4().hex[:12]
    return f"{st.session_state['owner']}:{st.session_state['session_key']}"


def submit(kind: str, request: dict[str, Any], fn: Any, background: bool = False) -> str:
    """Queue a job for this user (``JobRunner.submit``): listed in their workspace, fair-shared as this session;
    ``background``: work planned ahead that never delays anyone's job (the What-if sliders' neighbours)."""
    return runner().submit(kind, request, fn, owner=st.session_state["owner"], fair_key=fair_key(),
                           background=background)


# --- cached pure loads ---------------------------------------------------------------------------------------
@st.cache_data(max_entries=8, show_spinner=False)
def presets() -> list[str]:
    return list(api.list_presets())


@st.cache_data(max_entries=32, show_spinner=False)
def preset_scenario(name: str) -> Scenario:
    return api.load_preset_scenario(name)


@st.cache_data(max_entries=2, show_spinner=False)
def catalog_frames() -> dict[str, pd.DataFrame]:
    return dict(api.catalog_frames())


@st.cache_data(max_entries=32, show_spinner=False)
def plan_result(job_id: str, result_json: str) -> PlanResult:
    """Parse a finished job's result (keyed by job id; a done job's result never changes)."""
    return PlanResult.from_json(result_json)


def partial_plan(job_id: str) -> tuple[float, PlanResult] | None:
    """A running job's best plan so far, found before its proof (:mod:`planning.jobs.partials`), with when it was
    written; None when it has none, has ended, or this workspace may not see it."""
    if find_job(job_id) is None:
        return None
    found = read_partial(runner().store, job_id)
    return None if found is None else (found[0], _partial_result(job_id, *found))


def partial_answer(job_id: str) -> dict[str, Any] | None:
    """A running job's answer so far that is not a plan (a sweep's rows so far: ``{"rows", "final", "points"}``),
    None when it has none, has ended, or this workspace may not see it."""
    if find_job(job_id) is None:
        return None
    found = read_partial(runner().store, job_id)
    return None if found is None else _partial_json(job_id, *found)


@st.cache_data(max_entries=16, show_spinner=False)
def _partial_json(job_id: str, written: float, result_json: str) -> dict[str, Any]:
    data = json.loads(result_json)
    return data if isinstance(data, dict) else {}


def partial_stamp(job_id: str) -> float | None:
    """When the running job's best plan so far was written (None: none yet), without reading the plan."""
    return partial_written(runner().store, job_id) if find_job(job_id) is not None else None


@st.cache_data(max_entries=16, show_spinner=False)
def _partial_result(job_id: str, written: float, result_json: str) -> PlanResult:
    return PlanResult.from_json(result_json)


# --- saved scenarios -----------------------------------------------------------------------------------------
def slug(name: str) -> str:
    """A safe file stem for a scenario name."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip()).strip("-.")
    return text[:80] or "scenario"


def saved_scenarios() -> list[str]:
    """Names (file stems) of scenarios saved under ``PLANNING_HOME/scenarios``, sorted."""
    folder = scenarios_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.yaml"))


def save_named(scenario: Scenario, name: str) -> Path:
    """Save atomically as ``PLANNING_HOME/scenarios/<slug>.yaml``."""
    return save_scenario(scenario, scenarios_dir() / f"{slug(name)}.yaml")


def load_saved(name: str) -> Scenario:
    return load_scenario(scenarios_dir() / f"{slug(name)}.yaml")


def load_choice(choice: str) -> Scenario:
    """Turn a picker entry (``preset:NAME`` / ``saved:NAME``) into a Scenario.

    Raises
    ------
    PlanningError
        For an unknown entry or an invalid file.
    """
    kind, _, name = choice.partition(":")
    if kind == "preset":
        return preset_scenario(name)
    if kind == "saved":
        return load_saved(name)
    raise PlanningError("preset", f"{choice!r} is not a preset or a saved scenario.", "pick one from the list.")


def current_scenario() -> Scenario:
    """The session's working scenario; the default preset on first use."""
    scenario = st.session_state.get("scenario")
    if scenario is None:
        scenario = preset_scenario(DEFAULT_PRESET)
        set_scenario(scenario, f"preset:{DEFAULT_PRESET}")
    return scenario


def set_scenario(scenario: Scenario, origin: str) -> None:
    st.session_state["scenario"] = scenario
    st.session_state["scenario_origin"] = origin


# --- the current plan job, shared with the URL -----------------------------------------------------------------
def find_job(job_id: str | None) -> JobRecord | None:
    """The job, if this workspace may see it; another user's job answers exactly like an unknown id (``None``)."""
    if not job_id:
        return None
    try:
        ws = workspace()
        store = runner().store
        if ws.private and not store.can_see(job_id, ws.id):
            return None
        return store.find(job_id)
    except PlanningError:
        return None


def cancel_job(job_id: str) -> bool:
    """This user's cancel (this session's without sign-in): their interest goes, and the job stops only when
    nobody else holds it (identical requests share one job, so another user's plan is never stopped). The store
    decides (``JobRunner.cancel(by=...)`` → ``JobStore.withdraw``), with sign-in or without. The job of the URL's
    ``?job=`` is cancelled as its link's holder: without sign-in a reloaded page is a new session, and it may
    cancel the job its old session alone held, never one another user holds (``planning.jobs.access.orphan_hold``).

    Returns
    -------
    bool
        False when this user does not hold the job (or it already finished).
    """
    return runner().cancel(job_id, by=fair_key() or workspace().id, link=job_id == st.query_params.get("job"))


def cancel_if_running(job_id: str) -> bool:
    """This user's cancel of a job no longer wanted (:func:`cancel_job`); whether it was unfinished."""
    record = find_job(job_id)
    if record is not None and not record.is_terminal:
        cancel_job(job_id)
        return True
    return False


def stop_planning_ahead() -> int:
    """Cancel this session's unfinished What-if positions planned ahead (every one but the sliders' own, which
    the user asked for). ``app.py`` calls it on every run of another page, so leaving the What-if page leaves no
    prefetch running; coming back plans them again (``ui.sliders``). It lives here, not in ``ui.sliders``, so
    other pages' runs import nothing of the What-if page; a session that never planned ahead reads nothing.
    Returns how many were cancelled."""
    jobs: dict[Any, str] = st.session_state.get("slider_jobs") or {}
    current = st.session_state.get("slider_job")
    return sum(1 for job_id in jobs.values() if job_id != current and cancel_if_running(job_id))


def current_solve_job() -> JobRecord | None:
    """The plan job of this session, synchronised with ``?job=`` so a reload or a second tab finds it.

    A ``?job=`` in the URL that this session does not know yet is adopted, and its scenario restored.
    """
    url_job = st.query_params.get("job")
    if url_job and url_job != st.session_state["solve_job"]:
        record = find_job(url_job)
        if record is not None and record.kind == "solve":
            st.session_state["solve_job"] = url_job
            with contextlib.suppress(PlanningError, KeyError):
                set_scenario(Scenario.from_dict(record.request["scenario"]), f"job:{url_job}")
    job_id = st.session_state["solve_job"]
    record = find_job(job_id)
    if record is not None and st.query_params.get("job") != job_id:
        st.query_params["job"] = job_id
    return record


def link_solve_job(job_id: str) -> None:
    """Make ``job_id`` this session's plan job and put it in the URL (``?job=``), so a reload or a second tab
    finds it while it runs. Call it in the run that submits the job, before anything slow."""
    st.session_state["solve_job"] = job_id
    st.query_params["job"] = job_id


def keep_job_in_url(job_ids: Iterable[str]) -> None:
    """Say ``?job=`` again when this session's plan job is among ``job_ids`` (a live panel's, every poll).

    The run that submitted the job already put it in the URL, but that message can be lost: a rerun that stops
    the run before it, or a page switch whose URL update lands after it (the browser keeps the page's path with
    the query it had). Sent again each poll, it costs nothing when the URL already holds it (the browser compares)
    and repairs the link within a poll when it does not; before this, the link came back only with the result.
    """
    job_id = st.session_state.get("solve_job")
    if job_id and job_id in job_ids:
        st.query_params["job"] = job_id


def submit_solve(scenario: Scenario) -> str:
    """Plan ``scenario`` in the background; identical requests reuse the stored job/result."""
    from ui.jobs import solve_job, solve_request

    return submit("solve", solve_request(scenario), solve_job)


def result_of(record: JobRecord) -> PlanResult | None:
    """The PlanResult of a finished solve job (None while it runs or if it failed)."""
    if record.status != "done" or record.result_json is None:
        return None
    return plan_result(record.id, record.result_json)


def submit_simulation(result: PlanResult, duration_s: float = 120.0, seed: int = 0, headroom: bool = True) -> str:
    """Simulate a finished plan request by request in the background (identical requests reuse the stored run)."""
    from ui.jobs import simulate_job, simulate_request

    return submit("simulate", simulate_request(result.to_json(), duration_s, seed, headroom), simulate_job)


@st.cache_data(max_entries=32, show_spinner=False)
def sim_result(job_id: str, result_json: str) -> tuple[Any, dict[str, Any] | None]:
    """A finished simulation job's (SimResult, headroom dict or None), keyed by job id."""
    import json

    data = json.loads(result_json)
    return api.sim_result_from_dict(data["sim"]), data.get("headroom")
