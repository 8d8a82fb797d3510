"""The house rules, counted from the code: long functions, long parameter lists, long modules, the face imported
from below, and import circles that span two rooms.

Run: ``python tools/house_rules.py [--root DIR] [--list] [--json]``. Prints one count per rule (``--list``: every
offender too). ``tests/test_architecture.py`` holds each count at or below its ceiling, so they only go down.

Definitions (docs/architecture.md, "The import rules"):

- a *module* is a ``.py`` file under ``planning/``; its *room* is the first name below ``planning``
  (``planning/sharing/plan.py`` → ``sharing``, ``planning/pipeline.py`` → ``pipeline``);
- the *face* is ``planning/api.py``, ``planning/api_*.py`` and the CLI adapters ``planning/cli/``;
- an import is every ``import``/``from ... import`` anywhere in the file, inside functions too (lazy imports are
  arrows all the same); ``from planning.x import y`` names the module ``planning.x.y`` when that file exists, and
  importing ``planning.x.y`` imports the package ``planning.x`` too (Python runs its ``__init__`` first);
- a function's length counts from its ``def`` line to its last line, docstring included; its parameters are all
  of them but ``self``/``cls`` (``*args`` and ``**kwargs`` count one each).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

MAX_FUNCTION_LINES = 100
MAX_PARAMETERS = 8
MAX_MODULE_LINES = 600


@dataclass(frozen=True)
class Module:
    """One parsed module: its dotted name, path and syntax tree."""

    name: str
    path: Path
    tree: ast.Module
    lines: int


def modules(root: Path) -> dict[str, Module]:
    """Every module under ``root/planning`` by dotted name (a package is its ``__init__``)."""
    out: dict[str, Module] = {}
    for path in sorted((root / "planning").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        text = path.read_text(encoding="utf-8")
        out[".".join(parts)] = Module(".".join(parts), path, ast.parse(text), len(text.splitlines()))
    return out


def room(name: str) -> str:
    """The room of a dotted module name: the first name below ``planning`` (``planning`` itself for the package)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def in_face(name: str) -> bool:
    """Whether a module is the public face (``api``, ``api_*``) or a CLI adapter (``planning.cli``)."""
    r = room(name)
    return r == "api" or r.startswith("api_") or r == "cli"


def imports(module: Module, known: set[str]) -> set[str]:
    """The planning modules one module imports, anywhere in its file, resolved to known module names."""
    found: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "planning")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "planning":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    # importing ``planning.a.b`` first runs ``planning/a/__init__.py``: the package is imported too
    resolved = {_known(n, known) for n in found}
    parents = {".".join(n.split(".")[:k]) for n in resolved for k in range(2, n.count(".") + 1)}
    return (resolved | parents) - {module.name, "", "planning"}


def _known(name: str, known: set[str]) -> str:
    """``name`` or its nearest known parent package ("" when none)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def import_graph(mods: dict[str, Module]) -> nx.DiGraph:
    """Directed graph: an edge ``a → b`` when module ``a`` imports module ``b``."""
    graph = nx.DiGraph()
    known = set(mods)
    graph.add_nodes_from(known)
    for name, mod in mods.items():
        graph.add_edges_from((name, target) for target in imports(mod, known))
    return graph


def circles_across_rooms(graph: nx.DiGraph) -> list[list[str]]:
    """Strongly connected components (import circles) whose modules belong to two rooms or more."""
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len({room(m) for m in c}) > 1)


def face_imports_below(graph: nx.DiGraph) -> list[str]:
    """``module → face module`` for every module below the face that imports the face."""
    return sorted(f"{a} → {b}" for a, b in graph.edges if in_face(b) and not in_face(a))


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """All parameters but a leading ``self``/``cls``; ``*args`` and ``**kwargs`` count one each."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return n - 1 if names and names[0] in ("self", "cls") else n


def long_functions(mods: dict[str, Module]) -> list[str]:
    """``path:line name (N lines)`` for every function over :data:`MAX_FUNCTION_LINES`, docstring included."""
    out = []
    for mod in mods.values():
        for fn in _functions(mod.tree):
            n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out.append(f"{_rel(mod)}:{fn.lineno} {fn.name} ({n} lines)")
    return sorted(out)


def many_parameters(mods: dict[str, Module]) -> list[str]:
    """``path:line name (N parameters)`` for every function with more than :data:`MAX_PARAMETERS`."""
    out = []
    for mod in mods.values():
        for fn in _functions(mod.tree):
            if (n := parameter_count(fn)) > MAX_PARAMETERS:
                out.append(f"{_rel(mod)}:{fn.lineno} {fn.name} ({n} parameters)")
    return sorted(out)


def long_modules(mods: dict[str, Module]) -> list[str]:
    """``path (N lines)`` for every module over :data:`MAX_MODULE_LINES`."""
    return sorted(f"{_rel(m)} ({m.lines} lines)" for m in mods.values() if m.lines > MAX_MODULE_LINES)


def _rel(mod: Module) -> str:
    parts = mod.path.parts
    return "/".join(parts[parts.index("planning"):]) if "planning" in parts else str(mod.path)


def report(root: Path) -> dict[str, list[str]]:
    """Every rule's offenders (``circles`` as ``a, b, c`` per circle)."""
    mods = modules(root)
    graph = import_graph(mods)
    return {
        "face_imports_below": face_imports_below(graph),
        "circles_across_rooms": [", ".join(c) for c in circles_across_rooms(graph)],
        "functions_over_100_lines": long_functions(mods),
        "functions_over_8_parameters": many_parameters(mods),
        "modules_over_600_lines": long_modules(mods),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--list", action="store_true", help="print every offender")
    parser.add_argument("--json", action="store_true", help="print the offenders as JSON")
    args = parser.parse_args(argv)
    found = report(args.root)
    if args.json:
        json.dump(found, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    for rule, offenders in found.items():
        print(f"{rule}: {len(offenders)}")
        if args.list:
            print("".join(f"  {o}\n" for o in offenders), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
