"""The column-generation core of the on-demand engine: the LP over all templates, priced by a multiset search,
the reduced-cost fixing search and the Lagrangian group bounds (the orchestration, ILP and certificate loop are
in ``planning.allocate.ondemand``).

Sets: groups g (one demand class each; (model, phase, SLO)); multisets M of g's template space
(``planning.templates.search.MultisetSpace``: ≤ Nmax nodes, memory ≤ ρ·W, throughput T(M) > 0); regions r;
shapes k. Columns: pairs (M, r) with every shape of M sold in r.
Parameters: U[M, k] nodes; T(M) exact placement throughput; p[r, k] price; A[r, k] availability; D_g demand;
K init penalty; c[M, r] = (1 + K)·Σ_k U[M, k]·p[r, k] (nothing runs yet, so the penalty is K·p·ν at the optimum).

LP (the relaxation of ``planning.allocate.reduce``, columns generated instead of read from a library):
    min Σ c ν + big·Σ_g s_g
    availability[r, k]: Σ U[M, k] ν[M, r] ≤ A[r, k]                      (dual y_a ≤ 0)
    demand[g]:          Σ min(T(M), D_g) ν[M, r] + s_g ≥ D_g              (dual y_d ≥ 0)
    cardinality[g]:     Σ ν[M, r] + s_g ≥ n_g, n_g = ⌈D_g / T̄_g⌉          (dual y_n ≥ 0)
with T̄_g ≥ max_M T(M) (the search's bound; a weaker but valid cut than the library's exact max).
Pricing: rc(M, r) = Σ_k U[M, k]·(c_rk − y_a[r, k]) − y_d·min(T, D) − y_n; the per-region node weights
w[r, k] = (1 + K)p[r, k] − y_a[r, k] ≥ 0 feed ``MultisetSpace.search``, which returns every multiset whose
admissible bound is ≤ θ; exact placement decides. No column with rc < −tol left ⇒ LP optimal over all templates.

Fixing (as ``reduce.py``): for integer-feasible ν, cost(ν) ≥ z_LP + Σ rc·ν. The ILP runs over the multisets with
some pair of rc ≤ δ (the search with θ = δ lists all of them); every other column has rc > δ, so a plan of
cost ≤ z_LP + δ is optimal over all templates. Otherwise δ := cost − z_LP and the ILP is re-solved.
Not handled here (the caller falls back to the library): multi-class groups, aggregated mode, explicit
templates, running instances, the served objective.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from planning.allocate.knapcover import cover_ilp
from planning.allocate.pricers import LocalPricers, PriceCall, Priced, Pricers
from planning.allocate.subspace import seed_from_wider
from planning.allocate.tighter import seed_from_looser
from planning.catalog.schema import Catalog, ModelSpec, parse_shape
from planning.context import CancelToken, ProgressFn, check_cancel, time_left
from planning.groups import Group
from planning.resolve import ResolvedScenario
from planning.templates.search import MultisetSpace, SearchStats

if TYPE_CHECKING:
    from planning.perf import PerfModel

BIG_M_FACTOR = 1e4
SEED_PER_REGION = 24  # initial columns per group and region (best cost per throughput among single-shape templates)
ADD_PER_GROUP = 300  # most negative columns added per group and round
EVAL_BATCH = 4096  # candidates placed exactly per batch while pricing
MAX_ROUNDS = 300
TOL = 1e-7
COVER_ILP_LIMIT_S = 10.0  # per cover ILP of the group bounds; stopped early it still gives a valid bound
GROUP_THREADS = min(2, os.cpu_count() or 1)
"""Groups bounded at once by :func:`group_bounds` (threads: HiGHS frees the GIL in its solves, as in
``linked_cover.LINK_THREADS``); coral-extended's demand ×2: 0.64 → 0.37 s of wall on two quiet cores."""
CG_HALF_ROUNDS = 8  # progress of column generation: rounds / (rounds + 8), as the number of rounds is unknown


def supported(resolved: ResolvedScenario) -> bool:
    """Whether the on-demand engine handles this scenario (else the library path runs)."""
    scenario, groups = resolved.scenario, resolved.groups
    # a spot cap (S) is in the library path's LP reduction, not in this engine's priced search
    capped = scenario.spot.max_share < 1 and (scenario.spot.enabled or scenario.pricing == "spot")
    return (scenario.mode == "disaggregated" and scenario.objective.kind == "cost" and scenario.generate_templates
            and not scenario.explicit_templates and not scenario.current and not capped
            and all(len(g.classes) == 1 and g.phase in ("prefill", "decode") for g in groups))


