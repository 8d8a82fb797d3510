"""The shipped validation set: composition, disjointness from the fit, loader errors, fidelity thresholds, bands."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.perf import PerfModel, load_calibration
from planning.perf.bands import load_bands
from planning.perf.validation import COLUMNS, ValidationPoint, band_rows, load_validation, ordering, predict

ROOT = Path(__file__).resolve().parents[2]
# Kernel/layer-level data the calibration is fitted on (tools/calibrate_perf.py): never a validation source.
FIT_SOURCES = ("aic", "vidur", "helix", "splitwise")


@pytest.fixture(scope="module")
def evaluated(pm: PerfModel) -> tuple[list[ValidationPoint], list[float]]:
    points = load_validation()
    return points, [predict(pm, p) for p in points]


def _median_error(points: list[ValidationPoint], pred: list[float]) -> float:
    return statistics.median(abs(q / p.value - 1.0) for p, q in zip(points, pred, strict=True) if q == q)


def test_set_covers_the_required_kinds(pm: PerfModel) -> None:
    points = load_validation()
    assert len(points) >= 60
    assert len({p.gpu for p in points}) >= 6
    assert {"fp8"} <= {p.dtype for p in points} and {p.dtype for p in points} & {"bf16", "fp16"}
    assert {1, 2, 4, 8} <= {p.tp for p in points}
    assert any(pm.model(p.model).experts_total > 0 for p in points)
    assert any(pm.model(p.model).experts_total == 0 for p in points)
    kinds = {(p.kind, p.batch == 1 or p.concurrency == 1, p.batch is None and p.concurrency is None) for p in points}
    assert ("ttft", True, False) in kinds and ("tpot", True, False) in kinds and ("throughput", False, True) in kinds
    assert any(p.concurrency and p.concurrency > 1 for p in points)
    for p in points:
        assert p.source and p.engine and p.engine_version and p.reference, p.id
        pm.gpu(p.gpu)  # catalog ids only
        pm.model(p.model)


def test_validation_is_disjoint_from_the_fit_data() -> None:
    points = load_validation()
    assert not any(p.source.startswith(FIT_SOURCES) for p in points)
    cal_sources = {s.lower() for g in load_calibration().gpus.values() for s in g.source.split("; ")}
    assert not any(p.source in s for p in points for s in cal_sources)
    assert len({p.id for p in points}) == len(points)


def test_shipped_set_meets_the_fidelity_targets(evaluated: tuple[list[ValidationPoint], list[float]]) -> None:
    points, pred = evaluated
    single = [i for i, p in enumerate(points) if p.kind in ("ttft", "tpot") and (p.batch == 1 or p.concurrency == 1)]
    saturation = [i for i, p in enumerate(points)
                  if p.kind == "throughput" and p.batch is None and p.concurrency is None]
    for kind in ("ttft", "tpot"):
        ix = [i for i in single if points[i].kind == kind]
        assert _median_error([points[i] for i in ix], [pred[i] for i in ix]) <= 0.15, kind
    assert _median_error([points[i] for i in saturation], [pred[i] for i in saturation]) <= 0.20
    pairs, right = ordering(points, pred)
    assert pairs >= 20 and right / pairs >= 0.90
    # Settings someone measured but the model calls infeasible (does not fit) stay rare and are counted, not hidden.
    infeasible = [p.id for p, q in zip(points, pred, strict=True) if q != q]
    assert len(infeasible) <= 0.05 * len(points), infeasible
    # Per source, on the kinds the targets name. Sources the model is known to miss are listed with the diagnosed
    # cause (data/validation/README.md, docs/perf-model.md Sec. 7) and must still miss: fixing the model removes
    # them from the list, and a new source cannot fail silently.
    for source in {points[i].source for i in single + saturation}:
        ix = [i for i in single + saturation if points[i].source == source]
        limit = 0.20 if all(i in saturation for i in ix) else 0.15
        err = _median_error([points[i] for i in ix], [pred[i] for i in ix])
        if source in KNOWN_MISSES:
            assert err > limit + 0.05, f"{source} now meets its target ({err:.1%}): drop it from KNOWN_MISSES"
        else:
            assert err <= limit + 0.05, (source, err)


def test_shipped_set_meets_the_issue_42_targets(pm: PerfModel,
                                               evaluated: tuple[list[ValidationPoint], list[float]]) -> None:
    """Issue 42's targets on the shipped set: overall median <= 7 %, saturation-throughput p90 <= 18 %, and the
    median of each mixture-of-experts model's rows <= 10 % (Qwen3-235B's trtllm-bench rows need the waves, padded
    CUDA graphs and overlap scheduler of planning.perf.waves: 12.5 % without them)."""
    points, pred = evaluated
    assert _median_error(points, pred) <= 0.07
    sat = [abs(q / p.value - 1.0) for p, q in zip(points, pred, strict=True)
           if p.kind == "throughput" and p.batch is None and p.concurrency is None and q == q]
    assert float(np.quantile(sat, 0.9)) <= 0.18
    moe = {p.model for p in points if pm.model(p.model).experts_total > 0}
    assert {"qwen3-235b-a22b", "mixtral-8x7b"} <= moe
    for model in moe:
        ix = [i for i, p in enumerate(points) if p.model == model]
        assert _median_error([points[i] for i in ix], [pred[i] for i in ix]) <= 0.10, model


# Sources the model is known to miss, with the diagnosed cause. Empty: the ShareGPT runs once listed here
# (llm-price-compass, iog-llm-inference-benchmarks) are finite bursts whose duration the drain of their longest
# requests sets, not saturation plateaus; they moved to data/validation/bursts.csv, where the simulator replays
# their protocol (tests/simulate/test_bursts.py).
KNOWN_MISSES: dict[str, str] = {}


def test_committed_bands_match_a_recomputation(pm: PerfModel,
                                               evaluated: tuple[list[ValidationPoint], list[float]]) -> None:
    points, pred = evaluated
    fresh = {(r.gpu_class, r.dtype_class, r.kind): r for r in band_rows(pm, points, pred)}
    shipped = {(r.gpu_class, r.dtype_class, r.kind): r for r in load_bands().rows}
    assert fresh.keys() == shipped.keys()
    for key, r in fresh.items():
        assert shipped[key].n == r.n and shipped[key].p90 == pytest.approx(r.p90, abs=0.002), key


def test_loader_names_file_row_and_column(tmp_path: Path) -> None:
    row = dict.fromkeys(COLUMNS, "")
    row.update(id="x", source="s", reference="r", engine="vllm", engine_version="0.6", model="llama-3-8b", gpu="H100",
               n_gpus="1", tp="1", pp="1", dtype="bf16", input_len="100", output_len="10", quantity="ttft_ms",
               value="12", unit="ms")
    with (tmp_path / "a.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow(row)
        w.writerow({**row, "quantity": "speed"})
    with pytest.raises(PlanningError, match=r"a.csv:3:quantity"):
        load_validation(tmp_path)
    with (tmp_path / "a.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow({**row, "engine_version": ""})
    with pytest.raises(PlanningError, match=r"a.csv:2:engine_version"):
        load_validation(tmp_path)
    (tmp_path / "a.csv").write_text("id,value\n1,2\n")
    with pytest.raises(PlanningError, match="missing columns"):
        load_validation(tmp_path)


def test_engine_versions_map_to_their_default_scheduling() -> None:
    from planning.perf.engines import scheduling_of

    assert scheduling_of("vllm", "0.4.3 (docker vllm/vllm-openai:v0.4.3)") == "prefill-first"
    assert scheduling_of("vllm", "0.5.4") == "prefill-first"
    assert scheduling_of("vllm", "0.6.0") == "chunked"
    assert scheduling_of("vllm", "0.23.0") == "chunked"
    assert scheduling_of("tgi", "2.0.4 (max_batch_prefill_tokens 8192)") == "prefill-first"
    assert scheduling_of("tgi", "3.0.1") == "chunked"
    assert scheduling_of("trtllm", "0.5") == "chunked"
    assert scheduling_of("vllm", "unstated") == "chunked"


def test_engines_run_their_default_batch_limits() -> None:
    """Validation rows run the engine's own defaults: vLLM V1 by GPU size, V0 capped at 256 sequences, TGI at 128
    concurrent requests, TensorRT-LLM at the planner's limits."""
    from planning.perf.engines import engine_limits

    pm = PerfModel()
    s = pm.calibration.settings
    planner = (int(s.max_batched_tokens), int(s.max_num_seqs))
    def mem(gpu: str) -> float:
        return pm.gpu(gpu).memory_bytes

    assert engine_limits("vllm", "0.8.5", "H100", mem("H100"), s) == planner  # 79.6 GiB >= 70 GiB
    assert engine_limits("vllm", "unstated", "L4", mem("L4"), s) == (2048, 256)
    assert engine_limits("vllm", "0.23.0", "A100-80G", mem("A100-80G"), s) == (2048, 256)
    assert engine_limits("vllm", "0.4.3", "H100", mem("H100"), s) == (planner[0], 256)
    assert engine_limits("tgi", "2.0.4", "A10G", mem("A10G"), s) == (planner[0], 128)
    assert engine_limits("trtllm", "0.17", "L40S", mem("L40S"), s) == planner


