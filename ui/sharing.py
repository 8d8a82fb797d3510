"""Plan page section "Share GPUs between low-traffic models": api.solve_shared as a background job."""

from __future__ import annotations

from typing import Any

import streamlit as st

from planning.errors import PlanningError
from planning.result import PlanResult, savings_pct
from planning.scenario import Scenario
from planning.viz import sharing as vshare
from ui import checks, state, widgets
from ui.jobs import sharing_job, sharing_request

METHODS = {"kvpr": "KVPR heuristic (fast, Prism-style KV-pressure packing; the threshold splits the models)",
           "exact": "exact joint model (decides which models share and how nodes are packed; certified)"}


def sharing_section(result: PlanResult, plan_job_id: str) -> None:
    """Method and threshold → background job → shared nodes → models, memory bars, dedicated vs shared cost."""
    scenario = Scenario.from_dict(result.scenario)
    widgets.explain("sharing", "With many models, most get little traffic and a dedicated GPU each sits idle. "
                    "Models below the threshold can share GPUs: each keeps its weights resident and gets a slice of "
                    "the KV cache. The popular models keep dedicated instances.")
    rates = sorted(m.demand.rate_rps for m in scenario.models)
    jobs: dict[str, str] = st.session_state["shared_jobs"]
    with st.form("sharing_form", border=False):
        cols = st.columns([2, 2, 1], vertical_alignment="bottom")
        method = cols[0].radio("Method", list(METHODS), format_func=METHODS.__getitem__,
                               help="KVPR packs by KV-cache pressure greedily; exact solves the packing ILP.")
        default = float(scenario.options.sharing_threshold_rps or 1.0)
        threshold = cols[1].slider("Share models below (requests/s)", min_value=0.0,
                                   max_value=max(1.0, float(rates[-1]) if rates else 1.0), value=default, step=0.1,
                                   help="KVPR: models whose mean rate is below this share GPUs, the rest stay "
                                        "dedicated. Exact: models at or above it stay dedicated; below it the "
                                        "optimizer decides which share (and the threshold split is shown beside).")
        run = cols[2].form_submit_button("Plan with sharing", icon=":material/join_inner:")
    below = sum(r < threshold for r in rates)
    st.caption(f"{below} of {len(rates)} models are below {threshold:g} requests/s.")
    if run:
        try:
            jobs[plan_job_id] = state.submit("sharing", sharing_request(scenario, str(method), threshold),
                                             sharing_job)
        except PlanningError as exc:
            widgets.show_error(exc)
    record = widgets.job_result(state.find_job(jobs.get(plan_job_id)), "Planning with shared GPUs", key="sharing")
    out = None if record is None else record.result
    if out is None:
        return
    info = out["sharing"]
    nodes = out.get("shared_nodes", [])
    own = info.get("dedicated") or {}  # the dedicated part's own figures (the top level covers both parts)
    dedicated_part = float(own.get("provisioning_per_hour", info["dedicated_cost_per_hour"]) or 0.0) \
        if info["dedicated_models"] else 0.0
    shared_total = float(info["shared_cost_per_hour"]) + dedicated_part
    plan_gpus = sum(result.gpus_by_type().values())
    kcols = st.columns(3)
    kcols[0].metric("Dedicated plan (this page)", f"${result.comparable_cost:,.2f}/h",
                   help=f"${result.comparable_cost * 730:,.0f} per month; every model on its own instances.")
    kcols[1].metric("With shared GPUs", f"${shared_total:,.2f}/h",
                   help=f"${shared_total * 730:,.0f} per month: shared GPUs ${float(info['shared_cost_per_hour']):,.2f}"
                        f"/h + dedicated instances of the popular models ${dedicated_part:,.2f}/h.")
    saving = savings_pct(shared_total, result.comparable_cost)
    kcols[2].metric("Difference", "n/a" if saving is None else f"{-saving:+.1f} %",
                    help="Negative: sharing is cheaper than the dedicated plan.")
    if shared_total > result.comparable_cost + 1e-9:
        st.info("Sharing costs more than the dedicated plan here: the shared GPUs' KV pools do not fit the low-rate "
                "models' traffic more cheaply than the templates the planner already found. Try another threshold or "
                "the exact method.")
    st.caption(f"{len(info['shared_models'])} models on {len(nodes)} shared GPUs ({info['method']}, status "
               f"{info['shared_status']}); {len(info['dedicated_models'])} models dedicated.")
    if info.get("split") == "joint" and info.get("threshold_split_cost_per_hour") is not None:
        rule = float(info["threshold_split_cost_per_hour"])
        joint = float(info["shared_cost_per_hour"]) + float(info["dedicated_cost_per_hour"])
        gap = info.get("gap")
        proof = "certified optimal (gap 0)" if gap == 0 else (f"within {gap:.2%} of the proven bound" if gap is not None
                                                               else "gap not bounded")
        st.caption(f"**Split decided by one model** ({proof}): ${joint:,.2f}/h, against ${rule:,.2f}/h when the "
                   f"threshold alone decides which models share ({savings_pct(joint, rule) or 0.0:.1f} % cheaper).")
    comparison = info.get("comparison") or {}
    if comparison.get("returned") == "dedicated":
        st.warning(f"The {comparison.get('plan')} plan lost to the plan without sharing: {comparison.get('why')}. "
                   "The plan shown is the dedicated one.", icon=":material/warning:")
    checks.checks_section(out.get("checks", []), key="sharing")
    for line in info.get("notes", []):
        st.caption(line)
    st.plotly_chart(vshare.sharing_cost_figure({"cost_per_hour": result.comparable_cost, "gpus": plan_gpus},
                                               {"cost_per_hour": shared_total, "gpus": int(out.get("n_gpus", 0)),
                                                "shared_cost_per_hour": float(info["shared_cost_per_hour"])}),
                    width="stretch", key="sharing_cost")
    left, right = st.columns(2)
    left.plotly_chart(vshare.shared_nodes_figure(nodes), width="stretch", key="sharing_nodes")
    right.plotly_chart(vshare.shared_memory_figure(nodes), width="stretch", key="sharing_memory")
    _simulated(out)


