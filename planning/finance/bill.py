"""The year's bill: what the horizon's plan costs by month, model, region, cloud and pricing kind.

From the two-stage solution (``planning.finance.commitments.Sizing``): epoch e's instances cost their nodes'
marginal prices per hour; committed capacity (owned pools' amortised capex + operations, held and signed
reservations' effective hourly fee) costs the same every hour of the horizon and is charged to the models in
proportion to the node-hours they use of it, the rest to the model ``(idle)`` (so idle committed capacity is in
the bill, never hidden). Month m of the horizon belongs to growth period ⌊m·P / M⌋; its cost is that period's
mean hourly cost × 730 h.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from planning.finance.commitments import Candidate, Epoch, Sizing
from planning.offers import ResolvedOffer
from planning.pools import HOURS_PER_MONTH, cloud_of, kind_of, site_of

IDLE = "(idle)"
EGRESS = "(egress)"
BILL_COLUMNS = ("month", "model", "region", "cloud", "kind", "usd")


@dataclass(frozen=True)
class Pool:
    """A committed (region, shape): nodes held, fixed $ per node-hour, kind."""

    region: str
    shape: str
    nodes: int
    fixed_per_node_hour: float
    kind: str


def committed_pools(offers: Iterable[ResolvedOffer], candidates: Sequence[Candidate],
                    counts: Mapping[str, int]) -> list[Pool]:
    """Owned pools, held reservations and the sizing's signed reservations (merged per region and shape)."""
    acc: dict[tuple[str, str], list[float]] = {}  # nodes, fixed $/h
    kinds: dict[tuple[str, str], str] = {}
    for o in offers:
        if o.kind in ("owned", "reserved") and o.available > 0:
            row = acc.setdefault((o.region, o.shape), [0.0, 0.0])
            row[0] += o.available
            row[1] += o.available * o.fixed_per_node_hour
            kinds[(o.region, o.shape)] = o.kind
    for c in candidates:
        n = int(counts.get(c.id, 0))
        if n:
            row = acc.setdefault((c.pool, c.shape), [0.0, 0.0])
            row[0] += n
            row[1] += n * c.effective_hourly
            kinds[(c.pool, c.shape)] = "reserved"
    return [Pool(r, s, int(n), f / n if n else 0.0, kinds[(r, s)]) for (r, s), (n, f) in sorted(acc.items())]


def epoch_costs(sizing: Sizing, offers: Iterable[ResolvedOffer],
                pools: Sequence[Pool]) -> list[dict[tuple[str, str, str], float]]:
    """Per epoch: $/h by (model, region, shape) — marginal prices of the nodes used, plus each committed pool's
    fixed cost shared by node use (its idle part under the model ``(idle)``), plus KV egress under
    (model, "src->dst", ``(egress)``)."""
    price = {(o.region, o.shape): o.price_per_hour for o in offers}
    out: list[dict[tuple[str, str, str], float]] = [{} for _ in sizing.plans]
    for e, plan in enumerate(sizing.plans):
        use: dict[tuple[str, str], dict[str, float]] = {}
        for (model, region, shape), n in plan.model_nodes.items():
            key = (model, region, shape)
            out[e][key] = out[e].get(key, 0.0) + price.get((region, shape), 0.0) * n
            use.setdefault((region, shape), {})[model] = use.get((region, shape), {}).get(model, 0.0) + n
        for (model, src, dst), usd in plan.egress.items():
            key = (model, f"{src}->{dst}", EGRESS)
            out[e][key] = out[e].get(key, 0.0) + usd
        for pool in pools:
            fixed = pool.nodes * pool.fixed_per_node_hour
            if fixed <= 0:
                continue
            models = use.get((pool.region, pool.shape), {})
            used = min(float(pool.nodes), sum(models.values()))
            for model, share in models.items():  # each model pays for the nodes it uses (never more than held)
                key = (model, pool.region, pool.shape)
                out[e][key] = out[e].get(key, 0.0) + fixed * (share / max(used, 1e-12)) * used / pool.nodes
            if used < pool.nodes:
                key = (IDLE, pool.region, pool.shape)
                out[e][key] = out[e].get(key, 0.0) + fixed * (pool.nodes - used) / pool.nodes
    return out


def bill_rows(sizing: Sizing, offers: Iterable[ResolvedOffer], pools: Sequence[Pool], horizon_years: float,
              periods: int) -> list[dict[str, object]]:
    """The bill as rows ``month, model, region, cloud, kind, usd`` (months 1 … 12 × horizon years; region is the
    site, kind the pricing kind, or ``egress`` for cross-region KV transfer from that region)."""
    offers = list(offers)
    costs = epoch_costs(sizing, offers, pools)
    months = max(1, round(12 * horizon_years))
    by_period: dict[int, dict[tuple[str, str], float]] = {}
    period_hours: dict[int, float] = {}
    for ep, cost in zip(sizing.epochs, costs, strict=True):
        period_hours[ep.period] = period_hours.get(ep.period, 0.0) + ep.hours
        acc = by_period.setdefault(ep.period, {})
        for (model, region, shape), usd in cost.items():
            where = region if shape != EGRESS else f"{region} (egress)"
            acc[(model, where)] = acc.get((model, where), 0.0) + usd * ep.hours
    rows: list[dict[str, object]] = []
    for m in range(months):
        p = min(periods - 1, m * periods // months)
        hours = period_hours.get(p, 0.0)
        for (model, where), usd in sorted(by_period.get(p, {}).items()):
            if hours <= 0:
                continue
            egress = where.endswith(" (egress)")
            region = where.removesuffix(" (egress)").split("->", 1)[0]
            rows.append({"month": m + 1, "model": model, "region": site_of(region), "cloud": cloud_of(region),
                         "kind": "egress" if egress else kind_of(region), "usd": usd / hours * HOURS_PER_MONTH})
    return rows


def summarise(rows: Sequence[Mapping[str, object]], by: str) -> dict[str, float]:
    """Σ usd per value of column ``by`` (``model``, ``region``, ``cloud``, ``kind``, ``month``); months in calendar
    order (1, 2, …, 12, never 1, 10, 11, 12, 2), the other columns alphabetical."""
    out: dict[str, float] = {}
    for r in rows:
        key = str(r[by])
        out[key] = out.get(key, 0.0) + float(r["usd"])  # type: ignore[arg-type]
    return dict(sorted(out.items(), key=lambda kv: (int(kv[0]), "") if kv[0].isdigit() else (0, kv[0])))


def epoch_list(epochs: Sequence[Epoch]) -> list[dict[str, object]]:
    """The epochs as plain rows (for the finance view)."""
    return [{"index": e.index, "period": e.period, "slot": e.slot, "hours": e.hours, "factor": dict(e.factor)}
            for e in epochs]
