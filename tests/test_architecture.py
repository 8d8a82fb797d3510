"""House rules enforced by parsing the code (STYLE habit 1): one import direction."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_planning_never_imports_streamlit() -> None:
    offenders = [p for p in (ROOT / "planning").rglob("*.py") if "streamlit" in _imports(p)]
    assert offenders == []


def test_ui_never_imports_solver_libraries() -> None:
    ui_files = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
    offenders = [p for p in ui_files if p.exists() and _imports(p) & {"pulp", "highspy", "scipy"}]
    assert offenders == []


def test_runtime_code_never_reads_shared_reference() -> None:
    runtime = [*(ROOT / "planning").rglob("*.py"), ROOT / "app.py", *(ROOT / "pages").glob("*.py"),
               *(ROOT / "ui").glob("*.py")]
    offenders = [p for p in runtime if p.exists() and "shared/reference" in p.read_text(encoding="utf-8")]
    assert offenders == []
