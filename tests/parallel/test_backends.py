"""Backends for fan-out (issue 11 §3): the embedded process pool and Ray give the serial answer.

Ray runs as a local instance with two CPUs (``ray.init(num_cpus=2)``), started once for this module. The tests
that need Ray are marked ``ray``: `make test` leaves them out (the dev install has no Ray), `make test-ray`
installs the [ray] extra and runs them; CI runs both.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from planning import api, parallel
from planning.cli import main
from planning.context import Cancelled
from planning.errors import PlanningError
from planning.templates import library
from planning.templates.library import LibraryRun, build_library
from planning.templates.synthetic import shape_tables

SHAPES = ["1xL4", "2xL40S", "1xH100", "4xA10G"]
L, WEIGHT, SLO = 20, 60.0, 800.0


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    import ray  # the [ray] extra, installed by `make test-ray`; a missing ray fails here, it is not skipped
    module = parallel.ray_module(num_cpus=2)
    assert module.is_initialized()
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray]:
    tables, mem = shape_tables(SHAPES, L, WEIGHT, SLO, max_stages=4)
    return tables, mem


def test_backend_names_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLANNING_BACKEND", raising=False)
    assert parallel.resolve_backend() == "process"
    monkeypatch.setenv("PLANNING_BACKEND", "RAY")
    assert parallel.resolve_backend() == "ray"
    assert parallel.resolve_backend("process") == "process"  # an explicit choice wins
    with pytest.raises(PlanningError) as err:
        parallel.resolve_backend("dask")
    assert err.value.field == "backend" and "process, ray" in str(err.value)


def test_missing_ray_is_an_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray → ImportError
    with pytest.raises(PlanningError) as err:
        parallel.ray_module()
    assert "planning[ray]" in str(err.value)


def test_a_ray_that_cannot_start_is_an_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local Ray whose node times out starting (ray.init raises a bare Exception on a busy machine) is a
    PlanningError on the backend with the fix, not a traceback."""
    from types import SimpleNamespace

    def init(**_kw: Any) -> None:
        raise Exception("The current node timed out during startup.")  # what ray 2.60 raises

    monkeypatch.delenv("PLANNING_RAY_ADDRESS", raising=False)
    monkeypatch.setitem(sys.modules, "ray", SimpleNamespace(is_initialized=lambda: False, init=init))
    with pytest.raises(PlanningError) as err:
        parallel.ray_module()
    assert err.value.field == "backend" and "timed out during startup" in str(err.value)
    assert "use --backend process" in str(err.value)


@pytest.mark.ray
def test_library_build_is_identical_serial_pool_and_ray(ray_local: Any, inputs: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tables, mem = inputs
    monkeypatch.setattr(library, "POOL_MIN_TEMPLATES", 0)
    serial = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6)
    calls: list[tuple[int, int]] = []

    def progress(fraction: float, message: str) -> None:  # context.ProgressFn: "1,234 of 5,678 templates"
        done, total = re.fullmatch(r"([\d,]+) of ([\d,]+) templates", message).groups()  # type: ignore[union-attr]
        calls.append((int(done.replace(",", "")), int(total.replace(",", ""))))

    on_ray = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2, backend="ray", progress=progress))
    pooled = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2, backend="process"))
    assert len(serial) > 20
    assert on_ray.equals(serial) and pooled.equals(serial)
    assert calls[-1][0] == calls[-1][1] == calls[0][1]  # progress reaches the total


