"""Physics of perf v2: FP8 GEMMs, bounded activation workspace, the serving model and the aggregated T̂ phase."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel, Workload
from planning.perf.roofline import gemm_time


@pytest.mark.parametrize("gpu_id", ["H100", "H200", "L40S"])
def test_fp8_prefill_is_faster_than_bf16_at_large_sizes(pm: PerfModel, gpu_id: str) -> None:
    bf16 = pm.estimate("llama-2-7b", gpu_id, dtype="bf16", batch=1, input_len=2048)
    fp8 = pm.estimate("llama-2-7b", gpu_id, dtype="fp8", batch=1, input_len=2048)
    assert fp8.prefill_ms < bf16.prefill_ms
    dev = pm.device(gpu_id)
    big16 = float(gemm_time(dev, 8192, 8192, 8192, 2.0, "bf16"))
    big8 = float(gemm_time(dev, 8192, 8192, 8192, 1.0, "fp8"))
    assert big8 < big16
    # The quantization kernel is explicit and small next to a large GEMM (< 10 % of it).
    from planning.perf.roofline import quant_time

    assert float(quant_time(dev, 8192, 8192)) < 0.10 * big8


def test_activation_workspace_is_bounded_by_the_token_budget(pm: PerfModel) -> None:
    small = pm.estimate("llama-3-8b", "H100", batch=16, input_len=1000, output_len=1000)
    large = pm.estimate("llama-3-8b", "H100", batch=256, input_len=1000, output_len=1000)
    assert large.memory.activations_gb == pytest.approx(small.memory.activations_gb)
    assert large.memory.activations_gb < 2.0  # was 37.7 GB when it scaled with batch x prompt


def test_serving_peak_is_an_upper_bound_and_slos_hold(pm: PerfModel) -> None:
    free = pm.serving("llama-3-8b", "H100", dtype="fp8", input_len=1000, output_len=1000)
    assert free is not None and free.memory_gb <= free.capacity_gb + 1e-9
    tight = pm.serving("llama-3-8b", "H100", dtype="fp8", input_len=1000, output_len=1000, tpot_ms=20, ttft_ms=500)
    assert tight is not None
    assert tight.tpot_ms <= 20 and tight.ttft_ms <= 500
    assert tight.max_output_tokens_per_s <= free.max_output_tokens_per_s
    assert tight.max_requests_per_s == pytest.approx(tight.max_output_tokens_per_s / 1000)
    tighter = pm.serving("llama-3-8b", "H100", dtype="fp8", input_len=1000, output_len=1000, tpot_ms=12)
    assert tighter is not None and tighter.max_output_tokens_per_s <= tight.max_output_tokens_per_s
    assert pm.serving("llama-3-8b", "H100", input_len=1000, output_len=1000, tpot_ms=0.5) is None


def test_serving_ceiling_below_decode_only_ceiling(pm: PerfModel) -> None:
    # Prefill shares every step, so aggregated serving never beats the decode-only ceiling.
    for gpu_id in ("A10G", "L4", "H100"):
        est = pm.estimate("llama-3-8b", gpu_id, input_len=550, output_len=150)
        assert est.serving is not None
        assert est.serving.max_output_tokens_per_s < est.max_decode_tokens_per_s


def test_closed_loop_matches_single_request_and_grows_with_concurrency(pm: PerfModel) -> None:
    one = pm.serving("llama-3-8b", "A100-80G", input_len=1024, output_len=128, concurrency=1)
    step = pm.estimate("llama-3-8b", "A100-80G", batch=1, input_len=1024, output_len=128).decode_step_ms
    assert one is not None and one.tpot_ms == pytest.approx(step, rel=0.25)
    rates = [pm.serving("llama-3-8b", "A100-80G", input_len=1024, output_len=128, concurrency=c) for c in (1, 8, 64)]
    thr = [r.max_output_tokens_per_s for r in rates if r is not None]
    assert len(thr) == 3 and thr[0] < thr[1] < thr[2]
    # More clients than the KV cache holds: the excess queues (TTFT grows), throughput stays finite.
    flood = pm.serving("llama-3.3-70b", "H100", 2, dtype="fp8", input_len=5000, output_len=500, concurrency=400)
    assert flood is not None and flood.limited_by == "memory" and flood.ttft_ms > 1000
    with pytest.raises(PlanningError, match="concurrency"):
        pm.serving("llama-3-8b", "H100", input_len=10, output_len=10, concurrency=0)


def test_aggregated_table_is_monotone_and_matches_serving(pm: PerfModel) -> None:
    spec = pm.model("llama-3-8b")
    wl = Workload(1000, 200)
    table = pm.stage_table(spec, "1xH100", "aggregated", 50.0, wl, max_stages=3, ttft_ms=2000)
    assert np.all(np.diff(table, axis=1) <= 1e-9)
    h = pm.calibration.settings.aggregated_headroom
    sp = pm.serving("llama-3-8b", "H100", input_len=1000, output_len=200, tpot_ms=50 / h, ttft_ms=2000)
    # The planner's table is the serving rate at TPOT / aggregated_headroom times the aggregated load cap (the
    # TPOT bound binds here, not memory), within 1 %: the table's prompt lumps are its SLO-sized chunks.
    cap = pm.calibration.settings.aggregated_max_load
    assert sp is not None and sp.limited_by == "tpot"
    assert table[0, -1] == pytest.approx(cap * sp.max_requests_per_s, rel=0.01)
    other = pm.stage_table(spec, "1xH100", "aggregated", 50.0, wl, max_stages=3, ttft_ms=100)
    assert np.all(other <= table + 1e-9) and not np.array_equal(other, table)


def test_estimate_has_serving_block_and_validation_bands(pm: PerfModel) -> None:
    est = pm.estimate("llama-3-8b", "H100", dtype="fp8", input_len=1000, output_len=1000)
    assert est.batch == 1 and est.serving is not None
    assert set(est.band) == {"prefill_ms", "decode_step_ms", "max_prefill_tokens_per_s", "max_decode_tokens_per_s",
                             "serving"}
    hit = pm.bands.lookup("nvlink-hbm", "fp8", "throughput")
    assert hit is not None and est.band["serving"] == pytest.approx(round(hit[0], 3))
    assert "validation" in est.band_source["serving"]
    d = est.to_dict()
    assert d["serving"]["max_output_tokens_per_s"] == est.serving.max_output_tokens_per_s


def test_cli_serving_block_without_batch() -> None:
    out = subprocess.run([sys.executable, "-m", "planning.cli", "perf", "--model", "llama-3-8b", "--gpu", "L40S",
                          "--input-len", "550", "--output-len", "150", "--tpot", "80", "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["serving"]["tpot_ms"] <= 80 and data["serving"]["max_requests_per_s"] > 0
    text = subprocess.run([sys.executable, "-m", "planning.cli", "perf", "--model", "llama-3-8b", "--gpu", "L40S",
                           "--input-len", "550", "--output-len", "150"], capture_output=True, text=True, check=True)
    assert "serving (aggregated)" in text.stdout


def test_kind_bands_follow_the_estimate_bands(pm: PerfModel) -> None:
    est = pm.estimate("llama-3-8b", "L40S", dtype="fp8", input_len=500, output_len=100)
    kinds = pm.kind_bands("L40S", "fp8")
    assert kinds == {"ttft": est.band["prefill_ms"], "tpot": est.band["decode_step_ms"],
                     "throughput": est.band["serving"]}
    assert min(pm.kind_bands("A10G").values()) >= pm.calibration.settings.band_roofline


def test_aggregated_templates_use_the_serving_throughput(pm: PerfModel) -> None:
    # Mélange mode: a one-GPU template serves what PerfModel.serving says, per request-size class (mean shown).
    from planning.api import build_templates, load_preset_scenario
    from planning.groups import DEFAULT_PREFILL_BUDGET_MS, plan_groups

    scenario = load_preset_scenario("melange-arena")
    frame = build_templates(scenario)
    req = scenario.models[0]
    tpot = float(req.slo.decode_ms)
    (group,) = plan_groups(scenario)
    classes = group.classes
    for gpu_id in ("A10G", "H100"):
        row = frame[frame["template_id"] == f"1x1x{gpu_id}"].iloc[0]
        expected, memory_bound = [], False
        for c in classes:
            sp = pm.serving(req.id, gpu_id, input_len=c.input_len, output_len=c.output_len,
                            tpot_ms=tpot / pm.calibration.settings.aggregated_headroom,
                            ttft_ms=DEFAULT_PREFILL_BUDGET_MS)
            expected.append(sp.max_requests_per_s if sp is not None else 0.0)
            memory_bound |= sp is not None and sp.limited_by == "memory"
        # Planned at most the aggregated load cap of the serving rate; the planner keeps a sequence's whole KV
        # (I + O, not the mean I + O/2), so a memory-bound class plans less.
        cap = pm.calibration.settings.aggregated_max_load
        assert row["unit"] == "req/s"
        assert row["throughput"] <= cap * float(np.mean(expected)) * (1 + 1e-6)
        if not memory_bound:
            assert row["throughput"] == pytest.approx(cap * float(np.mean(expected)), rel=1e-6)
        assert row["throughput"] > 0.5 * cap * float(np.mean(expected))


def test_prefill_first_scheduling_stalls_decodes(pm: PerfModel) -> None:
    """Engines without chunked prefill run prompts as steps of their own: the same decode step as chunked at one
    client, a longer TPOT and a lower rate once other clients' prompts interleave, and a lower open-loop peak."""
    kw = dict(input_len=466, output_len=150)
    one_c = pm.serving("llama-3-8b", "A10G", concurrency=1, **kw)
    one_p = pm.serving("llama-3-8b", "A10G", concurrency=1, scheduling="prefill-first", **kw)
    assert one_c is not None and one_p is not None
    assert one_p.tpot_ms == pytest.approx(one_c.tpot_ms, rel=1e-9)
    for c in (4, 16, 32):
        ch = pm.serving("llama-3-8b", "A10G", concurrency=c, **kw)
        pf = pm.serving("llama-3-8b", "A10G", concurrency=c, scheduling="prefill-first", **kw)
        assert ch is not None and pf is not None
        assert pf.tpot_ms > ch.tpot_ms and pf.max_output_tokens_per_s < ch.max_output_tokens_per_s
        # TPOT = decode step + (B-1)/O prompts per step, each a 466-token prefill
        dec = pm.serving("llama-3-8b", "A10G", concurrency=1, **kw)
        assert dec is not None and pf.tpot_ms > dec.tpot_ms + (c - 1) / 150 * 0.8 * one_p.ttft_ms
    peak_c = pm.serving("llama-3-8b", "A10G", **kw)
    peak_p = pm.serving("llama-3-8b", "A10G", scheduling="prefill-first", **kw)
    assert peak_c is not None and peak_p is not None
    assert peak_p.max_output_tokens_per_s < peak_c.max_output_tokens_per_s
    with pytest.raises(PlanningError, match="scheduling"):
        pm.serving("llama-3-8b", "A10G", scheduling="fifo", **kw)


