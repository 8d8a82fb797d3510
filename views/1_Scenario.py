"""Scenario page: models, SLOs, demand, regions, prices/availability, objective and options; save and load."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd
import streamlit as st

from planning import api
from planning.errors import PlanningError
from planning.scenario import ModelRequest, Scenario, parse_scenario_text
from ui import options_form, scenario_finance, scenario_measurements, state, tables, widgets

widgets.page("Scenario", "Everything a plan depends on. Edits stay in this browser session until you save them.")

scenario = state.current_scenario()
frames = state.catalog_frames()


def _accept(new: Scenario, origin: str = "edited") -> None:
    """Check against the catalog, keep it as the working scenario, show warnings (``new`` was validated when it
    was built: every Scenario spec validates in ``__post_init__``)."""
    try:
        warnings = api.validate(new)
    except PlanningError as exc:
        widgets.show_error(exc)
        return
    state.set_scenario(new, origin)
    if origin == "edited":
        st.session_state["preset"] = "current"
    st.session_state["flash"] = ("Scenario updated.", list(warnings))
    st.rerun()


EDITED = " (edited)"


def _renamed(old: Scenario, name: str, description: str) -> dict[str, str]:
    """Keep a preset's name, description and source only while the scenario is the preset: an edit the user did not
    name becomes "<name> (edited)" (once: an edited scenario loaded and edited again keeps one suffix), and its
    source says it was edited from the preset, so a download, a saved file or a report never passes an edited
    scenario off as the preset or as the paper's setup."""
    origin = str(st.session_state["scenario_origin"] or "")
    source = old.source
    if origin.startswith(("preset:", "saved:")) and name == old.name:
        name = old.name if old.name.endswith(EDITED) else f"{old.name}{EDITED}"
        if description == old.description:
            description = f"Edited from {origin.replace(':', ' ')}. {old.description}".strip()
            description = description if not old.description.startswith("Edited from ") else old.description
    if origin.startswith("preset:") and not source.startswith("Edited in the workbench"):
        source = (f"Edited in the workbench from the preset {origin.removeprefix('preset:')}"
                  + (f" (the preset's setup: {old.source})" if old.source else "") + ".")
    return {"name": name, "description": description, "source": source}


def _saved_source(old: Scenario, name: str) -> str:
    """A preset saved under a name of its own is the user's scenario: its source says where it came from (the
    paper's citation stays as the preset's setup, never as the saved scenario's own source)."""
    origin = str(st.session_state["scenario_origin"] or "")
    if name == old.name or not origin.startswith("preset:") or old.source.startswith(("Edited in", "Saved in")):
        return old.source
    return (f"Saved in the workbench as {name} from the preset {origin.removeprefix('preset:')}"
            + (f" (the preset's setup: {old.source})" if old.source else "") + ".")


flash = st.session_state.pop("flash", None)
if flash:
    st.success(flash[0])
    for warning in flash[1]:
        st.warning(warning)

st.markdown(f"Working on **{scenario.name}** ({st.session_state['scenario_origin'] or 'new'}). "
            + (scenario.description or ""))

# --- load / save ---------------------------------------------------------------------------------------------
with st.expander("Load, save, download, upload", expanded=False):
    c1, c2 = st.columns(2)
    with c1.form("load_form"):
        options = [f"preset:{p}" for p in state.presets()] + [f"saved:{s}" for s in state.saved_scenarios()]
        pick = st.selectbox("Preset or saved scenario", options,
                            format_func=lambda c: c.split(":", 1)[1] + (" (saved)" if c.startswith("saved:") else ""))
        if st.form_submit_button("Load"):
            try:
                _accept(state.load_choice(pick), pick)
            except PlanningError as exc:
                widgets.show_error(exc)
    with c2.form("save_form"):
        save_name = st.text_input("Save as", value=scenario.name)
        if st.form_submit_button("Save to my scenarios"):
            try:
                path = state.save_named(replace(scenario, name=save_name, source=_saved_source(scenario, save_name)),
                                        save_name)
            except PlanningError as exc:
                widgets.show_error(exc)
            else:  # shown at the top of the page: inside the expander it vanished when the expander collapsed
                st.session_state["flash"] = (f"Saved {path.name} under {path.parent}.", [])
                st.rerun()
    c3, c4 = st.columns(2)
    c3.download_button("Download YAML", scenario.to_yaml(), file_name=f"{state.slug(scenario.name)}.yaml",
                       mime="application/x-yaml")
    with c4.form("upload_form"):
        uploaded = st.file_uploader("Upload a scenario (YAML or JSON)", type=["yaml", "yml", "json"])
        if st.form_submit_button("Load file"):
            try:
                if uploaded is None:  # said, never silent: a busy server can drop a file picked just before
                    raise PlanningError("Upload a scenario", "no file came with Load file (none was chosen, or its "
                                        "upload had not finished).", "Choose the YAML or JSON file, wait until it "
                                        "is listed under the box, then press Load file again.")
                _accept(parse_scenario_text(uploaded.getvalue().decode("utf-8", errors="replace"),
                                            origin=uploaded.name), f"upload:{uploaded.name}")
            except PlanningError as exc:
                widgets.show_error(exc)

