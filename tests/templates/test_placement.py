"""Exact placement agrees with brute force and Coral's ILP; hand-worked cases; validity and validation."""

from __future__ import annotations

import numpy as np
import pytest

from planning.errors import PlanningError
from planning.templates import Placement, Stage, evaluate, place
from planning.templates.brute import brute_evaluations, solve_brute, solve_partition_search
from planning.templates.exact import _monotone_values, maxmin_dp
from planning.templates.partitions import multiset_partitions, set_partitions


def _random_instance(rng: np.random.Generator, max_nodes: int, max_layers: int) -> tuple[int, np.ndarray]:
    n = int(rng.integers(1, max_nodes + 1))
    L = int(rng.integers(1, max_layers + 1))
    depth = int(rng.integers(1, n + 2))
    thr = rng.integers(0, 12, size=(depth, n, L)).astype(float)
    thr[rng.random(thr.shape) < 0.2] = 0.0  # "cannot hold" entries
    if n >= 3 and rng.random() < 0.5:
        thr[:, 2] = thr[:, 0]  # identical nodes exercise the multiset enumeration
    return L, thr


def _check_valid(L: int, thr: np.ndarray, p: Placement) -> None:
    if p.throughput == 0:
        assert p.stages == ()
        return
    assert sum(s.layers for s in p.stages) == L
    assert sorted(k for s in p.stages for k in s.nodes) == list(range(thr.shape[1]))
    assert all(s.layers >= 1 and s.nodes for s in p.stages)
    assert evaluate(L, thr, p.stages) == pytest.approx(p.throughput, rel=1e-9)


def test_exact_equals_brute_on_random_arbitrary_tables() -> None:
    rng = np.random.default_rng(20240501)
    checked = 0
    for _ in range(120):
        L, thr = _random_instance(rng, max_nodes=5, max_layers=30)
        exact = place(L, thr)
        _check_valid(L, thr, exact)
        if brute_evaluations(L, thr.shape[1], thr.shape[0]) <= 100_000:
            ref = solve_brute(L, thr).throughput
        else:
            ref = solve_partition_search(L, thr).throughput
        assert exact.throughput == pytest.approx(ref, rel=1e-12, abs=1e-12)
        checked += 1
    assert checked == 120


def test_exact_equals_brute_on_monotone_tables_with_duplicates() -> None:
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(2, 7))
        L = int(rng.integers(2, 40))
        thr = -np.sort(-rng.integers(0, 30, size=(min(n, 4), n, L)).astype(float), axis=2)
        thr[:, -1] = thr[:, 0]
        exact = place(L, thr)
        _check_valid(L, thr, exact)
        assert exact.throughput == pytest.approx(solve_partition_search(L, thr).throughput, rel=1e-12)


def test_plain_brute_and_partition_search_agree() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):
        L, thr = _random_instance(rng, max_nodes=4, max_layers=7)
        a = solve_brute(L, thr)
        b = solve_partition_search(L, thr)
        assert a.throughput == pytest.approx(b.throughput, rel=1e-12)
        if b.throughput > 0:
            assert evaluate(L, thr, b.stages) == pytest.approx(b.throughput)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exact_equals_ilp_small(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, L = 3, int(rng.integers(3, 8))
    thr = rng.integers(0, 20, size=(n, n, L)).astype(float)
    ilp = place(L, thr, method="ilp")
    exact = place(L, thr)
    assert ilp.status == "optimal"
    assert exact.throughput == pytest.approx(ilp.throughput, rel=1e-6)
    _check_valid(L, thr, ilp)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10, 16))