def test_cli_scheduling_flag() -> None:
    base = [sys.executable, "-m", "planning.cli", "perf", "--model", "llama-3-8b", "--gpu", "A10G", "--input-len", "550",
            "--output-len", "150", "--json"]
    chunked = json.loads(subprocess.run(base, capture_output=True, text=True, check=True).stdout)
    first = json.loads(subprocess.run([*base, "--scheduling", "prefill-first"], capture_output=True, text=True,
                                      check=True).stdout)
    assert first["serving"]["max_output_tokens_per_s"] < chunked["serving"]["max_output_tokens_per_s"]


def test_ttft_under_load_grows_with_the_rate_and_stops_at_the_peak(pm: PerfModel) -> None:
    """An open loop at a request rate: the batch is what Little's law keeps running, TTFT is the wait for the step
    in progress and the prompt work ahead plus the chunked prefill; beyond what the node sustains there is none."""
    kw = dict(input_len=1000, output_len=200)
    peak = pm.serving("llama-3-8b", "H100", **kw)  # type: ignore[arg-type]
    assert peak is not None
    points = [pm.serving("llama-3-8b", "H100", request_rate=r, **kw) for r in (0.5, 5.0, 15.0)]  # type: ignore[arg-type]
    assert all(p is not None and p.limited_by == "request_rate" for p in points)
    ttft = [p.ttft_ms for p in points if p is not None]
    tpot = [p.tpot_ms for p in points if p is not None]
    assert ttft[0] < ttft[1] < ttft[2] and tpot[0] < tpot[1] < tpot[2]
    alone = pm.serving("llama-3-8b", "H100", concurrency=1, **kw)  # type: ignore[arg-type]
    assert alone is not None and ttft[0] == pytest.approx(alone.ttft_ms, rel=0.15)  # light load: barely any wait
    for p, r in zip(points, (0.5, 5.0, 15.0), strict=True):  # Little's law
        assert p is not None and p.batch == pytest.approx(r * (p.ttft_ms + 199 * p.tpot_ms) / 1e3, abs=1.0)
    assert pm.serving("llama-3-8b", "H100", request_rate=1.5 * peak.max_requests_per_s, **kw) is None  # type: ignore[arg-type]
    with pytest.raises(PlanningError, match="request_rate"):
        pm.serving("llama-3-8b", "H100", request_rate=2.0, concurrency=4, **kw)  # type: ignore[arg-type]


