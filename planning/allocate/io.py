"""JSON-ready dicts for allocation problems and results (tuple keys become lists of their parts)."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from planning.allocate.problem import (
    AllocationProblem,
    AllocationResult,
    Commitment,
    Offer,
    TemplateOption,
    TransferPrice,
    WorkloadClass,
)
from planning.errors import PlanningError, quote


def problem_to_dict(problem: AllocationProblem) -> dict[str, Any]:
    """Plain dict of a problem (``current`` as a list of ``{template, region, count}``)."""
    out: dict[str, Any] = {
        "templates": [
            {"id": t.id, "group": t.group, "usage": dict(t.usage), "throughput": dict(t.throughput),
             "single_shape": t.single_shape, "gpu_types": list(t.gpu_types)}
            for t in problem.templates
        ],
        "offers": [asdict(o) for o in problem.offers],
        "classes": [asdict(q) for q in problem.classes],
        "current": [{"template": t, "region": r, "count": n} for (t, r), n in problem.current.items()],
        "transfers": [asdict(tp) for tp in problem.transfers],
        "spot_regions": sorted(problem.spot_regions),
        "commitments": [{"id": c.id, "cost": c.cost, "max_count": c.max_count, "offers": [list(k) for k in c.offers]}
                        for c in problem.commitments],
    }
    for f in fields(problem):
        if f.name not in out:
            out[f.name] = getattr(problem, f.name)
    return out


def problem_from_dict(data: dict[str, Any]) -> AllocationProblem:
    """Inverse of ``problem_to_dict``.

    Raises
    ------
    PlanningError
        When a required key is missing or an entry is malformed.
    """
    try:
        templates = tuple(
            TemplateOption(t["id"], t["group"], t["usage"], t["throughput"], t.get("single_shape", t.get("homogeneous")), tuple(t.get("gpu_types", ())))
            for t in data["templates"]
        )
        offers = tuple(Offer(o["region"], o["shape"], float(o["price_per_hour"]), o["available"]) for o in data["offers"])
        classes = tuple(WorkloadClass(q["id"], q["group"], float(q["rate"])) for q in data["classes"])
        current = {(c["template"], c["region"]): int(c["count"]) for c in data.get("current", [])}
        transfers = tuple(TransferPrice(str(tp["sender"]), str(tp["src"]), str(tp["dst"]), float(tp["usd_per_hour"]))
                          for tp in data.get("transfers", ()))
        commitments = tuple(Commitment(str(c["id"]), float(c["cost"]), int(c["max_count"]),
                                       tuple((str(r), str(s)) for r, s in c["offers"]))
                            for c in data.get("commitments", ()))
        spot_regions = frozenset(str(r) for r in data.get("spot_regions", ()))
    except KeyError as exc:
        raise PlanningError(str(exc.args[0]), "missing key in the allocation problem.", "See docs/allocation.md for the fields.") from exc
    except PlanningError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:  # a number that is not one, or beyond a float
        raise PlanningError("allocation problem", f"a count, price or rate is not a usable number ({quote(exc)}).",
                            "give plain numbers: counts as whole numbers, rates and prices as decimals.") from exc
    options = {k: v for k, v in data.items()
               if k not in ("templates", "offers", "classes", "current", "transfers", "commitments", "spot_regions")}
    return AllocationProblem(templates, offers, classes, current, transfers=transfers, commitments=commitments,
                             spot_regions=spot_regions, **options)


def result_to_dict(result: AllocationResult) -> dict[str, Any]:
    """Plain dict of a result: counts, assignment and nodes as lists of records."""
    return {
        "status": result.status,
        "objective": result.objective,
        "objective_value": result.objective_value,
        "cost_per_hour": result.cost_per_hour,
        "penalty_per_hour": result.penalty_per_hour,
        "transfer_per_hour": result.transfer_per_hour,
        "commitments": dict(result.commitments),
        "commitment_cost": result.commitment_cost,
        "flows": [{"sender": q, "src": a, "dst": b, "share": f} for (q, a, b), f in result.flows.items()],
        "alpha": result.alpha,
        "gap": result.gap,
        "counts": [{"template": t, "region": r, "count": n} for (t, r), n in result.counts.items()],
        "assignment": [{"class": q, "template": t, "region": r, "rate": v} for (q, t, r), v in result.assignment.items()],
        "served": dict(result.served),
        "nodes_used": [{"region": r, "shape": s, "count": n} for (r, s), n in result.nodes_used.items()],
        "phases": [asdict(p) for p in result.phases],
        "timings": dict(result.timings),
        "stats": asdict(result.stats),
        "builder": result.builder,
        "solver": result.solver,
        "diagnostics": [asdict(d) for d in result.diagnostics],
        "messages": list(result.messages),
    }
