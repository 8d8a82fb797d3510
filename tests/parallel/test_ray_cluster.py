"""A real multi-node Ray cluster (issue 29 §1): the planner at PLANNING_RAY_ADDRESS gives the local answers.

The module starts a head (1 CPU) and a worker node (1 CPU) as separate ``ray start`` processes on this machine
(``tests/parallel/ray_cluster.py``: own resources, own free ports, session files under the test's tmp path) and
points the planner at the head with ``PLANNING_RAY_ADDRESS``. A library build, a sweep, the on-demand pricing
searches (actors) and a timeline run on it and are compared with the local process backend. Two tests add a
third node and SIGKILL it mid-run: Ray re-runs the lost work and the answer is the same, or, with no retries
left, the fan-out fails with a ``PlanningError`` naming the backend; never a silent hole. The cluster is torn down
(each node's process group, then any process naming its temp dir) even when a test fails.
"""

from __future__ import annotations

import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from planning import api, parallel
from planning.errors import PlanningError
from planning.templates import library
from planning.templates.library import LibraryRun, build_library
from planning.templates.synthetic import shape_tables
from planning.timeline import TimelineOptions, diurnal
from tests.parallel.ray_cluster import DRIVER_ENV, LocalCluster, stragglers

pytestmark = pytest.mark.ray

SHAPES = ["1xL4", "2xL40S", "1xH100", "4xA10G"]
L, WEIGHT, SLO = 20, 60.0, 800.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    import ray  # the [ray] extra (`make test-ray`); a missing ray fails here, it is not skipped

    if ray.is_initialized():  # another module's local instance
        ray.shutdown()
    root = tmp_path_factory.mktemp("rc")  # short: Ray's unix sockets live under it (107-character limit)
    c = LocalCluster(Path(root))
    with pytest.MonkeyPatch.context() as mp:
        for k, v in DRIVER_ENV.items():
            mp.setenv(k, v)
        try:
            c.start(head_cpus=1, worker_cpus=[1])
            mp.setenv("PLANNING_RAY_ADDRESS", c.address)
            parallel.ray_module()
            # the probes below travel by value (the nodes import planning, not this test module)
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
            yield c
        finally:
            if ray.is_initialized():
                ray.shutdown()
            c.stop()
    assert stragglers(str(root)) == [], "a Ray process of the test cluster outlived its teardown"


def test_the_planner_joins_a_cluster_of_separate_nodes(cluster: LocalCluster) -> None:
    import ray

    res = ray.cluster_resources()
    assert res.get("node_head") == 1 and res.get("node_w0") == 1 and res.get("CPU") == 2
    assert cluster.alive_nodes() == 2
    # tasks land on both nodes (each holds a CPU for half a second, so two run at once only across nodes)
    nodes = parallel.run_tasks(_node_of, [0.5] * 4, backend="ray")
    assert len(set(nodes)) == 2


def _node_of(seconds: float) -> str:
    import ray

    time.sleep(seconds)
    return str(ray.get_runtime_context().get_node_id())


def test_library_build_on_the_cluster_equals_the_serial_build(cluster: LocalCluster,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    tables, mem = shape_tables(SHAPES, L, WEIGHT, SLO, max_stages=4)
    monkeypatch.setattr(library, "POOL_MIN_TEMPLATES", 0)
    serial = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6)
    there = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2, backend="ray"))
    pooled = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=2, backend="process"))
    assert len(serial) > 20
    assert there.equals(serial) and pooled.equals(serial)


def _unhurried(scenario: Any) -> Any:
    """The scenario with a 15-minute time limit: the tests compare answers, and on a loaded machine the preset's
    limit would turn a slow run into a different (time-limited) answer."""
    return replace(scenario, options=replace(scenario.options, time_limit_s=900))


def test_sweep_on_the_cluster_equals_the_sweep_here(cluster: LocalCluster) -> None:
    scenario = _unhurried(api.load_preset_scenario("melange-arena"))
    here = api.sweep(scenario, "demand", [0.5, 1.0, 2.0], backend="process")
    there = api.sweep(scenario, "demand", [0.5, 1.0, 2.0], backend="ray")
    assert there.equals(here)
    assert here[here.method == "Plan (mixed templates)"].feasible.all()


def _on_demand(scenario_name: str, backend: str) -> Any:
    from planning.allocate import pricing

    pricing._SPACES.clear()  # cold search spaces: the searches run (here or on the actors)
    parallel.set_default_backend(backend)
    try:
        return api.solve(_unhurried(api.load_preset_scenario(scenario_name)), with_baselines=False)
    finally:
        parallel.set_default_backend(None)