@dataclass
class PricedGroup:
    """One group's search space and the multisets generated for it (padded rows, keyed by code)."""

    group: Group
    space: MultisetSpace
    demand: float
    t_bar: float
    pool: dict[int, np.ndarray]
    warm: np.ndarray | None = None  # padded multisets found by an earlier solve: initial columns in every region


    def pool_row(self, code: int) -> np.ndarray:
        """The padded row of a generated multiset."""
        return self.pool[code]


def node_mem_gb(catalog: Catalog, shape: str) -> float:
    count, gpu = parse_shape(shape)
    return float(catalog.gpus[gpu].memory_gb * count)


_SPACES: OrderedDict[tuple[object, ...], MultisetSpace] = OrderedDict()
_SPACES_LOCK = threading.Lock()
SPACE_CACHE_SIZE = 256  # (model, phase, SLO, sizes, shapes, caps) spaces kept with their exact placements


def build_space(perf: PerfModel, catalog: Catalog, spec: ModelSpec, group: Group, shapes: Sequence[str], nmax: int,
                rho: float, max_stages: int) -> MultisetSpace:
    """The template space of one single-class group (T̂ tables from the perf model).

    Spaces are kept per (model, phase, SLO, request sizes, shapes, Nmax, ρ, depth, perf fingerprint), so a what-if
    that changes only prices, availability or demand reuses every exact placement already made (incremental
    what-ifs); an SLO change recomputes only the groups it touches, a tighter one starting from the placements of
    the same space under a looser SLO that it provably keeps (``planning.allocate.tighter``); a what-if that drops
    shapes (a GPU type) starts from the placements of a kept space over more shapes (``planning.allocate.subspace``).
    """
    from planning.perf import Workload

    c = group.classes[0]
    fingerprint = perf.fingerprint() if hasattr(perf, "fingerprint") else id(perf)
    key = (spec.id, group.phase, float(group.slo_ms), float(c.input_len), float(c.output_len), tuple(shapes),
           int(nmax), float(rho), int(max_stages), fingerprint, spec.weight_bytes(), spec.layers)
    with _SPACES_LOCK:
        hit = _SPACES.get(key)
        if hit is not None:
            _SPACES.move_to_end(key)
            hit.stats = SearchStats()
            return hit
    tables = np.asarray(perf.stage_tables(spec, list(shapes), group.phase, group.slo_ms,
                                          Workload(input_len=c.input_len, output_len=c.output_len), max_stages))
    correct = None
    if group.phase == "decode":
        from planning.templates.sets import common_batch_corrector

        correct = common_batch_corrector(perf, spec, shapes, group.slo_ms, (c.input_len, c.output_len), max_stages,
                                         tables)
    space = MultisetSpace(tuple(shapes), np.array([node_mem_gb(catalog, s) for s in shapes]), tables,
                          spec.weight_bytes() / 1e9, spec.layers, nmax=nmax, rho=rho, correct=correct)
    with _SPACES_LOCK:
        # a space over fewer shapes (a dropped GPU type) starts with a wider one's exact placements (subspace.py)
        wider = [sp for k, sp in reversed(_SPACES.items()) if k[:5] + k[6:] == key[:5] + key[6:]]
        if not seed_from_wider(space, wider):
            # a tighter SLO (what-if or sweep point) keeps the placements whose entries are unchanged (tighter.py)
            seed_from_looser(space, [sp for k, sp in reversed(_SPACES.items())
                                     if k[:2] + k[3:] == key[:2] + key[3:] and float(k[2]) > group.slo_ms])  # type: ignore[arg-type]
        _SPACES[key] = space
        while len(_SPACES) > SPACE_CACHE_SIZE:
            _SPACES.popitem(last=False)
    return space


def _max_throughput_bound(space: MultisetSpace) -> float:
    """T̄ ≥ max_M T(M): Nmax copies of the largest additive bound v_k (shapes may repeat; valid, cheap)."""
    return float(space.v.max() * space.nmax) if space.v.size else 0.0


