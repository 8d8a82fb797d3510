"""Plan-to-plan diff: which instances and GPUs changed between two plans, and why the cost moved."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from planning.errors import PlanningError
from planning.viz._common import empty_figure, money

DIFF_COLUMNS = (
    "template_id",
    "region",
    "change",
    "count_before",
    "count_after",
    "cost_before",
    "cost_after",
    "cost_delta",
    "gpus_delta",
    "why",
)
GPU_DIFF_COLUMNS = ("gpu", "before", "after", "delta")


@dataclass
class _Line:
    count: float = 0.0
    cost: float = 0.0
    gpus: dict[str, float] = field(default_factory=dict)


def _number(value: Any, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise PlanningError(where, f"must be a number, got {value!r}.", "Pass a number.") from exc


def _lines(items: Sequence[Mapping[str, Any]], name: str, per_copy: bool) -> dict[tuple[str, str], _Line]:
    """Sum instance items by (template_id, region); costs and GPUs become totals for the line."""
    lines: dict[tuple[str, str], _Line] = {}
    for i, item in enumerate(items or []):
        for key in ("template_id", "region", "count", "cost_per_hour"):
            if key not in item:
                raise PlanningError(
                    f"{name}[{i}].{key}",
                    "missing.",
                    "Each instance needs template_id, region, count, cost_per_hour and gpus.",
                )
        count = _number(item["count"], f"{name}[{i}].count")
        scale = count if per_copy else 1.0
        line = lines.setdefault((str(item["template_id"]), str(item["region"])), _Line())
        line.count += count
        line.cost += scale * _number(item["cost_per_hour"], f"{name}[{i}].cost_per_hour")
        for gpu, n in (item.get("gpus") or {}).items():
            line.gpus[str(gpu)] = line.gpus.get(str(gpu), 0.0) + scale * _number(n, f"{name}[{i}].gpus.{gpu}")
    return lines


def _gpu_text(gpus: Mapping[str, float], signed: bool = False) -> str:
    parts = [
        (f"{n:+g}" if signed else f"{n:g}") + f"×{g}"
        for g, n in sorted(gpus.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
        if abs(n) > 1e-9
    ]
    return ", ".join(parts) if parts else "no GPUs"


def _fmt_count(value: float) -> str:
    return f"{value:g}"


def _why(
    template: str,
    region: str,
    before: _Line,
    after: _Line,
    change: str,
    moved: Mapping[str, list[str]],
) -> str:
    delta = after.cost - before.cost
    if change == "added":
        text = (
            f"Added {_fmt_count(after.count)} × {template} in {region}: +{money(after.cost)} "
            f"for {_gpu_text(after.gpus)}."
        )
        elsewhere = [r for r in moved.get(template, []) if r != region]
        if elsewhere:
            text += (
                f" The same template was dropped in {', '.join(elsewhere)} (price or availability moved it)."
            )
        return text
    if change == "removed":
        return (
            f"Removed {_fmt_count(before.count)} × {template} in {region}: −{money(before.cost)}, "
            f"frees {_gpu_text(before.gpus)}."
        )
    if abs(after.count - before.count) > 1e-9:
        gpu_delta = {
            g: after.gpus.get(g, 0.0) - before.gpus.get(g, 0.0) for g in set(after.gpus) | set(before.gpus)
        }
        verb = "more" if after.count > before.count else "fewer"
        return (
            f"{template} in {region}: {_fmt_count(before.count)} → {_fmt_count(after.count)} copies "
            f"({verb}), {'+' if delta >= 0 else '−'}{money(abs(delta))} ({_gpu_text(gpu_delta, signed=True)})."
        )
    unit_before = before.cost / before.count if before.count else before.cost
    unit_after = after.cost / after.count if after.count else after.cost
    return (
        f"{template} in {region}: same {_fmt_count(after.count)} copies but the price per copy moved from "
        f"{money(unit_before)} to {money(unit_after)}."
    )


def plan_diff(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    *,
    per_copy: bool = False,
    include_unchanged: bool = False,
) -> pd.DataFrame:
    """Line-by-line difference between two plans' instances, with a sentence saying what changed.

    Parameters
    ----------
    before, after:
        Instance lists ``{"template_id", "region", "count", "cost_per_hour", "gpus": {gpu: n}}``.
        ``cost_per_hour`` and ``gpus`` are totals for the line (all ``count`` copies) unless
        ``per_copy``. Items with the same (template_id, region) are summed.
    per_copy:
        Read ``cost_per_hour`` and ``gpus`` as per copy (multiplied by ``count``).
    include_unchanged:
        Also return lines that did not change (``change == "unchanged"``).

    Returns
    -------
    pandas.DataFrame
        Columns ``template_id, region, change (added|removed|changed|unchanged), count_before,
        count_after, cost_before, cost_after, cost_delta, gpus_delta ({gpu: Δn}), why``; sorted by
        the size of the cost change, largest first.

    Raises
    ------
    PlanningError
        If an instance lacks a key or holds a non-number.
    """
    old = _lines(before, "before", per_copy)
    new = _lines(after, "after", per_copy)
    removed_regions: dict[str, list[str]] = {}
    for (template, region), line in old.items():
        if (template, region) not in new or new[(template, region)].count <= 0 < line.count:
            removed_regions.setdefault(template, []).append(region)
    rows: list[dict[str, Any]] = []
    for key in sorted(set(old) | set(new)):
        template, region = key
        b = old.get(key, _Line())
        a = new.get(key, _Line())
        if b.count <= 0 and a.count > 0:
            change = "added"
        elif a.count <= 0 < b.count:
            change = "removed"
        elif abs(a.count - b.count) > 1e-9 or abs(a.cost - b.cost) > 1e-9 or a.gpus != b.gpus:
            change = "changed"
        else:
            change = "unchanged"
        if change == "unchanged" and not include_unchanged:
            continue
        gpus_delta = {g: a.gpus.get(g, 0.0) - b.gpus.get(g, 0.0) for g in sorted(set(a.gpus) | set(b.gpus))}
        rows.append(
            {
                "template_id": template,
                "region": region,
                "change": change,
                "count_before": b.count,
                "count_after": a.count,
                "cost_before": b.cost,
                "cost_after": a.cost,
                "cost_delta": a.cost - b.cost,
                "gpus_delta": {g: d for g, d in gpus_delta.items() if abs(d) > 1e-9},
                "why": "No change."
                if change == "unchanged"
                else _why(template, region, b, a, change, removed_regions),
            }
        )
    frame = pd.DataFrame(rows, columns=list(DIFF_COLUMNS))
    if not frame.empty:
        frame = (
            frame.assign(_size=frame["cost_delta"].abs())
            .sort_values(["_size", "template_id", "region"], ascending=[False, True, True], kind="stable")
            .drop(columns="_size")
            .reset_index(drop=True)
        )
    return frame


def gpu_diff(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], *, per_copy: bool = False
) -> pd.DataFrame:
    """GPUs per type in each plan and the change.

    Parameters
    ----------
    before, after, per_copy:
        As for :func:`plan_diff`.

    Returns
    -------
    pandas.DataFrame
        Columns ``gpu, before, after, delta``, one row per GPU type in either plan, largest change first.
    """
    totals: dict[str, dict[str, float]] = {"before": {}, "after": {}}
    for name, items in (("before", before), ("after", after)):
        for line in _lines(items, name, per_copy).values():
            for gpu, n in line.gpus.items():
                totals[name][gpu] = totals[name].get(gpu, 0.0) + n
    gpus = sorted(set(totals["before"]) | set(totals["after"]))
    frame = pd.DataFrame(
        {
            "gpu": gpus,
            "before": [totals["before"].get(g, 0.0) for g in gpus],
            "after": [totals["after"].get(g, 0.0) for g in gpus],
        },
        columns=list(GPU_DIFF_COLUMNS[:3]),
    )
    frame["delta"] = frame["after"] - frame["before"]
    if not frame.empty:
        frame = (
            frame.assign(_size=frame["delta"].abs())
            .sort_values(["_size", "gpu"], ascending=[False, True], kind="stable")
            .drop(columns="_size")
            .reset_index(drop=True)
        )
    return frame


def diff_summary(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], *, per_copy: bool = False
) -> str:
    """One or two sentences on how the cost moved and which GPUs were swapped.

    Parameters
    ----------
    before, after, per_copy:
        As for :func:`plan_diff`.

    Returns
    -------
    str
        E.g. "The new plan costs $12.00/h less (−15 %): it drops 8×H100 and adds 12×L40S. 2 lines added,
        1 removed, 1 changed."
    """
    cost_before = sum(line.cost for line in _lines(before, "before", per_copy).values())
    cost_after = sum(line.cost for line in _lines(after, "after", per_copy).values())
    delta = cost_after - cost_before
    if abs(delta) < 0.005:
        head = f"The new plan costs the same ({money(cost_after)})"
    else:
        pct = f" ({100 * delta / cost_before:+.0f} %)" if cost_before > 0 else ""
        head = f"The new plan costs {money(abs(delta))} {'more' if delta > 0 else 'less'}{pct}"
    gpus = gpu_diff(before, after, per_copy=per_copy)
    change = dict(zip(gpus["gpu"].astype(str), gpus["delta"].astype(float), strict=True))
    drops = {g: -d for g, d in change.items() if d < 0}
    adds = {g: d for g, d in change.items() if d > 0}
    swaps = []
    if drops:
        swaps.append(f"drops {_gpu_text(drops)}")
    if adds:
        swaps.append(f"adds {_gpu_text(adds)}")
    head += (": it " + " and ".join(swaps) + ".") if swaps else "; the GPU mix is unchanged."
    lines = plan_diff(before, after, per_copy=per_copy)
    counts = Counter(lines["change"]) if not lines.empty else Counter()
    tail = ", ".join(
        f"{counts[c]} {word}"
        for c, word in (("added", "added"), ("removed", "removed"), ("changed", "changed"))
        if counts[c]
    )
    return head + (f" Lines: {tail}." if tail else " No instance changed.")


WATERFALL_ROW_PX = 30  # one step's row: its label (12 px) and bar with room to spare
WATERFALL_BASE_PX = 140  # title, axis and margins


def _running(start: float, deltas: Sequence[float]) -> list[float]:
    """The running totals of a waterfall after each step."""
    out, total = [], start
    for d in deltas:
        total += d
        out.append(total)
    return out


def plan_diff_figure(
    diff: pd.DataFrame, cost_before: float, title: str = "What changed the cost"
) -> go.Figure:
    """Waterfall from the old plan's $/h through each line's change to the new plan's $/h.

    Parameters
    ----------
    diff:
        Output of :func:`plan_diff`.
    cost_before:
        Total $/h of the old plan (the first bar).
    title:
        Figure title.

    Returns
    -------
    plotly.graph_objects.Figure
        One horizontal waterfall trace: "before", one step per changed line, "after", one row each (top to
        bottom), the figure as tall as its rows, labels outside the bars and never clipped.
    """
    if diff is None or diff.empty:
        return empty_figure("The two plans are the same: nothing changed.", title)
    labels = [f"{r.change}: {r.template_id} @ {r.region}" for r in diff.itertuples()]
    deltas = [float(d) for d in diff["cost_delta"]]
    steps = ["before", *labels, "after"]
    fig = go.Figure(
        go.Waterfall(
            orientation="h",  # one row per step: long template names never overlap, whatever their number
            y=steps,
            x=[float(cost_before), *deltas, 0.0],
            measure=["absolute", *(["relative"] * len(deltas)), "total"],
            text=[
                money(float(cost_before)),
                *[f"{d:+,.2f}" for d in deltas],
                money(float(cost_before) + sum(deltas)),
            ],
            textposition="outside",
            cliponaxis=False,  # a label beyond the last gridline is drawn, not cut
            hovertext=["", *diff["why"].tolist(), ""],
            decreasing={"marker": {"color": "#2CA02C"}},
            increasing={"marker": {"color": "#D62728"}},
            totals={"marker": {"color": "#7F7F7F"}},
        )
    )
    top = max(float(cost_before), *_running(float(cost_before), deltas))
    fig.update_layout(
        title=title,
        template="plotly_white",
        xaxis={"title": "USD per hour", "range": [0, top * 1.18 if top > 0 else 1.0]},  # room for the labels
        # the margin is measured in a fallback font and came out a few px short of the longest name's first
        # letter: two no-break spaces before each name take that shortfall
        yaxis={"autorange": "reversed", "automargin": True, "type": "category", "tickprefix": "\u00a0\u00a0"},
        height=WATERFALL_BASE_PX + WATERFALL_ROW_PX * len(steps),
        margin={"r": 40},
        showlegend=False,
    )
    return fig
