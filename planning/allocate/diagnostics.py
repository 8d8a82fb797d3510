"""Infeasibility diagnostics: best fraction per group alone and jointly, and which capacities bind, in sentences."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planning.allocate.instance import build_instance
from planning.allocate.matrix_model import build_matrix, solve_matrix
from planning.allocate.problem import AllocationProblem, GroupDiagnostic

_MAX_LISTED = 5


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if abs(100 * x - round(100 * x)) < 0.05 or x >= 0.1 else f"{100 * x:.1f} %"


def diagnose_infeasible(problem: AllocationProblem) -> tuple[tuple[GroupDiagnostic, ...], list[str]]:
    """Explain why the cost objective cannot meet all demand.

    Solves the max-served objective (uniform fraction α) jointly and for each group alone (HiGHS, matrix
    builder), and reads which (region, shape) capacities bind: fully used at the joint max-served solution,
    ranked by the LP-relaxation dual (how much α one more node would buy).

    Parameters
    ----------
    problem:
        The (infeasible) allocation problem.

    Returns
    -------
    Per-group diagnostics and the sentences to show.
    """
    from planning.allocate.solve import with_classes

    sentences: list[str] = []
    base = replace(problem, objective="served", builder="matrix", solver="highs", dump_model=None)
    inst = build_instance(base)
    model = build_matrix(inst, True, problem.budget_per_hour)
    joint = solve_matrix(model, "served", problem.time_limit_s, problem.mip_rel_gap)
    alpha_joint = float(joint.values[-1]) if joint.values is not None else 0.0
    lp = solve_matrix(model, "served", problem.time_limit_s, 1e-9, relax=True)
    avail = model.block("availability")
    used = np.zeros(len(inst.offer_keys), dtype=np.int64)
    if joint.values is not None:
        nu = np.rint(joint.values[: inst.n_pairs]).astype(np.int64)
        np.add.at(used, inst.use_row, (nu[inst.use_pair] * inst.use_val).astype(np.int64))
    gain: dict[tuple[str, str], float] = {}
    if avail is not None and lp.row_duals is not None:
        off = model.offsets["availability"]
        for i, key in enumerate(avail.keys):
            gain[key] = abs(float(lp.row_duals[off + i]))  # d(−α)/dA: one more node buys this much α
    if problem.budget_per_hour is not None:
        free = replace(base, budget_per_hour=None)
        m2 = build_matrix(build_instance(free), True, None)
        r2 = solve_matrix(m2, "served", problem.time_limit_s, problem.mip_rel_gap)
        if r2.values is not None and r2.values[-1] >= 1 - 1e-6:
            sentences.append(
                f"The budget of ${problem.budget_per_hour:,.2f}/h binds: without it all demand can be met; "
                f"within it every group reaches at most {_pct(alpha_joint)}."
            )
    oidx = {k: i for i, k in enumerate(inst.offer_keys)}
    out: list[GroupDiagnostic] = []
    for g, name in enumerate(inst.groups):
        sub = with_classes(base, {name})
        sub_inst = build_instance(sub)
        n_templates = sum(1 for t in problem.templates if t.group == name)
        if sub_inst.n_pairs == 0:
            alone = 0.0
        else:
            sub_model = build_matrix(sub_inst, True, problem.budget_per_hour)
            r = solve_matrix(sub_model, "served", problem.time_limit_s, problem.mip_rel_gap)
            alone = float(r.values[-1]) if r.values is not None else 0.0
        rows = sorted({inst.offer_keys[int(row)] for row, p in zip(inst.use_row, inst.use_pair, strict=True) if inst.pair_group[p] == g})
        full = [k for k in rows if used[oidx[k]] >= inst.offer_avail[oidx[k]]]
        full.sort(key=lambda k: -gain.get(k, 0.0))
        binding = tuple(
            f"{r} {s} ({used[oidx[(r, s)]]}/{inst.offer_avail[oidx[(r, s)]]} used"
            + (f", +1 node ≈ +{100 * gain[(r, s)]:.2g} pp" if gain.get((r, s), 0.0) > 1e-12 else "")
            + ")"
            for r, s in full[:_MAX_LISTED]
        )
        out.append(GroupDiagnostic(name, alone, alpha_joint, binding))
        if alone >= 1 - 1e-9 and alpha_joint >= 1 - 1e-9:
            continue
        if n_templates and sub_inst.n_pairs == 0:
            sentences.append(
                f"{name}: none of its {n_templates} templates can be bought in any region "
                "(a shape is not offered there or availability is below one instance)."
            )
            continue
        if not n_templates:
            sentences.append(f"{name}: no template serves this group; add templates for it.")
            continue
        text = f"{name} can reach {_pct(min(alone, 1.0))} of its demand alone and {_pct(alpha_joint)} jointly (the same fraction for every group)"
        if binding:
            more = f" and {len(full) - _MAX_LISTED} more" if len(full) > _MAX_LISTED else ""
            text += "; binding: " + ", ".join(binding) + more
        sentences.append(text + ".")
    return tuple(out), sentences
