"""What-if page: a variant runs in the background and is compared with the base plan and baselines."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from planning import api
from planning.jobs import JobStore
from tests.app.conftest import app, planned, texts, wait_for_job


def test_whatif_without_plan_offers_to_plan() -> None:
    at = app("views/4_What-if.py")
    assert not at.exception
    assert "No plan of" in texts(at)


def test_demand_variant_compared_with_base(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/4_What-if.py")
    assert not at.exception
    next(b for b in at.button if b.label == "Run variant").click()  # default: demand ×2, all models
    at.run()
    jobs = dict(at.session_state["whatif_jobs"])
    assert list(jobs) == ["demand ×2 (all models)"]
    assert wait_for_job(planning_home, jobs["demand ×2 (all models)"]) == "done"
    at.run()
    assert not at.exception
    frame = at.dataframe[0].value
    assert set(frame["variant"]) == {"base", "demand ×2 (all models)"}
    mixed = frame[frame["method"] == "Plan (mixed)"].set_index("variant")["cost_per_hour"]
    assert mixed["demand ×2 (all models)"] >= mixed["base"]  # twice the demand never costs less
    cauchy = frame[frame["method"] == "cauchy"].set_index("variant")  # Coral's Cauchy, beside the others
    assert set(cauchy.index) == {"base", "demand ×2 (all models)"}
    for variant, row in cauchy.iterrows():
        if row["status"] == "meets demand":
            assert mixed[variant] <= row["cost_per_hour"] + 1e-9  # the certified plan is never dearer
    assert "Plan-to-plan diff" in [s.value for s in at.subheader]


def test_bad_sweep_factors_show_a_message(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/4_What-if.py")
    next(t for t in at.text_input if t.label == "Factors k").set_value("1, two")
    next(b for b in at.button if b.label == "Run sweep").click()
    at.run()
    assert not at.exception
    assert "factors" in "\n".join(str(e.value) for e in at.error)


def test_removing_the_only_region_is_refused(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/4_What-if.py")
    at.selectbox(key="whatif_kind").set_value("remove_region")
    at.run()
    next(b for b in at.button if b.label == "Run variant").click()
    at.run()
    assert not at.exception
    assert "only region" in "\n".join(str(e.value) for e in at.error)


def test_sweep_runs_in_background(planning_home: Path) -> None:
    at, _ = planned(planning_home, page="views/4_What-if.py")
    next(t for t in at.text_input if t.label == "Factors k").set_value("1, 2")
    next(n for n in at.number_input if n.label == "Time limit per point (s)").set_value(300.0)
    next(b for b in at.button if b.label == "Run sweep").click()
    at.run()
    (label, job_id), = dict(at.session_state["sweep_jobs"]).items()
    assert wait_for_job(planning_home, job_id) == "done"
    with JobStore(planning_home / "jobs.sqlite") as store:
        record = store.get(job_id)
    assert record.request["point_limit_s"] == 300.0  # the page's limit reaches the job
    assert {row["status"] for row in record.result["rows"] if row["method"] == "Plan (mixed templates)"} == {"optimal"}
    at.run()
    assert not at.exception
    assert f"Sweep {label}" in texts(at)
    assert not any("Not proven" in str(c.value) for c in at.caption)  # every point proven: nothing to label


def test_variants_are_simulated_and_never_show_a_negative_saving(planning_home: Path) -> None:
    """Issue 10: attainment per variant; issue 12: no variant row shows the optimal plan losing to a baseline
    that serves the same demand."""
    at, _ = planned(planning_home, page="views/4_What-if.py")
    next(b for b in at.button if b.label == "Run variant").click()
    at.run()
    (label, job_id), = dict(at.session_state["whatif_jobs"]).items()
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    frame = at.dataframe[0].value
    savings = frame[(frame["method"] != "Plan (mixed)") & frame["savings_pct"].notna()]
    assert len(savings) >= 1 and (savings["savings_pct"] >= -1e-9).all()
    next(b for b in at.button if b.label == "Simulate each variant").click()
    at.run()
    sims = dict(at.session_state["whatif_sim_jobs"])
    assert set(sims) == {"base", label}
    for sim_job in sims.values():
        assert wait_for_job(planning_home, sim_job) == "done"
    at.run()
    assert not at.exception
    table = next(df.value for df in at.dataframe if "SLO attainment" in df.value)
    assert list(table["variant"]) == ["base", label]
    assert all(0 <= float(v.rstrip("%")) <= 100 for v in table["SLO attainment"])
    assert any("attainment per variant" in c.proto.spec for c in at.get("plotly_chart"))


def test_a_slider_position_is_planned_from_the_base_and_diffed(planning_home: Path) -> None:
    """Issue 41 §5: moving a slider plans that position in the background (warm from the base plan); the page
    shows its cost against the base and the plan diff; going back to a position reuses its plan."""
    at, _ = planned(planning_home, page="views/4_What-if.py")
    assert not at.exception
    assert "Move a slider" in [s.value for s in at.subheader]
    assert at.session_state["slider_job"] is None  # at rest: the base scenario, nothing to plan
    at.slider(key="slider_demand").set_value(2.0)
    at.run()
    first = str(at.session_state["slider_job"])
    assert wait_for_job(planning_home, first) == "done"
    at.run()
    assert not at.exception
    metric = next(m for m in at.metric if m.label == "Plan at the sliders")
    assert metric.value.startswith("$")
    assert "demand ×2 (all models)" in texts(at)
    assert any("What changed the cost" in c.proto.spec for c in at.get("plotly_chart"))
    at.slider(key="slider_price_pct").set_value(-20.0)
    at.run()
    second = str(at.session_state["slider_job"])
    assert second != first
    assert wait_for_job(planning_home, second) == "done"
    at.slider(key="slider_price_pct").set_value(0.0)
    at.run()
    assert str(at.session_state["slider_job"]) == first  # a position already planned comes back as it was


def assert_proven_at_prices(home: Path, job: str, base_job: str, factor: float) -> None:
    """Job ``job``'s plan is job ``base_job``'s at prices × ``factor``, proven by that relation: optimal, labelled so,
    the same instances, the cost scaled exactly."""
    with JobStore(home / "jobs.sqlite") as store:
        base, moved = store.get(base_job).result, store.get(job).result
    assert base is not None and moved is not None and moved["status"] == "optimal"
    assert moved["message"].startswith(f"proven optimal: the same plan at prices × {factor:g}")
    assert moved["cost_per_hour"] == pytest.approx(factor * base["cost_per_hour"], rel=1e-12)
    assert [(i["model"], i["template_id"], i["count"]) for i in moved["instances"]] == \
        [(i["model"], i["template_id"], i["count"]) for i in base["instances"]]


def test_a_price_slider_is_proven_from_the_base_plan(planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A price move from the base plan is answered by its relation to the base (``planning.relations``): the
    slider's job finds the base plan in the result cache (on here, as for a user; the suite turns it off) from the
    base scenario its request names, so the position's plan is the base plan at prices × 0.8, proven optimal, with
    the cost scaled exactly."""
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "on")
    at, base_job = planned(planning_home, page="views/4_What-if.py")
    at.slider(key="slider_price_pct").set_value(-20.0)
    at.run()
    job = str(at.session_state["slider_job"])
    assert wait_for_job(planning_home, job) == "done"
    assert_proven_at_prices(planning_home, job, base_job, 0.8)


