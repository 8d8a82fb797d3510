"""The one list of baselines: per strategy its function, label, description, options and when it applies.

``base.run_baseline``/``baseline_names``/``run_all_baselines`` run from it, the Plan page's caption is written from
it (``planning.api.baseline_catalog``) and the timeline re-plans the entries marked ``per_epoch``. A new baseline is
one module with its function and one :class:`Baseline` entry here (docs/architecture.md, "Where to put a new
feature").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planning.allocate.problem import AllocationProblem
    from planning.baselines.base import BaselineResult


def _always(_problem: AllocationProblem) -> bool:
    return True


def _disaggregated(problem: AllocationProblem) -> bool:
    """Some model is planned in both phases (its prefill and decode groups are linked)."""
    return any(len(link) >= 2 for link in problem.links)


@dataclass(frozen=True)
class Baseline:
    """One baseline strategy.

    ``name`` is the result's name (``"single"`` stands for the family ``single:<gpu>``, one per GPU type of the
    problem); ``function`` is ``"module:function"``, imported on first use and called as
    ``function(problem, [gpu,] cancel=…, **options)``; ``options`` names the strategy options
    ``run_all_baselines`` passes on; ``applies(problem)`` says whether it runs for a problem; ``per_epoch``:
    the timeline re-plans it in every epoch (homogeneous, on the single-shape templates); ``single_types``: its
    answer reads no template of the problem with two GPU types (single-shape ⊂ single-GPU-type templates), so
    it can start before the allocation has chosen its candidates (``planning.baselines.beside.EarlyStart``).
    """

    name: str
    function: str
    label: str
    description: str
    options: tuple[str, ...] = ()
    applies: Callable[[AllocationProblem], bool] = _always
    per_epoch: bool = False
    single_types: bool = False

    def run(self, problem: AllocationProblem, *args: Any, **options: Any) -> BaselineResult:
        """Call the strategy's function (imported here, so the registry loads no solver)."""
        module, _, name = self.function.partition(":")
        fn: Callable[..., BaselineResult] = getattr(importlib.import_module(module), name)
        return fn(problem, *args, **options)


BASELINES: tuple[Baseline, ...] = (
    Baseline("homo", "planning.baselines.homo:homo_greedy", "Homo",
             "Coral's greedy baseline, each model in turn gets whole homogeneous replicas of its cheapest GPU type.",
             options=("order",), per_epoch=True, single_types=True),
    Baseline("homo-ilp", "planning.baselines.homo:homo_ilp", "Homo-ILP",
             "the same joint ILP as the plan, restricted to one GPU type per template.", per_epoch=True,
             single_types=True),
    Baseline("cauchy", "planning.baselines.cauchy:cauchy", "Cauchy",
             "per model the most cost-efficient GPU combos (one prefill replica feeding up to 16 decode replicas, "
             "each phase on one GPU configuration; Token/USD), deployed by an ILP (Coral's comparison).",
             applies=_disaggregated, single_types=True),
    Baseline("single", "planning.baselines.single_type:single_type", "single:GPU",
             "every model on that one GPU type only (Mélange's single-type comparison).", single_types=True),
    Baseline("memp", "planning.baselines.memp:memp", "memP",
             "LLMFabric's split of the GPU pool in proportion to each model's memory demand.",
             options=("model_size", "gpu_memory_gb", "request_rate")),
)
"""Every baseline, in the order a plan lists them."""

BY_NAME = {b.name: b for b in BASELINES}
PER_EPOCH = tuple(b.name for b in BASELINES if b.per_epoch)
"""The baselines the timeline re-plans epoch by epoch (``planning.timeline.TimelineOptions.baselines``)."""
REPLANNED_LABELS = {b.name: f"{b.label} (re-planned)" for b in BASELINES if b.per_epoch}
"""Their names in the timeline's method columns."""


def entry(name: str) -> Baseline | None:
    """The registry entry of a baseline name (``single:<gpu>`` → the ``single`` family), or None."""
    return BY_NAME.get(name.split(":", 1)[0] if name.startswith("single:") else name)


def caption() -> str:
    """One line per baseline, ``**label**: description`` (the Plan page's legend under its baselines chart)."""
    return " ".join(f"**{b.label}**: {b.description}" for b in BASELINES)
