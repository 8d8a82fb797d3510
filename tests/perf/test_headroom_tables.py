"""Queueing and memory headroom of the T̂ tables: prefill load cap, S micro-batches of KV on decode pipelines."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planning.catalog.schema import parse_shape
from planning.perf import PerfModel, Workload
from planning.perf.calibration import Calibration
from planning.perf.roofline import resolve_precision

WL = Workload(755, 354)  # coral-core's qwen3-32b requests


def _with_settings(pm: PerfModel, **changes: float) -> PerfModel:
    cal = pm.calibration
    other = Calibration(gpus=cal.gpus, settings=replace(cal.settings, **changes), as_of=cal.as_of, path=cal.path)
    return PerfModel(catalog=pm.catalog, calibration=other)


def test_prefill_table_is_the_load_cap_share_of_the_batch_rate(pm: PerfModel) -> None:
    spec = pm.model("qwen3-32b")
    cap = pm.calibration.settings.prefill_max_load
    assert 0 < cap < 1
    full = _with_settings(pm, prefill_max_load=1.0).stage_table(spec, "2xL40S", "prefill", 1600, WL, max_stages=3)
    capped = pm.stage_table(spec, "2xL40S", "prefill", 1600, WL, max_stages=3)
    assert full.max() > 0
    np.testing.assert_allclose(capped, cap * full, rtol=1e-12)
    # decode is not capped by it
    dec_full = _with_settings(pm, prefill_max_load=1.0).stage_table(spec, "2xL40S", "decode", 100, WL, max_stages=3)
    np.testing.assert_array_equal(dec_full, pm.stage_table(spec, "2xL40S", "decode", 100, WL, max_stages=3))


@pytest.mark.parametrize("shape", ["2xL40S", "1xL40S", "1xH100"])
def test_decode_entry_holds_kv_of_s_micro_batches_brute_force(pm: PerfModel, shape: str) -> None:
    """Each entry equals a plain loop over (tp, batch) with memory j·w + (S + σ·√(S·batch/(1 − e))/batch)·KV(batch)
    + fixed <= capacity (S micro-batches of KV plus room for σ standard deviations of the running count, whose
    variance is S·batch/(1 − e), e = d ln t / d ln batch between this grid batch and the one below)."""
    spec = pm.model("qwen3-32b")
    slo_ms, max_stages = 100.0, 4
    table = pm.stage_table(spec, shape, "decode", slo_ms, WL, max_stages=max_stages)
    count, gpu_id = parse_shape(shape)
    dev = pm.device(gpu_id)
    prec = resolve_precision(spec, None, pm.gpu(gpu_id))
    net = pm.network_gbps(shape)[0]
    batches = pm._grid("decode", WL)
    layers = spec.layers  # qwen3-32b: all layers full attention
    # KV hand-off of one 755-token prompt, written out: all layers' K and V in BF16 over the node network
    t_kv = (pm.calibration.settings.network_latency_ms * 1e-3
            + layers * WL.input_len * 2 * spec.num_kv_heads * spec.head_dim * 2 / (net * 1e9 / 8))
    cycle = ((WL.output_len - 1) * slo_ms * 1e-3 - t_kv) / WL.output_len / pm.calibration.settings.decode_headroom
    assert cycle < slo_ms * 1e-3  # the hand-off tightens the budget
    sigmas = pm.calibration.settings.kv_sigmas
    assert sigmas > 0  # the square-root KV room is on (Sec. 3c)
    differs = False
    for s in range(1, max_stages + 1):
        budget = cycle / s
        for j in (1, layers // 4, layers // 2, layers):
            best = one_copy = 0.0
            for tp in pm.tp_options(spec, count):
                node = pm._node_engine(pm._layer_arch(spec), dev, prec, tp, count // tp)
                c = pm._curves(spec, node, "decode", WL, batches, net)
                steps = [float(j * c.t_full[i] + c.step_s + (c.transfer_s[i] if s > 1 else 0.0))
                         for i in range(len(batches))]
                for i in range(len(batches)):
                    t = steps[i]
                    base = j * c.w_layer + c.mem_fixed[i]
                    e = np.log(t / steps[i - 1]) / np.log(batches[i] / batches[i - 1]) if i > 0 else 0.0
                    spread = 1.0 / max(1.0 - min(max(e, 0.0), 1.0), 1e-3)
                    held = s + sigmas * np.sqrt(s * batches[i] * spread) / batches[i]  # batches of KV, with the room
                    if t <= budget and base + held * j * c.kv_full[i] <= c.capacity:
                        best = max(best, c.dp * c.tokens[i] / t)
                    if t <= budget and base + j * c.kv_full[i] <= c.capacity:
                        one_copy = max(one_copy, c.dp * c.tokens[i] / t)
            assert table[s - 1, j - 1] == pytest.approx(best, rel=1e-9, abs=1e-9), (s, j)
            differs |= best < one_copy
    if shape == "2xL40S":
        assert differs  # the S x KV rule binds somewhere (coral-core's qwen3-32b decode pipeline)
    assert np.all(np.diff(table, axis=0) <= 1e-9)  # more stages: no more per-node throughput


def test_prefill_reserves_the_engine_step_workspace(pm: PerfModel) -> None:
    """A prefill node reserves activations for the engine's token budget even when its planned batch is smaller."""
    spec = pm.model("qwen3-32b")
    dev = pm.device("L40S")
    prec = resolve_precision(spec, None, pm.gpu("L40S"))
    c = pm._curves(spec, pm._node_engine(pm._layer_arch(spec), dev, prec, 1, 1), "prefill", WL,
                   np.array([1.0, 2.0, 8.0]), 25.0)
    assert np.all(c.mem_fixed == c.mem_fixed[0])
    budgeted = _with_settings(pm, max_batched_tokens=1024)
    small = budgeted._curves(spec, budgeted._node_engine(pm._layer_arch(spec), dev, prec, 1, 1), "prefill", WL,
                             np.array([1.0]), 25.0)
    assert small.mem_fixed[0] < c.mem_fixed[0]


