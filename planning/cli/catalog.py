"""``planning catalog gpus|configs|models|regions|slos [--json]``: print the catalog as a table or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planning.catalog.load import load_catalog
from planning.catalog.tables import catalog_rows

KINDS = ("gpus", "configs", "models", "regions", "slos")

_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gpus": ("id", "memory_gb", "memory_mib", "hbm_bw_gbps", "bf16_tflops", "fp8_tflops", "intra_link",
             "intra_link_gbps", "p2p", "generation"),
    "configs": ("id", "shape", "vcpus", "price_on_demand", "price_spot", "network_gbps", "quality"),
    "models": ("id", "layers", "hidden_size", "num_heads", "num_kv_heads", "experts_total", "experts_active",
               "params_total_b", "params_active_b", "dtype", "sliding_window"),
    "regions": ("key", "display_name"),
    "slos": ("id", "model_id", "prefill_ms", "decode_ms"),
}  # fmt: skip


def _format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(b[i]) for b in body)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def _run(args: argparse.Namespace) -> int:
    from planning.cli import print_json

    catalog = load_catalog(overrides_dir=Path(args.overrides) if args.overrides else None)
    rows = catalog_rows(catalog, args.kind)
    if args.kind == "configs":
        rows = [
            r
            for r in rows
            if (not args.cloud or r["cloud"] == args.cloud)
            and (not args.region or r["region_key"] == args.region or r["region"] == args.region)
            and (not args.gpu or r["gpu_id"] == args.gpu)
        ]
    if args.json:
        print_json(rows)
    else:
        print(_format_table(rows, _TABLE_COLUMNS[args.kind]))
        print(f"({len(rows)} rows)")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``planning catalog KIND [--json]`` to the CLI."""
    parser = subparsers.add_parser(
        "catalog", help="show catalog tables (GPUs, node configs, models, regions)"
    )
    parser.add_argument("kind", choices=KINDS, help="which table to show")
    parser.add_argument("--json", action="store_true", help="print a JSON list of records")
    parser.add_argument(
        "--overrides", metavar="DIR", help="folder of user CSV/YAML overrides to layer on top"
    )
    parser.add_argument("--cloud", help="configs only: keep one cloud (aws, gcp, azure, lambda, runpod)")
    parser.add_argument("--region", help="configs only: keep one region (us-east-2 or aws:us-east-2)")
    parser.add_argument("--gpu", help="configs only: keep one GPU id")
    parser.set_defaults(func=_run)
