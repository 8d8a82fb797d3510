"""The measurements room sits below the face: it never imports the public face or the orchestration."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"api", "api_fanout", "api_simulate", "api_measurements", "pipeline", "assemble", "whatif", "jobs", "viz",
             "streamlit"}


def _modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        for n in names:
            parts = n.split(".")
            found.add(parts[1] if parts[0] == "planning" and len(parts) > 1 else parts[0])
    return found


def test_room_imports_nothing_above_it() -> None:
    files = [p for p in (ROOT / "planning" / "measurements").glob("*.py") if p.name != "commands.py"]
    assert files
    assert {p.name: sorted(_modules(p) & FORBIDDEN) for p in files if _modules(p) & FORBIDDEN} == {}
