"""The held-out split of ``benchmarks/bench_measurements.py`` stays blind: the fit never reads the held-out half,
and the published levels run at the occupancy their notes state (``Measurement.in_flight``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

import planning.measurements.fit as fit
from benchmarks import bench_measurements as bench
from planning.errors import PlanningError
from planning.measurements.readers import read_file
from planning.measurements.schema import Measurement
from planning.measurements.store import add, load_store
from planning.perf.model import PerfModel


@pytest.fixture(scope="module")
def halves() -> dict[str, list[Measurement]]:
    return bench.halves(bench.published())


def test_the_published_levels_carry_the_occupancy_their_notes_state(halves: dict[str, list[Measurement]]) -> None:
    pub = bench.published()
    assert [m.file for m in pub] == ["c1", "c4", "c8", "c16", "c32", "c64"]
    assert [m.concurrency for m in pub] == [1, 4, 8, 16, 32, 64]  # the clients as run
    assert [m.in_flight for m in pub] == [None, 3.9, 7.3, 12.9, 18.9, 20.4]  # Little's law, from the notes
    assert [m.concurrency for m in bench.published(rounded=True)] == [1, 4, 7, 13, 19, 20]
    assert {m.file for m in halves["4/16/64"]} == {"c4", "c16", "c64"}
    assert {m.file for m in halves["1/8/32"]} == {"c1", "c8", "c32"}


def test_the_fit_never_reads_the_held_out_half(halves: dict[str, list[Measurement]], perf: PerfModel,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    train, test = halves["4/16/64"], halves["1/8/32"]
    seen: list[str] = []
    fitting = [False]
    real_sim, real_fit = fit.simulate_point, fit.fit_corrections

    def spy_sim(m: Measurement, pm: PerfModel):  # type: ignore[no-untyped-def]
        if fitting[0]:
            seen.append(m.file)
        return real_sim(m, pm)

    def short_fit(points: Sequence[Measurement], pm: PerfModel) -> fit.Corrections:
        fitting[0] = True
        try:
            return real_fit(points, pm, max_evals=4)
        finally:
            fitting[0] = False

    monkeypatch.setattr(fit, "simulate_point", spy_sim)
    monkeypatch.setattr(bench, "fit_corrections", short_fit)
    honest = bench.split_fit(train, test, perf)
    assert seen and set(seen) <= {"c4", "c16", "c64"}  # every simulation of the fit is a training point
    # the held-out values poisoned 10x: the fit is the same, only the held-out errors move
    poisoned = [replace(m, ttft_ms_mean=m.ttft_ms_mean and 10 * m.ttft_ms_mean,
                        itl_ms_mean=m.itl_ms_mean and 10 * m.itl_ms_mean,
                        output_tokens_per_s=m.output_tokens_per_s and 10 * m.output_tokens_per_s) for m in test]
    blind = bench.split_fit(train, poisoned, perf)
    assert blind.corrections == honest.corrections
    assert fit.median_error(blind.after) > 0.8 > fit.median_error(honest.after)


def test_a_stated_occupancy_is_matched_by_littles_law(perf: PerfModel) -> None:
    base = Measurement(model="llama-3-8b", gpu="A10G", count=1, tp=1, engine="vllm", engine_version="0.4.3",
                       dtype="bf16", input_len=466, output_len=64, concurrency=16, request_rate=None, requests=24,
                       output_tokens_per_s=100.0)
    nominal = fit.simulate_point(base, perf)
    mixed = fit.simulate_point(replace(base, in_flight=7.3), perf)
    # the simulated run kept as many requests in flight on average as the measured one (ramp-up and drain
    # included), so more than 7.3 clients: 24 requests drain with fewer busy than the clients
    assert mixed.requests_per_s * mixed.e2e_latency_ms_mean / 1e3 == pytest.approx(7.3, rel=0.03)
    assert 7 < mixed.concurrency <= 15 and mixed.output_tokens_per_s < nominal.output_tokens_per_s
    lower, upper = (fit.simulate_point(replace(base, concurrency=c), perf) for c in (mixed.concurrency,
                                                                                     mixed.concurrency + 1))
    assert lower.output_tokens_per_s <= mixed.output_tokens_per_s <= upper.output_tokens_per_s
    # as many in flight as clients: the closed loop of the clients
    full = fit.simulate_point(replace(base, concurrency=8, in_flight=8.0), perf)
    eight = fit.simulate_point(replace(base, concurrency=8), perf)
    assert (full.output_tokens_per_s, full.itl_ms_mean) == pytest.approx((eight.output_tokens_per_s,
                                                                          eight.itl_ms_mean))


@pytest.mark.parametrize(("change", "words"), [({"in_flight": 9.0}, "with 8 clients"),
                                               ({"in_flight": 0.5}, "outside"),
                                               ({"concurrency": None, "request_rate": 2.0, "in_flight": 3.0},
                                                "no concurrency")])
def test_a_bad_occupancy_is_refused_by_name(change: dict[str, object], words: str) -> None:
    base = Measurement(model="llama-3-8b", gpu="A10G", count=1, tp=1, engine="vllm", engine_version="0.4.3",
                       dtype="bf16", input_len=466, output_len=64, concurrency=8, request_rate=None, requests=24,
                       output_tokens_per_s=100.0)
    with pytest.raises(PlanningError, match=words) as err:
        replace(base, **change)
    assert err.value.field.endswith("in_flight")


def test_a_csv_states_the_occupancy_and_the_store_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "llmperf.csv"
    path.write_text("model,gpu,count,tp,engine,engine_version,input_len,output_len,concurrency,in_flight,"
                    "output_tokens_per_s\nllama-3-8b,A10G,1,1,vllm,0.4.3,466,150,8,7.3,163.5\n", encoding="utf-8")
    [m] = read_file(path)
    assert (m.concurrency, m.in_flight) == (8, 7.3)
    store = tmp_path / "measurements.csv"
    assert add([m], store) == (1, 1)
    [back] = load_store(store)
    assert back.in_flight == 7.3 and back == m
    path.write_text(path.read_text(encoding="utf-8").replace(",7.3,", ",9,"), encoding="utf-8")
    with pytest.raises(PlanningError, match="9 requests in flight with 8 clients"):
        read_file(path)