def test_a_position_proven_at_once_is_drawn_in_the_run_that_asks_for_it(
        planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A position its start plan proves by a relation (a price move) is waited for in the run that submits it, so
    its plan is on screen at once instead of after the next progress poll; a position that must be solved (a
    demand move) is not waited for. The wait is made long here (a bound on a hang on a loaded machine, not the
    page's second), so the outcome does not depend on the machine's speed."""
    import ui.sliders

    monkeypatch.setenv("PLANNING_RESULT_CACHE", "on")
    monkeypatch.setattr(ui.sliders, "QUICK_WAIT_S", 120.0)
    at, _ = planned(planning_home, page="views/4_What-if.py")
    at.slider(key="slider_price_pct").set_value(-20.0)
    at.run()
    assert not at.exception
    assert at.session_state["slider_quick"] == at.session_state["slider_job"]
    assert "Sliders: prices -20 %." in texts(at)  # drawn in this run: no rerun in between
    at.slider(key="slider_demand").set_value(2.0)
    at.run()
    assert not at.exception
    assert at.session_state["slider_quick"] is None  # solved, not proven at once: its progress is drawn


def test_a_price_move_after_a_demand_move_is_proven_from_the_demand_position(
        planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A position is planned from the finished position whose plan proves it (``api.nearest_base``), not always from
    the base plan: after demand ×1.25, the price step planned ahead is the demand position's plan at prices × 0.95,
    proven by relation, its cost scaled exactly. From the base plan (two changes) no relation holds: it would be
    solved. The result cache is on, as for a user (the suite turns it off)."""
    monkeypatch.setenv("PLANNING_RESULT_CACHE", "on")
    at, _ = planned(planning_home, page="views/4_What-if.py")
    assert all(wait_for_job(planning_home, j) == "done" for j in dict(at.session_state["slider_jobs"]).values())
    at.slider(key="slider_demand").set_value(1.25)
    at.run()
    demand = str(at.session_state["slider_job"])
    assert wait_for_job(planning_home, demand) == "done"
    at.run()  # the positions one step from demand ×1.25 are planned ahead, from what is finished
    both = api.slider_position(demand=1.25, price_pct=-5.0)
    ahead = str(at.session_state["slider_jobs"][both])
    assert wait_for_job(planning_home, ahead) == "done"
    at.slider(key="slider_price_pct").set_value(-5.0)
    at.run()
    assert not at.exception
    assert str(at.session_state["slider_job"]) == ahead
    assert_proven_at_prices(planning_home, ahead, demand, 0.95)
    assert "Sliders: demand ×1.25 (all models), prices -5 %." in texts(at)


def test_neighbouring_positions_are_planned_ahead_and_a_far_one_shows_the_nearest(
        planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: with the base plan shown, the positions one step away are planned ahead, so moving there reads a
    finished plan; a position still being planned shows the nearest finished position's plan, labelled as that
    position's; positions no longer one step away, and everything when the base changes, are cancelled."""
    import ui.sliders

    opened = threading.Event()
    opened.set()
    real = ui.sliders.near_job

    def gated(request: dict[str, Any], progress: Any, cancel: Any) -> dict[str, Any]:
        while not opened.wait(0.01):  # the test decides when a solve may run: no clock, no race
            cancel.check()
        return real(request, progress, cancel)

    monkeypatch.setattr(ui.sliders, "near_job", gated)
    at, _ = planned(planning_home, page="views/4_What-if.py")
    ahead = dict(at.session_state["slider_jobs"])
    rest = api.slider_position()
    assert set(ahead) == set(api.slider_neighbours(rest))  # every slider, both directions
    assert all(wait_for_job(planning_home, j) == "done" for j in ahead.values())
    opened.clear()  # from here new solves wait
    at.slider(key="slider_demand").set_value(1.25)
    at.run()
    assert not at.exception
    near = api.slider_position(demand=1.25)
    assert at.session_state["slider_job"] == ahead[near]  # the plan planned ahead, read at once
    assert "Sliders: demand ×1.25 (all models)." in texts(at)
    assert next(m for m in at.metric if m.label == "Plan at the sliders").value.startswith("$")
    further = at.session_state["slider_jobs"][api.slider_position(demand=1.5)]
    at.slider(key="slider_demand").set_value(3.0)
    at.run()
    assert not at.exception
    shown = texts(at)
    assert "Sliders: demand ×3" not in shown  # never another position's plan labelled as the sliders'
    assert "Nearest planned position: demand ×1.25 (all models)." in shown
    assert any(m.label == "Plan of the nearest planned position" for m in at.metric)
    assert wait_for_job(planning_home, further) == "cancelled"  # no longer one step away
    far = str(at.session_state["slider_job"])
    opened.set()
    assert wait_for_job(planning_home, far) == "done"
    at.run()
    assert "Sliders: demand ×3 (all models)." in texts(at)
    opened.clear()
    at.slider(key="slider_demand").set_value(3.25)
    at.run()
    store = JobStore(planning_home / "jobs.sqlite")
    held = [j for j in at.session_state["slider_jobs"].values() if not store.get(j).is_terminal]
    assert len(held) >= 2  # the sliders' position and those planned ahead of it, waiting
    at.session_state["scenario"] = replace(at.session_state["scenario"], name="edited")  # a new base
    at.run()
    opened.set()
    assert [wait_for_job(planning_home, j) for j in held] == ["cancelled"] * len(held)
    store.close()


def test_leaving_the_page_cancels_what_is_planned_ahead_and_the_jobs_page_lists_none(
        planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: the sliders' prefetch ran on after one left the What-if page and showed on the Jobs page as if the
    user had asked for it. Leaving cancels every position still planned ahead; the Jobs page lists the user's own
    plan only; coming back plans the neighbours again."""
    import ui.sliders

    opened = threading.Event()  # closed: every position planned ahead waits (no clock, no race)
    real = ui.sliders.near_job

    def gated(request: dict[str, Any], progress: Any, cancel: Any) -> dict[str, Any]:
        while not opened.wait(0.01):
            cancel.check()
        return real(request, progress, cancel)

    monkeypatch.setattr(ui.sliders, "near_job", gated)
    try:
        at, base_job = planned(planning_home, page="views/4_What-if.py")
        ahead = dict(at.session_state["slider_jobs"])
        store = JobStore(planning_home / "jobs.sqlite")
        assert ahead and not any(store.get(j).is_terminal for j in ahead.values())
        at.switch_page("views/5_Jobs.py")
        at.run()
        assert not at.exception
        assert [wait_for_job(planning_home, j) for j in ahead.values()] == ["cancelled"] * len(ahead)
        listed = set(at.dataframe[0].value["id"])
        assert base_job in listed and not listed & set(ahead.values())  # the user's plan, no prefetch
        at.switch_page("views/4_What-if.py")
        at.run()
        again = dict(at.session_state["slider_jobs"])
        assert set(again) == set(ahead)
        assert all(not store.get(j).is_terminal for j in again.values())  # planned ahead anew
        store.close()
    finally:
        opened.set()


def test_a_position_still_being_proven_shows_its_own_best_plan_so_far(
        planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41 §5 (round 21): a far position whose solve has found a plan but not yet proven it shows that plan
    as the sliders' own, labelled "best plan found so far" with its gap, instead of the nearest planned position,
    and the run that moved the slider waits for that first plan (``FIRST_PLAN_WAIT_S``, long here: a bound on a
    hang, not the page's 0.8 s) so it draws it itself; the proven plan replaces it when the job ends. The job
    publishes its answer as a partial one first (the job store's ``ProgressWriter.plan``, which a real solve calls
    with each better plan) and then waits for the test: no clock, no race."""
    import ui.sliders
    from planning.jobs.partials import read_partial

    opened = threading.Event()
    opened.set()
    real = ui.sliders.near_job

    def published_then_held(request: dict[str, Any], progress: Any, cancel: Any) -> dict[str, Any]:
        out = real(request, lambda f, m="": progress(f, m), cancel)  # a plain progress: no partial of its own
        if not opened.is_set():
            progress.plan({**out, "status": "feasible", "mip_gap": 0.0123})
            while not opened.wait(0.01):
                cancel.check()
        return out

    monkeypatch.setattr(ui.sliders, "near_job", published_then_held)
    monkeypatch.setattr(ui.sliders, "FIRST_PLAN_WAIT_S", 120.0)
    at, _ = planned(planning_home, page="views/4_What-if.py")
    assert all(wait_for_job(planning_home, j) == "done" for j in dict(at.session_state["slider_jobs"]).values())
    store = JobStore(planning_home / "jobs.sqlite")
    opened.clear()
    try:
        at.slider(key="slider_demand").set_value(3.0)  # far: nothing planned there
        at.run()
        assert not at.exception
        job = str(at.session_state["slider_job"])
        shown = texts(at)
        assert "The best plan found so far for **demand ×3 (all models)**, within 1.2% of the best bound" in shown
        assert "Sliders: demand ×3 (all models)." in shown and "Nearest planned position" not in shown
        assert next(m for m in at.metric if m.label == "Status").value == "feasible"
        assert read_partial(store, job) is not None and not store.get(job).is_terminal
    finally:
        opened.set()  # never leave the job held (the suite would wait for its thread)
    assert wait_for_job(planning_home, job) == "done"
    assert read_partial(store, job) is None  # an ended job's partial answer is never read
    at.run()
    assert "The best plan found so far" not in texts(at)
    assert next(m for m in at.metric if m.label == "Status").value == "optimal"
    store.close()


def test_a_running_sweep_draws_its_rows_so_far(planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41 (round 22): a sweep job hands its rows so far to the job store (``ProgressWriter.plan``, as
    ``api.sweep`` does after each point); the page draws them, said to be a first look and how many points are
    solved as asked, while the job runs, and the final figure once it ends. The job publishes and then waits for
    the test: no clock, no race."""
    import ui.jobs

    opened = threading.Event()
    real = ui.jobs.sweep_job

    def published_then_held(request: dict[str, Any], progress: Any, cancel: Any) -> dict[str, Any]:
        assert request["first_pass_s"] == api.FIRST_PASS_S  # the page asks for a first look
        row = {"x": 1.0, "method": api.PLAN_METHOD, "cost_per_hour": 30.5, "served_fraction": 1.0, "feasible": True,
               "status": "feasible", "proven_gap": 0.031, "proof": "within 3.10% of the optimum (proven gap)"}
        progress.plan({"rows": [row], "final": 0, "points": 2})
        while not opened.wait(0.01):
            cancel.check()
        return real(request, lambda f, m="": progress(f, m), cancel)

    monkeypatch.setattr(ui.jobs, "sweep_job", published_then_held)
    at, _ = planned(planning_home, page="views/4_What-if.py")
    next(t for t in at.text_input if t.label == "Factors k").set_value("1, 2")
    try:
        next(b for b in at.button if b.label == "Run sweep").click()
        at.run()
        (label, job_id), = dict(at.session_state["sweep_jobs"]).items()
        store = JobStore(planning_home / "jobs.sqlite")
        from planning.jobs.partials import read_partial

        for _ in range(2000):  # the job's first row reaches the store (an event the test waits for, not a time)
            if read_partial(store, job_id) is not None:
                break
            threading.Event().wait(0.01)
        store.close()
        at.run()
        assert not at.exception
        shown = texts(at)
        assert f"Sweep {label} (so far)" in shown
        assert "1 of 2 points planned so far, 1 of them at a first look" in shown and "0 solved as asked" in shown
        assert any("plan at ×1: within 3.10% of the optimum (proven gap)" in str(c.value) for c in at.caption)
    finally:
        opened.set()  # never leave the job held (the suite would wait for its thread)
    assert wait_for_job(planning_home, job_id) == "done"
    at.run()
    assert not at.exception and f"Sweep {label} (so far)" not in texts(at) and f"Sweep {label}" in texts(at)


def test_a_running_variant_shows_its_best_plan_so_far(planning_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41 §5 (round 22): a variant whose solve has a plan but no proof yet shows that plan in a box saying so
    (never among the finished variants side by side); the proven one replaces it when the job ends. The job
    publishes its answer as a partial one first and then waits for the test: no clock, no race."""
    import ui.jobs
    from planning.jobs.partials import read_partial

    opened = threading.Event()
    real = ui.jobs.near_job

    def published_then_held(request: dict[str, Any], progress: Any, cancel: Any) -> dict[str, Any]:
        out = real(request, lambda f, m="": progress(f, m), cancel)  # a plain progress: no partial of its own
        progress.plan({**out, "status": "feasible", "mip_gap": 0.0123})
        while not opened.wait(0.01):
            cancel.check()
        return out

    monkeypatch.setattr(ui.jobs, "near_job", published_then_held)
    at, _ = planned(planning_home, page="views/4_What-if.py")
    store = JobStore(planning_home / "jobs.sqlite")
    try:
        next(b for b in at.button if b.label == "Run variant").click()  # default: demand ×2, all models
        at.run()
        job = dict(at.session_state["whatif_jobs"])["demand ×2 (all models)"]
        for _ in range(6000):  # the job's partial plan reaches the store (an event waited for, not a time)
            if read_partial(store, job) is not None:
                break
            threading.Event().wait(0.01)
        at.run()
        assert not at.exception
        shown = texts(at)
        assert "Variant **demand ×2 (all models)** (still being planned):" in shown
        assert "Best plan found so far" in shown and "feasible (gap 1.23%)" in shown
        assert not at.dataframe or "demand ×2 (all models)" not in set(at.dataframe[0].value["variant"])
    finally:
        opened.set()  # never leave the job held (the suite would wait for its thread)
    assert wait_for_job(planning_home, job) == "done"
    store.close()
    at.run()
    assert not at.exception and "(still being planned)" not in texts(at)
    assert "demand ×2 (all models)" in set(at.dataframe[0].value["variant"])
