"""CLI sub-commands of the templates area: ``planning place FILE [--method exact|ilp|brute] [--json]``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from planning.errors import PlanningError
from planning.templates.placement import METHODS, Placement, place

MAX_FILE_BYTES = 64 * 1024 * 1024


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``place`` to the top-level parser."""
    p = subparsers.add_parser(
        "place",
        help="throughput-optimal placement of a model on explicit node tables",
        description=(
            'FILE holds one instance {"layers": L, "thr": thr} or a JSON list of them; thr[S-1][k][j-1] is the '
            "throughput of node k holding j layers when the template has S stages (0 = cannot hold)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="JSON file with one instance or a list of instances")
    p.add_argument("--method", choices=METHODS, default="exact", help="solver (default: exact)")
    p.add_argument("--time-limit", type=float, default=60.0, help="seconds per ILP solve (ilp only)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run_place)


def load_instances(path: str | Path) -> tuple[list[dict[str, Any]], bool]:
    """Read FILE; returns (instances, was_list).

    Raises
    ------
    PlanningError
        If the file is too large, is not valid JSON (with line and column), or an instance lacks keys.
    FileNotFoundError
        If the file does not exist.
    """
    from planning.safeio import Limits, load_json_file

    data = load_json_file(path, field="FILE", limits=Limits(max_bytes=MAX_FILE_BYTES, max_nodes=20_000_000),
                          what="placement instance file (JSON)")
    was_list = isinstance(data, list)
    items = data if was_list else [data]
    for i, item in enumerate(items):
        where = f"instances[{i}]" if was_list else "instance"
        if not isinstance(item, dict):
            raise PlanningError(
                where, f"must be an object, got {type(item).__name__}.", 'use {"layers": L, "thr": [...]}.'
            )
        missing = [k for k in ("layers", "thr") if k not in item]
        if missing:
            raise PlanningError(
                where, f"is missing {', '.join(missing)}.", 'use {"layers": L, "thr": [...]}.'
            )
    return items, was_list


def solve_instances(
    items: list[dict[str, Any]], method: str, time_limit: float = 60.0, was_list: bool = True
) -> list[Placement]:
    """Place every instance; errors name the instance index."""
    out = []
    for i, item in enumerate(items):
        try:
            out.append(place(item["layers"], item["thr"], method=method, time_limit=time_limit))
        except PlanningError as exc:
            prefix = f"instances[{i}]." if was_list else ""
            raise PlanningError(prefix + exc.field, exc.problem, exc.fix) from None
    return out


def placement_json(pl: Placement) -> dict[str, Any]:
    """Per-instance output: ``throughput``, ``stages`` [{layers, nodes}], ``seconds``, ``method``, ``status``."""
    return pl.to_dict()


def _text(i: int, pl: Placement) -> str:
    lines = [
        f"instance {i}: throughput {pl.throughput:g} with {pl.n_stages} stage(s) "
        f"[{pl.method}, {pl.status}, {pl.seconds * 1e3:.3f} ms]"
    ]
    if not pl.stages:
        lines.append("  no feasible placement (no node set can hold the layers)")
    for s, (st, (a, b)) in enumerate(zip(pl.stages, pl.layer_ranges(), strict=True)):
        lines.append(f"  stage {s + 1}: layers {a}-{b - 1} ({st.layers}) on nodes {list(st.nodes)}")
    return "\n".join(lines)


def run_place(args: argparse.Namespace) -> int:
    """Entry point of ``planning place``."""
    from planning.cli import print_json

    items, was_list = load_instances(args.file)
    results = solve_instances(items, args.method, args.time_limit, was_list)
    if args.json:
        payload = [placement_json(r) for r in results]
        print_json(payload if was_list else payload[0])
    else:
        print("\n".join(_text(i, r) for i, r in enumerate(results)))
    return 0
