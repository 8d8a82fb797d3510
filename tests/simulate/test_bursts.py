"""Finite open-loop runs (N prompts at a request rate, heavy-tailed lengths): the replay, vLLM's incremental KV
policy, the shipped length mix, and the simulator's error against the published runs (data/validation/bursts.csv)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import planning.simulate.engine as engine_mod
from planning.errors import PlanningError
from planning.perf import PerfModel
from planning.simulate.bench import replay
from planning.simulate.validation import (
    BURST_COLUMNS,
    burst_errors,
    load_bursts,
    load_length_mix,
    sample_lengths,
)

MIX = "chat-sharegpt-filter"


@pytest.fixture(scope="module")
def errors(pm: PerfModel) -> pd.DataFrame:
    return burst_errors(perf=pm)


def test_bursts_file_follows_its_schema() -> None:
    frame = load_bursts()
    assert tuple(frame.columns) == BURST_COLUMNS and frame["id"].is_unique and len(frame) >= 20
    assert (frame["value"] > 0).all() and frame["reference"].str.startswith("https://").all()
    assert set(frame["quantity"]) <= {"ttft_ms", "itl_ms", "output_tokens_per_s"}
    assert (frame["prompts"] >= 1).all() and (frame["request_rate"] > 0).all()
    assert math.inf in set(frame["request_rate"])  # "inf": every prompt at once


def test_bad_bursts_and_mixes_are_planning_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bursts.csv"
    bad.write_text("id,value\n1,2\n", encoding="utf-8")
    with pytest.raises(PlanningError, match="header"):
        load_bursts(bad)
    row = load_bursts().iloc[0].to_dict()
    row["request_rate"] = "fast"
    pd.DataFrame([row], columns=list(BURST_COLUMNS)).to_csv(bad, index=False)
    with pytest.raises(PlanningError, match=r"bursts\.csv:2"):
        load_bursts(bad)
    row["request_rate"] = "-1"
    pd.DataFrame([row], columns=list(BURST_COLUMNS)).to_csv(bad, index=False)
    with pytest.raises(PlanningError, match="prompts"):
        load_bursts(bad)
    row["request_rate"] = "inf"
    row["output_len"] = "-5"
    pd.DataFrame([row], columns=list(BURST_COLUMNS)).to_csv(bad, index=False)
    with pytest.raises(PlanningError, match="input_len"):
        load_bursts(bad)
    mix = tmp_path / "mix.csv"
    mix.write_text("mix,side,percentile,tokens,source\nm,input,0,5,x\nm,input,100,3,x\n", encoding="utf-8")
    with pytest.raises(PlanningError, match=r"length_mix\.m\.input"):
        load_length_mix("m", mix)
    with pytest.raises(PlanningError, match=r"length_mix\.nope"):
        load_length_mix("nope")


def test_length_mix_keeps_its_shape_at_the_runs_mean() -> None:
    inp, out = load_length_mix(MIX)
    rng = np.random.default_rng(0)
    draws = sample_lengths(out, 200.0, 50_000, rng)
    assert draws.mean() == pytest.approx(200.0, rel=0.03)
    assert draws.min() >= 1
    # heavy tail kept: the shipped mix's p99 is ~3.7x its mean, far from a fixed-length benchmark
    assert np.percentile(draws, 99) > 3.0 * draws.mean()
    short = sample_lengths(inp, 43.0, 50_000, rng)
    assert short.mean() == pytest.approx(43.0, rel=0.05)


def test_replay_rejects_bad_arrays(pm: PerfModel) -> None:
    with pytest.raises(PlanningError, match="arrival_s"):
        replay("llama-3-8b", "H100", arrival_s=[0.0, 1.0], input_lens=[10], output_lens=[10], perf=pm)
    with pytest.raises(PlanningError, match="arrival_s"):
        replay("llama-3-8b", "H100", arrival_s=[-1.0], input_lens=[10], output_lens=[10], perf=pm)
    with pytest.raises(PlanningError, match="output_lens"):
        replay("llama-3-8b", "H100", arrival_s=[0.0], input_lens=[10], output_lens=[0], perf=pm)


def test_slow_arrivals_bound_the_throughput(pm: PerfModel) -> None:
    """At 2 req/s of 100-token answers an H100 is nearly idle: output tok/s is the offered 200 (the last request's
    own decode adds a little span), and every request finishes."""
    n = 200
    arrival = np.arange(n) / 2.0
    res = replay("llama-3-8b", "H100", arrival_s=arrival.tolist(), input_lens=[500] * n, output_lens=[100] * n,
                 perf=pm)
    assert res.requests == n
    assert res.output_tokens_per_s == pytest.approx(200.0, rel=0.02)
    assert res.output_tokens_per_s < 200.0


def _engines(monkeypatch: pytest.MonkeyPatch) -> list[engine_mod.DecodeEngine]:
    made: list[engine_mod.DecodeEngine] = []
    orig = engine_mod.DecodeEngine.__init__

    def init(self: engine_mod.DecodeEngine, *a: object, **k: object) -> None:
        orig(self, *a, **k)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(engine_mod.DecodeEngine, "__init__", init)
    return made


def test_grow_policy_admits_more_and_preempts_when_full(pm: PerfModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's policy on a burst of heavy-tailed requests: admission on the prompt's KV runs a larger batch than
    reserving every whole footprint up front, the cache fills and sequences are preempted, and every request
    still finishes exactly once with all its tokens."""
    made = _engines(monkeypatch)
    inp_mix, out_mix = load_length_mix(MIX)
    rng = np.random.default_rng(3)
    n = 400
    inp = sample_lengths(inp_mix, 215.0, n, rng)
    out = sample_lengths(out_mix, 200.0, n, rng)
    kw = dict(arrival_s=[0.0] * n, input_lens=inp.tolist(), output_lens=out.tolist(), perf=pm)
    grow = replay("llama-3-8b", "L4", kv_policy="grow", **kw)  # type: ignore[arg-type]
    reserve = replay("llama-3-8b", "L4", kv_policy="reserve", **kw)  # type: ignore[arg-type]
    g, r = made
    assert grow.requests == reserve.requests == n
    assert g.peak_batch > r.peak_batch and g.preemptions > 0 and r.preemptions == 0
    assert g.sim.finish_events == n and g.served == n
    assert g.tokens_out == int(out.sum())  # recomputation regenerates nothing twice
    assert g.kv_peak <= 1.0 + 1e-9 and g.kv_full == 0.0  # the cache never overflows and empties at the end
    assert grow.output_tokens_per_s > reserve.output_tokens_per_s
    with pytest.raises(PlanningError, match="kv_policy"):
        replay("llama-3-8b", "L4", kv_policy="lru", **kw)  # type: ignore[arg-type]


