"""Fitting the perf model's corrections to measurements through the simulator (issue 40 target: fitting on half of
a setting's concurrencies cuts the median error on the other half at least in half, or below 5 %)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from planning import api
from planning.measurements.fit import (
    ROBUST_SCALE,
    Corrections,
    corrected_perf,
    fit_corrections,
    free_corrections,
    median_error,
    point_errors,
    robust_loss,
    simulate_point,
)
from planning.measurements.schema import Measurement
from planning.perf.model import PerfModel

TRUTH = Corrections(prefill=1.0, decode=0.7, step_ms=4.0)  # 30 % slower decode and 4 ms more per step


def _measured(perf: PerfModel, truth: Corrections, concurrencies: tuple[int, ...]) -> list[Measurement]:
    """What a user running a node slower than the model would measure: the simulator under ``truth``."""
    slow = corrected_perf(perf, "A10G", truth)
    out = []
    for c in concurrencies:
        base = Measurement(model="llama-3-8b", gpu="A10G", count=1, tp=1, engine="vllm", engine_version="0.9.2",
                           dtype="bf16", input_len=512, output_len=128, concurrency=c, request_rate=None,
                           requests=max(48, 3 * c), output_tokens_per_s=1.0, source="synthetic", file=f"c{c}.json")
        r = simulate_point(base, slow)
        out.append(replace(base, ttft_ms_mean=r.ttft_ms_mean, itl_ms_mean=r.itl_ms_mean,
                           output_tokens_per_s=r.output_tokens_per_s))
    return out


def test_corrections_reach_the_simulator(perf: PerfModel) -> None:
    [m] = _measured(perf, Corrections(), (8,))
    [slow] = _measured(perf, TRUTH, (8,))
    assert slow.itl_ms_mean is not None and m.itl_ms_mean is not None
    assert slow.itl_ms_mean > 1.3 * m.itl_ms_mean  # slower decode and step overhead both lengthen a step
    assert corrected_perf(perf, "A10G", Corrections()) is perf
    assert corrected_perf(perf, "A10G", Corrections(decode=100.0)).gpu_calibration("A10G").eff_bw == 1.0


def test_fit_on_half_cuts_the_error_on_the_other_half(perf: PerfModel) -> None:
    points = _measured(perf, TRUTH, (1, 2, 4, 8, 16, 32, 64, 128))
    train, held_out = points[::2], points[1::2]
    before = median_error(point_errors(held_out, perf))
    fitted = fit_corrections(train, perf, max_evals=60)
    after = median_error(point_errors(held_out, perf, fitted))
    assert before > 0.10  # the model is really off for this "user"
    assert after < max(before / 2, 0.05) and after < 0.05
    assert fitted.decode < 0.9  # the fit found the slower decode, not only a compensating overhead


def test_fit_of_points_the_model_already_matches_stays_near_identity(perf: PerfModel) -> None:
    points = _measured(perf, Corrections(), (2, 16))
    fitted = fit_corrections(points, perf, max_evals=40)
    assert fitted.prefill == pytest.approx(1.0, abs=0.1) and fitted.decode == pytest.approx(1.0, abs=0.1)
    assert abs(fitted.step_ms) < 1.0


def test_api_fit_reports_before_after_and_leave_one_out(perf: PerfModel) -> None:
    points = _measured(perf, TRUTH, (1, 8, 32))
    [fit] = api.fit_measurements(points, max_evals=40)
    frame = api.fit_frame([fit])
    row = frame.iloc[0]
    assert (row["model"], row["shape"], row["tp"], row["points"]) == ("llama-3-8b", "1xA10G", 1, 3)
    assert row["fitted"] == "prefill, decode, step"  # TTFT, ITL and throughput each at three loads
    assert row["error_after"] < row["error_before"] / 2
    assert 0 <= row["error_leave_one_out"] < row["error_before"] and bool(row["trusted"])
    pts = api.points_frame([fit])
    assert len(pts) == 9 and set(pts["quantity"]) == {"ttft_ms", "itl_ms", "output_tokens_per_s"}


def test_a_correction_needs_its_quantity_at_two_loads(perf: PerfModel) -> None:
    points = _measured(perf, Corrections(), (1, 8, 32))
    assert free_corrections(points) == (True, True, True)
    one_ttft = [points[0]] + [replace(m, ttft_ms_mean=None) for m in points[1:]]
    assert free_corrections(one_ttft) == (False, True, True)  # one TTFT cannot be checked by another point
    only_ttft = [replace(m, itl_ms_mean=None, output_tokens_per_s=None) for m in points]
    assert free_corrections(only_ttft) == (True, False, False)
    assert free_corrections(one_ttft[1:2]) == (False, True, True)  # one load fits what it measures
    assert free_corrections(points[:1]) == (True, True, True)


def test_robust_loss_is_least_squares_near_zero_and_bounded_in_pull() -> None:
    assert robust_loss(0.01) == pytest.approx(0.01 ** 2, rel=0.01)
    pull = [(robust_loss(r + 1e-6) - robust_loss(r)) / 1e-6 for r in (0.05, 0.1, 0.5, 1.0, 3.0)]
    assert max(pull) <= ROBUST_SCALE * 1.0001 and pull[-1] < pull[1] / 10  # a far miss pulls less, not more
    assert robust_loss(math.log(2.0)) < math.log(2.0) ** 2 / 10  # a 2x miss weighs a tenth of its square


def test_one_point_the_simulator_cannot_reproduce_does_not_drag_the_fit(perf: PerfModel) -> None:
    """One load's TTFT twice what the rest imply (the API server queued it): the decode the others show is still
    found, and the prefill rate, which the other TTFTs hold, is not halved."""
    points = _measured(perf, TRUTH, (1, 2, 4, 8, 16, 32, 64, 128))
    train, held_out = points[::2], points[1::2]
    assert train[2].ttft_ms_mean is not None
    train[2] = replace(train[2], ttft_ms_mean=2 * train[2].ttft_ms_mean)
    fitted = fit_corrections(train, perf, max_evals=60)
    assert fitted.prefill > 0.85 and fitted.decode < 0.9
    assert median_error(point_errors(held_out, perf, fitted)) < 0.05
