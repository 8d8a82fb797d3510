"""Plan-to-plan diff: added, removed, resized and repriced lines, GPU totals, summary, waterfall."""

from __future__ import annotations

from typing import Any

import pytest

from planning.errors import PlanningError
from planning.viz import diff_summary, gpu_diff, plan_diff, plan_diff_figure
from planning.viz._common import EMPTY_NAME


def _inst(template: str, region: str, count: float, cost: float, gpus: dict[str, float]) -> dict[str, Any]:
    return {"template_id": template, "region": region, "count": count, "cost_per_hour": cost, "gpus": gpus}


BEFORE = [
    _inst("T1", "aws:us-east-1", 2, 20.0, {"H100": 8}),
    _inst("T2", "gcp:us-central1", 1, 5.0, {"L4": 4}),
    _inst("T4", "aws:us-east-1", 1, 3.0, {"A10G": 1}),
    _inst("T5", "aws:us-west-2", 1, 6.0, {"L40S": 2}),
]
AFTER = [
    _inst("T2", "gcp:us-central1", 3, 15.0, {"L4": 12}),
    _inst("T3", "aws:us-east-1", 1, 4.0, {"L40S": 2}),
    _inst("T4", "aws:us-east-1", 1, 3.0, {"A10G": 1}),  # unchanged
    _inst("T5", "aws:us-west-2", 1, 4.5, {"L40S": 2}),  # same count, cheaper price
]


def test_plan_diff_classifies_each_line_with_cost_delta() -> None:
    diff = plan_diff(BEFORE, AFTER)
    by_template = {r["template_id"]: r for r in diff.to_dict("records")}
    assert set(by_template) == {"T1", "T2", "T3", "T5"}  # T4 unchanged is left out
    assert by_template["T1"]["change"] == "removed"
    assert by_template["T1"]["cost_delta"] == pytest.approx(-20.0)
    assert by_template["T1"]["gpus_delta"] == {"H100": -8}
    assert by_template["T2"]["change"] == "changed"
    assert (by_template["T2"]["count_before"], by_template["T2"]["count_after"]) == (1, 3)
    assert by_template["T2"]["gpus_delta"] == {"L4": 8}
    assert by_template["T3"]["change"] == "added"
    assert by_template["T5"]["change"] == "changed"
    assert by_template["T5"]["cost_delta"] == pytest.approx(-1.5)
    assert "price per copy" in by_template["T5"]["why"]
    assert "frees 8×H100" in by_template["T1"]["why"]
    assert "1 → 3 copies" in by_template["T2"]["why"]
    # Sorted by size of the cost change, largest first.
    assert list(diff["template_id"]) == ["T1", "T2", "T3", "T5"]
    # Line deltas add up to the change in total cost.
    total_before = sum(i["cost_per_hour"] for i in BEFORE)
    total_after = sum(i["cost_per_hour"] for i in AFTER)
    assert diff["cost_delta"].sum() == pytest.approx(total_after - total_before)


def test_plan_diff_unchanged_moved_and_per_copy() -> None:
    full = plan_diff(BEFORE, AFTER, include_unchanged=True)
    assert (full["change"] == "unchanged").sum() == 1
    moved = plan_diff([_inst("T1", "r1", 1, 10.0, {"H100": 4})], [_inst("T1", "r2", 1, 8.0, {"H100": 4})])
    added = moved[moved["change"] == "added"].iloc[0]
    assert "dropped in r1" in added["why"]
    per_copy = plan_diff(
        [_inst("T", "r", 2, 5.0, {"L4": 1})], [_inst("T", "r", 3, 5.0, {"L4": 1})], per_copy=True
    )
    assert per_copy.iloc[0]["cost_delta"] == pytest.approx(5.0)
    assert per_copy.iloc[0]["gpus_delta"] == {"L4": 1}


def test_identical_and_empty_plans_have_no_diff() -> None:
    assert plan_diff(BEFORE, BEFORE).empty
    assert plan_diff([], []).empty
    assert list(plan_diff([], []).columns)[:3] == ["template_id", "region", "change"]
    assert plan_diff([], AFTER)["change"].eq("added").all()


def test_plan_diff_names_a_missing_key() -> None:
    with pytest.raises(PlanningError, match=r"after\[0\]\.count"):
        plan_diff([], [{"template_id": "T", "region": "r", "cost_per_hour": 1.0}])


def test_gpu_diff_totals_per_type() -> None:
    gpus = gpu_diff(BEFORE, AFTER).set_index("gpu")
    assert gpus.loc["H100", "delta"] == -8
    assert gpus.loc["L4", "delta"] == 8
    assert gpus.loc["L40S", "delta"] == 2
    assert gpus.loc["A10G", "delta"] == 0
    assert gpus.loc["L4", "after"] == 12


def test_diff_summary_says_cheaper_and_which_gpus_moved() -> None:
    text = diff_summary(BEFORE, AFTER)
    assert text.startswith("The new plan costs $7.50/h less")
    assert "drops 8×H100" in text and "adds 8×L4, 2×L40S" in text
    assert "costs the same" in diff_summary(BEFORE, BEFORE)


def test_plan_diff_figure_is_a_waterfall_from_before_to_after() -> None:
    diff = plan_diff(BEFORE, AFTER)
    fig = plan_diff_figure(diff, cost_before=34.0)
    trace = fig.data[0]
    assert trace.type == "waterfall"
    assert len(trace.y) == len(diff) + 2 and trace.orientation == "h"
    assert trace.text[-1] == "$26.50/h"
    empty = plan_diff_figure(plan_diff(BEFORE, BEFORE), 34.0)
    assert any(a.name == EMPTY_NAME for a in empty.layout.annotations)
