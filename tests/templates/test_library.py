"""Template library: caps respected, throughput equals per-template exact placement, pool ≡ serial, cache."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import numpy as np
import pytest

from planning.context import Cancelled
from planning.errors import PlanningError
from planning.templates import library, place
from planning.templates.library import (
    LibraryCache,
    LibraryRun,
    build_library,
    library_key,
    multisets_by_pattern,
)
from planning.templates.synthetic import shape_tables

SHAPES = ["1xL4", "2xL40S", "1xH100", "4xA10G"]
L, WEIGHT, SLO = 20, 60.0, 800.0


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray]:
    tables, mem = shape_tables(SHAPES, L, WEIGHT, SLO, max_stages=4)
    return tables, mem


@pytest.fixture(scope="module")
def lib(inputs: tuple[np.ndarray, np.ndarray]):  # type: ignore[no-untyped-def]
    tables, mem = inputs
    return build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6)


def test_caps_and_feasibility(lib, inputs) -> None:  # type: ignore[no-untyped-def]
    _tables, mem = inputs
    assert lib.height > 10
    assert lib["n_nodes"].max() <= 4
    assert (lib["mem_gb"] <= 6 * WEIGHT + 1e-9).all()
    assert (lib["throughput"] > 0).all()
    assert lib["template_id"].is_sorted() and lib["template_id"].n_unique() == lib.height
    # every multiset within the caps that some placement can serve is present
    mem_of = dict(zip(SHAPES, mem, strict=True))
    for row in lib.iter_rows(named=True):
        assert sum(mem_of[s] * c for s, c in zip(row["shapes"], row["counts"], strict=True)) == pytest.approx(
            row["mem_gb"]
        )
        assert row["n_nodes"] == sum(row["counts"])
        assert row["single_gpu_type"] == (row["n_gpu_types"] == 1)


def test_library_matches_exact_placement_per_template(lib, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, _mem = inputs
    index = {s: i for i, s in enumerate(SHAPES)}
    for row in lib.sample(40, seed=1).iter_rows(named=True):
        nodes = [index[s] for s, c in zip(row["shapes"], row["counts"], strict=True) for _ in range(c)]
        ref = place(L, np.transpose(tables[nodes], (1, 0, 2)))
        assert row["throughput"] == pytest.approx(ref.throughput, rel=1e-9)
        stages = json.loads(row["stages_json"])
        assert len(stages) == row["S"]
        assert sum(st["layers"] for st in stages) == L
        assert sorted(s for st in stages for s in st["shapes"]) == sorted(
            s for s, c in zip(row["shapes"], row["counts"], strict=True) for _ in range(c)
        )
        # the stored placement achieves the stored throughput
        S = row["S"]
        value = min(sum(tables[index[s], S - 1, st["layers"] - 1] for s in st["shapes"]) for st in stages)
        assert value == pytest.approx(row["throughput"], rel=1e-9)


def test_dropped_multisets_cannot_hold_the_model(lib, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    kept = set(lib["template_id"].to_list())
    missing = 0
    for pattern, ids in multisets_by_pattern(len(SHAPES), 3).items():
        for row in ids:
            names = sorted((SHAPES[k], c) for k, c in zip(row.tolist(), pattern, strict=True))
            tid = "+".join(f"{c}x{s}" for s, c in names)
            total_mem = sum(mem[k] * c for k, c in zip(row.tolist(), pattern, strict=True))
            if tid in kept or total_mem > 6 * WEIGHT:
                continue
            nodes = [k for k, c in zip(row.tolist(), pattern, strict=True) for _ in range(c)]
            assert place(L, np.transpose(tables[nodes], (1, 0, 2))).throughput == 0
            missing += 1
    assert missing > 0


def test_non_monotone_tables_use_general_path(inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    bumpy = tables.copy()
    bumpy[0, :, 5] = bumpy[0, :, 4] + 1.0  # break monotonicity of one shape
    df = build_library(SHAPES[:3], mem[:3], bumpy[:3], WEIGHT, L, nmax=3, rho=6)
    for row in df.iter_rows(named=True):
        nodes = [SHAPES.index(s) for s, c in zip(row["shapes"], row["counts"], strict=True) for _ in range(c)]
        assert row["throughput"] == pytest.approx(place(L, np.transpose(bumpy[nodes], (1, 0, 2))).throughput)


def test_pool_output_identical_to_serial(inputs, lib, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    monkeypatch.setattr(library, "POOL_MIN_TEMPLATES", 0)  # force the pool on this small library
    pooled = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2))
    assert pooled.equals(lib)


def test_cache_hit_and_key(tmp_path: Path, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    cache = LibraryCache(tmp_path)
    a = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache))
    files = list(tmp_path.glob("*.parquet"))
    assert len(files) == 1
    calls: list[tuple[float, str]] = []
    b = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache, progress=lambda f, m: calls.append((f, m))))
    assert b.equals(a) and calls == []  # loaded, not rebuilt
    k1 = library_key(SHAPES, mem, tables, WEIGHT, L, 3, 6)
    assert files[0].stem == k1
    assert library_key(SHAPES, mem, tables, WEIGHT, L, 3, 7) != k1
    assert library_key(SHAPES, mem, tables * 1.01, WEIGHT, L, 3, 6) != k1


def test_progress_and_cancel(inputs, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    monkeypatch.setattr(library, "POOL_MIN_TEMPLATES", 0)
    calls: list[tuple[int, int]] = []
    fractions: list[float] = []

    def progress(fraction: float, message: str) -> None:  # the project's ProgressFn: "1,234 of 5,678 templates"
        done, total = re.fullmatch(r"([\d,]+) of ([\d,]+) templates", message).groups()  # type: ignore[union-attr]
        calls.append((int(done.replace(",", "")), int(total.replace(",", ""))))
        fractions.append(fraction)

    build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(progress=progress))
    assert calls[0][0] == 0 and calls[-1][0] == calls[-1][1] > 0
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions == [d / t for d, t in calls]
    ev = threading.Event()
    ev.set()
    with pytest.raises(Cancelled):
        build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cancel=ev))
    with pytest.raises(Cancelled):
        build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cancel=ev, workers=2))


def test_input_validation(inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    with pytest.raises(PlanningError) as err:
        build_library(SHAPES, mem[:2], tables, WEIGHT, L)
    assert err.value.field == "shape_mem_gb"
    with pytest.raises(PlanningError) as err:
        build_library(SHAPES, mem, tables[:, :, :5], WEIGHT, L)
    assert err.value.field == "tables"
    with pytest.raises(PlanningError) as err:
        build_library(SHAPES, mem, tables, WEIGHT, L, nmax=0)
    assert err.value.field == "nmax"