def _plan(result: Any) -> list[tuple[str, str, int]]:
    return [(i.template_id, i.region, i.count) for i in result.instances]


def test_pricing_searches_on_the_cluster_give_the_same_plan(cluster: LocalCluster) -> None:
    here = _on_demand("coral-core", "process")
    try:
        there = _on_demand("coral-core", "ray")
    except PlanningError as exc:
        # Seen when this module ran in the same process as test_backends' local instance (2 of 2 `make test-ray`
        # runs, retry included; `make test-ray` now runs this module in its own process): a pricing actor "died
        # unexpectedly" on a node nobody killed and used up its 3 restarts. The backend failed clearly, as it
        # promises; in case it recurs, it is retried once, loudly, so the plan comparison below still runs.
        if "ActorDiedError" not in str(exc):
            raise
        warnings.warn(f"pricing actors died on an intact cluster, retried once: {exc}", stacklevel=1)
        there = _on_demand("coral-core", "ray")
    assert here.status == there.status == "optimal"
    assert there.cost_per_hour == pytest.approx(here.cost_per_hour, rel=1e-9)
    assert _plan(there) == _plan(here)
    assert there.stats["pricing_rounds"] == here.stats["pricing_rounds"] >= 1


def _timeline_case() -> tuple[Any, list[Any]]:
    scenario = api.load_preset_scenario("coral-core")
    scenario = replace(scenario, models=scenario.models[:2],
                       options=replace(scenario.options, templates="on-demand", mip_rel_gap=0.0, time_limit_s=900))
    shape = [0.4, 1.0, 0.7]
    demand = [diurnal(m.id, shape, m.demand.rate_rps, m.demand.input_len, m.demand.output_len, epoch_hours=8)
              for m in scenario.models]
    return scenario, demand


def test_timeline_on_the_cluster_equals_the_timeline_here(cluster: LocalCluster) -> None:
    scenario, demand = _timeline_case()
    opts = TimelineOptions(baselines=("homo",), static_peak=True)
    runs = {}
    for backend in ("process", "ray"):
        parallel.set_default_backend(backend)
        try:
            runs[backend] = api.timeline(scenario, demand, options=opts)
        finally:
            parallel.set_default_backend(None)
    here, there = runs["process"], runs["ray"]
    assert len(there.epochs) == len(here.epochs) == 3
    assert there.total_cost == pytest.approx(here.total_cost, rel=1e-9)
    assert there.static_peak_total_cost == pytest.approx(here.static_peak_total_cost, rel=1e-9)
    assert [e.gpus for e in there.epochs] == [e.gpus for e in here.epochs]
    assert there.baselines_total_cost == pytest.approx(here.baselines_total_cost, rel=1e-9)