def test_prompts_arrive_in_lumps(pm: PerfModel) -> None:
    """Decode-heavy serving: a prompt rides in one step of every few, so the mean step is q t(B, I) + (1 - q) t(B, 0),
    not t(B, q I). Below the ridge (32 decodes of Llama-3-8B BF16: weight-bound) the step is convex in its tokens:
    a whole 1,000-token prompt is compute-bound, so the lumpy mean is the slower one (Jensen)."""
    from planning.perf.curves import graphed
    from planning.perf.roofline import EngineCopy, LayerArch, resolve_precision
    from planning.perf.serving import StepSetup, _step_time, _times

    spec = pm.model("llama-3-8b")
    arch, s = LayerArch.from_spec(spec), pm.calibration.settings
    dev = graphed(pm.device("H100"), s)
    prec = resolve_precision(spec, "bf16", pm.gpu("H100"))
    b = np.array([32.0])
    share = np.array([250.0])  # 1000/128 requests: 250 prompt tokens per step on average, 1000 at a time
    eng = EngineCopy(dev, arch, prec, 1)
    parts = _times(StepSetup(eng, 1064.0, 1000.0, 8192.0, "chunked"), b, share, b)
    mean_share = _step_time(eng, b, 1064.0, share, 1000.0)
    assert parts["t"][0] > 1.05 * mean_share[0]
    q = 250.0 / 1000.0
    assert parts["t"][0] == pytest.approx(q * parts["t_p"][0] + (1 - q) * parts["t_dec"][0])


