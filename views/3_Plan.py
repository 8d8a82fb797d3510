"""Plan page: KPIs, cost breakdown, capacity, service, instances with pipeline diagrams, baselines, export."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from planning import api, viz
from planning.scenario import Scenario
from ui import checks, export_check, finance, markets, sharing, simulation, state, widgets

widgets.page("Plan", "What to rent where, how each model replica is pipelined, and what it costs.")

record = state.current_solve_job()
if record is None:
    st.info("No plan yet. Pick a scenario on Home and press **Plan it**.")
    st.page_link("views/0_Home.py", label="Home", icon=":material/home:")
    st.stop()
if not record.is_terminal:
    widgets.live_jobs({"Planning": record.id}, key="plan")
    st.stop()
result = state.result_of(record)
if result is None:
    widgets.show_job_outcome(record)
    st.stop()

widgets.kpis(result)
checks.checks_section(result.checks, key="plan")
if not result.has_plan:  # no breakdown, simulation or export of a plan that does not exist
    st.info("Nothing to break down, simulate or export without a plan. Apply the fix above on the Scenario page "
            "and press **Plan it** on Home again.", icon=":material/info:")
    st.page_link("views/1_Scenario.py", label="Edit the scenario", icon=":material/edit:")
    st.stop()
if result.stopped_at:
    st.caption(f"Stopped by the time limit at: {result.stopped_at}.")
timing_text = ", ".join(f"{k.removesuffix('_seconds').replace('_', ' ')} {v:,.1f} s" for k, v in result.timings.items())
st.caption(f"Objective: {result.objective}. Status {result.status}"
           + (f", MIP gap {result.mip_gap:.3%}" if result.mip_gap is not None else "")
           + (f". Timings: {timing_text}." if timing_text else "."))
stats = dict(result.stats)
if stats.get("templates_total"):
    line = f"{int(stats['templates_total']):,} serving templates generated"
    if "templates_in_ilp" in stats:
        line += (f"; the LP bound (${stats.get('lp_bound_per_hour', 0):,.2f}/h) priced out all but "
                 f"{int(stats['templates_in_ilp']):,} of them before the ILP")
        if result.certified:  # the badge reads the gap: "proven optimal … (gap 0)" or "within x % …"
            line += f"; the plan is {result.proof()}"
    st.caption(line + ".")
widgets.provenance_badges(result.provenance)
if result.instances:
    bands, band_totals = api.plan_uncertainty(result)
    st.caption(
        f"**How far to trust the capacity:** throughputs carry a factor of {1 + band_totals['band']:.2f} either way "
        "(cost-weighted p90 error of the performance model against published measurements of the same GPU class and "
        "dtype, docs/perf-model.md). If real throughput is that much lower, serving the same demand costs up to "
        f"${band_totals['cost_high']:,.2f}/h; if higher, as little as ${band_totals['cost_low']:,.2f}/h.")
    with st.expander("Capacity per instance with its uncertainty band"):
        st.dataframe(bands, hide_index=True, width="stretch",
                     column_config={"band": st.column_config.NumberColumn("± band", format="percent"),
                                    "capacity": st.column_config.NumberColumn(format="%.0f"),
                                    "capacity_low": st.column_config.NumberColumn("low", format="%.0f"),
                                    "capacity_high": st.column_config.NumberColumn("high", format="%.0f")})

if result.cost_by_pricing_kind or result.finance:
    finance.finance_section(result, state.slug(str(result.scenario.get("name", "plan"))))

st.header("Cost breakdown")
widgets.explain("cost_treemap", "Where the money goes: each block is one model → phase → region → node "
                "configuration; its area is the hourly cost. Prefill and decode are planned separately.")
breakdown = result.breakdown_frame()
nodes_only = breakdown[breakdown["kind"].isin(["provisioning", "idle committed"])]
full = nodes_only.assign(cost_per_hour=nodes_only["full_cost_per_hour"].astype(float), phase=nodes_only["phase"]
                         .where(nodes_only["phase"] != "", "idle"))  # full cost: what the design hour pays
left, right = st.columns(2)
left.plotly_chart(viz.cost_treemap(full, title="Cost breakdown (full cost, design hour)"), width="stretch", key="treemap")
right.plotly_chart(viz.cost_bars(full, title="Full cost per hour (design hour)"), width="stretch", key="cost_bars")
committed = result.committed_per_hour
st.caption(f"The charts add up to the design hour's full cost of its nodes, ${result.provisioning_per_hour + committed:,.2f}/h"
           + (f": marginal ${result.provisioning_per_hour:,.2f}/h (the prices the allocation sees: on-demand, spot, "
              f"owned power, reserved $0) + committed ${committed:,.2f}/h (owned and reserved nodes, serving or "
              "idle, the idle ones under (idle))" if committed > 0 else "")
           + (f"; with ${result.transfer_per_hour:,.2f}/h of KV egress, ${result.comparable_cost:,.2f}/h"
              if result.transfer_per_hour > 0 else "") + ". The bill is above.")
if committed > 0:
    st.dataframe(nodes_only, hide_index=True, width="stretch", column_config={
        "cost_per_hour": st.column_config.NumberColumn("marginal $/h", format="$%.2f"),
        "full_cost_per_hour": st.column_config.NumberColumn("full $/h", format="$%.2f")})
if result.penalty_per_hour > 0:
    st.caption(f"The plan also carries an initialization allowance of ${result.penalty_per_hour:,.2f}/h (K × the "
               "price of newly started nodes), which the optimizer uses against churn; it is not a bill and no "
               "comparison counts it.")

st.header("GPUs used vs available")
widgets.explain("gpu_usage_figure", "Nodes rented per region and configuration against what the region can supply "
                "(the cap). A bar at its cap means scarcity shaped the plan.")
capacity = result.capacity_frame()
used_only = capacity[capacity["used"] > 0] if "used" in capacity else capacity
show_all = st.toggle(f"Show all {len(capacity)} offered configurations (not only the {len(used_only)} the plan uses)",
                     value=False, key="capacity_all") if len(used_only) < len(capacity) else True
st.plotly_chart(viz.gpu_usage_figure(capacity if show_all else used_only), width="stretch", key="capacity")

st.header("Served vs demanded")
widgets.explain("served_figure", "Throughput the plan provides for each model and phase against the demand. With the "
                "cost objective every bar reaches its demand; with max-served it may stop short.")
st.plotly_chart(viz.served_figure(result.service_frame(), normalize=True), width="stretch", key="service")

st.header("Check with simulation")
simulation.simulation_panel(result, record.id)

st.header("Instances")
widgets.explain("instances", "An instance is one running copy of a serving template: a pipeline of nodes, "
                "possibly of different GPU types. Pick one to see its layout.")
frame = result.instances_frame()
st.dataframe(frame, hide_index=True, width="stretch", column_config={
    "template_id": st.column_config.TextColumn("template"), "count": st.column_config.NumberColumn("copies"),
    "throughput_unit": st.column_config.TextColumn("unit"),
    "throughput": st.column_config.NumberColumn("throughput", format="%,.0f"),
    "utilisation": st.column_config.NumberColumn("utilisation", format="percent"),
    "cost_per_hour": st.column_config.NumberColumn("$/h", format="$%.2f"),
    "single_shape": st.column_config.CheckboxColumn("one node type"),
    "n_stages": st.column_config.NumberColumn("stages"), "provenance": st.column_config.TextColumn("perf numbers"),
})
if result.instances:
    labels = [f"{i.model} · {i.phase} · {i.template_id} · {i.region} (×{i.count})" for i in result.instances]
    pick = st.selectbox("Pipeline layout of", range(len(labels)), format_func=lambda k: labels[k])
    instance = result.instances[pick]
    widgets.explain("pipeline_figure", "Stages run left to right; each box is a node coloured by GPU type with the "
                    "layer range it holds. Boxes stacked in one stage are data-parallel replicas.")
    st.plotly_chart(viz.pipeline_figure([asdict(s) for s in instance.stages], title=labels[pick],
                                        phase=instance.phase), width="stretch",
                    key="pipeline")
    widgets.provenance_badges({"throughput": instance.provenance})

st.header("Baselines")
widgets.explain("baselines_figure", "The same demand served by one GPU type only (homogeneous) and by simple heuristics. "
                "Savings = how much cheaper the mixed plan is.")
st.plotly_chart(viz.baselines_figure(result.baselines_frame()), width="stretch", key="baselines")
st.caption(api.baseline_caption())  # one source: planning.baselines.registry
st.dataframe(widgets.baselines_table(result), hide_index=True, width="stretch",
             column_config={"plan": st.column_config.TextColumn(width="medium"),
                            "note": st.column_config.TextColumn(width="large")})

if len(result.scenario.get("models", [])) >= 3:  # sharing pays off with many (mostly low-traffic) models
    st.header("Share GPUs between low-traffic models")
    sharing.sharing_section(result, record.id)

st.header("Compare clouds and regions")
markets.markets_section(Scenario.from_dict(result.scenario), record.id)

st.header("Export")
name = state.slug(str(result.scenario.get("name", "plan")))
widgets.explain("export", "The report states every assumption (models, SLOs, traffic, regions, prices with their "
                "source and date) and the comparison with the baselines; print the HTML page to PDF. The deployment "
                "files are SkyPilot task YAML and Kubernetes manifests per instance (mixed-GPU pipelines are marked "
                "as needing manual steps).")
if result.instances:  # what the files run differently from the plan, and its price, before the download
    export_check.export_check_section(result, record.id)
cols = st.columns(3)
cols[0].download_button("Report (printable HTML)", api.plan_report(result, "html"), file_name=f"{name}.report.html",
                        mime="text/html", icon=":material/print:")
cols[1].download_button("Report (Markdown)", api.plan_report(result, "markdown"), file_name=f"{name}.report.md",
                        mime="text/markdown", icon=":material/description:")
if result.instances:
    cols[2].download_button("Deployment files (SkyPilot + Kubernetes, zip)", api.export_zip(result, "all"),
                            file_name=f"{name}.deploy.zip", mime="application/zip", icon=":material/rocket_launch:")
cols = st.columns(3)
cols[0].download_button("Plan JSON", result.to_json(), file_name=f"{name}.plan.json", mime="application/json")
cols[1].download_button("Instances CSV", result.instances_frame().to_csv(index=False),
                        file_name=f"{name}.instances.csv", mime="text/csv")
cols[2].download_button("Cost lines CSV (marginal and full $/h)", api.cost_lines_csv(result),
                        file_name=f"{name}.costs.csv", mime="text/csv")