def test_decode_cycle_budget_keeps_the_mean_tpot_with_the_handoff() -> None:
    """t_KV + O·C = (O − 1)·TPOT at the budget; no output gap means no hand-off term; never negative."""
    from planning.perf.model import decode_cycle_budget_s

    c = decode_cycle_budget_s(30.0, 28.0, 0.012, 1.0)
    assert 0.012 + 28 * c == pytest.approx(27 * 0.030)
    assert decode_cycle_budget_s(30.0, 28.0, 0.0, 1.0) < 0.030  # the wait for the next step costs one cycle
    assert decode_cycle_budget_s(30.0, 1.0, 0.5, 1.0) == pytest.approx(0.030)
    assert decode_cycle_budget_s(30.0, 2.0, 5.0, 1.0) == 0.0
    assert decode_cycle_budget_s(30.0, 28.0, 0.0, 1.5) == pytest.approx(decode_cycle_budget_s(30.0, 28.0, 0.0, 1.0) / 1.5)
    longer = [decode_cycle_budget_s(30.0, o, 0.01, 1.0) for o in (4, 16, 64, 256, 1024)]
    assert longer == sorted(longer) and longer[-1] < 0.030  # long outputs spread the hand-off thin


def test_aggregated_table_uses_its_own_headroom(pm: PerfModel) -> None:
    """The aggregated tables follow aggregated_headroom and ignore decode_headroom (a larger h: no more rate)."""
    spec = pm.model("llama-3-8b")
    wl = Workload(1155, 300)
    base = pm.stage_table(spec, "1xL40S", "aggregated", 60, wl, max_stages=2)
    assert base.max() > 0
    same = _with_settings(pm, decode_headroom=3.0).stage_table(spec, "1xL40S", "aggregated", 60, wl, max_stages=2)
    np.testing.assert_array_equal(same, base)
    h = pm.calibration.settings.aggregated_headroom
    tighter = _with_settings(pm, aggregated_headroom=h * 1.5).stage_table(spec, "1xL40S", "aggregated", 60, wl,
                                                                          max_stages=2)
    assert np.all(tighter <= base + 1e-9) and float(tighter.sum()) < float(base.sum())


