"""Learn page: the papers' own small examples, recomputed live, each with the paper's numbers and a control."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from planning import api, viz
from planning.errors import PlanningError
from ui import widgets

st.title("Learn: why heterogeneous GPUs and joint planning pay off")
st.caption("Each example is a paper's own small case. Move its control and the engine recomputes it; the paper's "
           "figures stand beside ours, and differences are explained, not hidden.")
widgets.glossary()


# readable headers for the lessons' row tables (the rows keep short keys: the figures and tests read them)
HEADERS = {"makespan_s": "makespan (s)", "cost_per_hour": "$/h", "per_dollar": "tok/s per $/h",
           "throughput": "prompt tok/s", "gpus": "GPUs", "layers": "layers per stage", "gpu": "GPU",
           "price_per_hour": "price ($/h)", "batch": "decode batch", "input ≤": "input ≤ (tokens)",
           "output ≤": "output ≤ (tokens)", "A10G/A100 tokens per $": "A10G ÷ A100 tokens per $"}


def _checks_frame(lesson: api.Lesson) -> pd.DataFrame:
    """The paper's figures beside ours at the paper's setting: tolerance, agreement and, if not, why."""
    return pd.DataFrame([{"figure": c.figure, "paper": c.paper, "engine": c.ours, "tolerance": c.stated,
                          "agrees": "yes" if c.within else "no", "why not": c.why} for c in lesson.checks])


def _show(lesson: api.Lesson) -> None:
    st.markdown(f"**{lesson.takeaway}**")
    st.caption(f"Source: {lesson.paper}")
    left, right = st.columns(2)
    with left:
        st.markdown("The paper")
        if lesson.paper_numbers:
            st.dataframe(pd.DataFrame({"figure": list(lesson.paper_numbers),
                                       "value": list(lesson.paper_numbers.values())}),
                         hide_index=True, width="stretch")
        else:
            st.caption("The paper shows this as a figure without numbers; the engine's are on the right.")
    with right:
        st.markdown("The engine")
        st.dataframe(pd.DataFrame({"figure": list(lesson.ours), "value": list(lesson.ours.values())}),
                     hide_index=True, width="stretch")
    if lesson.checks:
        agree = sum(c.within for c in lesson.checks)
        st.markdown(f"Against the paper at its own setting: {agree} of {len(lesson.checks)} figures within "
                    "tolerance")
        st.dataframe(_checks_frame(lesson), hide_index=True, width="stretch",
                     column_config={"why not": st.column_config.TextColumn(width="large")})
        for c in lesson.checks:
            if not c.within:
                st.caption(f"{c.figure}: {c.why}")
    for caption, table in lesson.tables:
        st.markdown(caption)
        st.dataframe(pd.DataFrame(list(table)).rename(columns=HEADERS), hide_index=True, width="stretch")
    if lesson.rows:
        st.dataframe(pd.DataFrame(list(lesson.rows)).rename(columns=HEADERS), hide_index=True, width="stretch")
    for note in lesson.notes:
        st.caption(note)


@st.cache_data(max_entries=16, show_spinner="Placing Qwen3-235B on every node multiset…")
def _mixed_pipeline(slo_ms: float, max_gpus_per_node: int) -> api.Lesson:
    """Coral Fig. 1(a) builds a template library (cached on disk too); a control moved back is instant."""
    return api.lesson("coral-mixed-pipeline", slo_ms=slo_ms, max_gpus_per_node=max_gpus_per_node)


tabs = st.tabs(["Mixed pipelines & contention (Coral)", "Request size (Mélange)", "SLOs (Mélange)",
                "Budget & routing (Demystifying)"])
try:
    with tabs[0]:
        st.subheader("One model, one pipeline: mixed GPUs vs one GPU type, per dollar")
        a, b = st.columns(2)
        slo = a.slider("Prefill SLO (TTFT, ms)", 600, 3600, 1800, 100, key="learn_fig1a_slo",
                       help="The paper's Fig. 1(a) uses 1800 ms.")
        node = b.radio("Largest node offered (GPUs)", [2, 4], horizontal=True, key="learn_fig1a_node",
                       help="2: the node sizes of the paper's winner (1×L40S and 2×H100 nodes).")
        mixed_pipeline = _mixed_pipeline(float(slo), int(node))
        _show(mixed_pipeline)
        widgets.explain("mixed_pipeline_figure")
        st.plotly_chart(viz.mixed_pipeline_figure(pd.DataFrame(list(mixed_pipeline.rows))), width="stretch",
                        key="learn_fig1a_chart")
        st.subheader("Two models, few GPUs")
        a, b = st.columns(2)
        a_nodes = a.slider("GPU-A nodes available", 0, 6, 2, key="learn_a")
        b_nodes = b.slider("GPU-B nodes available", 0, 8, 3, key="learn_b")
        _show(api.lesson("coral-contention", a_nodes=a_nodes, b_nodes=b_nodes))
        st.subheader("Mixed replicas fill the gaps between throughput steps")
        nmax = st.slider("Most nodes per replica (N_max)", 1, 6, 4, key="learn_nmax")
        _show(api.lesson("coral-spectrum", nmax=nmax))
    with tabs[1]:
        st.subheader("Small requests favour cheap GPUs; the mix wins")
        rate = st.slider("Request rate (req/s) of 1000-in / 250-out requests", 0.5, 20.0, 6.5, 0.5, key="learn_rate",
                         help="6.5 req/s: the paper's Fig. 9 case (2 A100 + 1 A10G); the checks compare it there.")
        _show(api.lesson("melange", rate_rps=rate))
    with tabs[2]:
        st.subheader("Tighten TPOT and the small GPU loses the most")
        tpot = st.slider("TPOT SLO (ms)", 20, 200, 100, 10, key="learn_tpot",
                         help="Mélange Fig. 6 sweeps TPOT for Llama-2-7B at 64 input / 64 output tokens in bars "
                              "at 40, 60, …, 160 ms; the checks compare 40 ms (tight), the A10G's best lead in "
                              "60–160 ms, and the bar at the slider's value.")
        _show(api.lesson("slo", tpot_ms=float(tpot)))
    with tabs[3]:
        st.subheader("Composition, tensor parallelism (TP-2) and routing decide the makespan")
        budget = st.slider("Budget ($/h)", 2.0, 16.0, 8.0, 1.0, key="learn_budget")
        _show(api.lesson("demystifying", budget_per_hour=budget))
except PlanningError as exc:
    st.error(str(exc))
