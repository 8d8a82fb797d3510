"""Seeded synthetic allocation problems for tests and benchmarks (made-up numbers, not catalog data)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planning.allocate.problem import AllocationProblem, Offer, TemplateOption, WorkloadClass

# Made-up relative speeds and per-GPU prices of fictitious GPU types g0, g1, …; only their spread matters.
_GPU_COUNTS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Synthetic:
    """The sizes and shape of a random problem.

    ``groups``, ``templates_per_group``, ``regions``, ``shapes``, ``classes_per_group``: sizes. ``max_nodes``: nodes
    per template (1..max_nodes, drawn with repetition from the shapes). ``max_available``: availability per
    (region, shape) drawn from 0..max_available. ``demand_scale``: each group's total rate = scale × (capacity of
    all its templates at one instance each, averaged). ``homogeneous_share``: share of templates drawn from a
    single shape.
    """

    groups: int = 2
    templates_per_group: int = 3
    regions: int = 1
    shapes: int = 3
    classes_per_group: int = 1
    max_nodes: int = 3
    max_available: int = 3
    demand_scale: float = 0.5
    homogeneous_share: float = 0.3


def random_problem(seed: int, spec: Synthetic = Synthetic(), **options: object) -> AllocationProblem:
    """A random but well-formed problem: RNG ``seed``, sizes ``spec`` (:class:`Synthetic`); ``options`` are passed
    to ``AllocationProblem`` (objective, solver, builder, K, budget_per_hour, …)."""
    groups, templates_per_group, regions, shapes = spec.groups, spec.templates_per_group, spec.regions, spec.shapes
    classes_per_group, max_nodes, max_available = spec.classes_per_group, spec.max_nodes, spec.max_available
    demand_scale, homogeneous_share = spec.demand_scale, spec.homogeneous_share
    rng = np.random.default_rng(seed)
    n_gpu = max(1, min(shapes, 5))
    speed = rng.uniform(0.5, 3.0, n_gpu)
    per_gpu_price = speed * rng.uniform(0.6, 1.4, n_gpu)
    shape_names = []
    shape_speed = []
    shape_price = []
    for s in range(shapes):
        gpu = s % n_gpu
        count = _GPU_COUNTS[(s // n_gpu) % len(_GPU_COUNTS)]
        shape_names.append(f"{count}xg{gpu}")
        shape_speed.append(speed[gpu] * count * rng.uniform(0.85, 1.0))
        shape_price.append(per_gpu_price[gpu] * count)
    region_names = [f"cloud:r{r}" for r in range(regions)]
    offers = []
    for r, rn in enumerate(region_names):
        for s, sn in enumerate(shape_names):
            if regions > 1 and rng.random() < 0.15 and s > 0:
                continue  # some shapes not sold in some regions
            offers.append(Offer(rn, sn, float(shape_price[s] * (1 + 0.1 * r) * rng.uniform(0.95, 1.05)), int(rng.integers(0, max_available + 1))))
    tpls: list[TemplateOption] = []
    classes: list[WorkloadClass] = []
    for g in range(groups):
        gname = f"m{g}/{'prefill' if g % 2 == 0 else 'decode'}"
        cls_ids = [f"{gname}#{c}" for c in range(classes_per_group)]
        class_factor = rng.uniform(0.5, 1.5, (shapes, classes_per_group))
        caps = []
        for i in range(templates_per_group):
            if rng.random() < homogeneous_share:
                s = int(rng.integers(shapes))
                nodes = [s] * int(rng.integers(1, max_nodes + 1))
            else:
                nodes = list(rng.integers(0, shapes, int(rng.integers(1, max_nodes + 1))))
            usage: dict[str, int] = {}
            for s in nodes:
                usage[shape_names[s]] = usage.get(shape_names[s], 0) + 1
            eff = rng.uniform(0.6, 1.0) / (1 + 0.05 * (len(nodes) - 1))
            thr = {q: float(sum(shape_speed[s] * class_factor[s, c] for s in nodes) * eff) for c, q in enumerate(cls_ids)}
            if classes_per_group > 1 and rng.random() < 0.2:
                thr[cls_ids[int(rng.integers(classes_per_group))]] = 0.0  # cannot serve one class
            caps.append(sum(thr.values()))
            tpls.append(TemplateOption(f"{gname}@{i}", gname, usage, thr))
        total = demand_scale * float(np.mean(caps)) * max(1.0, templates_per_group ** 0.5)
        weights = rng.dirichlet(np.ones(classes_per_group))
        for c, q in enumerate(cls_ids):
            classes.append(WorkloadClass(q, gname, float(total * weights[c])))
    return AllocationProblem(tuple(tpls), tuple(offers), tuple(classes), **options)  # type: ignore[arg-type]
