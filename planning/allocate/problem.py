"""Solver-agnostic inputs and outputs of the allocation model (templates, offers, classes, result)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from planning.catalog.schema import parse_shape
from planning.context import CancelToken
from planning.errors import PlanningError, quote

Objective = Literal["cost", "served"]
SolverName = Literal["highs", "cbc"]
BuilderName = Literal["auto", "pulp", "matrix"]
Status = Literal["optimal", "feasible", "infeasible", "time_limit", "error"]



@dataclass(frozen=True)
class TemplateOption:
    """One serving template of one (model, phase) group, region-independent.

    ``usage`` maps shape -> node count (Coral's U_c(τ)); ``throughput`` maps workload-class id -> throughput
    of one instance when it serves only that class (units of that class's rate; a missing class = 0, cannot
    serve). ``single_shape`` defaults to "uses one node shape" (Coral's Homo); ``gpu_types`` defaults to the GPU ids of its shapes.
    """

    id: str
    group: str
    usage: Mapping[str, int]
    throughput: Mapping[str, float]
    single_shape: bool | None = None
    gpu_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        usage = {str(s): int(n) for s, n in self.usage.items() if int(n) != 0}
        if not usage:
            raise PlanningError(f"templates[{self.id}].usage", "the template uses no nodes.", "Give at least one shape with a positive count.")
        for shape, n in usage.items():
            if n < 0:
                raise PlanningError(f"templates[{self.id}].usage[{shape}]", f"negative node count {n}.", "Use counts >= 1.")
        thr = {str(q): float(t) for q, t in self.throughput.items()}
        for q, t in thr.items():
            if not math.isfinite(t) or t < 0:
                raise PlanningError(f"templates[{self.id}].throughput[{q}]", f"throughput {t} is not a finite number >= 0.", "Use 0 for a class the template cannot serve.")
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "throughput", thr)
        if self.single_shape is None:
            object.__setattr__(self, "single_shape", len(usage) == 1)
        if not self.gpu_types:
            object.__setattr__(self, "gpu_types", tuple(sorted({parse_shape(s, bare_gpu=True)[1] for s in usage})))
        else:
            object.__setattr__(self, "gpu_types", tuple(sorted(set(self.gpu_types))))

    def gpus(self) -> dict[str, int]:
        """GPUs per GPU type used by one instance."""
        out: dict[str, int] = {}
        for shape, n in self.usage.items():
            count, gpu = parse_shape(shape, bare_gpu=True)
            out[gpu] = out.get(gpu, 0) + count * n
        return out


MAX_NODES = 10**15  # nodes of one (region, shape): "unlimited" (availability_scale 10^6) fits, exact in a float
MAX_RATE = 1e12  # demand of one class in its unit (tokens/s or req/s)


def check_dump_path(path: str | Path, field: str = "dump_model") -> None:
    """Refuse a model-dump path HiGHS cannot write (it crashes the process on a bad one) before any solving.

    Raises
    ------
    PlanningError: a suffix other than ``.lp``/``.mps``, a missing parent folder, a parent that is a file, or a
        path that is a folder.
    """
    p = Path(path)
    if p.suffix.lower() not in (".lp", ".mps"):
        raise PlanningError(field, f"{quote(str(path))} does not end in .lp or .mps.", "name the file model.lp or model.mps.")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PlanningError(field, f"folder {quote(str(parent))} does not exist or is not a folder.",
                            "create the folder first, or write the model somewhere else.")
    if p.is_dir():
        raise PlanningError(field, f"{quote(str(path))} is a folder.", "give a file name such as model.lp.")


@dataclass(frozen=True)
class Offer:
    """A purchasable node shape in one region: price per node-hour and how many nodes can be held."""

    region: str
    shape: str
    price_per_hour: float
    available: int

    def __post_init__(self) -> None:
        if not math.isfinite(self.price_per_hour) or self.price_per_hour < 0:
            raise PlanningError(f"offers[{self.region} {self.shape}].price_per_hour", f"price {self.price_per_hour} is not >= 0.", "Give the hourly node price in USD.")
        try:
            avail = float(self.available)
        except (TypeError, ValueError, OverflowError):
            avail = math.inf
        if not math.isfinite(avail) or avail > MAX_NODES or avail < 0 or int(avail) != avail:
            raise PlanningError(f"offers[{self.region} {self.shape}].available",
                                f"availability {quote(self.available)} is not a whole number of nodes in [0, {MAX_NODES:,}].",
                                "Give a whole number of nodes.")
        object.__setattr__(self, "available", int(self.available))


@dataclass(frozen=True)
class WorkloadClass:
    """Demand of one class (e.g. a request-size bucket) of one (model, phase) group, in its rate unit."""

    id: str
    group: str
    rate: float

    def __post_init__(self) -> None:
        if not math.isfinite(self.rate) or self.rate < 0 or self.rate > MAX_RATE:
            raise PlanningError(f"classes[{self.id}].rate", f"rate {quote(self.rate)} is not a number in [0, {MAX_RATE:g}].",
                                "Give the demanded rate (e.g. tokens/s).")


@dataclass(frozen=True)
class TransferPrice:
    """Permission and price to send a link's requests from prefill in ``src`` to decode in ``dst`` (src ≠ dst).

    ``sender`` is the first (sending) class of a link of ``AllocationProblem.links`` (a model's prefill class);
    ``usd_per_hour`` is the cost of moving *all* of that link's requests (its full rate) across, i.e. the KV
    bytes per request × requests/s × 3600 × $/GB; a flow carrying a share f of the requests costs f × that.
    """

    sender: str
    src: str
    dst: str
    usd_per_hour: float

    def __post_init__(self) -> None:
        where = f"transfers[{self.sender} {self.src}->{self.dst}]"
        if self.src == self.dst:
            raise PlanningError(where, "source and destination region are the same.",
                                "List only cross-region transfers; a region always pairs with itself for free.")
        if not math.isfinite(self.usd_per_hour) or self.usd_per_hour < 0:
            raise PlanningError(f"{where}.usd_per_hour", f"price {quote(self.usd_per_hour)} is not a finite number >= 0.",
                                "Give the USD per hour of moving the link's full rate.")


@dataclass(frozen=True)
class Commitment:
    """A first-stage decision (planning.finance's commitment sizing): R ∈ {0, …, ``max_count``} nodes bought at
    ``cost`` (for the whole horizon the problem stands for) that add R nodes to the availability of every offer
    in ``offers`` ((region, shape) keys, e.g. one reserved pool's shape in every epoch's copy of the region)."""

    id: str
    cost: float
    max_count: int
    offers: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        if not math.isfinite(self.cost) or self.cost < 0:
            raise PlanningError(f"commitments[{self.id}].cost", f"{quote(self.cost)} is not a finite cost >= 0.",
                                "Give the commitment's cost in USD.")
        if not 0 <= int(self.max_count) <= MAX_NODES:
            raise PlanningError(f"commitments[{self.id}].max_count", f"{quote(self.max_count)} is not a node count.",
                                "Give the most nodes that may be committed.")
        object.__setattr__(self, "offers", tuple((str(r), str(s)) for r, s in self.offers))


@dataclass(frozen=True)
class AllocationProblem:
    """Everything the allocation model needs, explicit and solver-agnostic.

    ``current`` maps (template id, region) -> running instances ν′ (for the initialisation penalty K, Coral
    Sec. 4.3). Availability ``Offer.available`` is the total number of nodes that may be held, running ones
    included. ``budget_per_hour`` bounds provisioning + penalty (the cost objective's value) and is used with
    the ``served`` objective. ``dump_model`` writes the model (``.lp`` or ``.mps``) of the final solve.
    ``decompose`` lets the cost objective try the exact group-by-group shortcut first (matrix builder);
    ``part_mip_rel_gap`` is the relative gap each part of that shortcut is solved to (None: ``mip_rel_gap``, which
    the joint model keeps when the parts' plans do not fit together). ``settle_stall`` ends that shortcut's
    linked settle of competing parts (``linked.settle``) at its first priced round that neither raises its
    bound nor finds a cheaper repaired plan, for the merged ILP it falls back to (the baselines and the on-demand
    engine set it: a settle that will not close costs more than that ILP; docs/allocation.md, "Baselines").
    ``settle`` (default on) lets that shortcut settle competing parts by the linked Lagrangian bound before it
    merges them; off, it merges them at once (the on-demand engine's fixing ILPs: over their few fixed columns the
    merged ILP proves the optimum sooner than a settle's rounds of part ILPs; docs/allocation.md).
    ``start`` is a plan (template id, region) -> instances handed to HiGHS as a MIP start (e.g. the best
    baseline's counts); its templates are exempt from dominance pruning so that it maps exactly. ``start_only``
    switches off HiGHS's root heuristics when that start maps (``matrix_model.ROOT_HEURISTICS``): for a caller
    whose start is near the optimum, where they search for a plan already known (the linked cover ILPs).
    ``links`` are tuples of class ids served *in the same regions in the same proportions* (a model's prefill
    class and its decode class: a request's KV cache must reach a decode node in its prefill's region). Each
    link ℓ gets split variables s_{ℓr} ≥ 0 with Σ_r s_{ℓr} ≥ α, and every class q of ℓ must be served in
    region r at rate ≥ λ_q s_{ℓr} (``formulation``, constraint (R)). The first class of a link *sends* (a
    request's prefill), the others *receive* (its decode). ``transfers`` lists the cross-region flows allowed
    (a link's sender class, source region, destination region, $/h at the link's full rate); each adds a
    flow column f_{ℓ,src,dst} ≥ 0 priced in the cost objective and the budget. None listed = pairing per region.
    ``spot_cap`` maps a group to the largest share s of its demand that may depend on ``spot_regions``: its
    capacity outside them must serve at least (1 − s) α of it (constraint (S)). ``commitments`` are integer
    first-stage columns that extend offers' availability at a cost (constraint (A) becomes Σ U ν − Σ R ≤ A).
    """

    templates: tuple[TemplateOption, ...]
    offers: tuple[Offer, ...]
    classes: tuple[WorkloadClass, ...]
    current: Mapping[tuple[str, str], int] = field(default_factory=dict)
    K: float = 0.0
    objective: Objective = "cost"
    budget_per_hour: float | None = None
    solver: SolverName = "highs"
    time_limit_s: float = 60.0
    improving_limit: int | None = None  # HiGHS mip_max_improving_sols: a stop counted in work (deterministic)
    node_limit: int | None = None  # HiGHS mip_max_nodes: a stop counted in work (deterministic; the baselines')
    lean: bool = False  # part ILPs without HiGHS's sub-MIP heuristics (matrix_model.LEAN; solve.full_search)
    stop: CancelToken | None = field(default=None, compare=False, repr=False)
    # checked by HiGHS's MIP interrupt callback (matrix builder): a wall-clock safety net read through
    # planning.context's clock (a test moves it); HiGHS's own time_limit_s stays the outer limit
    builder: BuilderName = "auto"
    mip_rel_gap: float = 1e-3
    prune: bool = True
    dump_model: str | None = None
    decompose: bool = True
    part_mip_rel_gap: float | None = None
    settle_stall: bool = False
    settle: bool = True
    start: Mapping[tuple[str, str], int] = field(default_factory=dict)
    start_only: bool = False
    links: tuple[tuple[str, ...], ...] = ()
    transfers: tuple[TransferPrice, ...] = ()
    spot_cap: Mapping[str, float] = field(default_factory=dict)
    spot_regions: frozenset[str] = frozenset()
    commitments: tuple[Commitment, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "templates", tuple(self.templates))
        object.__setattr__(self, "offers", tuple(self.offers))
        object.__setattr__(self, "classes", tuple(self.classes))
        object.__setattr__(self, "current", {(str(t), str(r)): int(n) for (t, r), n in dict(self.current).items() if int(n) != 0})
        object.__setattr__(self, "start", {(str(t), str(r)): int(n) for (t, r), n in dict(self.start).items() if int(n) != 0})
        _unique("templates", [t.id for t in self.templates])
        _unique("classes", [q.id for q in self.classes])
        _unique("offers", [f"{o.region} {o.shape}" for o in self.offers])
        class_group = {q.id: q.group for q in self.classes}
        for t in self.templates:
            for q in t.throughput:
                if q not in class_group:
                    raise PlanningError(f"templates[{t.id}].throughput", f"unknown workload class {q!r}.", f"Use one of {sorted(class_group)}.")
                if class_group[q] != t.group:
                    raise PlanningError(f"templates[{t.id}].throughput[{q}]", f"class {q!r} belongs to group {class_group[q]!r}, not {t.group!r}.", "Give throughputs only for the template's own group.")
        object.__setattr__(self, "links", tuple(tuple(str(q) for q in link) for link in self.links))
        linked: set[str] = set()
        for i, link in enumerate(self.links):
            for q in link:
                if q not in class_group:
                    raise PlanningError(f"links[{i}]", f"unknown workload class {quote(q)}.", "Use class ids from `classes`.")
                if q in linked:
                    raise PlanningError(f"links[{i}]", f"class {quote(q)} is in two links.", "Put each class in one link at most.")
                linked.add(q)
        object.__setattr__(self, "transfers", tuple(self.transfers))
        senders = {link[0] for link in self.links if len(link) > 1}
        seen_flows: set[tuple[str, str, str]] = set()
        for tp in self.transfers:
            if tp.sender not in senders:
                raise PlanningError(f"transfers[{tp.sender} {tp.src}->{tp.dst}].sender",
                                    f"{quote(tp.sender)} is not the first (sending) class of a link of two or more classes.",
                                    f"Use one of {sorted(senders)}.")
            key = (tp.sender, tp.src, tp.dst)
            if key in seen_flows:
                raise PlanningError(f"transfers[{tp.sender} {tp.src}->{tp.dst}]", "listed twice.", "List each (sender, src, dst) once.")
            seen_flows.add(key)
        object.__setattr__(self, "spot_cap", {str(g): float(s) for g, s in dict(self.spot_cap).items() if float(s) < 1})
        object.__setattr__(self, "spot_regions", frozenset(self.spot_regions))
        for g, s in self.spot_cap.items():
            if not 0 <= s <= 1:
                raise PlanningError(f"spot_cap[{g}]", f"share {quote(s)} is not in [0, 1].", "Give a share, e.g. 0.5.")
        object.__setattr__(self, "commitments", tuple(self.commitments))
        _unique("commitments", [c.id for c in self.commitments])
        offered = {(o.region, o.shape) for o in self.offers}
        for c in self.commitments:
            for covered in c.offers:
                if covered not in offered:
                    raise PlanningError(f"commitments[{c.id}].offers", f"{covered} is not an offer of the problem.",
                                        "List (region, shape) keys of `offers` (with the committed nodes' price).")
        ids = {t.id for t in self.templates}
        for (tid, region), n in self.start.items():
            if tid not in ids or n < 0:
                raise PlanningError("start", f"start plan entry ({tid!r}, {region!r}): {n} is not a known template with a count >= 0.", "Use template ids from `templates`.")
        for (tid, region), n in self.current.items():
            if tid not in ids:
                raise PlanningError("current", f"running instances refer to unknown template {tid!r} in {region}.", "Use template ids from `templates`.")
            if n < 0:
                raise PlanningError(f"current[{tid}, {region}]", f"negative running count {n}.", "Use counts >= 0.")
        if self.K < 0 or not math.isfinite(self.K):
            raise PlanningError("K", f"initialisation penalty factor {self.K} is not >= 0.", "Use init time / adjustment interval, e.g. 0.1.")
        if self.objective not in ("cost", "served"):
            raise PlanningError("objective", f"unknown objective {self.objective!r}.", 'Use "cost" or "served".')
        if self.solver not in ("highs", "cbc"):
            raise PlanningError("solver", f"unknown solver {self.solver!r}.", 'Use "highs" or "cbc".')
        if self.builder not in ("auto", "pulp", "matrix"):
            raise PlanningError("builder", f"unknown builder {self.builder!r}.", 'Use "auto", "pulp" or "matrix".')
        if self.builder == "matrix" and self.solver != "highs":
            raise PlanningError("builder", "the matrix builder passes the model to HiGHS only.", 'Use builder="pulp" with solver="cbc".')
        if self.dump_model:
            check_dump_path(self.dump_model)
        if self.budget_per_hour is not None and not (self.budget_per_hour >= 0):
            raise PlanningError("budget_per_hour", f"budget {self.budget_per_hour} is not >= 0.", "Give USD per hour or leave it unset.")
        if not (self.time_limit_s > 0):
            raise PlanningError("time_limit_s", f"time limit {self.time_limit_s} is not > 0.", "Give seconds, e.g. 60.")
        if not (0 <= self.mip_rel_gap < 1):
            raise PlanningError("mip_rel_gap", f"relative gap {self.mip_rel_gap} is not in [0, 1).", "Use e.g. 1e-3.")
        if self.part_mip_rel_gap is not None and not (0 <= self.part_mip_rel_gap < 1):
            raise PlanningError("part_mip_rel_gap", f"relative gap {self.part_mip_rel_gap} is not in [0, 1).",
                                "Use e.g. 0 (proven optimal parts) or leave it unset (mip_rel_gap).")

    def groups(self) -> tuple[str, ...]:
        """Groups with demand classes, in order of first appearance in ``classes``."""
        return tuple(dict.fromkeys(q.group for q in self.classes))

    def linked_parts(self) -> list[list[str]]:
        """The groups in parts joined by ``links`` (a model's prefill and decode; an unlinked group alone), each
        part and the parts in :meth:`groups` order."""
        groups = list(self.groups())
        group_of = {q.id: q.group for q in self.classes}
        part_of = {g: [g] for g in groups}
        for link in self.links:
            joined = {group_of[q] for q in link}
            merged = [g for g in groups if any(g in part_of[h] for h in joined)]
            for g in merged:
                part_of[g] = merged
        parts: list[list[str]] = []
        for g in groups:
            if part_of[g] not in parts:
                parts.append(part_of[g])
        return parts


def start_from(counts: Mapping[tuple[str, str], int], problem: AllocationProblem) -> dict[tuple[str, str], int]:
    """A plan's ``counts`` as ``problem``'s MIP start (``AllocationProblem.start``), or nothing when one of its
    templates is not among the problem's (a plan over other columns)."""
    start = {(str(t), str(r)): int(n) for (t, r), n in counts.items() if int(n) > 0}
    ids = {t.id for t in problem.templates}
    return start if start and all(t in ids for t, _r in start) else {}


def _unique(name: str, ids: list[str]) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise PlanningError(name, f"duplicate id {i!r}.", "Give every entry a unique id.")
        seen.add(i)


@dataclass(frozen=True)
class SolveStats:
    """Size of the model actually solved and what pruning removed."""

    templates_in: int = 0
    templates_unsold: int = 0
    templates_dominated: int = 0
    templates_no_demand: int = 0
    pairs: int = 0
    variables: int = 0
    integer_variables: int = 0
    constraints: int = 0
    nonzeros: int = 0


@dataclass(frozen=True)
class PhaseResult:
    """One solver call: which phase, its status, objective, bound, gap and time."""

    phase: str
    status: Status
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    solver_status: str


@dataclass(frozen=True)
class GroupDiagnostic:
    """Why a group cannot be fully served: its best fraction alone and jointly, and the binding capacities."""

    group: str
    alone_fraction: float
    joint_fraction: float
    binding: tuple[str, ...]


@dataclass(frozen=True)
class AllocationResult:
    """Outcome of ``solve_allocation``; never None, always with a status.

    ``counts`` maps (template id, region) -> instances ν; ``assignment`` maps (class id, template id, region)
    -> rate served by those instances; ``served`` maps group -> served / demanded (capped at 1 only by the
    model). ``alpha`` is the uniform served fraction (1 for a feasible cost solve). ``cost_per_hour`` is the
    provisioning cost, ``penalty_per_hour`` the initialisation penalty Σ K p max(0, ν − ν′),
    ``transfer_per_hour`` the cross-region KV transfer cost Σ c f. ``flows`` maps (sender class id, src region,
    dst region) -> f, the share of the link's demand whose prefill runs in src and decode in dst (paired
    regions included, src == dst; only for links, only f > 0).
    """

    status: Status
    objective: Objective
    objective_value: float | None
    cost_per_hour: float | None
    penalty_per_hour: float | None
    alpha: float | None
    counts: Mapping[tuple[str, str], int]
    assignment: Mapping[tuple[str, str, str], float]
    served: Mapping[str, float]
    nodes_used: Mapping[tuple[str, str], int]
    gap: float | None
    phases: tuple[PhaseResult, ...]
    timings: Mapping[str, float]
    stats: SolveStats
    builder: str
    solver: str
    diagnostics: tuple[GroupDiagnostic, ...] = ()
    messages: tuple[str, ...] = ()
    transfer_per_hour: float = 0.0
    flows: Mapping[tuple[str, str, str], float] = field(default_factory=dict)
    commitments: Mapping[str, int] = field(default_factory=dict)  # commitment id -> R (only R > 0)
    commitment_cost: float = 0.0  # Σ cost·R

    @property
    def total_per_hour(self) -> float | None:
        """Provisioning + initialisation penalty + KV transfer + commitments (the cost objective's value)."""
        if self.cost_per_hour is None:
            return None
        return self.cost_per_hour + (self.penalty_per_hour or 0.0) + self.transfer_per_hour + self.commitment_cost

    @property
    def has_plan(self) -> bool:
        """Whether a solution (optimal or not) is attached."""
        return self.cost_per_hour is not None
