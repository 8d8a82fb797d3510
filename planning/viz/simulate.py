"""Figures of a simulated plan: latency CDFs against the SLO line, attainment and goodput bars, instance load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go

from planning.errors import PlanningError
from planning.simulate.metrics import CDF_POINTS, SimResult
from planning.viz._common import empty_figure

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
ATTAINMENT_TARGET = 0.99


def _check(result: Any, function: str) -> SimResult:
    if not isinstance(result, SimResult):
        raise PlanningError(function, f"expects a SimResult, got {type(result).__name__}.",
                            "pass the result of planning.api.simulate(...).")
    return result


def latency_cdf_figure(result: SimResult, metric: str = "ttft") -> go.Figure:
    """CDF of TTFT (``metric="ttft"``) or TPOT (``"tpot"``) per model, each SLO a dashed line named in the legend
    (one line per distinct SLO, naming the models that share it).

    Raises
    ------
    PlanningError: not a SimResult, or an unknown metric.
    """
    res = _check(result, "latency_cdf_figure")
    if metric not in ("ttft", "tpot"):
        raise PlanningError("metric", f"unknown metric {metric!r}.", "use 'ttft' or 'tpot'.")
    label = "Time to first token (ms)" if metric == "ttft" else "Time per output token (ms)"
    models = [m for m in res.models if (m.ttft_cdf_ms if metric == "ttft" else m.tpot_cdf_ms)]
    if not models:
        return empty_figure("No finished requests to draw.", label)
    fig = go.Figure()
    share = np.linspace(0.0, 1.0, CDF_POINTS)
    slos: dict[float, list[tuple[str, str]]] = {}  # SLO → (model, colour) of the models that share it
    for k, m in enumerate(models):
        color = _PALETTE[k % len(_PALETTE)]
        xs = m.ttft_cdf_ms if metric == "ttft" else m.tpot_cdf_ms
        fig.add_trace(go.Scatter(x=list(xs), y=share, mode="lines", name=m.model, line={"color": color},
                                 hovertemplate="%{x:.0f} ms: %{y:.0%} of requests<extra>" + m.model + "</extra>"))
        slo = m.slo_ttft_ms if metric == "ttft" else m.slo_tpot_ms
        if slo:
            slos.setdefault(float(slo), []).append((m.model, color))
    for slo, owners in sorted(slos.items()):
        # SLO lines named in the legend, not by annotations: close SLOs drew their labels over each other
        names = ", ".join(name for name, _ in owners)
        fig.add_trace(go.Scatter(x=[slo, slo], y=[0.0, 1.02], mode="lines", name=f"SLO {slo:g} ms ({names})",
                                 line={"color": owners[0][1] if len(owners) == 1 else "#444", "dash": "dash",
                                       "width": 1},
                                 hovertemplate=f"SLO {slo:g} ms<extra>{names}</extra>"))
    # the legend under the plot: beside it, in a half-width column, it squeezed the plot to half its width
    fig.update_layout(template="plotly_white", height=340 + 20 * len(fig.data), xaxis_title=label,
                      yaxis_title="share of requests", yaxis={"tickformat": ".0%", "range": [0, 1.02]},
                      legend={"title": "model and SLO", "orientation": "h", "yanchor": "top", "y": -0.25, "x": 0},
                      title=f"{'TTFT' if metric == 'ttft' else 'TPOT'} distribution vs SLO "
                            f"({res.arrivals}, {res.duration_s:g} s, rate × {res.rate_scale:g})")
    return fig


def attainment_figure(result: SimResult) -> go.Figure:
    """Per model: share of requests within the TTFT target, the TPOT target and both; 99 % target line."""
    res = _check(result, "attainment_figure")
    if not res.models:
        return empty_figure("No models simulated.", "SLO attainment")
    names = [m.model for m in res.models]
    fig = go.Figure()
    for label, attr, color in (("TTFT within SLO", "attainment_ttft", "#9ecae1"),
                               ("TPOT within SLO", "attainment_tpot", "#a1d99b"),
                               ("both (attainment)", "attainment", "#08519c")):
        fig.add_trace(go.Bar(x=names, y=[getattr(m, attr) for m in res.models], name=label, marker_color=color,
                             hovertemplate="%{y:.2%}<extra>" + label + "</extra>"))
    fig.add_hline(y=ATTAINMENT_TARGET, line={"dash": "dash", "color": "#444"}, annotation_text="99 %")
    fig.update_layout(template="plotly_white", barmode="group", height=320, yaxis={"tickformat": ".0%"},
                      yaxis_title="share of requests", title=f"SLO attainment: {res.attainment:.2%} overall")
    return fig


def goodput_figure(result: SimResult) -> go.Figure:
    """Per model: output tokens/s served and the part of it from requests within both targets (goodput)."""
    res = _check(result, "goodput_figure")
    if not res.models:
        return empty_figure("No models simulated.", "Goodput")
    names = [m.model for m in res.models]
    fig = go.Figure([
        go.Bar(x=names, y=[m.output_tokens_per_s for m in res.models], name="output tok/s", marker_color="#bdbdbd"),
        go.Bar(x=names, y=[m.goodput_tokens_per_s for m in res.models], name="goodput tok/s", marker_color="#31a354"),
    ])
    fig.update_layout(template="plotly_white", barmode="overlay", height=320, yaxis_title="output tokens/s",
                      title=f"Goodput {res.goodput_tokens_per_s:,.0f} output tok/s")
    return fig


def instance_load_figure(result: SimResult) -> go.Figure:
    """Per instance: busy share of the run and peak KV-cache fill (saturation shows as bars at 100 %)."""
    res = _check(result, "instance_load_figure")
    if not res.instances:
        return empty_figure("No instances simulated.", "Instance load")
    names = [i.name for i in res.instances]
    fig = go.Figure([
        go.Bar(y=names, x=[i.utilisation for i in res.instances], orientation="h", name="busy", marker_color="#3182bd"),
        go.Bar(y=names, x=[i.kv_peak for i in res.instances], orientation="h", name="KV peak", marker_color="#fd8d3c"),
    ])
    fig.update_layout(template="plotly_white", barmode="group", height=120 + 28 * len(names),
                      xaxis={"tickformat": ".0%", "range": [0, 1.05]}, title="Instance load and KV pressure")
    return fig


def variants_attainment_figure(results: Mapping[str, SimResult]) -> go.Figure:
    """What-if view: overall attainment (bars) and goodput (hover) of each simulated variant, 99 % line.

    Raises
    ------
    PlanningError: a value that is not a SimResult.
    """
    if not results:
        return empty_figure("No variants simulated.", "Attainment per variant")
    names = list(results)
    res = [_check(results[n], "variants_attainment_figure") for n in names]
    colors = ["#31a354" if r.attainment >= ATTAINMENT_TARGET else "#de2d26" for r in res]
    fig = go.Figure(go.Bar(x=names, y=[r.attainment for r in res], marker_color=colors,
                           customdata=[r.goodput_tokens_per_s for r in res],
                           hovertemplate="%{x}: %{y:.2%} within SLO, goodput %{customdata:,.0f} tok/s<extra></extra>"))
    fig.add_hline(y=ATTAINMENT_TARGET, line={"dash": "dash", "color": "#444"}, annotation_text="99 %")
    fig.update_layout(template="plotly_white", height=320, yaxis={"tickformat": ".0%", "range": [0, 1.02]},
                      yaxis_title="SLO attainment", title="Simulated SLO attainment per variant")
    return fig


def simulation_kpis(result: SimResult) -> dict[str, Any]:
    """Headline numbers for a "Check with simulation" panel: attainment, goodput, worst p99s, saturated."""
    res = _check(result, "simulation_kpis")
    return {
        "attainment": res.attainment,
        "goodput_tokens_per_s": res.goodput_tokens_per_s,
        "requests": res.requests,
        "worst_ttft_p99_ms": max((m.ttft_ms.p99 for m in res.models if np.isfinite(m.ttft_ms.p99)), default=None),
        "worst_tpot_p99_ms": max((m.tpot_ms.p99 for m in res.models if np.isfinite(m.tpot_ms.p99)), default=None),
        "saturated": [i.name for i in res.saturated()],
    }