def test_simulated_bursts_against_published_runs(errors: pd.DataFrame) -> None:
    """One GPU per engine: inter-token latency and throughput of the published runs within 10 / 15 % (median)."""
    single = errors[errors["n_gpus"] == 1]
    for quantity, limit in (("itl_ms", 0.10), ("output_tokens_per_s", 0.15)):
        rows = single[single["quantity"] == quantity]
        assert len(rows) >= 4 and rows["rel_error"].abs().median() <= limit, quantity
    # the L4 run of 1,000 prompts at once: the closed form's steady peak said 2.2x, the replay of the burst is within
    # 30 % (vLLM 0.5.4's own reservation, 0.9 of the card, leaves ~4.6 GiB of KV against the old model's 3.7 GB; the
    # published rate implies a smaller batch: docs/simulator.md)
    l4 = errors[errors["id"] == "compass-l4-1000-inf-output"]["rel_error"].iloc[0]
    assert abs(l4) <= 0.3


def test_tp2_without_peer_to_peer_is_no_faster_than_one_gpu(errors: pd.DataFrame) -> None:
    """Two RTX 4090s (no peer-to-peer) all-reduce through host memory: the published TP2 inter-token latency at 16
    and 32 req/s is as long as one GPU's (33 vs 31 ms, 55 vs 34 ms), and the replay predicts it (it halved the step
    before); every TP2 row within 45 %, their median within 30 %."""
    tp2 = errors[errors["n_gpus"] == 2]
    assert len(tp2) >= 9 and tp2["rel_error"].abs().median() <= 0.30 and tp2["rel_error"].abs().max() <= 0.45
    itl = errors[(errors["quantity"] == "itl_ms") & errors["id"].str.startswith("iog-r1-")]
    for rate in (16, 32):
        one = itl[(itl["n_gpus"] == 1) & (itl["request_rate"] == rate)]["predicted"].iloc[0]
        two = itl[(itl["n_gpus"] == 2) & (itl["request_rate"] == rate)]["predicted"].iloc[0]
        assert two >= 0.9 * one, (rate, one, two)