# --- models, SLOs, demand, regions, objective, options ----------------------------------------------------
model_ids = sorted(frames["models"]["id"].astype(str)) if "id" in frames["models"] else []
model_ids += [m.id for m in scenario.models if m.id not in model_ids]
region_ids = sorted(frames["regions"]["key"].astype(str)) if "key" in frames["regions"] else []
region_ids += [r for r in scenario.regions if r not in region_ids]
gpu_ids = sorted(frames["gpus"]["id"].astype(str))
try:
    offers = api.offers_frame(scenario)
except PlanningError as exc:  # e.g. every region removed: say so, show an empty table
    widgets.show_error(exc)
    offers = pd.DataFrame(columns=api.OFFER_COLUMNS)
shape_ids = sorted(set(frames["configs"]["shape"].astype(str)) | set(scenario.shapes))

with st.form("scenario_form"):
    c1, c2 = st.columns([1, 2])
    new_name = c1.text_input("Name", value=scenario.name,
                             help="Names the plan, the report and downloaded files. An edited preset is renamed "
                                  "\"… (edited)\" unless you name it.")
    new_description = c2.text_input("Description", value=scenario.description)
    st.subheader("Models, SLOs and demand")
    widgets.explain("models_table", "One row per model. TTFT (prefill_ms) bounds the time to the first token, TPOT "
                    "(decode_ms) the time per output token; demand is requests/s with mean prompt and output tokens.")
    edited_models = st.data_editor(
        tables.models_frame(scenario), num_rows="dynamic", hide_index=True, width="stretch",
        key="models_editor",
        column_config={
            "id": st.column_config.SelectboxColumn("model", options=model_ids, required=True),
            "prefill_ms": st.column_config.NumberColumn("TTFT / prefill SLO (ms)"),
            "decode_ms": st.column_config.NumberColumn("TPOT / decode SLO (ms)"),
            "rate_rps": st.column_config.NumberColumn("requests/s"),
            "input_len": st.column_config.NumberColumn("prompt tokens"),
            "output_len": st.column_config.NumberColumn("output tokens"),
        })
    st.subheader("Where")
    c1, c2, c3 = st.columns(3)
    regions = c1.multiselect("Regions", region_ids, default=list(scenario.regions))
    shapes = c2.multiselect("Node configs (empty = all)", shape_ids, default=list(scenario.shapes))
    exclude = c3.multiselect("Exclude GPU types", gpu_ids, default=[g for g in scenario.exclude_gpus if g in gpu_ids])
    st.subheader("Objective and options")
    c1, c2, c3, c4 = st.columns(4)
    objective = c1.radio("Objective", ["cost", "served"], index=["cost", "served"].index(scenario.objective.kind),
                         help="Min cost: the cheapest plan serving all demand. Max served: as much demand as the "
                              "budget and the available GPUs allow.",
                         format_func={"cost": "min cost (serve all)", "served": "max served"}.__getitem__)
    budget = c2.number_input("Budget $/h (0 = none)", min_value=0.0,
                             value=float(scenario.objective.budget_per_hour or 0.0), step=10.0)
    mode = c3.selectbox("Mode", ["disaggregated", "aggregated"],
                        index=["disaggregated", "aggregated"].index(scenario.mode),
                        help="Disaggregated: prefill and decode on separate instances, planned separately. "
                             "Aggregated: one instance does both (vLLM's default).")
    pricing = c4.selectbox("Pricing", ["on_demand", "spot"], index=["on_demand", "spot"].index(scenario.pricing),
                           help="Spot is cheaper, but the cloud can reclaim spot nodes at short notice.")
    chosen_options = options_form.option_inputs(st.columns(5), st, scenario.options)
    apply = st.form_submit_button("Apply", type="primary")
if apply:
    data: dict[str, Any] = scenario.to_dict()
    try:
        data["models"] = tables.models_from_frame(scenario, edited_models)
        data.update(regions=regions, shapes=shapes, exclude_gpus=exclude, mode=mode, pricing=pricing,
                    objective={"kind": objective, "budget_per_hour": budget or None})
        data["options"] = {**data["options"], **chosen_options}
        data["name"], data["description"] = new_name.strip() or scenario.name, new_description
        if Scenario.from_dict(data).to_dict() == scenario.to_dict():
            st.info("Nothing changed.")
        else:
            data.update(_renamed(scenario, data["name"], data["description"]))
            _accept(Scenario.from_dict(data))
    except PlanningError as exc:
        widgets.show_error(exc)

