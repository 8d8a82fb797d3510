"""Serving Template library for one (model, phase, SLO): enumerate node multisets, place each exactly, cache.

Sets: shapes k = 1..K; templates = multisets of shapes with 1..Nmax nodes and total GPU memory ≤ ρ · weights.
Parameters: tables[k, S-1, j-1] = T̂_j of one node of shape k holding j layers with S stages (perf model).
Per template: the exact placement of ``planning.templates.exact`` (node k's row = its shape's table); templates
with throughput 0 (cannot hold the model) are dropped.

Vectorized engine (tables non-increasing in j, checked per call; otherwise every template goes through
``solve_exact`` one by one). Templates are grouped by *pattern* — the sorted multiplicities, e.g. (2, 1, 1) —
because all templates of a pattern share the same multiset partitions. For a chunk of templates of one pattern:
  1. S = 1: value c_M(L) (pooled formula with one block).
  2. For S ≥ 2, a partition-free upper bound UB_S = min(Σ_k A_k / L, Σ_k thr_k(1) / S) with
     A_k = max_j j · thr_k(j) (from T ≤ c_b(j_b) ≤ A_b / j_b summed over stages, and S·T ≤ Σ_b c_b(1));
     templates with UB_S ≤ incumbent skip S entirely.
  3. Block curves for every distinct block (sub-multiset) are built incrementally (one row add each); the
     counts J_b = #{j : c_b(j) > incumbent} give the test "Σ_b J_b ≥ L and min_b c_b(1) > incumbent", which
     every partition able to beat the incumbent passes; only passing (template, partition) pairs get the exact
     pooled L-th-largest evaluation. Chunks are independent, so a process pool returns the serial result.

Rooms: ``enumeration`` (multisets by pattern), ``chunks`` (the chunk solver), ``pool`` (process pool),
``cache`` (content key, Parquet), ``frame`` (polars assembly); this module checks inputs and drives the build.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from planning.context import CancelToken, ProgressFn, check_cancel
from planning.errors import PlanningError
from planning.parallel import resolve_backend, run_tasks
from planning.templates.cache import ALGORITHM_VERSION, LibraryCache, Notice, library_key
from planning.templates.chunks import ChunkResult, solve_chunk_general, solve_chunk_monotone
from planning.templates.enumeration import is_monotone, multisets_by_pattern
from planning.templates.frame import SCHEMA, assemble
from planning.templates.partitions import Block
from planning.templates.pool import shared_pool, solve_batch, solve_task

__all__ = [
    "ALGORITHM_VERSION",
    "SCHEMA",
    "LibraryCache",
    "LibraryRun",
    "build_library",
    "library_key",
    "multisets_by_pattern",
    "solve_chunk_general",
    "solve_chunk_monotone",
]

POOL_MIN_TEMPLATES = 20_000  # below this a process pool costs more to start than it saves
CHUNK_ROWS = 128  # small chunks keep the block curves in cache (measured: 128 ≈ 1.6× faster than 512)


def _validate(
    shapes: list[str],
    mem: np.ndarray,
    tables: np.ndarray,
    weight_gb: float,
    layers: int,
    nmax: int,
    rho: float,
) -> None:
    K = len(shapes)
    if K == 0:
        raise PlanningError("shapes", "is empty.", "give at least one node shape, e.g. '1xL40S'.")
    if len(set(shapes)) != K:
        raise PlanningError("shapes", "contains duplicates.", "list each shape once.")
    if mem.shape != (K,):
        raise PlanningError(
            "shape_mem_gb", f"needs {K} entries (one per shape), got {mem.shape}.", "align with shapes."
        )
    if tables.ndim != 3 or tables.shape[0] != K or tables.shape[2] != layers or tables.shape[1] < 1:
        raise PlanningError(
            "tables",
            f"must have shape (K={K}, S_max, L={layers}), got {tables.shape}.",
            "use PerfModel.stage_tables.",
        )
    if not np.all(np.isfinite(tables)) or np.any(tables < 0):
        raise PlanningError("tables", "must be finite and ≥ 0.", "use 0 for 'cannot hold'.")
    if not weight_gb > 0:
        raise PlanningError(
            "weight_gb", f"must be > 0, got {weight_gb}.", "give the model's weight size in GB."
        )
    if layers < 1:
        raise PlanningError("layers", f"must be ≥ 1, got {layers}.", "give the model's layer count.")
    if nmax < 1:
        raise PlanningError("nmax", f"must be ≥ 1, got {nmax}.", "Coral uses Nmax = 6.")
    if not rho > 0:
        raise PlanningError("rho", f"must be > 0, got {rho}.", "Coral uses ρ = 12.")


@dataclass(frozen=True)
class LibraryRun:
    """How a library build runs (not what it holds, except ``single_shape``).

    progress:
        The project's progress callback (:data:`planning.context.ProgressFn`): ``progress(done / total,
        "{done:,} of {total:,} templates")``, before the first chunk and after each one.
    cancel:
        A :class:`planning.context.CancelToken` (e.g. ``threading.Event``); checked between chunks.
    workers:
        > 1 solves chunks in a process pool; the output is identical to the serial run.
    cache, key:
        With a cache, the library is loaded if present and it passes the cache's checks (key defaults to
        ``library_key`` of the inputs); a damaged or foreign file is discarded and the library rebuilt.
    backend:
        Where the chunks run when ``workers`` > 1: ``"process"`` (the embedded pool) or ``"ray"``
        (``planning.parallel``); same output either way.
    single_shape:
        Only the templates of one node shape (n nodes of the same shape, Homo's templates): the small library
        an anytime solve plans with first (``planning.templates.sets.quick_template_sets``).
    notice:
        ``notice(line)`` for a cache file that was discarded or could not be written (one sentence each);
        the line also goes to ``progress`` so a running job shows it.
    """

    progress: ProgressFn | None = None
    cancel: CancelToken | None = None
    workers: int = 1
    cache: LibraryCache | None = None
    key: str | None = None
    backend: str | None = None
    single_shape: bool = False
    notice: Notice | None = None

    def told(self, line: str) -> None:
        """A cache notice, to ``notice`` and to ``progress``."""
        if self.notice is not None:
            self.notice(line)
        if self.progress is not None:
            self.progress(0.0, line)


def build_library(
    shapes: list[str],
    shape_mem_gb: npt.ArrayLike,
    tables: npt.ArrayLike,
    weight_gb: float,
    layers: int,
    nmax: int = 6,
    rho: float = 12.0,
    run: LibraryRun | None = None,
) -> pl.DataFrame:
    """Serving Template library of one (model, phase, SLO).

    Parameters
    ----------
    shapes:
        Candidate node shapes (``"2xL40S"``), K of them.
    shape_mem_gb:
        GPU memory per node of each shape (GB), length K.
    tables:
        ``(K, S_max, L)`` stage tables: ``tables[k, S-1, j-1]`` = throughput of one node of shape k holding j
        layers with S stages.
    weight_gb:
        Model weight size (GB); the memory cap is ``rho * weight_gb``.
    layers:
        Number of layers L.
    nmax, rho:
        Coral's pruning: at most ``nmax`` nodes, total memory ≤ ``rho`` × weights.
    run:
        Progress, cancel, workers, backend, cache and its notices, ``single_shape`` (:class:`LibraryRun`).

    Returns
    -------
    polars.DataFrame
        One row per template with throughput > 0, sorted by ``template_id`` (columns in ``SCHEMA``):
        ``template_id`` like ``"3x1xL4+1x2xL40S"`` (parts sorted by shape key), ``shapes``/``counts`` (long
        layout: parallel lists), ``n_nodes``, ``n_gpus``, ``n_gpu_types``, ``single_gpu_type``,
        ``mem_gb``, ``throughput``, ``S``, ``stages_json`` (pipeline order: ``[{"layers": j, "shapes": [...]}]``).

    Raises
    ------
    PlanningError
        On inconsistent inputs.
    Cancelled
        When ``run.cancel`` is set.
    """
    run = run or LibraryRun()
    shapes = list(shapes)
    mem = np.asarray(shape_mem_gb, dtype=float)
    tab = np.asarray(tables, dtype=float)
    _validate(shapes, mem, tab, float(weight_gb), int(layers), int(nmax), float(rho))
    key = run.key
    if run.cache is not None:
        key = key or library_key(shapes, mem, tab, weight_gb, layers, nmax, rho,
                                 "single-shape" if run.single_shape else "")
        hit = run.cache.load(key, run.told)
        if hit is not None:
            return hit
    L = int(layers)
    monotone = is_monotone(tab)
    cap = float(rho) * float(weight_gb) * (1 + 1e-12)
    tasks = _chunk_tasks(mem, tab, L, int(nmax), cap, monotone, run.single_shape)
    results = _solve_tasks(tasks, tab, L, monotone, run)
    df = assemble(shapes, mem, tasks, results)
    if run.cache is not None and key is not None:
        run.cache.store(key, df, run.told)
    return df


def _chunk_tasks(mem: np.ndarray, tab: np.ndarray, L: int, nmax: int, cap: float, monotone: bool,
                 single_shape: bool) -> list[tuple[Block, np.ndarray]]:
    """The node multisets worth placing, as (pattern, rows) chunks of at most ``CHUNK_ROWS``: within the memory
    cap and (monotone tables) able to hold all ``L`` layers with some stage count."""
    depth = tab.shape[1]
    jmax = (tab > 0).sum(axis=2)  # layers a node can hold, per (shape, S) (monotone: a prefix)
    tasks: list[tuple[Block, np.ndarray]] = []
    for pattern, ids in multisets_by_pattern(len(mem), nmax).items():
        if single_shape and len(pattern) != 1:
            continue
        cnt = np.asarray(pattern)
        keep = (mem[ids] * cnt).sum(axis=1) <= cap
        if monotone:  # a necessary condition for throughput > 0 with some S
            s_top = min(sum(pattern), L, depth)
            reach = (jmax[ids, :s_top] * cnt[:, None]).sum(axis=1) >= L
            keep &= reach.any(axis=1)
        sel = ids[keep]
        for start in range(0, sel.shape[0], CHUNK_ROWS):
            tasks.append((pattern, sel[start : start + CHUNK_ROWS]))
    return tasks


def _solve_tasks(tasks: list[tuple[Block, np.ndarray]], tab: np.ndarray, L: int, monotone: bool,
                 run: LibraryRun) -> list[ChunkResult | None]:
    """Every chunk's placements, in task order: serially, or in ~16 batches per worker on the process pool or
    Ray (the same result); progress after each chunk or batch, cancel checked between them."""
    progress, cancel, workers, backend = run.progress, run.cancel, run.workers, run.backend
    total = sum(t[1].shape[0] for t in tasks)
    results: list[ChunkResult | None] = [None] * len(tasks)
    done = 0

    def report() -> None:
        if progress is not None:
            progress(done / total if total else 1.0, f"{done:,} of {total:,} templates")

    report()
    if workers <= 1 or total < POOL_MIN_TEMPLATES:
        for i, (pattern, ids) in enumerate(tasks):
            check_cancel(cancel, "library build")
            results[i] = solve_task((pattern, ids, tab, L, monotone))
            done += ids.shape[0]
            report()
        return results
    # ~16 batches per worker: one pickle of the tables per batch (not per 128-row chunk), and still small
    # enough for progress and for cancel to take effect within a few seconds.
    n_batches = min(len(tasks), workers * 16)
    bounds = [(int(a), int(b)) for a, b in itertools.pairwise(np.linspace(0, len(tasks), n_batches + 1).astype(int))
              if b > a]

    def landed(i: int, batch: list[ChunkResult]) -> None:
        nonlocal done
        a, b = bounds[i]
        results[a:b] = batch
        done += sum(t[1].shape[0] for t in tasks[a:b])
        report()

    run_tasks(solve_batch, [(tab, L, monotone, tasks[a:b]) for a, b in bounds], backend=backend,
              workers=workers, cancel=cancel, on_result=landed, what="library build",
              pool=None if resolve_backend(backend) == "ray" else shared_pool(workers))
    return results
