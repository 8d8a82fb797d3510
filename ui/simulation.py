"""The "Check with simulation" panel (Plan page) and the attainment-per-variant view (What-if page)."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from planning import api
from planning.jobs import JobRecord
from planning.result import PlanResult
from planning.viz import simulate as vsim
from ui import checks, state, widgets

DURATIONS = (60.0, 120.0, 300.0, 600.0)


def _finished(job_id: str | None) -> JobRecord | None:
    record = state.find_job(job_id)
    return record if record is not None and record.status == "done" and record.result_json else None


def simulation_panel(result: PlanResult, plan_job_id: str) -> None:
    """Run ``planning.api.simulate`` (and the headroom search) on the plan in the background; show CDFs vs SLO,
    attainment and goodput KPIs, instance load and the headroom."""
    widgets.explain("simulation", "The plan was sized with average throughput. Here every request is simulated "
                    "(Poisson arrivals at the planned rates, continuous batching, KV cache): does the plan keep its "
                    "latency promise, and how much more demand would it take before it stops?")
    sim_jobs: dict[str, str] = st.session_state["sim_jobs"]
    with st.form("simulate_form", border=False):
        cols = st.columns([2, 2, 2], vertical_alignment="bottom")
        duration = cols[0].selectbox("Simulated time", DURATIONS, index=1, format_func=lambda s: f"{s:g} s",
                                     help="Length of the arrival window; longer runs give steadier p99s but take "
                                          "longer.")
        headroom = cols[1].checkbox("Also find the headroom", value=True,
                                    help="Bisection over the demand scale: the highest uniform multiple of today's "
                                         "traffic at which ≥ 99 % of requests still meet both SLOs.")
        run = cols[2].form_submit_button("Check with simulation", icon=":material/play_arrow:")
    if run:
        sim_jobs[plan_job_id] = state.submit_simulation(result, duration_s=float(duration), headroom=bool(headroom))
    job_id = sim_jobs.get(plan_job_id)
    record = state.find_job(job_id)
    if record is None:
        return
    if not record.is_terminal:
        widgets.live_jobs({"Simulating the plan": record.id}, key="simulate")
        return
    if _finished(job_id) is None:
        widgets.show_job_outcome(record)
        return
    assert record.result_json is not None
    sim, head = state.sim_result(record.id, record.result_json)
    k = vsim.simulation_kpis(sim)
    kcols = st.columns(4)
    kcols[0].metric("SLO attainment", f"{k['attainment']:.1%}",
                   help="Share of simulated requests that met both their TTFT and their TPOT target (99 % is the "
                        "usual promise).")
    kcols[1].metric("Goodput", f"{k['goodput_tokens_per_s']:,.0f} tok/s",
                   help="Output tokens per second of the requests that met both targets.")
    worst = k["worst_ttft_p99_ms"]
    kcols[2].metric("Worst p99 TTFT", "—" if worst is None else f"{worst:,.0f} ms")
    if head is not None:
        kcols[3].metric("Headroom (× demand)", f"×{float(head['scale']):.2f}",  # "×1.04 demand" was cut at 1280 px
                       help="The highest uniform demand scale at which simulated attainment stays ≥ "
                            f"{float(head['target']):.0%} ({len(head['evaluations'])} simulated runs).")
    else:
        worst_tpot = k["worst_tpot_p99_ms"]
        kcols[3].metric("Worst p99 TPOT", "—" if worst_tpot is None else f"{worst_tpot:,.1f} ms")
    verdict = ("keeps its latency promise" if k["attainment"] >= vsim.ATTAINMENT_TARGET
               else "misses its latency promise for some requests")
    st.markdown(f"Simulated {k['requests']:,} requests over {sim.duration_s:g} s: the plan **{verdict}**.")
    checks.checks_section([c for c in api.simulated_checks(result, sim).checks if c.kind == "slo"], key="simulated")
    if k["saturated"]:
        st.caption("Saturated instances (busy ≥ 95 % or KV cache full): " + ", ".join(k["saturated"]))
    for line in sim.notes:
        st.caption(line)
    left, right = st.columns(2)
    left.plotly_chart(vsim.latency_cdf_figure(sim, "ttft"), width="stretch", key="sim_ttft")
    right.plotly_chart(vsim.latency_cdf_figure(sim, "tpot"), width="stretch", key="sim_tpot")
    left, right = st.columns(2)
    left.plotly_chart(vsim.attainment_figure(sim), width="stretch", key="sim_attainment")
    right.plotly_chart(vsim.goodput_figure(sim), width="stretch", key="sim_goodput")
    with st.expander("Instance load and KV pressure"):
        st.plotly_chart(vsim.instance_load_figure(sim), width="stretch", key="sim_load")


def variants_attainment(results: Mapping[str, PlanResult]) -> None:
    """What-if page: a button that simulates each variant's plan; then attainment per variant."""
    jobs: dict[str, str] = st.session_state["whatif_sim_jobs"]
    simulable = {label: res for label, res in results.items() if res.has_plan and res.instances}
    if st.button("Simulate each variant", icon=":material/play_arrow:",
                 help="Simulate every variant's plan request by request (120 s at its planned rates) and compare "
                      "the share of requests that meet their SLOs."):
        for label, res in simulable.items():
            jobs[label] = state.submit_simulation(res, duration_s=120.0, headroom=False)
    running = {f"Simulating {label}": jid for label, jid in jobs.items()
               if (r := state.find_job(jid)) is not None and not r.is_terminal}
    if running:
        widgets.live_jobs(running, key="whatif_sim")
        return
    sims = {}
    for label, job_id in jobs.items():
        record = _finished(job_id)
        if record is not None and label in results:
            assert record.result_json is not None
            sims[label] = state.sim_result(record.id, record.result_json)[0]
        elif (r := state.find_job(job_id)) is not None and r.status != "done":
            widgets.show_job_outcome(r)
    if sims:
        st.plotly_chart(vsim.variants_attainment_figure(sims), width="stretch", key="variants_attainment")
        st.dataframe([{"variant": label, "SLO attainment": f"{s.attainment:.1%}",
                       "goodput (output tok/s)": f"{s.goodput_tokens_per_s:,.0f}", "requests": s.requests}
                      for label, s in sims.items()], hide_index=True, width="stretch")
