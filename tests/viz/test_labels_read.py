"""Charts whose labels read (issue 38): no label drawn over another, none cut at the figure's edge.

The What-if waterfall put one long step name ("changed: phi-4/prefill/1x1xL40S @ aws:us-east-2") under each bar
of a vertical chart, slanted over each other and off the right edge, with its top value label clipped; the
simulation's latency CDF wrote one "model SLO x ms" annotation per model at the top of the plot, on top of each
other when SLOs were close. Checked here on the figures, by the rows and lines they draw.
"""

from __future__ import annotations

import math

import pandas as pd

from planning.simulate.metrics import ModelSim, Percentiles, SimResult
from planning.viz import plan_diff_figure
from planning.viz.diff import WATERFALL_ROW_PX
from planning.viz.simulate import latency_cdf_figure

LABEL_PX = 12  # plotly's default tick font size


def _diff(steps: int) -> pd.DataFrame:
    return pd.DataFrame({"change": ["changed"] * steps,
                         "template_id": [f"qwen3-32b/prefill/1x1xL4+1x1xL40S+1x2xL40S#{k}" for k in range(steps)],
                         "region": ["aws:us-east-2"] * steps, "cost_delta": [3.72 * (-1) ** k for k in range(steps)],
                         "why": [""] * steps})


def test_every_waterfall_step_has_a_row_of_its_own_however_many() -> None:
    for steps in (1, 9, 30):
        fig = plan_diff_figure(_diff(steps), cost_before=26.0)
        trace = fig.data[0]
        rows = len(trace.y)
        assert trace.orientation == "h" and rows == steps + 2 and len(set(trace.y)) == rows  # no shared row
        plot_px = fig.layout.height - 140
        assert plot_px / rows >= WATERFALL_ROW_PX >= 2 * LABEL_PX  # each name fits its row with room to spare
        assert fig.layout.yaxis.automargin  # long names widen the margin instead of running off the figure


def test_waterfall_value_labels_are_never_clipped() -> None:
    fig = plan_diff_figure(_diff(9), cost_before=26.0)
    trace = fig.data[0]
    assert trace.textposition == "outside" and trace.cliponaxis is False
    totals, running = [26.0], 26.0
    for d in trace.x[1:-1]:
        running += d
        totals.append(running)
    assert fig.layout.xaxis.range[1] >= 1.15 * max(totals)  # room right of the longest bar for its label


def _model(name: str, slo_ttft: float) -> ModelSim:
    p = Percentiles(100.0, 100.0, 100.0, 100.0)
    return ModelSim(name, 10, 10, 0, slo_ttft, 50.0, p, p, p, p, p, 1.0, 1.0, 1.0, 100.0, 1.0, 100.0,
                    ttft_cdf_ms=tuple(float(x) for x in range(101)), tpot_cdf_ms=tuple(float(x) for x in range(101)))


def test_slo_lines_are_named_in_the_legend_not_written_over_each_other() -> None:
    """Three models, two with the same TTFT SLO and one 2 % away: no annotation text, one line per distinct SLO."""
    sim = SimResult((_model("a", 1000.0), _model("b", 1000.0), _model("c", 1020.0)), (), 60.0, 30, 1.0, 300.0,
                    "poisson", 1.0, 0, "proportional", 0.1, 100)
    fig = latency_cdf_figure(sim, "ttft")
    assert not [a for a in fig.layout.annotations if a.text]  # nothing drawn on the plot to collide
    slo_lines = [t for t in fig.data if t.name.startswith("SLO")]
    assert [t.name for t in slo_lines] == ["SLO 1000 ms (a, b)", "SLO 1020 ms (c)"]
    assert all(t.showlegend is not False and t.line.dash == "dash" for t in slo_lines)
    assert not any(math.isnan(x) for t in slo_lines for x in t.x)
    assert fig.layout.legend.orientation == "h" and fig.layout.legend.y < 0  # under the plot, not beside it
    tpot = latency_cdf_figure(sim, "tpot")
    assert [t.name for t in tpot.data if t.name.startswith("SLO")] == ["SLO 50 ms (a, b, c)"]


def test_slanted_names_widen_the_margin_and_bar_labels_are_drawn_whole() -> None:
    """The baselines chart cut "Plan (mixed templates)" at the bottom; the markets chart's names too, many regions
    slanted, and its legend took the bars' width."""
    from planning.viz import baselines_figure
    from ui.markets import markets_figure

    df = pd.DataFrame({"name": ["Plan (mixed templates)", "homo", "single:L40S"], "cost_per_hour": [26.0, 39.1, 27.9],
                       "feasible": [True, True, True], "served_fraction": [1.0, 1.0, 1.0]})
    fig = baselines_figure(df)
    assert fig.layout.xaxis.automargin and fig.layout.xaxis2.automargin
    assert all(t.cliponaxis is False and t.textposition == "outside" for t in fig.data)
    longest_last = max(len(n) for n in ("memp", "single:L40S", "homo-ilp", "cauchy"))
    assert fig.layout.margin.r >= longest_last * 6.5 * math.cos(math.radians(30))  # the slanted last name fits
    where = ["all regions (mixed optimum)", *[f"aws:ap-northeast-{k}" for k in range(1, 9)]]
    markets = markets_figure(pd.DataFrame({"where": where, "on-demand $/month": [19_000.0] * 9,
                                           "spot $/month": [5_500.0] * 9}))
    assert markets.layout.xaxis.automargin and markets.layout.legend.orientation == "h"
    assert markets.layout.legend.y > 1  # above the plot
