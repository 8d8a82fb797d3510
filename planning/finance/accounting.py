"""What a plan costs by pricing kind, what committed capacity idles, and the comparable cost's committed part.

Every hour of a plan is paid as (planning.pools):

- owned nodes: amortised capex + operations for every node of the pool (``fixed_per_node_hour`` × count, used or
  idle) + power for each serving node (the marginal price the allocation saw);
- reserved nodes: the reservation's effective hourly price (upfront over the term + hourly fee) for every held
  node, used or idle; nothing more when used (marginal price 0);
- on-demand and spot nodes: their price for each node the plan holds (spot: its expected cost per node-hour).

So ``bill = Σ marginal prices of the nodes used + committed`` with ``committed`` = Σ fixed cost of owned and held
reserved nodes. ``committed`` does not depend on the plan: every side of a like-for-like comparison (the plan,
its baselines, what-if variants with the same pools) counts it, so idle owned or reserved capacity is never a
saving of one side over another.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from planning.offers import ResolvedOffer
from planning.pools import KINDS


def committed_per_hour(offers: Iterable[ResolvedOffer]) -> float:
    """Σ fixed $/h of the owned and held reserved nodes (paid whether they serve or not)."""
    return float(sum(o.fixed_per_node_hour * o.available for o in offers if o.kind in ("owned", "reserved")))


def kind_costs(offers: Iterable[ResolvedOffer], used: Mapping[tuple[str, str], int]) -> dict[str, float]:
    """$/h by pricing kind of a plan using ``used[(region, shape)]`` nodes: every kind of ``KINDS`` (0 when absent);
    owned and reserved include their fixed cost for every node, used or idle."""
    out = dict.fromkeys(KINDS, 0.0)
    for o in offers:
        n = int(used.get((o.region, o.shape), 0))
        out[o.kind] += o.price_per_hour * n + (o.fixed_per_node_hour * o.available if o.kind in ("owned", "reserved")
                                               else 0.0)
    return out


def idle_capacity(offers: Iterable[ResolvedOffer], used: Mapping[tuple[str, str], int]) -> list[dict[str, Any]]:
    """Owned and held reserved capacity the plan leaves idle: per (region, shape) the nodes held, used and idle
    and the $/h paid for the idle ones (``fixed_per_node_hour`` × idle), and that fixed $/node-hour (the full cost
    of a cost line adds it per node it uses: ``planning.billing.full_cost_rows``)."""
    rows = []
    for o in offers:
        if o.kind not in ("owned", "reserved"):
            continue
        n = int(used.get((o.region, o.shape), 0))
        idle = max(0, o.available - n)
        rows.append({"region": o.region, "shape": o.shape, "kind": o.kind, "held": o.available, "used": n,
                     "idle": idle, "idle_usd_per_hour": idle * o.fixed_per_node_hour,
                     "fixed_per_node_hour": o.fixed_per_node_hour})
    return rows

