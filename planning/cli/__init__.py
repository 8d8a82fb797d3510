"""Thin command-line adapter: parses arguments, calls public planning functions, prints results."""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from planning.errors import PlanningError, quote

# Each area's sub-commands live in ``planning/cli/<area>.py`` exposing ``register(subparsers)``;
# registered parsers set ``func`` (args -> exit code). ``main`` imports only the module of the command asked
# (:data:`COMMANDS`; a test checks it against what each module registers): ``planning solve`` never pays for the
# imports of ``simulate`` or ``perf``; ``planning --help`` and an unknown command build the whole parser.
COMMANDS = {
    "catalog": "planning.cli.catalog", "perf": "planning.cli.perf", "place": "planning.cli.templates",
    "jobs": "planning.cli.jobs", "allocate": "planning.cli.allocate", "solve": "planning.cli.commands",
    "templates": "planning.cli.commands", "sweep": "planning.cli.commands", "validate": "planning.cli.commands",
    "presets": "planning.cli.commands", "export": "planning.cli.export", "simulate": "planning.cli.simulate",
    "import-melange": "planning.cli.melange", "timeline": "planning.cli.timeline",
    "measurements": "planning.cli.measurements", "validate-plan": "planning.cli.measurements",
    "prices": "planning.cli.prices",
}
"""Each command's module (the one whose ``register`` adds it), in the order ``planning --help`` lists them: a
module's commands are listed together, in the order its ``register`` adds them."""

_COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))
"""The modules the whole parser imports, in :data:`COMMANDS`' order (each once)."""

EXIT_OK, EXIT_NO_PLAN, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_CODES_HELP = """exit codes:
  0  a plan was found (or the command succeeded)
  1  no plan: the problem is infeasible, or the time limit passed before any plan was found
  2  bad input: a file, option or value is wrong; the message names the field and the fix
  3  internal error: a bug; a one-line message names the log file holding the traceback
     ($PLANNING_HOME/logs, else the system temp folder)
  4  a plan that misses an SLO (status slo_miss): every alternative computed failed an SLO check"""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser: every command, or only ``command``'s module's (:data:`COMMANDS`) when it names one."""
    parser = argparse.ArgumentParser(
        prog="planning",
        description="Plan cost-minimal LLM serving on heterogeneous cloud GPUs.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    modules = [COMMANDS[command]] if command in COMMANDS else _COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def print_json(payload: Any) -> None:
    json.dump(payload, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def log_dir() -> Path:
    """Folder for crash logs: ``$PLANNING_HOME/logs`` when set, else ``<tmp>/planning-logs``."""
    home = os.environ.get("PLANNING_HOME")
    return Path(home).expanduser() / "logs" if home else Path(tempfile.gettempdir()) / "planning-logs"


def _write_crash_log(argv: Sequence[str] | None, exc: BaseException) -> str:
    """Write the traceback of an unexpected error; returns where it went (or why it could not be written)."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = (f"planning {' '.join(map(str, sys.argv[1:] if argv is None else argv))}\n"
            + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
    for folder in (log_dir(), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"planning-crash-{stamp}-{os.getpid()}.log"
            path.write_text(text, encoding="utf-8")
            return str(path)
        except OSError:
            continue
    return "nowhere (no writable log folder)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit code (see :data:`EXIT_CODES_HELP`): 0 ok, 1 no plan, 2 bad input, 3 bug.

    Parameters
    ----------
    argv:
        Arguments without the program name; ``None`` reads ``sys.argv``.

    Returns
    -------
    int
        The exit code; an unexpected error's traceback goes to a log file instead of the terminal.

    Raises
    ------
    SystemExit
        From argparse only: code 2 for a usage error, 0 for ``--help``.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)  # usage errors exit with 2 through argparse's SystemExit, --help with 0
    try:
        code = args.func(args)
    except PlanningError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FileNotFoundError as exc:
        print(f"error: file not found: {quote(str(exc.filename), 120)}. Fix: check the path.", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (IsADirectoryError, NotADirectoryError, PermissionError, FileExistsError) as exc:
        print(f"error: cannot use {quote(str(exc.filename), 120)}: {exc.strerror}. "
              "Fix: check the path and its permissions.", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted.", file=sys.stderr)
        return 130
    except Exception as exc:
        where = _write_crash_log(argv, exc)
        print(f"internal error: {type(exc).__name__}: {quote(str(exc), 200, bare=True)} "
              f"(a bug; traceback written to {where}).", file=sys.stderr)
        return EXIT_INTERNAL
    if isinstance(code, bool) or not isinstance(code, int):
        return EXIT_OK if code is None else EXIT_INTERNAL
    return code

