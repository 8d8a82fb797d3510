"""Figure functions: structure of each figure for small inputs, empty inputs, bad inputs."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest

from planning.errors import PlanningError, UnknownIdError
from planning.viz import (
    EXPLANATIONS,
    GLOSSARY,
    GPU_COLORS,
    baselines_figure,
    cost_bars,
    cost_treemap,
    explain,
    gpu_color,
    gpu_of_shape,
    gpu_usage_figure,
    layer_ranges,
    pareto_front,
    pipeline_figure,
    savings,
    served_figure,
    sweep_figure,
    template_scatter,
    whatif_figure,
)
from planning.viz._common import EMPTY_NAME
from tests.ids import GPU_IDS


def _node(shape: str, thr: float | None = None) -> dict[str, Any]:
    count, _, gpu = shape.partition("x")
    node: dict[str, Any] = {"shape": shape, "gpu": gpu, "count": int(count)}
    if thr is not None:
        node["throughput"] = thr
    return node


STAGES = [
    {
        "layers": 24,
        "layer_start": 0,
        "layer_end": 24,
        "nodes": [_node("2xL40S", 900.0), _node("2xL40S", 900.0)],
    },
    {"layers": 30, "layer_start": 24, "layer_end": 54, "nodes": [_node("1xH100", 1700.0)]},
    {
        "layers": 26,
        "layer_start": 54,
        "layer_end": 80,
        "nodes": [_node("4xA10G", 600.0), _node("4xA10G", 600.0), _node("4xL4", 500.0)],
    },
]


def _texts(fig: go.Figure) -> list[str]:
    return [a.text or "" for a in fig.layout.annotations]


def _is_empty_figure(fig: go.Figure) -> bool:
    return len(fig.data) == 0 and any(a.name == EMPTY_NAME for a in fig.layout.annotations)


# -- pipeline -----------------------------------------------------------------------------------------


def test_pipeline_draws_one_box_per_node_and_labels_layer_ranges() -> None:
    fig = pipeline_figure(STAGES, "llama-3-70b decode", phase="decode")
    boxes = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(boxes) == 6
    texts = " ".join(_texts(fig))
    for first, last in [(0, 23), (24, 53), (54, 79)]:
        assert f"layers {first}–{last}" in texts
    # Box labels name the shape; colours follow the GPU map.
    assert sorted(b.label.text.split("<br>")[0] for b in boxes) == sorted(
        ["2xL40S", "2xL40S", "1xH100", "4xA10G", "4xA10G", "4xL4"]
    )
    assert {b.fillcolor for b in boxes} == {GPU_COLORS[g] for g in ("L40S", "H100", "A10G", "L4")}
    # One hover trace per GPU type; one legend entry per GPU type.
    assert len(fig.data) == 4
    assert sum(1 for b in boxes if b.showlegend) == 4
    # Two stage→stage hand-offs, plus the decode loop-back.
    assert sum(1 for a in fig.layout.annotations if (a.name or "").startswith("handoff")) == 2
    assert any(s.type == "path" and s.name == "decode-loop" for s in fig.layout.shapes)
    assert "17 GPUs" in fig.layout.title.text


def test_pipeline_stages_go_left_to_right_and_replicas_stack() -> None:
    fig = pipeline_figure(STAGES)
    boxes = [s for s in fig.layout.shapes if s.type == "rect"]
    centres = [((b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2) for b in boxes]
    xs = sorted({round(x, 6) for x, _ in centres})
    assert len(xs) == 3  # one column per stage
    stage3 = [c for c in centres if round(c[0], 6) == xs[2]]
    assert len(stage3) == 3 and len({round(y, 6) for _, y in stage3}) == 3  # stacked, not overlapping
    heights = sorted(y for _, y in stage3)
    box_h = boxes[0].y1 - boxes[0].y0
    assert all(b - a >= box_h for a, b in itertools.pairwise(heights))
    # Prefill (no phase) has no loop-back.
    assert not any(s.type == "path" for s in fig.layout.shapes)


def test_pipeline_layer_ranges_from_counts_and_inclusive_ends() -> None:
    counts_only = [{"layers": 10, "nodes": [_node("1xL4")]}, {"layers": 22, "nodes": [_node("1xL4")]}]
    assert layer_ranges(counts_only) == [(0, 9), (10, 31)]
    inclusive = [{"layers": 10, "layer_start": 0, "layer_end": 9, "nodes": [_node("1xL4")]}]
    assert layer_ranges(inclusive) == [(0, 9)]
    with pytest.raises(PlanningError, match=r"stages\[0\]\.layer_end"):
        layer_ranges([{"layers": 10, "layer_start": 0, "layer_end": 30, "nodes": [_node("1xL4")]}])
    with pytest.raises(PlanningError, match=r"stages\[0\]\.nodes"):
        pipeline_figure([{"layers": 4, "nodes": []}])


def test_pipeline_empty_input_explains_instead_of_raising() -> None:
    fig = pipeline_figure([])
    assert _is_empty_figure(fig)


def test_gpu_colors_cover_all_ids_and_are_distinct() -> None:
    assert set(GPU_COLORS) == set(GPU_IDS)
    assert len(set(GPU_COLORS.values())) == len(GPU_IDS)
    assert gpu_color("2xL40S") == GPU_COLORS["L40S"]
    assert gpu_of_shape("8xA100-80G") == "A100-80G"
    assert gpu_color("MI300X") == gpu_color("MI300X")  # unknown ids still get a stable colour


# -- costs --------------------------------------------------------------------------------------------

COSTS = pd.DataFrame(
    [
        ("llama-3-70b", "prefill", "aws:us-east-1", "4xL40S", 30.0),
        ("llama-3-70b", "decode", "aws:us-east-1", "2xL40S", 12.0),
        ("llama-3-70b", "decode", "gcp:us-central1", "4xL4", 8.0),
        ("llama-3-70b", "decode", "gcp:us-central1", "4xL4", 2.0),  # duplicate line: summed
        ("llama-3-8b", "decode", "gcp:us-central1", "1xA10G", 3.0),
    ],
    columns=["model", "phase", "region", "shape", "cost_per_hour"],
)


@pytest.mark.parametrize("kind", ["treemap", "sunburst"])
def test_cost_treemap_nests_model_phase_region_shape(kind: str) -> None:
    fig = cost_treemap(COSTS, kind=kind)  # type: ignore[arg-type]
    assert len(fig.data) == 1 and fig.data[0].type == kind
    trace = fig.data[0]
    values = dict(zip(trace.ids, trace.values, strict=True))
    assert values["all"] == pytest.approx(55.0)
    assert values["all/llama-3-70b"] == pytest.approx(52.0)
    assert values["all/llama-3-70b/decode/gcp:us-central1/4xL4"] == pytest.approx(10.0)
    leaves = [i for i in trace.ids if i.count("/") == 4]
    assert len(leaves) == 4
    assert "$55.00/h" in fig.layout.title.text


def test_cost_bars_stack_by_shape_with_totals() -> None:
    fig = cost_bars(COSTS, by="model", color="shape")
    assert fig.layout.barmode == "stack"
    assert len(fig.data) == 4  # one trace per shape
    totals = sorted(a.text for a in fig.layout.annotations)
    assert totals == ["$3.00/h", "$52.00/h"]
    assert {t.name: t.marker.color for t in fig.data}["4xL4"] == GPU_COLORS["L4"]


def test_cost_functions_handle_empty_and_missing_columns() -> None:
    assert _is_empty_figure(cost_treemap(pd.DataFrame()))
    assert _is_empty_figure(cost_bars(COSTS.iloc[0:0]))
    assert _is_empty_figure(cost_treemap(COSTS.assign(cost_per_hour=0.0)))
    with pytest.raises(PlanningError, match=r"cost_treemap\.df\.shape"):
        cost_treemap(COSTS.drop(columns="shape"))
    with pytest.raises(PlanningError, match="kind"):
        cost_treemap(COSTS, kind="pie")  # type: ignore[arg-type]


# -- plan ---------------------------------------------------------------------------------------------


def test_gpu_usage_has_bars_per_gpu_and_a_cap_marker_per_capped_row() -> None:
    usage = pd.DataFrame(
        [
            ("aws:us-east-1", "4xL40S", "L40S", 3, 4),
            ("aws:us-east-1", "1xH100", "H100", 2, 2),
            ("gcp:us-central1", "4xL4", "L4", 5, math.inf),
        ],
        columns=["region", "shape", "gpu", "used", "available"],
    )
    fig = gpu_usage_figure(usage)
    bars = [t for t in fig.data if t.type == "bar"]
    caps = [t for t in fig.data if t.name == "available (cap)"]
    assert len(bars) == 3 and len(caps) == 1
    assert list(caps[0].y) == [2.0, 4.0]  # the uncapped L4 row has no cap marker
    assert [t.text[0] for t in bars if t.name == "L4"] == ["5/∞"]
    assert _is_empty_figure(gpu_usage_figure(usage.iloc[0:0]))


def test_served_figure_reports_fraction_and_normalizes() -> None:
    df = pd.DataFrame(
        [("m1", "prefill", 100.0, 100.0), ("m1", "decode", 200.0, 150.0)],
        columns=["model", "phase", "demanded", "served"],
    )
    fig = served_figure(df)
    assert [t.name for t in fig.data] == ["demanded", "served"]
    assert sorted(fig.data[1].text) == ["100 %", "75 %"]
    normalized = served_figure(df, normalize=True)
    assert sorted(normalized.data[1].y) == [75.0, 100.0]
    assert list(normalized.data[0].y) == [100.0, 100.0]
    assert _is_empty_figure(served_figure(None))  # type: ignore[arg-type]


def test_baselines_figure_labels_savings_and_infeasible() -> None:
    df = pd.DataFrame(
        [
            ("mixed plan", 60.0, 1.0, True),
            ("homogeneous H100", 80.0, 1.0, True),
            ("homogeneous L4", math.nan, 0.0, False),
        ],
        columns=["name", "cost_per_hour", "served_fraction", "feasible"],
    )
    fig = baselines_figure(df)
    assert len(fig.data) == 2
    labels = list(fig.data[0].text)
    assert "plan -25 %" in labels[1]
    assert labels[2] == "infeasible"
    assert savings(60.0, 80.0) == pytest.approx(25.0)
    assert savings(60.0, 0.0) is None
    with pytest.raises(PlanningError, match="plan_name"):
        baselines_figure(df, plan_name="nope")


# -- templates ----------------------------------------------------------------------------------------


def test_template_scatter_groups_homogeneous_and_mixed() -> None:
    df = pd.DataFrame(
        [
            ("t1", "m", "prefill", 1000.0, 10.0, True, 1),
            ("t2", "m", "prefill", 1500.0, 12.0, False, 2),
            ("t3", "m", "prefill", 900.0, 14.0, False, 3),  # dominated: dearer and slower than t1
            ("t4", "m", "decode", 300.0, 5.0, True, 1),
        ],
        columns=[
            "template_id",
            "model",
            "phase",
            "throughput",
            "cost_per_hour",
            "homogeneous",
            "n_gpu_types",
        ],
    )
    fig = template_scatter(df)
    names = [t.name for t in fig.data]
    assert names == ["homogeneous", "mixed · 2 GPU types", "mixed · 3+ GPU types", "Pareto front"]
    assert list(fig.data[0].customdata) == ["t1", "t4"]
    front_x = [x for x in fig.data[-1].x if x is not None]
    assert sorted(front_x) == [5.0, 10.0, 12.0]  # t3 is not on the front
    assert pareto_front([1, 2, 3], [5, 4, 6]) == [0, 2]
    assert len(template_scatter(df, frontier=False).data) == 3
    assert _is_empty_figure(template_scatter(df.iloc[0:0]))


# -- what-if ------------------------------------------------------------------------------------------


def test_whatif_figure_has_cost_and_served_per_method() -> None:
    rows = [
        (v, m, c, f)
        for v in ("base", "demand ×2")
        for m, c, f in (
            ("mixed plan", 60.0, 1.0),
            ("homogeneous H100", 90.0, 1.0),
            ("homogeneous L4", math.nan, 0.0),
        )
    ]
    df = pd.DataFrame(rows, columns=["variant", "method", "cost_per_hour", "served_fraction"])
    fig = whatif_figure(df)
    assert len(fig.data) == 6  # 3 methods × (cost, served)
    cost_l4 = next(t for t in fig.data if t.name == "homogeneous L4" and t.showlegend is not False)
    assert list(cost_l4.text) == ["infeasible", "infeasible"]
    assert {t.marker.color for t in fig.data if t.name == "homogeneous H100"} == {GPU_COLORS["H100"]}
    assert _is_empty_figure(whatif_figure(df.iloc[0:0]))


def test_sweep_figure_draws_one_line_per_method_plan_thick() -> None:
    rows = [(x, m, c * x) for x in (1, 2, 3) for m, c in (("homogeneous L4", 12.0), ("mixed", 10.0))]
    df = pd.DataFrame(rows, columns=["x", "method", "cost_per_hour"])
    fig = sweep_figure(df, "demand ×", plan_method="mixed")
    assert [t.name for t in fig.data] == ["mixed", "homogeneous L4"]
    assert fig.data[0].line.width > fig.data[1].line.width
    assert fig.layout.xaxis.title.text == "demand ×"
    assert _is_empty_figure(sweep_figure(df.iloc[0:0], "x"))
    # finance reads months: every point carries its monthly cost (× 730 h) in the hover, the axis says how
    assert list(fig.data[0].customdata) == pytest.approx([10.0 * x * 730 for x in (1, 2, 3)])
    assert "per month" in fig.data[0].hovertemplate and "per month" in fig.layout.yaxis.title.text


# -- text ---------------------------------------------------------------------------------------------


def test_every_figure_function_has_an_explanation_and_the_glossary_is_complete() -> None:
    import planning.viz as viz

    figure_functions = [n for n in viz.__all__ if n.endswith(("_figure", "_treemap", "_bars", "_scatter"))]
    assert figure_functions and all(n in EXPLANATIONS for n in figure_functions)
    for term in (
        "TTFT",
        "TPOT",
        "template",
        "instance",
        "prefill",
        "decode",
        "pipeline stage",
        "data-parallel",
        "tensor parallel",
        "SLO",
        "availability",
        "spot",
    ):
        assert 20 < len(GLOSSARY[term]) < 400
    assert explain("TTFT") == GLOSSARY["TTFT"]
    assert explain("pipeline_figure") == EXPLANATIONS["pipeline_figure"]
    with pytest.raises(UnknownIdError, match="TTFT"):
        explain("TTTF")


def test_sweep_figure_draws_an_unproven_plan_point_open_with_a_whisker_to_its_bound() -> None:
    """A sweep point whose plan is not proven optimal (a first look's, or one its time limit stopped): open marker,
    whisker down to cost × (1 − proven gap); a proven point solid, no whisker; a baseline line untouched."""
    plan = "Plan (mixed templates)"
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0, 1.0], "method": [plan, plan, plan, "single:L4"],
                       "cost_per_hour": [10.0, 20.0, None, 12.0],
                       "status": ["optimal", "feasible", "time_limit", "proven"],
                       "proven_gap": [0.0, 0.25, None, None]})
    fig = sweep_figure(df, "demand ×", plan_method=plan)
    drawn = next(t for t in fig.data if t.name == plan)
    assert list(drawn.marker.symbol) == ["circle", "circle-open", "circle"]  # no plan at ×3: nothing drawn open
    assert list(drawn.error_y.arrayminus) == [0.0, pytest.approx(5.0), 0.0]
    assert next(t for t in fig.data if t.name == "single:L4").error_y.arrayminus is None