def test_exact_equals_ilp_more(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, L = int(rng.integers(2, 5)), int(rng.integers(2, 10))
    thr = rng.integers(0, 20, size=(n, n, L)).astype(float)
    thr[rng.random(thr.shape) < 0.2] = 0
    ilp = place(L, thr, method="ilp")
    assert place(L, thr).throughput == pytest.approx(ilp.throughput, rel=1e-6)


def test_two_equal_nodes_data_parallel_beats_pipeline() -> None:
    # One stage: each node holds all 4 layers at 10 → 10 + 10 = 20. Two stages of 2 layers: 12 each → min = 12.
    row1 = [30.0, 20.0, 15.0, 10.0]
    row2 = [24.0, 12.0, 8.0, 6.0]
    thr = [[row1, row1], [row2, row2]]
    p = place(4, thr)
    assert p.throughput == 20.0
    assert p.stages == (Stage(layers=4, nodes=(0, 1)),)


def test_two_equal_nodes_pipeline_beats_data_parallel() -> None:
    # A node cannot hold 4 layers (0) so one stage is infeasible; two stages of 2 layers give min(9, 9) = 9,
    # better than 1+3 layers (min(14, 4) = 4).
    row1 = [16.0, 12.0, 8.0, 0.0]
    row2 = [14.0, 9.0, 4.0, 0.0]
    p = place(4, [[row1, row1], [row2, row2]])
    assert p.throughput == 9.0
    assert sorted(s.layers for s in p.stages) == [2, 2]
    assert p.layer_ranges() == ((0, 2), (2, 4))


def test_uneven_split_follows_node_speed() -> None:
    # Fast node 0 (throughput 60/j) and slow node 1 (20/j), 8 layers: best is 6 + 2 layers → min(10, 10) = 10.
    L = 8
    fast = [60.0 / j for j in range(1, L + 1)]
    slow = [20.0 / j for j in range(1, L + 1)]
    single = [[0.0] * L, [0.0] * L]
    p = place(L, [single, [fast, slow]])
    assert p.throughput == pytest.approx(10.0)
    assert {s.nodes: s.layers for s in p.stages} == {(0,): 6, (1,): 2}


def test_infeasible_gives_zero_and_no_stages() -> None:
    p = place(3, [[[5.0, 0.0, 0.0]]])
    assert p.throughput == 0.0 and p.stages == ()


def test_monotone_formula_matches_dp() -> None:
    rng = np.random.default_rng(5)
    curves = -np.sort(-rng.integers(0, 50, size=(200, 3, 12)).astype(float), axis=2)
    assert np.allclose(_monotone_values(curves, 12), maxmin_dp(curves, 12))


def test_partition_counts() -> None:
    # Stirling numbers S(5, k) and a multiset case enumerated by hand: {a, a, b} into 2 blocks → {aa|b}, {ab|a}.
    assert [sum(1 for _ in set_partitions(5, k)) for k in range(1, 6)] == [1, 15, 25, 10, 1]
    assert [len(multiset_partitions((1,) * 5, k)) for k in range(1, 6)] == [1, 15, 25, 10, 1]
    assert set(multiset_partitions((2, 1), 2)) == {((2, 0), (0, 1)), ((1, 1), (1, 0))}


@pytest.mark.parametrize(
    ("layers", "thr", "field"),
    [
        (0, [[[1.0]]], "layers"),
        (2.5, [[[1.0, 1.0]]], "layers"),
        (2, [[1.0, 1.0]], "thr"),
        (3, [[[1.0, 1.0]]], "thr"),
        (2, [[[1.0, -1.0]]], "thr[0][0][1]"),
        (2, [[[1.0, float("nan")]]], "thr"),
    ],
)
def test_validation_names_the_field(layers: object, thr: object, field: str) -> None:
    with pytest.raises(PlanningError) as err:
        place(layers, thr)  # type: ignore[arg-type]
    assert err.value.field == field


def test_unknown_method_and_brute_limits() -> None:
    with pytest.raises(PlanningError, match="method"):
        place(1, [[[1.0]]], method="magic")
    with pytest.raises(PlanningError) as err:
        place(2, np.ones((1, 8, 2)), method="brute")
    assert err.value.field == "thr"
    with pytest.raises(PlanningError) as err:
        place(90, np.ones((6, 6, 90)), method="brute")
    assert err.value.field == "layers"


def test_placement_is_frozen_and_serializes() -> None:
    p = place(4, [[[4.0, 3.0, 2.0, 1.0], [4.0, 3.0, 2.0, 1.0]]])
    with pytest.raises(AttributeError):
        p.throughput = 1.0  # type: ignore[misc]
    d = p.to_dict()
    assert d["throughput"] == p.throughput and d["stages"][0]["nodes"] == [0, 1]
    assert p.seconds >= 0 and p.method == "exact"