def test_engine_limits_bound_the_serving_batch() -> None:
    """A 256-sequence cap binds where the planner's 1,024 would run more sequences; a smaller step budget leaves a
    smaller activation workspace, so a memory-bound batch grows."""
    pm = PerfModel()
    kw = dict(input_len=215, output_len=43)
    free = pm.serving("llama-3-8b", "A10G", 2, **kw)
    capped = pm.serving("llama-3-8b", "A10G", 2, engine_limits=(8192, 256), **kw)
    assert free is not None and capped is not None
    assert free.batch > 256 and capped.batch == 256 and capped.limited_by == "max_num_seqs"
    big = pm.serving("llama-3-8b", "L4", input_len=215, output_len=198, engine_limits=(8192, 256))
    small = pm.serving("llama-3-8b", "L4", input_len=215, output_len=198, engine_limits=(2048, 256))
    assert big is not None and small is not None
    assert big.limited_by == small.limited_by == "memory" and small.batch > big.batch
    with pytest.raises(PlanningError, match="engine_limits"):
        pm.serving("llama-3-8b", "L4", input_len=215, output_len=198, engine_limits=(0, 256))


def test_llmperf_rows_run_at_the_occupancy_they_had() -> None:
    """llmperf's A10G levels kept ~19-22 requests in flight at 32 and 64 nominal clients (Little's law on each
    level's own requests/minute, TTFT and ITL, stated in the row notes). At that occupancy the prefill-first closed
    form meets the published throughput and ITL: the '~300 tok/s ceiling' of 2024 engines on an A10G is what 20
    requests in flight give, not the engine's peak."""
    from planning.perf.validation import in_flight

    assert in_flight("x; 18.9 requests in flight on average (Little's law)") == 19
    assert in_flight("AIPerf average") is None
    pm = PerfModel()
    rows = {p.id: p for p in load_validation() if p.source == "philschmid-llmperf-a10g"}
    for rid, limit in (("philschmid-llmperf-a10g-161", 0.10), ("philschmid-llmperf-a10g-170", 0.15),
                       ("philschmid-llmperf-a10g-179", 0.05), ("philschmid-llmperf-a10g-180", 0.05)):
        p = rows[rid]
        assert p.concurrency == 32 and in_flight(p.notes) == 19
        assert abs(predict(pm, p) / p.value - 1) <= limit, rid
    # at the nominal 32 clients the same row would be far off: the occupancy, not a fitted factor, closes the gap
    nominal = pm.serving("llama-3-8b", "A10G", input_len=466, output_len=150, concurrency=32,
                         scheduling="prefill-first")
    assert nominal is not None and nominal.max_output_tokens_per_s > 1.3 * rows["philschmid-llmperf-a10g-161"].value
