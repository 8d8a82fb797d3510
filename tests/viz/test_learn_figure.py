"""The Learn lesson figure of Coral Fig. 1(a): one bar per setup, GPU colours, the best one-type line."""

from __future__ import annotations

import pandas as pd
import pytest

from planning.errors import PlanningError
from planning.viz import GPU_COLORS, mixed_pipeline_figure
from planning.viz.learn import MIXED_COLOR

ROWS = pd.DataFrame([
    {"setup": "best H100 only", "kind": "one GPU type", "template": "1x1xH100+3x2xH100", "gpus": 7, "per_dollar": 2444.1,
     "layers": "27 | 27 | 27 | 13"},
    {"setup": "best L40S only", "kind": "one GPU type", "template": "6x2xL40S", "gpus": 12, "per_dollar": 2569.7,
     "layers": "16 | 16 | 16 | 16 | 16 | 14"},
    {"setup": "best mixed pipeline", "kind": "mixed", "template": "3x2xH100+3x2xL40S", "gpus": 12,
     "per_dollar": 2722.6, "layers": "24 | 24 | 24 | 8 | 8 | 6"},
])


def test_one_bar_per_setup_coloured_by_gpu_with_the_best_one_type_line() -> None:
    fig = mixed_pipeline_figure(ROWS)
    bar = fig.data[0]
    assert list(bar.y) == list(ROWS["setup"])[::-1]  # first row on top
    colours = dict(zip(bar.y, bar.marker.color, strict=True))
    assert colours["best H100 only"] == GPU_COLORS["H100"] and colours["best L40S only"] == GPU_COLORS["L40S"]
    assert colours["best mixed pipeline"] == MIXED_COLOR
    assert [s.x0 for s in fig.layout.shapes] == [2569.7]  # the dashed line sits at the best one-type value
    assert "3x2xH100+3x2xL40S (12 GPUs)" in bar.text[0]


def test_empty_and_malformed_inputs() -> None:
    assert mixed_pipeline_figure(ROWS.iloc[0:0]).layout.annotations[0].name == "empty-input"
    with pytest.raises(PlanningError, match="per_dollar"):
        mixed_pipeline_figure(ROWS.drop(columns=["per_dollar"]))
