"""`planning prices refresh --skypilot-catalog DIR`: the user's SkyPilot catalog into the user price layer."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``prices`` sub-command."""
    p = subparsers.add_parser("prices", help="refresh node prices from your SkyPilot catalog (a user price layer)")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    ref = sub.add_parser("refresh", help="read ~/.sky/catalogs/<version>/<cloud>/vms.csv into "
                                         "$PLANNING_HOME/catalog/node_configs.csv (as of the files' date)")
    ref.add_argument("--skypilot-catalog", required=True, type=Path,
                     help="SkyPilot's catalog folder, e.g. ~/.sky/catalogs/v8")
    ref.set_defaults(func=run_refresh)


def run_refresh(args: argparse.Namespace) -> int:
    """Execute ``planning prices refresh``."""
    from planning.catalog.prices import refresh_prices

    refresh, path = refresh_prices(args.skypilot_catalog)
    print(f"{len(refresh.rows)} node configs priced from SkyPilot's catalog ({refresh.changed} changed, "
          f"{refresh.unchanged} unchanged); {refresh.kept} shipped rows of those clouds kept (not priced there "
          f"directly). Layer: {path}")
    for w in refresh.warnings:
        print(f"warning: {w}")
    return 0