def _simulated(out: dict[str, Any]) -> None:
    """The shared GPUs simulated request by request (the job's ``simulated``): KPIs and the per-model table."""
    if "simulated_error" in out:
        st.warning(f"The shared GPUs could not be simulated: {out['simulated_error']}")
    sim = out.get("simulated")
    if not sim:
        return
    ded = out.get("simulated_dedicated")
    st.markdown("**Simulated request by request**: the shared GPUs and the popular models' dedicated instances "
                "of this shared plan")
    widgets.explain("shared_simulation", "Each shared GPU runs its models' requests in turn: one prompt, or one step "
                    "of every model that is generating. New prompts are taken in Moore–Hodgson order (Prism): as many "
                    "as possible meet their time-to-first-token target. A model waits when its share of the KV cache "
                    "is full.")
    if "simulated_dedicated_error" in out:
        st.warning(f"The dedicated models could not be simulated: {out['simulated_dedicated_error']}")
    rows = [{"model": m["model"], "GPU": m["gpu"], "shared GPU #": m["node"], "requests": m["requests"],
             "within SLO": m["attainment"], "TTFT p99 (ms)": m["ttft_ms_p99"], "TPOT p99 (ms)": m["tpot_ms_p99"]}
            for m in sim["models"]]
    rows += [{"model": m["model"], "GPU": "dedicated", "shared GPU #": None, "requests": m["requests"],
              "within SLO": m["attainment"], "TTFT p99 (ms)": m["ttft_ms_p99"], "TPOT p99 (ms)": m["tpot_ms_p99"]}
             for m in (ded or {}).get("models", [])]
    rows.sort(key=lambda r: (r["within SLO"] if r["within SLO"] is not None else -1.0, r["model"]))
    within, total = all_within(sim, ded)
    c = st.columns(4)
    c[0].metric("Requests within SLO", f"{within / total:.2%}" if total else "—",
                help=f"{total:,} requests in {sim['duration_s']:g} s of arrivals (seed {sim['seed']}), shared and "
                     "dedicated models together; a request counts when its TTFT and TPOT both meet the model's "
                     "targets.")
    c[1].metric("On shared GPUs", f"{sim['attainment']:.2%}", help=f"{sim['requests']:,} requests")
    c[2].metric("Worst model", f"{min(r['within SLO'] or 0.0 for r in rows):.2%}" if rows else "—")
    c[3].metric("Busiest shared GPU", f"{max(sim['node_busy'], default=0.0):.0%} busy")
    st.dataframe(rows,
                 hide_index=True, width="stretch",
                 column_config={"within SLO": st.column_config.NumberColumn(format="percent"),
                                "TTFT p99 (ms)": st.column_config.NumberColumn(format="%.0f"),
                                "TPOT p99 (ms)": st.column_config.NumberColumn(format="%.1f")})


def all_within(shared: dict[str, Any], dedicated: dict[str, Any] | None) -> tuple[float, int]:
    """(requests within SLO, requests) over the shared GPUs and the dedicated models' simulation together."""
    within, total = 0.0, 0
    for part in (shared, dedicated or {}):
        for m in part.get("models", []):
            if m["requests"] and m["attainment"] is not None:
                within += m["attainment"] * m["requests"]
                total += m["requests"]
    return within, total
