"""Issue 37 §5 and §1: a policy row shows what was found and what was proven — best found, proven bound, gap — and
says "optimum" only at gap 0; the policies' checks (look-ahead ≤ myopic, offline ≤ every other) fail loudly."""

from __future__ import annotations

from typing import Any

import pytest

from planning.checks import policy_checks, policy_rows
from planning.timeline.policies import policy_label


def _totals(offline: float, bound: float | None, status: str = "feasible", lookahead: float = 100.0,
            myopic: float = 101.0) -> dict[str, dict[str, Any]]:
    return {"myopic": {"label": policy_label("myopic", 3), "total_cost": myopic},
            "lookahead": {"label": policy_label("lookahead", 3), "total_cost": lookahead},
            "offline": {"label": policy_label("offline", 3), "total_cost": offline, "status": status,
                        "bound": bound, "gap": None if bound is None else (offline - bound) / offline}}


def test_an_uncertified_offline_schedule_is_best_found_with_its_bound_and_gap() -> None:
    """The issue's case: offline reports the look-ahead's total beside a bound 7.7 % lower."""
    rows = {r["policy"]: r for r in policy_rows(_totals(100.0, 92.3))}
    off = rows[policy_label("offline", 3)]
    assert "optim" not in off["policy"]
    assert off["best_found"] == 100.0 and off["proven_bound"] == 92.3 and off["gap"] == pytest.approx(0.077)
    assert off["proof"] == "best found, 7.70% above the proven bound"
    myopic = rows["myopic (Coral)"]
    assert myopic["proven_bound"] == 92.3 and myopic["gap"] == pytest.approx((101 - 92.3) / 101)
    assert not any("optim" in r["proof"] for r in rows.values())


def test_optimum_is_said_only_at_gap_zero() -> None:
    rows = {r["policy"]: r for r in policy_rows(_totals(99.0, 99.0, status="optimal"))}
    assert rows[policy_label("offline", 3)]["proof"] == "optimum (gap 0)"
    assert rows["myopic (Coral)"]["proof"].startswith("best found, ")
    alone = policy_rows({"myopic": {"label": "myopic (Coral)", "total_cost": 50.0}})
    assert alone[0]["proof"] == "no bound (offline not run)" and alone[0]["proven_bound"] is None


def test_policy_checks_fail_when_look_ahead_loses_to_myopic_or_offline_is_not_proven() -> None:
    checks = {c.name: c for c in policy_checks(_totals(100.0, 92.3, lookahead=102.0, myopic=101.0))}
    lost = checks["look-ahead (H=3) ≤ myopic (Coral)"]
    assert lost.status == "failed" and "$1.00 more" in lost.cause and lost.fix
    assert checks["offline (all epochs at once) ≤ myopic (Coral)"].status == "passed"
    gap = checks["proven gap of offline (all epochs at once)"]
    assert gap.status == "failed" and "7.70%" in gap.cause
    ok = {c.name: c for c in policy_checks(_totals(99.0, 99.0, status="optimal"))}
    assert all(c.status == "passed" for c in ok.values())