def test_tgi_router_holds_prompts_behind_the_decodes(pm: PerfModel) -> None:
    """TGI 2's router lets waiting prompts in once they are 0.3 of the running batch or after 20 decode steps
    (``perf.engines.RouterBatching``, TGI v2.0.4): published TGI runs carry it, vLLM and TGI 3 do not."""
    import math

    from planning.perf.engines import RouterBatching, published_engine, router_batching

    tgi = router_batching("tgi", "2.0.4 (max_batch_prefill_tokens 8192)")
    assert tgi == RouterBatching() and tgi.min_waiting(13) == 3 and tgi.max_decode_steps == 19
    assert router_batching("tgi", "3.0.1") is None and router_batching("vllm", "0.4.3") is None
    assert published_engine(pm, "tgi", "2.0.4", "A10G").router == tgi
    args = dict(input_len=474, output_len=150, scheduling="prefill-first")
    # closed loop of 13 clients: equal requests come back in groups that open the gate by their number,
    # k = floor(0.3 * 13 / 1.3) = 3 prompts per prefill, instead of one at the next step
    free = pm.serving("llama-3-8b", "A10G", concurrency=13, **args)  # type: ignore[arg-type]
    held = pm.serving("llama-3-8b", "A10G", concurrency=13, router=tgi, **args)  # type: ignore[arg-type]
    assert free is not None and held is not None
    three = pm.estimate("llama-3-8b", "A10G", batch=3, input_len=474).prefill_ms
    assert held.ttft_ms > free.ttft_ms and three <= held.ttft_ms < three + 2 * held.tpot_ms  # + the step in progress
    assert held.tpot_ms < free.tpot_ms  # fewer, larger prefill stalls
    # open loop (Poisson): a prompt that comes while the gate is closed waits up to 19 steps
    lam = 0.5 * free.max_requests_per_s if free.max_requests_per_s else 1.0
    open_free = pm.serving("llama-3-8b", "A10G", request_rate=lam, **args)  # type: ignore[arg-type]
    open_held = pm.serving("llama-3-8b", "A10G", request_rate=lam, router=tgi, **args)  # type: ignore[arg-type]
    assert open_free is not None and open_held is not None
    assert open_free.ttft_ms < open_held.ttft_ms < open_free.ttft_ms + 19 * open_held.tpot_ms
    assert math.isfinite(open_held.ttft_ms)