def test_allreduce_without_peer_to_peer_goes_through_host_memory(pm: PerfModel) -> None:
    """The host path's bus bandwidth (aiconfigurator L40S 4-GPU all-reduce, 5.1 GB/s) instead of the PCIe link's."""
    from planning.perf.roofline import allreduce_time

    host, p2p = pm.device("RTX4090"), pm.device("L40S")
    assert not host.p2p and p2p.p2p and host.link_bw == p2p.link_bw
    size = 44 * 4096 * 2.0  # one decode step of 44 sequences, Llama-3-8B hidden state
    t_host, t_p2p = float(allreduce_time(host, size, 2)), float(allreduce_time(p2p, size, 2))
    assert t_host == pytest.approx(host.cal.ar_latency_us * 1e-6 + size / (host.cal.ar_host_gbps * 1e9))
    assert t_host > 2.5 * t_p2p


# Known misses, with the diagnosed cause (docs/simulator.md); each must still miss so the list stays true.
KNOWN_BURST_MISSES = {
    # queueing at 16-32 req/s on one RTX 4090 (+29 % at 16, +127..+131 % at 32 req/s; 22-28x before vLLM's own
    # memory reservation): 32 req/s of ~210-token prompts ask ~93 % of the tensor rate the model gives the 4090
    # (a generation prior, no measurement of its own), so the simulated prompt queue runs near saturation where the
    # published engine kept a 161 ms mean TTFT (docs/simulator.md)
    "ttft-under-load": lambda e: e[(e["quantity"] == "ttft_ms") & (e["n_gpus"] == 1) & (e["request_rate"] >= 16)],
}


@pytest.mark.parametrize("name", sorted(KNOWN_BURST_MISSES))
def test_known_burst_misses_still_miss(errors: pd.DataFrame, name: str) -> None:
    rows = KNOWN_BURST_MISSES[name](errors)
    assert len(rows) >= 1 and rows["rel_error"].abs().median() > 0.3, f"{name} now fits: drop it from the list"


def test_sliding_window_models_keep_the_reserve_policy(pm: PerfModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """gpt-oss-20b alternates 128-token sliding layers: per-step growth does not track what the window caps, so
    its engine keeps whole-footprint reservation and the cache still empties at the end of a burst."""
    made = _engines(monkeypatch)
    n = 60
    rng = np.random.default_rng(1)
    res = replay("gpt-oss-20b", "L40S", arrival_s=[0.0] * n, input_lens=rng.integers(50, 900, n).tolist(),
                 output_lens=rng.integers(20, 600, n).tolist(), kv_policy="grow", perf=pm)
    (eng,) = made
    assert not eng.grow and eng.preemptions == 0
    assert res.requests == n and eng.kv_full == 0.0 and eng.kv_slide == 0.0