# ------------------------------------------------------------------------------------- a node lost mid-run
def _kill_when_started(cluster: LocalCluster, name: str, marks: Path, node: str) -> threading.Thread:
    """A thread that SIGKILLs node ``name`` as soon as a task has started on it (a mark from ``node``)."""

    def watch() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _started_on(marks, node):
            time.sleep(0.05)
        cluster.kill_node(name)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_node_killed_mid_build_loses_nothing(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The victim (2 CPUs) dies when the first batch lands, batches still pending: Ray re-runs what it held on the
    survivors and the library is the serial one, row for row."""
    cluster.add_worker("victim", 2)
    tables, mem = shape_tables(SHAPES, L, WEIGHT, SLO, max_stages=4)
    monkeypatch.setattr(library, "POOL_MIN_TEMPLATES", 0)
    serial = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6)
    killed: list[str] = []
    progress_at_kill: list[tuple[str, str]] = []

    def progress(_f: float, message: str) -> None:
        done, total = (x.replace(",", "") for x in message.split(" templates")[0].split(" of "))
        if not killed and 0 < int(done) < int(total):
            cluster.kill_node("victim")
            killed.append("victim")
            progress_at_kill.append((done, total))

    there = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=4, rho=6, run=LibraryRun(workers=4, backend="ray", progress=progress))
    assert killed == ["victim"], "the node was not killed mid-run"
    assert there.equals(serial)
    assert _wait_until(lambda: cluster.alive_nodes() == 2)


def _probe(arg: tuple[int, float, str, str]) -> tuple[int, str]:
    """Task ``i``: note (a file named node-i under ``marks``) where it started, then hold a CPU ``seconds``
    (five times longer on a node with resource ``slow``); returns (i, the node it finished on)."""
    import ray

    i, seconds, marks, slow = arg
    node = str(ray.get_runtime_context().get_node_id())
    Path(marks, f"{node}-{i}").touch()
    on_slow = any(n["NodeID"] == node and slow in n["Resources"] for n in ray.nodes() if n["Alive"])
    time.sleep(seconds * (5 if on_slow else 1))
    return i, node


def _node_id(resource: str) -> str:
    """The id of the live node holding ``resource``, once the driver sees it (the GCS may count a node alive a
    moment before the driver's view has it, or a killed one a while after)."""
    import ray

    found: list[str] = []

    def seen() -> bool:
        found[:] = [str(n["NodeID"]) for n in ray.nodes() if n["Alive"] and resource in n["Resources"]]
        return bool(found)

    assert _wait_until(seen, 120), f"no live node holds {resource}"
    return found[0]


def _started_on(marks: Path, node: str) -> set[int]:
    return {int(p.name.rsplit("-", 1)[1]) for p in marks.iterdir() if p.name.startswith(node + "-")}


def test_tasks_running_on_a_killed_node_are_rerun(cluster: LocalCluster, tmp_path: Path) -> None:
    """Tasks were running on the victim when it died: every result still arrives, in order, and the lost ones
    were re-run on a survivor (they started on the victim and finished elsewhere)."""
    cluster.add_worker("victim2", 2)
    victim = _node_id("node_victim2")
    watcher = _kill_when_started(cluster, "victim2", tmp_path, victim)
    items = [(i, 1.0, str(tmp_path), "node_victim2") for i in range(8)]
    out = parallel.run_tasks(_probe, items, backend="ray")
    watcher.join(10)
    assert cluster.nodes[-1].killed
    assert [i for i, _node in out] == list(range(8))  # no hole, no reordering
    lost = _started_on(tmp_path, victim) - {i for i, node in out if node == victim}
    assert lost, "no task was running on the victim when it died (the test proved nothing)"
    assert all(out[i][1] != victim for i in lost)


def test_with_no_retries_left_a_lost_node_fails_the_run_clearly(cluster: LocalCluster, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The same loss with no retries: a PlanningError naming the backend and the fix, not a Ray traceback and
    not a list with holes."""
    cluster.add_worker("victim3", 2)
    victim = _node_id("node_victim3")
    monkeypatch.setattr(parallel, "RAY_RETRIES", 0)
    watcher = _kill_when_started(cluster, "victim3", tmp_path, victim)
    items = [(i, 1.0, str(tmp_path), "node_victim3") for i in range(6)]
    with pytest.raises(PlanningError) as err:
        parallel.run_tasks(_probe, items, backend="ray", what="the probe")
    watcher.join(10)
    assert cluster.nodes[-1].killed and _started_on(tmp_path, victim)
    assert err.value.field == "backend" and "the probe lost work on the Ray cluster" in str(err.value)
    assert "--backend process" in str(err.value)


def test_a_node_killed_during_pricing_rounds_gives_the_same_plan(cluster: LocalCluster) -> None:
    """Pricing actors spread over the nodes; one node dies during the column generation: its actors restart
    elsewhere from their group and re-run the round (exact searches), so the plan is the one priced here; or,
    when Ray used up the call's retries before noticing the node was gone, the solve fails with a
    PlanningError naming the backend (both outcomes are seen on this machine under load)."""
    here = _on_demand("coral-core", "process")
    cluster.add_worker("victim4", 1)
    from planning.allocate import pricers

    calls = {"n": 0}
    real = pricers.RayPricers.price_all

    def price_all(self: Any, batch: Any, cancel: Any = None) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # the actors exist (started at round 1) and hold state: lose a node now
            cluster.kill_node("victim4")
        return real(self, batch, cancel)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pricers.RayPricers, "price_all", price_all)
        try:
            there = _on_demand("coral-core", "ray")
        except PlanningError as exc:  # the other allowed outcome: a clear failure, never a silent hole
            assert exc.field == "backend" and "a pricing round lost work on the Ray cluster" in str(exc)
            return
    assert calls["n"] >= 2, "the solve ended before the node was killed"
    assert there.status == here.status == "optimal"
    assert there.cost_per_hour == pytest.approx(here.cost_per_hour, rel=1e-9)
    assert _plan(there) == _plan(here)


def _wait_until(cond: Any, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.5)
    return False