# --- prices and availability ---------------------------------------------------------------------------------
st.subheader("Prices and availability")
widgets.explain("offers_table", "What each node configuration costs per hour in each region and how many nodes "
                "can be rented. Source, date and quality flag say where a price came from; edited cells become "
                "overrides of this scenario (marked), the shipped catalog is never changed.")
if stale := api.stale_price_warning(offers["as_of"]):  # each row's date is its "as of" column
    st.warning(stale, icon=":material/schedule:")
with st.form("offers_form"):
    filter_text = st.text_input("Filter (region or config contains)", "")
    shown = offers
    if filter_text:
        needle = filter_text.lower()
        mask = offers["region"].str.lower().str.contains(needle) | offers["shape"].str.lower().str.contains(needle)
        shown = offers[mask]
    edited_offers = st.data_editor(
        shown, hide_index=True, width="stretch", key="offers_editor",
        disabled=["region", "shape", "instance_type", "override", "quality", "source", "as_of"],
        column_config={
            "price_per_hour": st.column_config.NumberColumn("$/h per node", min_value=0.0, format="%.3f"),
            "available": st.column_config.NumberColumn("nodes available", min_value=0, step=1),
            "override": st.column_config.CheckboxColumn("override"),
            "as_of": st.column_config.TextColumn("as of"),
        })
    c1, c2 = st.columns(2)
    price_scale = c1.number_input("All prices ×", min_value=0.01, value=float(scenario.price_scale), step=0.05)
    avail_scale = c2.number_input("All availability ×", min_value=0.0, value=float(scenario.availability_scale),
                                  step=0.1)
    save_offers = st.form_submit_button("Apply price/availability edits")
if save_offers:
    try:
        changed = tables.apply_offer_edits(scenario, shown, pd.DataFrame(edited_offers))
        new = replace(changed, price_scale=float(price_scale), availability_scale=float(avail_scale))
        _accept(replace(new, **_renamed(scenario, scenario.name, scenario.description)))
    except PlanningError as exc:
        widgets.show_error(exc)

# --- owned GPUs, reservations, spot, the horizon (ui/scenario_finance.py) --------------------------------------
if (with_finance := scenario_finance.finance_form(scenario, shape_ids, gpu_ids)) is not None:
    _accept(replace(with_finance, **_renamed(scenario, scenario.name, scenario.description)))

# --- plan on your measurements: options.measurements (ui/scenario_measurements.py) --------------------------
if (with_measurements := scenario_measurements.measurements_form(scenario)) is not None:
    _accept(replace(with_measurements, **_renamed(scenario, scenario.name, scenario.description)))

# --- custom model from a Hugging Face config.json -------------------------------------------------------------
st.subheader("Custom model")
widgets.explain("custom_model", "Upload a model's Hugging Face config.json (no download happens): layers, hidden "
                "size and heads are read from it, so the performance model can size it like a catalog model.")
with st.form("custom_model_form"):
    c1, c2 = st.columns([2, 3])
    custom_id = c1.text_input("Model id", "my-model")
    config_file = c2.file_uploader("config.json", type=["json"])
    weights = st.text_input("Weights for deployment (a Hugging Face repository id or a mounted volume's path)", "",
                            placeholder="my-org/my-model or /mnt/models/my-model", key="custom_weights",
                            help="Where the exported vLLM recipes read the weights. Left empty, the export says "
                                 "that no source is given and marks its files as manual.")
    c1, c2, c3, c4, c5 = st.columns(5)
    ttft = c1.number_input("TTFT ms", min_value=1.0, value=1500.0)
    tpot = c2.number_input("TPOT ms", min_value=1.0, value=80.0)
    rate = c3.number_input("requests/s", min_value=0.0, value=1.0)
    in_len = c4.number_input("prompt tokens", min_value=1.0, value=1024.0)
    out_len = c5.number_input("output tokens", min_value=1.0, value=256.0)
    add_custom = st.form_submit_button("Add model")
if add_custom:
    try:
        if config_file is None:
            raise PlanningError("config.json", "no file uploaded.", "choose the model's config.json file.")
        config = api.read_model_config(config_file.getvalue(), custom_id)  # names the bad key or the syntax error
        request = ModelRequest.from_dict(
            {"id": custom_id, "slo": {"prefill_ms": ttft, "decode_ms": tpot},
             "demand": {"rate_rps": rate, "input_len": in_len, "output_len": out_len}, "custom_config": config,
             "weights": weights}, "custom model")  # validates the weights source like the YAML field
        others = tuple(m for m in scenario.models if m.id != custom_id)
        _accept(replace(scenario, models=(*others, request), **_renamed(scenario, scenario.name, scenario.description)))
    except PlanningError as exc:
        widgets.show_error(exc)

st.divider()
st.page_link("views/0_Home.py", label="Plan this scenario on Home", icon=":material/home:")
