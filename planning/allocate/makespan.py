"""Demystifying's makespan: evaluate a plan's batch processing time, and its link to the served fraction.

A batch of f_w requests of workload w arrives at once; an instance of configuration c processes workload w
at h_{c,w} requests/s. Given y_c instances of c and fractions x_{c,w} of workload w routed to c (Σ_c x = 1),
the instances of c finish after T_c = Σ_w x_{c,w} f_w / (y_c h_{c,w}) and the makespan is max_c T_c
(Demystifying Sec. 4.3, Eq. 3). Without ``fractions`` every workload is split in proportion to the
configurations' rates (its Cases 1-2): then T_c = Σ_w f_w / Σ_c y_c h_{c,w} for every c.

Equivalence with the served objective: a plan finishes within T iff it can serve the *rates* f_w / T, i.e.
with rates λ_w = f_w the uniform fraction α = 1/T is servable. So min T = 1 / max α, and the arg-max plan of
the served objective (with α not capped by 1, i.e. α* < 1) is a minimum-makespan plan.
"""

from __future__ import annotations

from collections.abc import Mapping

from planning.errors import PlanningError


def makespan_seconds(
    counts: Mapping[str, int],
    throughput: Mapping[str, Mapping[str, float]],
    requests: Mapping[str, float],
    fractions: Mapping[str, Mapping[str, float]] | None = None,
) -> float:
    """Processing time of a batch under a given plan.

    Parameters
    ----------
    counts:
        Configuration -> number of instances y_c (zero entries ignored).
    throughput:
        Configuration -> workload -> requests/s h_{c,w} of one instance.
    requests:
        Workload -> requests in the batch f_w.
    fractions:
        Configuration -> workload -> fraction x_{c,w} of workload w routed to c (each workload's fractions
        sum to 1). None = proportional to rates.

    Returns
    -------
    The makespan in seconds, max_c Σ_w x_{c,w} f_w / (y_c h_{c,w}).

    Raises
    ------
    PlanningError
        If a workload cannot be served, fractions do not sum to 1, or work is routed to a configuration that
        cannot process it.
    """
    active = {c: n for c, n in counts.items() if n > 0}
    if fractions is None:
        proportional: dict[str, dict[str, float]] = {}
        for w in requests:
            total = sum(n * throughput[c].get(w, 0.0) for c, n in active.items())
            if total <= 0 and requests[w] > 0:
                raise PlanningError("counts", f"no instance can process workload {w!r}.", "Add a configuration with throughput for it.")
            for c, n in active.items():
                share = n * throughput[c].get(w, 0.0) / total if total > 0 else 0.0
                proportional.setdefault(c, {})[w] = share
        fractions = proportional
    for w in requests:
        s = sum(fractions.get(c, {}).get(w, 0.0) for c in active)
        if requests[w] > 0 and abs(s - 1.0) > 1e-6:
            raise PlanningError(f"fractions[*][{w}]", f"fractions of workload {w!r} sum to {s:.4f}, not 1.", "Route all of every workload.")
    worst = 0.0
    for c, n in active.items():
        t = 0.0
        for w, f in requests.items():
            x = fractions.get(c, {}).get(w, 0.0)
            if x <= 0:
                continue
            h = throughput[c].get(w, 0.0)
            if h <= 0:
                raise PlanningError(f"fractions[{c}][{w}]", f"work routed to {c!r}, which cannot process {w!r}.", "Route it elsewhere.")
            t += x * f / (n * h)
        worst = max(worst, t)
    return worst


def makespan_from_alpha(alpha: float) -> float:
    """Minimum makespan T* = 1 / α* for rates λ_w = f_w (α* from the served objective, not capped).

    Raises
    ------
    PlanningError
        If α ≤ 0 (nothing can be served) or α reached the cap 1 (the true optimum may be larger).
    """
    if alpha <= 0:
        raise PlanningError("alpha", "no fraction of the batch can be served.", "Add capacity or budget.")
    if alpha >= 1 - 1e-12:
        raise PlanningError("alpha", "α hit its cap of 1, so 1/α only bounds the makespan.", "Scale the requests up (e.g. ×1000) and scale T back.")
    return 1.0 / alpha