@pytest.mark.ray
def test_a_cancelled_ray_build_stops(ray_local: Any, inputs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancel after the first batch lands: the pending Ray tasks are cancelled and the build raises."""
    tables, mem = inputs
    monkeypatch.setattr(library, "POOL_MIN_TEMPLATES", 0)
    ev = threading.Event()
    landed: list[int] = []

    def progress(done: int, total: int) -> None:
        if done > 0:
            landed.append(done)
            ev.set()

    with pytest.raises(Cancelled):
        build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2, backend="ray", cancel=ev, progress=progress))
    assert len(landed) == 1  # nothing after the cancel was merged
    ev2 = threading.Event()
    ev2.set()
    with pytest.raises(Cancelled):  # set before the start: nothing is submitted
        build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2, backend="ray", cancel=ev2))


@pytest.mark.ray
def test_sweep_on_ray_equals_the_sweep_here(ray_local: Any) -> None:
    scenario = api.load_preset_scenario("melange-arena")
    here = api.sweep(scenario, "demand", [0.5, 2.0], backend="process")
    fractions: list[float] = []
    there = api.sweep(scenario, "demand", [0.5, 2.0], backend="ray", workers=2,
                      progress=lambda f, _m: fractions.append(f))
    assert there.equals(here)
    assert sorted(fractions) == [0.5, 1.0]


@pytest.mark.ray
def test_cli_sweep_backend_ray_prints_the_same_rows(ray_local: Any, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        assert main(["sweep", "--preset", "melange-arena", "--kind", "slo", "--values", "1,1.5", "--json"]) == 0
        here = json.loads(capsys.readouterr().out)
        assert main(["sweep", "--preset", "melange-arena", "--kind", "slo", "--values", "1,1.5", "--json",
                     "--backend", "ray"]) == 0
        there = json.loads(capsys.readouterr().out)
    finally:
        parallel.set_default_backend(None)
    assert there == here and {r["x"] for r in here} == {1.0, 1.5}
    assert any(r["method"] == "Plan (mixed templates)" and r["feasible"] for r in here)


@pytest.mark.parametrize("values", ["0.5,x", "-1", "0"])
def test_cli_sweep_refuses_bad_values(values: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--preset", "melange-arena", "--values", values]) == 2
    assert "--values" in capsys.readouterr().err


def _on_demand_solve(backend: str) -> tuple[Any, dict[str, float]]:
    """coral-core planned with templates on demand, pricing searches on ``backend``, from cold search spaces."""
    from planning.allocate import pricing

    pricing._SPACES.clear()
    parallel.set_default_backend(backend)
    try:
        result = api.solve(api.load_preset_scenario("coral-core"))
    finally:
        parallel.set_default_backend(None)
    return result, dict(result.stats)


@pytest.mark.ray
def test_on_demand_pricing_on_ray_actors_gives_the_same_plan(ray_local: Any) -> None:
    """The pricing searches as Ray actors (one per group): the same certified plan, the same columns and rounds,
    and the same exact placements merged back into the driver's spaces (issue 11 §3)."""
    here, st_here = _on_demand_solve("process")
    there, st_there = _on_demand_solve("ray")
    assert here.status == there.status == "optimal"
    assert st_there.get("reduction_certified") == st_here.get("reduction_certified") == 1.0
    assert there.cost_per_hour == pytest.approx(here.cost_per_hour, rel=1e-9)
    assert [(i.template_id, i.region, i.count) for i in there.instances] == \
        [(i.template_id, i.region, i.count) for i in here.instances]
    for key in ("pricing_rounds", "lp_columns", "templates_in_ilp", "templates_total", "templates_placed_now",
                "search_candidates"):
        assert st_there[key] == st_here[key], key
    assert st_here["pricing_rounds"] >= 1 and st_here["templates_placed_now"] > 0  # the searches ran here too


@pytest.mark.ray
def test_a_cancelled_ray_pricing_round_stops(ray_local: Any) -> None:
    from planning.allocate.pricers import PriceCall, RayPricers
    from planning.allocate.pricing import PricedGroup
    from planning.templates.search import MultisetSpace

    tables, mem = shape_tables(SHAPES, L, WEIGHT, SLO, max_stages=4)
    space = MultisetSpace(tuple(SHAPES), mem, tables, WEIGHT, L, nmax=4, rho=6)
    pricers = RayPricers([PricedGroup(None, space, 10.0, 100.0, {})])
    try:
        ev = threading.Event()
        ev.set()
        w = np.ones((1, len(SHAPES)))
        with pytest.raises(Cancelled):
            pricers.price_all([PriceCall(0, w, 1.0, 0.0, 0.0, None)], ev)
        (P, codes, _reg, rc, T, floor), = pricers.price_all([PriceCall(0, w, 1.0, 0.0, 0.0, None)])
        assert P.shape[0] == codes.size == T.size > 0 and (rc <= 0).all() and floor <= rc.min() + 1e-9
        assert set(codes.tolist()) <= set(space.cache)  # the actor's placements reached the driver's space
    finally:
        pricers.close()
