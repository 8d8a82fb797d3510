"""KV-pressure-ratio placement (Prism Sec. 6.2, Alg. 1) and the exact min-max-KVPR placement it is checked against.

Formulation (Prism Sec. 6.2, App. A.1)
--------------------------------------
Sets: models k ∈ M (a model with tensor parallelism ``tp`` is ``tp`` parts, each with 1/tp of its weight
and rate, on distinct GPUs); GPUs i ∈ {1..N}, identical, with memory C.
Parameters: d_k = r_k / s_k, the SLO-weighted request rate (requests/s over the TTFT SLO in s); w_k, the
memory of its weights.
Variables: x_{k,i} ∈ {0,1}, part k on GPU i; Σ_i x_{k,i} = 1; parts of one model on distinct GPUs.
KV memory left on GPU i: S_i = C − Σ_k w_k x_{k,i} (must stay > 0). Pressure: KVPR_i = Σ_k d_k x_{k,i} / S_i.
Objective: minimise max_i KVPR_i (KVPR_OPT).

Alg. 1 (the heuristic): sort parts by d_k descending; give each to the GPU of least current KVPR (that has room
for its weights; for a TP part, not one holding another part of the same model: then the next lowest); a
model keeps its current GPU unless the best one is better by more than the migration threshold τ.
App. A.1 bound: with g_max the GPU of the largest final KVPR and m_k the last part put on it,
KVPR_max ≤ KVPR_OPT · (1 + C / (S_before − w_k)) where S_before − w_k is g_max's final KV memory.

The exact placement enumerates set partitions of the parts into at most N blocks (GPUs are identical), so it
is meant for small instances (≤ 10 parts); it is the oracle the heuristic is measured against.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from planning.errors import PlanningError


@dataclass(frozen=True)
class KvprModel:
    """One model to place: its id, SLO-weighted rate d = rate/SLO, weight memory w and tensor-parallel degree."""

    id: str
    weighted_rate: float
    weight: float
    tp: int = 1


@dataclass(frozen=True)
class Part:
    """One placement entry: a model, or one tensor-parallel part of it (1/tp of its weight and rate)."""

    model: str
    index: int
    weighted_rate: float
    weight: float


@dataclass(frozen=True)
class KvprPlacement:
    """GPU of every part (``gpu_of[j]`` for ``parts[j]``), each GPU's KVPR and the maximum; ``bound`` is the
    App. A.1 bound factor (1 + C / final KV memory of the worst GPU) for the heuristic, 1.0 for the exact one."""

    parts: tuple[Part, ...]
    gpu_of: tuple[int, ...]
    kvpr: tuple[float, ...]
    max_kvpr: float
    bound_factor: float
    method: str

    def models_on(self, gpu: int) -> tuple[str, ...]:
        return tuple(p.model for p, g in zip(self.parts, self.gpu_of, strict=True) if g == gpu)


def split_parts(models: Sequence[KvprModel]) -> tuple[Part, ...]:
    """Placement entries: one per model, ``tp`` equal parts for a tensor-parallel model (App. A.1.2).

    Raises
    ------
    PlanningError
        A negative rate or weight, or tp < 1.
    """
    parts: list[Part] = []
    for i, m in enumerate(models):
        if m.weighted_rate < 0 or m.weight < 0 or not (math.isfinite(m.weighted_rate) and math.isfinite(m.weight)):
            raise PlanningError(f"models[{i}]", f"{m.id}: rate {m.weighted_rate} and weight {m.weight} must be ≥ 0.",
                                "give finite non-negative numbers.")
        if m.tp < 1:
            raise PlanningError(f"models[{i}].tp", f"is {m.tp}.", "use tp ≥ 1.")
        for j in range(m.tp):
            parts.append(Part(m.id, j, m.weighted_rate / m.tp, m.weight / m.tp))
    return tuple(parts)


def _ratio(w_rate: float, kv: float) -> float:
    if kv <= 0:
        return math.inf
    return w_rate / kv


def kvpr_placement(models: Sequence[KvprModel], n_gpus: int, capacity: float, *, tau: float = 0.0,
                   current: dict[str, int] | None = None) -> KvprPlacement:
    """Prism's Alg. 1: place models on ``n_gpus`` identical GPUs of memory ``capacity`` by least KVPR.

    Parameters
    ----------
    models:
        Models with SLO-weighted rate (req/s per s of SLO), weight memory (same unit as ``capacity``), tp.
    n_gpus, capacity:
        Number of GPUs and memory of each.
    tau:
        Migration threshold: a model with a ``current`` GPU moves only when the best GPU's KVPR is lower by
        more than ``tau`` (Alg. 1 line 8).
    current:
        Current GPU of some models (model id → GPU index); TP models are not migrated part by part.

    Returns
    -------
    KvprPlacement with ``method="kvpr"``.

    Raises
    ------
    PlanningError
        ``n_gpus`` < 1, a TP degree above ``n_gpus``, or a part whose weights fit on no GPU.
    """
    if n_gpus < 1:
        raise PlanningError("n_gpus", f"is {n_gpus}.", "use at least one GPU.")
    parts = split_parts(models)
    tps = {m.id: m.tp for m in models}
    for m in models:
        if m.tp > n_gpus:
            raise PlanningError("n_gpus", f"{m.id} needs {m.tp} distinct GPUs for its TP parts; only {n_gpus}.",
                                f"use at least {m.tp} GPUs.")
    order = sorted(range(len(parts)), key=lambda j: (-parts[j].weighted_rate, parts[j].model, parts[j].index))
    w_rate = [0.0] * n_gpus
    kv = [float(capacity)] * n_gpus
    holds: list[set[str]] = [set() for _ in range(n_gpus)]
    gpu_of = [-1] * len(parts)
    last_on = [-1] * n_gpus  # index of the last part put on each GPU (for the App. A.1 bound)
    before = [float(capacity)] * n_gpus
    for j in order:
        p = parts[j]
        ranked = sorted(range(n_gpus), key=lambda i: (_ratio(w_rate[i], kv[i]), i))
        candidates = [i for i in ranked if kv[i] > p.weight]
        if tps[p.model] > 1:  # App. A.1.2: parts of one TP model on distinct GPUs (next-lowest KVPR instead)
            candidates = [i for i in candidates if p.model not in holds[i]]
        if not candidates:
            raise PlanningError("models", f"{p.model} (weights {p.weight:g}) fits on no GPU left "
                                f"({n_gpus} GPUs of {capacity:g}).", "add GPUs or larger GPUs.")
        best = candidates[0]
        cur = (current or {}).get(p.model)
        stays = cur is not None and tps[p.model] == 1 and 0 <= cur < n_gpus and kv[cur] > p.weight
        if stays and cur is not None and not _ratio(w_rate[cur], kv[cur]) - _ratio(w_rate[best], kv[best]) > tau:
            best = cur
        gpu_of[j] = best
        before[best] = kv[best]
        last_on[best] = j
        w_rate[best] += p.weighted_rate
        kv[best] -= p.weight
        holds[best].add(p.model)
    ratios = tuple(_ratio(w_rate[i], kv[i]) for i in range(n_gpus))
    worst = max(range(n_gpus), key=lambda i: (ratios[i], -i))
    factor = 1.0 + capacity / kv[worst] if kv[worst] > 0 else math.inf
    return KvprPlacement(parts, tuple(gpu_of), ratios, max(ratios), factor, "kvpr")


def kvpr_partitions(n: int, blocks: int) -> Iterator[list[int]]:
    """Restricted growth strings: every partition of n items into at most ``blocks`` unlabeled blocks."""
    labels = [0] * n

    def rec(i: int, used: int) -> Iterator[list[int]]:
        if i == n:
            yield labels
            return
        for b in range(min(used + 1, blocks)):
            labels[i] = b
            yield from rec(i + 1, max(used, b + 1))

    if n == 0:
        yield []
        return
    yield from rec(0, 0)


EXACT_MAX_PARTS = 12


def exact_kvpr_placement(models: Sequence[KvprModel], n_gpus: int, capacity: float) -> KvprPlacement:
    """The min-max-KVPR placement by enumerating set partitions (GPUs are identical): the oracle for Alg. 1.

    Returns
    -------
    KvprPlacement with ``method="exact"`` (``max_kvpr`` = KVPR_OPT; inf when no placement fits).

    Raises
    ------
    PlanningError
        More than ``EXACT_MAX_PARTS`` parts (the enumeration is exponential) or ``n_gpus`` < 1.
    """
    if n_gpus < 1:
        raise PlanningError("n_gpus", f"is {n_gpus}.", "use at least one GPU.")
    parts = split_parts(models)
    if len(parts) > EXACT_MAX_PARTS:
        raise PlanningError("models", f"{len(parts)} parts; the exact placement enumerates partitions.",
                            f"use at most {EXACT_MAX_PARTS} parts, or the kvpr heuristic.")
    best_val, best_labels = math.inf, [0] * len(parts)
    for labels in kvpr_partitions(len(parts), n_gpus):
        wr = [0.0] * n_gpus
        kv = [float(capacity)] * n_gpus
        seen: list[set[str]] = [set() for _ in range(n_gpus)]
        ok = True
        for p, b in zip(parts, labels, strict=True):
            if p.model in seen[b]:
                ok = False
                break
            seen[b].add(p.model)
            wr[b] += p.weighted_rate
            kv[b] -= p.weight
        if not ok or min(kv) <= 0:
            continue
        val = max(_ratio(wr[i], kv[i]) for i in range(n_gpus))
        if val < best_val - 1e-15:
            best_val, best_labels = val, list(labels)
    wr = [0.0] * n_gpus
    kv = [float(capacity)] * n_gpus
    for p, b in zip(parts, best_labels, strict=True):
        wr[b] += p.weighted_rate
        kv[b] -= p.weight
    ratios = tuple(_ratio(wr[i], kv[i]) for i in range(n_gpus)) if math.isfinite(best_val) else (math.inf,) * n_gpus
    return KvprPlacement(parts, tuple(best_labels), ratios, best_val, 1.0, "exact")
