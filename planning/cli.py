"""Thin command-line adapter: parses arguments, calls public planning functions, prints results."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from planning.errors import PlanningError

# Each area owns its sub-commands in ``planning/<area>/commands.py`` exposing ``register(subparsers)``;
# registered parsers set ``func`` (args -> exit code).
_COMMAND_MODULES = (
    "planning.catalog.commands",
    "planning.perf.commands",
    "planning.templates.commands",
    "planning.jobs.commands",
    "planning.allocate.commands",
    "planning.commands",
    "planning.timeline.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="planning",
        description="Plan cost-minimal LLM serving on heterogeneous cloud GPUs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # an area not built yet must not break the others
            if exc.name is None or not name.startswith(exc.name):
                raise
            continue
        module.register(sub)
    return parser


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except PlanningError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: file not found: {exc.filename}. Fix: check the path.", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
