"""The template sets the on-demand engine hands out (``planning.allocate.ondemand``): a set of given multisets of
a group's space, and the single-GPU-type sets every baseline but memP reads (the pipeline starts those baselines
on them beside the allocation, ``planning.baselines.beside.EarlyStart``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import polars as pl

from planning.allocate.pricing import PricedGroup
from planning.catalog.schema import shape_gpu
from planning.context import CancelToken
from planning.templates.sets import TemplateSet


def template_set(pg: PricedGroup, P: np.ndarray, provenance: Callable[[str], str] | None = None) -> TemplateSet:
    """A ``TemplateSet`` of the given multisets (library rows, sorted by id); ``provenance(gpu)`` labels rows."""
    return frame_set(pg, pg.space.frame(P), provenance)


def frame_set(pg: PricedGroup, frame: pl.DataFrame, provenance: Callable[[str], str] | None) -> TemplateSet:
    """The ``TemplateSet`` of library rows ``frame`` (:meth:`MultisetSpace.frame`) of ``pg``'s space."""
    from planning.templates.sets import usage_matrix

    sp = pg.space
    shapes = list(sp.shapes)
    usage = usage_matrix(frame, shapes)
    rank = {"measured": 0, "calibrated": 1, "given": 0, "roofline": 2}
    names = ["measured", "calibrated", "roofline"]
    shape_rank = np.array([rank.get(provenance(shape_gpu(s)) if provenance else "roofline", 2) for s in shapes])
    worst = np.where(usage > 0, shape_rank[None, :], -1).max(axis=1) if usage.size else np.zeros(0, dtype=int)
    return TemplateSet(pg.group, tuple(shapes), tuple(frame["template_id"].to_list()), usage,
                       frame["throughput"].to_numpy().reshape(-1, 1), tuple(frame["stages_json"].to_list()),
                       tuple(names[int(r)] for r in worst), stage_tables=sp.tables)


def single_type_multisets(pg: PricedGroup) -> np.ndarray:
    """Every multiset of ``pg``'s space whose nodes are all of one GPU type (padded rows, one GPU type after
    another): the rows every fixing ILP carries for the baselines (:func:`_fixed_sets`)."""
    gp = np.array([shape_gpu(s) for s in pg.space.shapes])
    return np.concatenate([pg.space.all_multisets(gp == g) for g in sorted(set(gp.tolist()))])


@dataclass(frozen=True)
class SingleRows:
    """Where the single-GPU-type sets of a solve with baselines go: ``start`` receives them (the pipeline starts
    the baselines that read only those); their placements may run on ``pool`` beside this process (the baselines'
    processes, idle until these sets exist; ``planning.templates.placing``), None: here alone."""

    start: Callable[[list[TemplateSet]], None]
    pool: Executor | None = None


def single_type_sets(priced: Sequence[PricedGroup], provenance: Callable[[str], str] | None = None,
                     pool: Executor | None = None, cancel: CancelToken | None = None) -> list[TemplateSet]:
    """Per group, the template set of its single-GPU-type multisets (:func:`single_type_multisets`), rows sorted
    by id as in the fixing ILP's sets: what every baseline but memP reads of a solve's baseline problem, known
    once the groups' spaces exist, before any pricing (the pipeline starts those baselines on it beside the
    allocation, ``planning.baselines.beside.EarlyStart``). The exact placements it computes are the ones the
    first fixing attempt would compute: the spaces keep them, so that attempt reuses them. They run on ``pool``
    and here (:func:`planning.templates.placing.place_beside`: the same placements as here alone)."""
    from planning.templates.placing import place_beside

    rows = [single_type_multisets(pg) for pg in priced]
    place_beside([(pg.space, P) for pg, P in zip(priced, rows, strict=True)], pool, cancel)
    return [template_set(pg, P, provenance) for pg, P in zip(priced, rows, strict=True)]