def test_decode_kv_room_binds_only_where_memory_does(pm: PerfModel) -> None:
    """The √ KV room lowers KV-bound decode entries and leaves TPOT-bound ones alone; σ = 0 gives the old rule."""
    spec = pm.model("qwen3-32b")
    room = pm.stage_table(spec, "1xA100-80G", "decode", 100, WL, max_stages=2)
    none = _with_settings(pm, kv_sigmas=0.0).stage_table(spec, "1xA100-80G", "decode", 100, WL, max_stages=2)
    assert np.all(room <= none + 1e-9) and float(room.sum()) < float(none.sum())  # 32B on 80 GB: KV binds
    tight = pm.stage_table(spec, "1xH100", "decode", 20, WL, max_stages=1)  # a 20 ms TPOT binds before memory
    loose = _with_settings(pm, kv_sigmas=0.0).stage_table(spec, "1xH100", "decode", 20, WL, max_stages=1)
    assert tight.max() > 0
    np.testing.assert_array_equal(tight[:, : spec.layers // 4], loose[:, : spec.layers // 4])


def test_aggregated_tables_keep_the_same_kv_room(pm: PerfModel) -> None:
    """The aggregated tables use the same σ·√(S·B) KV room: a KV-bound aggregated entry (llama-3-8b on an RTX 4090,
    2,455-token prompts) plans less with it, and σ = 0 restores the old rule."""
    spec = pm.model("llama-3-8b")
    wl = Workload(2455, 300)
    room = pm.stage_table(spec, "1xRTX4090", "aggregated", 120, wl, max_stages=2)
    none = _with_settings(pm, kv_sigmas=0.0).stage_table(spec, "1xRTX4090", "aggregated", 120, wl, max_stages=2)
    assert pm.calibration.settings.kv_sigmas > 0 and none.max() > 0
    assert np.all(room <= none + 1e-9) and float(room.sum()) < float(none.sum())


def test_kv_room_grows_with_the_steps_elasticity() -> None:
    """σ standard deviations of the running count, whose variance is S·b/(1 − e): e = 0 gives square-root staffing,
    a step that grows like b^e more room, a step proportional to the batch (e → 1) room without bound."""
    from planning.perf.tables import kv_room, step_elasticity

    b = np.array([8.0, 16.0, 32.0, 64.0])
    stages = np.array([1.0, 2.0])
    flat = np.full((2, 1, 4), 0.05)  # a step that does not grow: e = 0
    np.testing.assert_allclose(kv_room(stages, b, flat, 1.0)[:, 0, :],
                               stages[:, None] + np.sqrt(stages[:, None] * b[None, :]) / b[None, :])
    for e in (0.3, 0.6):
        t = (0.01 * b ** e)[None, None, :] * np.ones((2, 1, 1))
        np.testing.assert_allclose(step_elasticity(b, t)[..., 1:], e)
        room = kv_room(stages, b, t, 1.0)[:, 0, 1:]
        want = stages[:, None] + np.sqrt(stages[:, None] * b[None, 1:] / (1 - e)) / b[None, 1:]
        np.testing.assert_allclose(room, want)
    linear = (0.001 * b)[None, None, :] * np.ones((2, 1, 1))  # e = 1: extra slots add no rate at all
    extra = kv_room(stages, b, linear, 1.0)[:, 0, 1:] - stages[:, None]
    square_root = kv_room(stages, b, flat, 1.0)[:, 0, 1:] - stages[:, None]
    np.testing.assert_allclose(extra, square_root * np.sqrt(1e3))  # bounded only by the numerical floor


def test_kv_bound_mha_decode_plans_a_batch_whose_fluctuation_fits(pm: PerfModel) -> None:
    """catalog-wide's llama-2-7b decode on two 1xL40S stages (16 layers each, 1,155 / 211 tokens, TPOT 80 ms): its
    step reads mostly KV (e ≈ 0.7 at 45 sequences per micro-batch), so 2 × 45 sequences with room for √90 more no
    longer fit: the entry runs 2 × 32 (in the simulator 4.4 % of requests had waited > 3 s for a KV slot)."""
    spec = pm.model("llama-2-7b")
    wl = Workload(1155, 211)
    point = pm.stage_point(spec, "1xL40S", "decode", 80.0, wl, (2, 16))
    assert point is not None and point.batch == 32 and point.elasticity > 0.5
    table = pm.stage_table(spec, "1xL40S", "decode", 80.0, wl, max_stages=2)
    assert table[1, 15] == pytest.approx(point.throughput)
    square_root = _with_settings(pm, kv_sigmas=0.0)  # no room at all: the KV-bound batch of 45 fits
    bare = square_root.stage_point(spec, "1xL40S", "decode", 80.0, wl, (2, 16))
    assert bare is not None and bare.batch == 45 and bare.throughput > point.throughput
