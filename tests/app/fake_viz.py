"""Stand-ins for planning.viz figures not written yet (opt-in with PLANNING_FAKE_ENGINE=1)."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

NAMES = ("cost_treemap", "cost_bars", "capacity_chart", "service_chart", "baselines_chart", "template_scatter",
         "pipeline_figure", "variants_chart", "plan_diff", "sweep_chart")


def _figure(*args: Any, **kwargs: Any) -> go.Figure:
    return go.Figure(go.Bar(x=[1, 2], y=[1, 2]))


def install(monkeypatch: Any) -> None:
    from planning import viz

    for name in NAMES:
        if not hasattr(viz, name):
            monkeypatch.setattr(viz, name, _figure, raising=False)
    if not hasattr(viz, "GLOSSARY"):
        monkeypatch.setattr(viz, "GLOSSARY", {"TTFT": "time to first token"}, raising=False)
    if not hasattr(viz, "EXPLANATIONS"):
        monkeypatch.setattr(viz, "EXPLANATIONS", {}, raising=False)
