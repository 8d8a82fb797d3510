"""The published closed-loop points: schema, and the simulator's error against them (reported, guarded)."""

from __future__ import annotations

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel
from planning.simulate.validation import COLUMNS, closed_loop_errors, error_summary, load_closed_loop


def test_closed_loop_file_follows_the_shared_schema() -> None:
    frame = load_closed_loop()
    assert tuple(frame.columns) == COLUMNS
    assert len(frame) >= 20
    assert frame["id"].is_unique
    assert (frame["value"] > 0).all()
    assert frame["source"].str.len().gt(0).all() and frame["reference"].str.startswith("https://").all()
    assert set(frame["quantity"]) <= {"ttft_ms", "itl_ms", "tpot_ms", "output_tokens_per_s"}


def test_simulated_errors_per_source(pm: PerfModel) -> None:
    errors = closed_loop_errors(perf=pm)
    assert np.isfinite(errors["predicted"]).all() and (errors["predicted"] > 0).all()
    summary = error_summary(errors)
    overall = summary[(summary["source"] == "all")]["median_abs_error"].iloc[0]
    # The target: median absolute error <= 20 % against published closed-loop runs (perf model v2).
    assert overall <= 0.2
    # At concurrency 1 there is no queueing: the simulated inter-token latency is one decode step of the
    # perf model, so the simulator adds no error of its own there.
    c1 = errors[(errors["concurrency"] == 1) & (errors["quantity"] == "itl_ms")]
    assert (c1["rel_error"].abs() < 0.3).all()


def test_bad_validation_file_is_a_planning_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "closed_loop.csv"
    bad.write_text("id,value\n1,2\n", encoding="utf-8")
    with pytest.raises(PlanningError, match="header"):
        load_closed_loop(bad)
