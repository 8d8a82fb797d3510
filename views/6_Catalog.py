"""Catalog page: a browser of the shipped catalog (GPUs, purchasable node configs, models, SLO presets, presets)."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from planning import api
from ui import widgets

GPU_COLUMNS = ["id", "memory_gb", "memory_mib", "hbm_bw_gbps", "bf16_tflops", "fp8_tflops", "intra_link",
               "intra_link_gbps", "p2p", "generation", "source", "memory_source", "as_of", "age_days"]  # fmt: skip
CONFIG_COLUMNS = ["region_key", "instance_type", "shape", "gpu_count", "vcpus", "memory_gib", "price_on_demand",
                  "price_spot", "per_gpu_hour", "network_gbps", "available_nodes", "quality", "hypothetical",
                  "notes", "source", "as_of", "age_days"]  # fmt: skip
MODEL_COLUMNS = ["id", "display_name", "hf_repo", "layers", "hidden_size", "num_heads", "num_kv_heads", "head_dim",
                 "intermediate_size", "vocab_size", "experts_total", "experts_active", "moe_intermediate_size",
                 "sliding_window", "params_total_b", "params_active_b", "dtype", "weight_gb", "notes", "source",
                 "as_of"]  # fmt: skip


_FRAMES = {"gpus": "gpus", "configs": "configs", "models": "models", "slos": "slo_presets"}


@st.cache_data(max_entries=4, show_spinner=False)
def _table(kind: str) -> pd.DataFrame:
    """One catalog table (``api.catalog_frames``), with the age of every row's ``as_of``."""
    frame = api.catalog_frames()[_FRAMES[kind]].copy()
    if "as_of" in frame:
        today = dt.datetime.now(dt.UTC).date()
        frame["age_days"] = [(today - dt.date.fromisoformat(v)).days for v in frame["as_of"]]
    return frame


@st.cache_data(max_entries=2, show_spinner=False)
def _presets() -> pd.DataFrame:
    rows = [{"name": p["name"], "mode": p["mode"], "pricing": p["pricing"], "models": ", ".join(p["models"]),
             "regions": ", ".join(p["regions"]), "shapes": ", ".join(p["shapes"]),
             "explicit offers": p["explicit_offers"], "objective": p["objective"], "description": p["description"],
             "source": p["source"]} for p in api.preset_summaries()]
    return pd.DataFrame(rows)


widgets.page(
    "Catalog",
    "What can be rented, where and at what price, and the models to serve. Every row carries its source and "
    "the date it was read (as_of). Rows flagged `anomaly` are kept as published, not fixed; `hypothetical` "
    "rows are shapes a paper used that the cloud does not sell, priced as described in their notes."
)

tab_gpus, tab_configs, tab_models, tab_slos, tab_presets = st.tabs(
    ["GPUs", "Node configs", "Models", "SLO presets", "Presets"]
)

with tab_gpus:
    gpus = _table("gpus")
    st.dataframe(
        gpus[GPU_COLUMNS],
        hide_index=True,
        width="stretch",
        column_config={
            "memory_gb": st.column_config.NumberColumn("memory (GB, marketed)"),
            "memory_mib": st.column_config.NumberColumn(
                "usable (MiB)", help="total memory as the driver reports it (nvidia-smi), which the planner uses"),
            "p2p": st.column_config.CheckboxColumn(
                "peer-to-peer", help="GPUs of one node reach each other directly (NVLink or PCIe P2P)"),
            "hbm_bw_gbps": st.column_config.NumberColumn("HBM (GB/s)"),
            "bf16_tflops": st.column_config.NumberColumn("BF16 dense TFLOPS"),
            "fp8_tflops": st.column_config.NumberColumn("FP8 dense TFLOPS"),
            "intra_link_gbps": st.column_config.NumberColumn("link (GB/s per dir.)"),
        },
    )

with tab_configs:
    configs = _table("configs")
    if stale := api.stale_price_warning(configs["as_of"]):
        st.warning(stale, icon=":material/schedule:")
    col_cloud, col_region, col_gpu, col_quality = st.columns(4)
    clouds = col_cloud.multiselect("Cloud", sorted(configs["cloud"].unique()), key="cfg_cloud")
    visible = configs[configs["cloud"].isin(clouds)] if clouds else configs
    regions = col_region.multiselect("Region", sorted(visible["region_key"].unique()), key="cfg_region")
    gpu_ids = col_gpu.multiselect("GPU", sorted(configs["gpu_id"].unique()), key="cfg_gpu")
    qualities = col_quality.multiselect(
        "Quality", ["ok", "anomaly", "estimated", "hypothetical"], key="cfg_quality"
    )
    if regions:
        visible = visible[visible["region_key"].isin(regions)]
    if gpu_ids:
        visible = visible[visible["gpu_id"].isin(gpu_ids)]
    if qualities:
        visible = visible[visible["quality"].isin(qualities)]
    visible = visible.assign(
        hypothetical=visible["quality"] == "hypothetical",
        per_gpu_hour=(visible["price_on_demand"] / visible["gpu_count"]).round(4),
    )
    st.dataframe(
        visible[CONFIG_COLUMNS],
        hide_index=True,
        width="stretch",
        column_config={
            "price_on_demand": st.column_config.NumberColumn("on-demand $/h", format="%.4f"),
            "price_spot": st.column_config.NumberColumn("spot $/h", format="%.4f"),
            "per_gpu_hour": st.column_config.NumberColumn("$/GPU-h", format="%.4f"),
            "network_gbps": st.column_config.NumberColumn("network (Gbit/s)"),
            "available_nodes": st.column_config.NumberColumn("nodes (illustrative)"),
            "hypothetical": st.column_config.CheckboxColumn("hypothetical"),
        },
    )
    counts = visible["quality"].value_counts().to_dict()
    st.caption(
        f"{len(visible)} of {len(configs)} configs. Quality flags: "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + ". Available node counts are illustrative defaults, not measurements."
    )

with tab_models:
    models = _table("models")
    st.dataframe(
        models[MODEL_COLUMNS],
        hide_index=True,
        width="stretch",
        column_config={
            "params_total_b": st.column_config.NumberColumn("params total (B)"),
            "params_active_b": st.column_config.NumberColumn("params active (B)"),
            "weight_gb": st.column_config.NumberColumn("weights (GB)"),
        },
    )
    st.caption(
        "Parameter counts are computed from each config.json; active = parameters multiplied per token "
        "(total minus the input-embedding table and inactive experts)."
    )

with tab_slos:
    slos = _table("slos")
    st.dataframe(
        slos[["id", "model_id", "prefill_ms", "decode_ms", "source", "as_of"]],
        hide_index=True,
        width="stretch",
        column_config={
            "prefill_ms": st.column_config.NumberColumn("prefill / TTFT (ms)"),
            "decode_ms": st.column_config.NumberColumn("decode / TPOT (ms)"),
        },
    )

with tab_presets:
    st.dataframe(_presets(), hide_index=True, width="stretch")
    st.caption("Presets reproduce the papers' setups; paper prices are explicit offers in `paper:*` regions.")