class ColumnLP:
    """The LP above in HiGHS, grown column by column."""

    def __init__(self, groups: Sequence[PricedGroup], prices: np.ndarray, available: np.ndarray, K: float) -> None:
        import highspy

        self.groups = groups
        self.R, self.K_shapes = prices.shape
        self.offered = ~np.isnan(prices)
        self.node_cost = np.where(self.offered, (1.0 + K) * np.nan_to_num(prices), np.inf)  # (R, K)
        self.n_avail = self.R * self.K_shapes
        G = len(groups)
        self.n_rows = self.n_avail + 2 * G
        self.n_min = [max(1.0, math.ceil(pg.demand / pg.t_bar - 1e-9)) if pg.t_bar > 0 else 1.0 for pg in groups]
        finite = self.node_cost[np.isfinite(self.node_cost)]
        self.max_cost = float(finite.max() * groups[0].space.nmax) if finite.size else 1.0
        self.big_m = BIG_M_FACTOR * max(self.max_cost, 1.0)
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        inf = highspy.kHighsInf
        lower = np.concatenate([np.full(self.n_avail, -inf), [pg.demand for pg in groups], self.n_min])
        self.available = available.reshape(-1).astype(float)
        upper = np.concatenate([self.available, np.full(2 * G, inf)])
        h.addRows(self.n_rows, lower, upper, 0, np.zeros(self.n_rows, dtype=np.int32), np.zeros(0, dtype=np.int32),
                  np.zeros(0))
        for gi in range(G):
            h.addCol(self.big_m, 0.0, inf, 2, np.array([self.n_avail + gi, self.n_avail + G + gi], dtype=np.int32),
                     np.array([1.0, self.n_min[gi]]))
        self.h = h
        self.inf = inf
        self.columns: set[tuple[int, int, int]] = set()  # (group, code, region)
        self.order: list[tuple[int, int, int]] = []  # the same keys in HiGHS column order (after G slack columns)

    def add(self, gi: int, P: np.ndarray, codes: np.ndarray, T: np.ndarray, regions: np.ndarray) -> int:
        """Add columns (multiset row i in region regions[i]); returns how many were new."""
        pg = self.groups[gi]
        G = len(self.groups)
        Kn = self.K_shapes
        new: list[int] = []
        for i, (c, r) in enumerate(zip(codes.tolist(), regions.tolist(), strict=True)):
            key = (gi, int(c), int(r))
            if key in self.columns:
                continue
            self.columns.add(key)
            self.order.append(key)
            new.append(i)
        n = len(new)
        if n:
            idx = np.asarray(new, dtype=np.int64)
            Pn, reg = P[idx], regions[idx].astype(np.int64)
            counts = np.zeros((n, Kn + 1))  # node counts per shape (column Kn: the padding)
            np.add.at(counts, (np.repeat(np.arange(n), Pn.shape[1]), Pn.reshape(-1)), 1.0)
            counts = counts[:, :Kn]
            costs = np.where(counts > 0, self.node_cost[reg], 0.0)
            costs = (costs * counts).sum(axis=1)  # inf where a node is not sold in the column's region
            # availability rows r·Kn + k (ascending k within a column), then the demand and count rows
            col, k = np.nonzero(counts)
            avail_rows = reg[col] * Kn + k
            extra_rows = np.stack([np.full(n, self.n_avail + gi), np.full(n, self.n_avail + G + gi)], axis=1)
            extra_vals = np.stack([np.minimum(T[idx], pg.demand).astype(float), np.ones(n)], axis=1)
            row_ix = np.concatenate([avail_rows, extra_rows.reshape(-1)])
            val = np.concatenate([counts[col, k], extra_vals.reshape(-1)])
            owner = np.concatenate([col, np.repeat(np.arange(n), 2)])
            order = np.argsort(owner, kind="stable")  # column-major: each column's availability rows, then its two
            ptr = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=n))]).astype(np.int32)
            self.h.addCols(n, costs.astype(float), np.zeros(n), np.full(n, self.inf), int(row_ix.size), ptr,
                           row_ix[order].astype(np.int32), val[order].astype(float))
        return n

    def best_columns(self, per_group: int) -> list[tuple[int, int, int]]:
        """The columns of the last LP solve in its support (value > 0), plus per group the ``per_group`` with the
        smallest reduced cost: a small master for a fast incumbent ILP (price-and-branch on a short list)."""
        sol = self.h.getSolution()
        G = len(self.groups)
        value = np.asarray(sol.col_value, dtype=float)[G:]
        rc = np.asarray(sol.col_dual, dtype=float)[G:]
        n = min(len(self.order), value.size)
        group = np.array([k[0] for k in self.order[:n]], dtype=np.int64)
        keep = value[:n] > 1e-9
        for gi in range(G):
            idx = np.flatnonzero(group == gi)
            keep[idx[np.argsort(rc[idx], kind="stable")[:per_group]]] = True
        return [self.order[i] for i in np.flatnonzero(keep)]

    def solve(self) -> tuple[float, bool, np.ndarray, np.ndarray, np.ndarray]:
        """(z_LP without slack cost, feasible, weights (G-independent) w[r, k], y_d per group, y_n per group)."""
        self.h.run()
        sol = self.h.getSolution()
        y = np.asarray(sol.row_dual, dtype=float)
        G = len(self.groups)
        y_a = np.minimum(y[: self.n_avail].reshape(self.R, self.K_shapes), 0.0)
        y_d = np.maximum(y[self.n_avail : self.n_avail + G], 0.0)
        y_n = np.maximum(y[self.n_avail + G :], 0.0)
        slack = np.asarray(sol.col_value, dtype=float)[:G]
        z = float(self.h.getInfo().objective_function_value) - self.big_m * float(slack.sum())
        feasible = bool((slack <= 1e-7 * max(1.0, max(pg.demand for pg in self.groups))).all())
        w = self.node_cost - y_a  # inf where not sold
        return z, feasible, w, y_d, y_n

    def shortfall(self, floors: np.ndarray) -> Shortfall:
        """After the last pricing round of a solve that left demand uncovered (``floors``: each group's floor
        under every column's reduced cost): whether that proves no plan exists, and the binding offers.

        Any plan that meets every demand is a point of this LP with no slack, and costs at most
        C = Σ_(r,k) (1 + K)·p[r, k]·A[r, k] (its nodes are within the availability). The LP over every template
        has optimum z* ≥ z + Σ_g min(0, floor_g)·Σ A (Farley: each column uses a node, so Σ ν ≤ Σ A). When that
        exceeds C, the slack cannot be zero at any point: no plan meets the demand. Unproven (the library path
        then decides) when some offered availability is unlimited or the margin is within tolerance."""
        sol = self.h.getSolution()
        G = len(self.groups)
        offered = self.offered.reshape(-1)
        cap = float(np.sum(self.node_cost.reshape(-1)[offered] * self.available[offered]))
        nodes = float(self.available[offered].sum())
        z = float(self.h.getInfo().objective_function_value) + float(np.minimum(floors, 0.0).sum()) * nodes
        proven = bool(np.isfinite(cap) and np.isfinite(z) and z > cap * (1 + 1e-6) + 1e-6)
        y_a = np.asarray(sol.row_dual, dtype=float)[: self.n_avail]
        with np.errstate(divide="ignore", invalid="ignore"):  # demand one more node would serve, per dollar
            worth = np.where(offered, -y_a / self.node_cost.reshape(-1), 0.0)
        binding = [int(i) for i in np.argsort(-worth, kind="stable") if offered[i] and y_a[i] < -TOL * self.big_m]
        short = tuple((i // self.K_shapes, i % self.K_shapes, float(self.available[i])) for i in binding)
        unserved = np.asarray(sol.col_value, dtype=float)[:G]
        return Shortfall(proven, tuple(float(u) for u in unserved), short)


def column_costs(space: MultisetSpace, P: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(m, R) Σ_{k∈M} w[r, k] for padded multisets (inf where some shape is not sold)."""
    wT = np.concatenate([w.T, np.zeros((1, w.shape[0]))])  # empty slot costs 0
    return wT[P].sum(axis=1)


def price(pg: PricedGroup, w: np.ndarray, y_d: float, y_n: float, theta: float, limit: int | None,
          per_region: bool = True, cancel: CancelToken | None = None,
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Columns with exact rc ≤ theta: (rows, codes, regions, rc, floor); at most ``limit`` most negative (None = all).

    Candidates are placed exactly in order of their bound; with a limit the scan stops once ``limit`` columns
    are found (a heuristic round), without one every candidate is placed (a proof round). ``floor`` ≤ the reduced
    cost of every column of the group with T > 0: the smallest exact reduced cost of the placed candidates, the
    search bound of the first candidate not placed (the list is sorted by bound), and theta (every non-candidate
    has rc > theta), whether or not the scan stopped early: the round's Farley bound uses it.
    """
    sp = pg.space
    P, lb = sp.search(w, y_d, y_n, pg.demand, theta, per_region=per_region)
    out_p, out_r, out_rc = [], [], []
    found = 0
    floor = float(theta)  # every non-candidate has rc > theta
    a = 0
    while a < P.shape[0]:
        check_cancel(cancel, "pricing search")
        chunk = P[a : a + EVAL_BATCH]
        a += chunk.shape[0]
        T = sp.throughput(chunk)
        with np.errstate(invalid="ignore"):
            rc = column_costs(sp, chunk, w) - y_d * np.minimum(T, pg.demand)[:, None] - y_n
        rc[T <= 0] = np.inf
        if rc.size:
            floor = min(floor, float(np.nanmin(rc)))  # placed candidates: their exact reduced costs
        i, r = np.nonzero(rc <= theta)
        out_p.append(chunk[i])
        out_r.append(r)
        out_rc.append(rc[i, r])
        found += i.size
        if limit is not None and found >= limit:
            break
    if a < P.shape[0]:  # stopped early: the candidates not placed are bounded by their search bounds (ascending)
        floor = min(floor, float(lb[a]))
    if not out_p:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros((0, sp.nmax), dtype=np.int64), empty, empty, np.zeros(0), floor
    Pn, rn, rcn = np.concatenate(out_p), np.concatenate(out_r), np.concatenate(out_rc)
    if limit is not None and rcn.size > limit:
        keep = np.argsort(rcn, kind="stable")[:limit]
        Pn, rn, rcn = Pn[keep], rn[keep], rcn[keep]
    return Pn, sp.codes(Pn), rn, rcn, floor


@dataclass(frozen=True)
class Shortfall:
    """Demand the LP over every template leaves uncovered (:meth:`ColumnLP.shortfall`): ``proven`` that no plan
    meets it, each group's uncovered demand and the binding offers (a negative availability dual), the most
    demand one more node would serve per dollar first, as (region index, shape index, nodes available)."""

    proven: bool
    unserved: tuple[float, ...]
    short: tuple[tuple[int, int, float], ...]


@dataclass
class PricingResult:
    """LP optimum over all templates and what it took."""

    z_lp: float
    feasible: bool
    rounds: int
    columns: int
    w: np.ndarray
    y_d: np.ndarray
    y_n: np.ndarray
    seconds: float
    z_lb: float = -math.inf  # Lagrangian bound (≥ z_lp; with the linked models' pairing), set by allocate_on_demand
    linked_gain: float = 0.0  # what the linked cover bounds added to Σ_g L_g + Σ y_a·A (``linked_cover``)
    linked_clock_stops: int = 0  # linked cover ILPs a wall clock stopped (``linked_cover.LINK_SAFETY_S``)
    shortfall: Shortfall | None = None  # when column generation converged with demand uncovered


def seed(pg: PricedGroup, node_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Initial columns: per region, the single-shape templates (n nodes of one shape, Homo's columns) with the best
    cost per throughput. Mixed node sizes of one GPU type come from pricing like every other column: seeding all
    single-GPU-type templates placed ~10x more multisets before the first LP (catalog-wide: first plan after
    1.77 vs 1.03 CPU-s, the same total)."""
    sp = pg.space
    rows = np.concatenate([sp.all_multisets(np.arange(sp.K) == k) for k in range(sp.K)])
    T = sp.throughput(rows)
    rows, T = rows[T > 0], T[T > 0]
    cost = column_costs(sp, rows, node_cost)
    ps, rs = [], []
    for r in range(cost.shape[1]):
        with np.errstate(divide="ignore"):  # a group with no demand (0 req/s) seeds nothing: every ratio is inf
            ratio = cost[:, r] / np.minimum(T, pg.demand)
        ok = np.flatnonzero(np.isfinite(ratio))
        top = ok[np.argsort(ratio[ok], kind="stable")[:SEED_PER_REGION]]
        ps.append(top)
        rs.append(np.full(top.size, r))
    idx, reg = np.concatenate(ps).astype(np.int64), np.concatenate(rs).astype(np.int64)
    return rows[idx], sp.codes(rows[idx]), reg, T[idx]


def warm_columns(pg: PricedGroup, node_cost: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Initial columns from ``pg.warm`` (a warm start: the columns an earlier solve of a neighbouring problem used,
    e.g. the epoch before), in every region that sells all their shapes. They only start the master: pricing still
    proves the LP optimal over all templates, so the answer is the cold start's (fewer rounds to reach it)."""
    sp = pg.space
    empty = (np.zeros((0, sp.nmax), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    if pg.warm is None or not len(pg.warm):
        return empty
    rows = np.asarray(pg.warm, dtype=np.int64)
    T = sp.throughput(rows)
    rows = rows[T > 0]
    if not len(rows):
        return empty
    T = T[T > 0]
    cost = column_costs(sp, rows, node_cost)
    idx, reg = np.nonzero(np.isfinite(cost))
    return rows[idx], sp.codes(rows[idx]), reg.astype(np.int64), T[idx]


@dataclass(frozen=True)
class RoundState:
    """What a column generation round knows, for ``solve_lp``'s ``on_round`` hook (anytime incumbents, bounds).

    ``stage`` is ``"lp"`` right after the restricted master LP (``floors`` None: not priced yet) or ``"priced"``
    after the round's searches (``floors[g]`` ≤ every reduced cost of group g, ``added`` new columns; no column
    added means the LP is optimal over all templates).
    """

    stage: str
    rounds: int
    lp: ColumnLP
    z: float
    feasible: bool
    floors: np.ndarray | None = None
    added: int = 0

    def farley_bound(self, upper: float) -> float:
        """A lower bound on the optimal plan's cost (−inf when none can be given; ``upper`` only gates it: no plan
        yet, no bound needed).

        For an integer plan ν (no slack) and the master's duals y: cost(ν) = Σ rc·ν + y·(Aν) ≥ Σ rc·ν + y·b, and
        y·b = z (the restricted master's optimum). Some optimal plan uses only columns of throughput T > 0 (they
        alone cover the demand, and the instance-count row n_g = ⌈D_g / T̄_g⌉ follows from that cover), and such a
        column of group g holds a node of some shape with v_k > 0 (T ≤ Σ v_k) and covers every layer, so it costs
        c_j ≥ c_g = max(the cheapest such node, L · min_k cost_k / J_k), J_k the most layers node k serves. With rc_j ≥ floor_g: rc_j ≥ r·c_j for r = min_g min(0, floor_g / c_g), so
        cost ≥ z + r·cost, i.e. cost ≥ z / (1 − r) (Farley's ratio bound, per group). The older form,
        z + min_g floor_g · upper / c_min, is never larger for plans of cost ≤ ``upper``: it puts every instance
        in the worst group at the cheapest node of any group.
        """
        if self.floors is None or not self.feasible or not math.isfinite(upper):
            return -math.inf
        cheapest = np.min(self.lp.node_cost, axis=0) if self.lp.node_cost.size else np.zeros(0)  # (K,), inf: unsold
        r = 0.0
        for pg, floor in zip(self.lp.groups, self.floors.tolist(), strict=True):
            if floor >= 0:
                continue
            sp = pg.space
            usable = cheapest[sp.v > 0]
            c_g = float(usable.min()) if usable.size else math.inf
            # a column with T > 0 covers all L layers with stages of j_b layers, each stage's nodes having
            # T̂_{j_b} > 0, so j_b ≤ J_k (the most layers node k serves at any S) and the column costs at least
            # L · min_k cost_k / J_k (a 70B model's column is not one T4)
            held: np.ndarray = np.any(np.asarray(sp.tables) > 0, axis=1)  # (K, L): node k serves j layers at some S
            J = np.where(held.any(axis=1), held.shape[1] - np.argmax(held[:, ::-1], axis=1), 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                per_layer = np.where(J > 0, cheapest / np.where(J > 0, J, 1), np.inf)
            if per_layer.size and np.isfinite(per_layer).any():
                c_g = max(c_g, sp.layers * float(per_layer[np.isfinite(per_layer)].min()))
            if not math.isfinite(c_g):
                continue  # no shape serves the group: it has no column with T > 0 (the LP would be infeasible)
            if c_g <= 0:
                return -math.inf
            r = min(r, floor / c_g)
        return self.z / (1.0 - r) if self.z >= 0 else -math.inf


@dataclass(frozen=True)
class LpRun:
    """How :func:`solve_lp` runs: ``cancel`` (checked every round), ``pricers`` (each round's searches; default
    here, in order; ``RayPricers``: as Ray actors), ``progress`` (:data:`planning.context.ProgressFn`: one
    ``pricing:`` message per round with the LP value; its fraction only grows, the number of rounds is not known
    in advance) and ``on_round`` (called after each master LP and after each round's searches with a
    :class:`RoundState`: the anytime incumbents and the Farley bounds of ``planning.allocate.ondemand`` hang there)."""

    cancel: CancelToken | None = None
    pricers: Pricers | None = None
    progress: ProgressFn | None = None
    on_round: Callable[[RoundState], None] | None = None


def solve_lp(groups: Sequence[PricedGroup], prices: np.ndarray, available: np.ndarray, K: float,
             per_region: bool = True, run: LpRun = LpRun()) -> tuple[PricingResult, ColumnLP]:
    """Column generation until no column of any group prices out (exact over all templates); ``run``: its
    cancel token, pricers, progress and per-round hook (:class:`LpRun`)."""
    cancel, progress, on_round = run.cancel, run.progress, run.on_round
    pricers = run.pricers if run.pricers is not None else LocalPricers(groups)
    t0 = time.perf_counter()
    lp = ColumnLP(groups, prices, available, K)
    for gi, pg in enumerate(groups):
        check_cancel(cancel, "pricing: seed columns")
        for P, codes, reg, T in (seed(pg, lp.node_cost), warm_columns(pg, lp.node_cost)):
            lp.add(gi, P, codes, T, reg)
            for c, row in zip(codes.tolist(), P, strict=True):
                pg.pool[c] = row
    tol = TOL * max(1.0, lp.max_cost)
    rounds = 0
    while True:
        rounds += 1
        check_cancel(cancel, f"pricing: column generation round {rounds}")
        z, feasible, w, y_d, y_n = lp.solve()
        if progress is not None:
            what = f"LP bound {z:,.2f} $/h" if feasible else "demand not yet covered"
            progress(rounds / (rounds + CG_HALF_ROUNDS), f"pricing: column generation round {rounds}, {what} "
                     f"({len(lp.columns):,} columns)")
        if on_round is not None:
            on_round(RoundState("lp", rounds, lp, z, feasible))
        added = 0
        calls = [PriceCall(gi, w, float(y_d[gi]), float(y_n[gi]), -tol, ADD_PER_GROUP, per_region)
                 for gi in range(len(groups))]
        floors = np.zeros(len(groups))
        for gi, (P, codes, reg, _rc, T, floor) in enumerate(pricers.price_all(calls, cancel)):
            floors[gi] = floor
            if P.shape[0]:
                added += lp.add(gi, P, codes, T, reg)
                for c, row in zip(codes.tolist(), P, strict=True):
                    groups[gi].pool[c] = row
        if on_round is not None:
            on_round(RoundState("priced", rounds, lp, z, feasible, floors, added))
        if added == 0 or rounds >= MAX_ROUNDS:
            break
    short = lp.shortfall(floors) if not feasible and added == 0 else None  # converged, demand uncovered
    res = PricingResult(z_lp=z, feasible=feasible and rounds < MAX_ROUNDS, rounds=rounds, columns=len(lp.columns),
                        w=w, y_d=y_d, y_n=y_n, seconds=time.perf_counter() - t0, shortfall=short)
    return res, lp


def fix(groups: Sequence[PricedGroup], pr: PricingResult, thetas: Sequence[float],
        per_region: bool = True, cancel: CancelToken | None = None, pricers: Pricers | None = None) -> list[np.ndarray]:
    """Per group the multisets with some pair of reduced cost ≤ θ_g (all of them: a proof round)."""
    pricers = pricers if pricers is not None else LocalPricers(groups)
    calls = [PriceCall(gi, pr.w, float(pr.y_d[gi]), float(pr.y_n[gi]), thetas[gi], None, per_region)
             for gi in range(len(groups))]
    out = []
    for pg, (P, _codes, _reg, _rc, _T, _floor) in zip(groups, pricers.price_all(calls, cancel), strict=True):
        if P.shape[0]:
            _, first = np.unique(pg.space.codes(P), return_index=True)
            P = P[np.sort(first)]
        out.append(P)
    return out


def own_spaces(groups: Sequence[PricedGroup]) -> bool:
    """Whether no search space is shared by two of ``groups``: then each may be searched and bounded in a thread
    of its own (``group_bounds``, ``linked_cover.linked_bounds``), its placements cached in its space alone."""
    ids = [id(pg.space) for pg in groups]
    return len(set(ids)) == len(ids)


def group_bounds(groups: Sequence[PricedGroup], pr: PricingResult, seeds: Sequence[tuple[np.ndarray, np.ndarray]],
                 per_region: bool = True, cancel: CancelToken | None = None, pricers: Pricers | None = None) -> np.ndarray:
    """L_g ≤ min cost of an integer cover of D_g at the Lagrangian prices w (availability relaxed).

    A column of rc(M, r) can appear in a cover of cost ≤ U only if rc ≤ U − y_d·D − y_n (module docstring), so
    the search with that threshold lists every multiset a cover of cost ≤ U may use; the cover ILP over them
    (cost min_r W_r(M)) then gives L_g (its dual bound). U is the cover ILP's value over ``seeds``. Each cover ILP
    gets at most the time left on ``cancel``'s deadline (a cover ILP stopped early still gives a valid dual bound);
    the deadline itself is checked between the steps. With the searches in this process (``LocalPricers``) and
    no space shared by two groups, the groups are bounded :data:`GROUP_THREADS` at a time: each group's steps
    read only its own space, so the bounds are those of one group after another.
    """
    pricers = pricers if pricers is not None else LocalPricers(groups)

    def upper(gi: int) -> float:  # an integer cover from the LP's columns: U_g
        check_cancel(cancel, "on-demand allocation: group bounds")
        P0, T0 = seeds[gi]
        cost0 = column_costs(groups[gi].space, P0, pr.w).min(axis=1)
        ok = np.isfinite(cost0) & (T0 > 0)
        return cover_ilp(cost0[ok], T0[ok], groups[gi].demand, time_left(cancel, COVER_ILP_LIMIT_S))[0]

    def call(gi: int, u: float) -> PriceCall:  # every multiset a cover of cost ≤ U_g may use
        y_d, y_n = float(pr.y_d[gi]), float(pr.y_n[gi])
        theta = u - y_d * groups[gi].demand - y_n
        return PriceCall(gi, pr.w, y_d, y_n, theta * (1 + 1e-9) + 1e-9, None, per_region)

    def bound(gi: int, found: Priced, u: float) -> float:
        check_cancel(cancel, "on-demand allocation: group bounds")
        pg, (P, _codes, _reg, _rc, T, _floor) = groups[gi], found
        if P.shape[0]:
            _, first = np.unique(pg.space.codes(P), return_index=True)
            P, T = P[first], T[first]
        cost = column_costs(pg.space, P, pr.w).min(axis=1)
        _value, b = cover_ilp(cost, T, pg.demand, time_left(cancel, COVER_ILP_LIMIT_S))
        return min(b, u)

    def alone(gi: int) -> float:
        u = upper(gi)
        return bound(gi, pricers.price_all([call(gi, u)], cancel)[0], u)

    if GROUP_THREADS > 1 and isinstance(pricers, LocalPricers) and len(groups) > 1 and own_spaces(groups):
        with ThreadPoolExecutor(GROUP_THREADS, thread_name_prefix="group-bound") as pool:
            return np.array(list(pool.map(alone, range(len(groups)))), dtype=float)
    uppers = [upper(gi) for gi in range(len(groups))]  # the searches in one fan-out (Ray: every actor at once)
    found = pricers.price_all([call(gi, u) for gi, u in enumerate(uppers)], cancel)
    return np.array([bound(gi, f, u) for gi, (f, u) in enumerate(zip(found, uppers, strict=True))], dtype=float)
