"""Demand series: epoch tables, traces, diurnal curves, durations, the shipped samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.timeline import diurnal, from_trace, load_demand, parse_duration_hours, parse_epoch_table
from planning.timeline.demand import align
from planning.traces import Trace

DATA = Path(__file__).resolve().parents[2] / "data" / "demand"


def test_durations() -> None:
    assert parse_duration_hours("1h") == 1.0
    assert parse_duration_hours("30m") == 0.5
    assert parse_duration_hours("1d") == 24.0
    assert parse_duration_hours(2) == 2.0
    with pytest.raises(PlanningError, match="epoch"):
        parse_duration_hours("soon")
    with pytest.raises(PlanningError, match="minute"):
        parse_duration_hours("10s")


def test_epoch_table_resamples_time_weighted() -> None:
    text = "epoch_start,rate_rps,input_len,output_len\n0,2,100,10\n1,4,300,30\n"
    half = parse_epoch_table("m", text, 0.5)
    assert half.rate_rps == (2.0, 2.0, 4.0, 4.0)
    two = parse_epoch_table("m", text, 2.0)
    assert two.rate_rps == (3.0,)
    # sizes are rate-weighted: (2·100 + 4·300) / 6
    assert two.input_len[0] == pytest.approx(1400 / 6)


def test_epoch_table_iso_times_and_errors() -> None:
    text = "epoch_start,rate_rps,input_len,output_len\n2024-05-13T00:00:00,1,10,10\n2024-05-13T02:00:00,3,10,10\n"
    s = parse_epoch_table("m", text, 1.0)
    assert s.rate_rps == (1.0, 1.0, 3.0, 3.0)
    with pytest.raises(PlanningError, match=r"rate_rps \(row 2\)"):
        parse_epoch_table("m", "epoch_start,rate_rps,input_len,output_len\n0,-1,10,10\n", 1.0)
    with pytest.raises(PlanningError, match="increasing"):
        parse_epoch_table("m", "epoch_start,rate_rps,input_len,output_len\n1,1,10,10\n0,1,10,10\n", 1.0)
    with pytest.raises(PlanningError, match="columns"):
        parse_epoch_table("m", "start,rate\n0,1\n", 1.0)


def test_trace_aggregation_rates_sizes_and_fixed_buckets() -> None:
    rng = np.random.default_rng(3)
    arrivals = np.sort(rng.uniform(0, 7200, 3000))
    arrivals -= arrivals[0]
    inp = rng.integers(10, 5000, 3000)
    out = rng.integers(1, 600, 3000)
    trace = Trace(arrivals, inp, out, "synthetic")
    s = from_trace("m", trace, 1.0, histogram=True)
    assert len(s) == 2
    first = arrivals < 3600
    assert s.rate_rps[0] == pytest.approx(first.sum() / 3600)
    assert s.input_len[0] == pytest.approx(inp[first].mean())
    # the histogram's rates add up to the epoch rate, over buckets fixed for the whole trace
    for e in range(2):
        assert sum(s.bucket_rates[e]) == pytest.approx(s.rate_rps[e])
    assert len(s.buckets) == len(s.bucket_rates[0]) <= 60
    with pytest.raises(PlanningError, match="epoch"):
        from_trace("m", trace, 40.0)


def test_diurnal_peak_and_days() -> None:
    s = diurnal("m", [1, 2, 4, 2], 8.0, 100, 10, epoch_hours=6.0, days=2)
    assert len(s) == 8
    assert max(s.rate_rps) == pytest.approx(8.0)
    assert s.rate_rps[0] == pytest.approx(2.0)
    with pytest.raises(PlanningError, match="shape"):
        diurnal("m", [0, 0], 1.0, 10, 10)


@pytest.mark.parametrize("name", ["azure_code_day.csv", "azure_conv_day.csv"])
def test_shipped_samples_are_a_day_with_a_source(name: str) -> None:
    s = load_demand("m", DATA / name, 1.0)
    assert len(s) == 24
    assert all(r > 0 for r in s.rate_rps)
    assert max(s.rate_rps) > 1.3 * min(s.rate_rps)  # a diurnal swing, not a constant
    header = (DATA / name).read_text(encoding="utf-8").splitlines()[1]
    assert "Azure" in header  # every row names its source


def test_align_rejects_mixed_epochs_and_duplicates() -> None:
    a = diurnal("a", [1, 2], 1.0, 10, 10)
    b = diurnal("b", [1, 2], 1.0, 10, 10, epoch_hours=2.0)
    with pytest.raises(PlanningError, match="epoch"):
        align([a, b])
    with pytest.raises(PlanningError, match="twice"):
        align([a, a])
