"""House rules enforced by parsing the code (STYLE habit 1): one import direction."""

from __future__ import annotations

import ast
import re
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
    ui_files = [ROOT / "app.py", *sorted((ROOT / "views").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
    offenders = [p for p in ui_files if p.exists() and _imports(p) & {"pulp", "highspy", "scipy"}]
    assert offenders == []


# The reference-data folder that sits beside the clone in CI only. The test below reads files of this repository
# and searches them for that path; the path is assembled so this file does not itself look like a reader of it.
REFERENCE_DIR = "/".join(("shared", "reference"))


def test_runtime_code_never_reads_shared_reference() -> None:
    """No runtime file (engine, app, pages, ui) names the CI-only reference folder: a user's clone has none."""
    runtime = [*(ROOT / "planning").rglob("*.py"), ROOT / "app.py", *(ROOT / "views").glob("*.py"),
               *(ROOT / "ui").glob("*.py")]
    offenders = [p for p in runtime if p.exists() and REFERENCE_DIR in p.read_text(encoding="utf-8")]
    assert offenders == []


PUBLIC_FACE = {"api", "viz", "result", "scenario", "errors", "jobs"}


def _planning_modules(path: Path) -> set[str]:
    """Every ``planning`` module a file imports, as dotted names (``from planning import api`` → planning.api)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "planning")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "planning":
                found.update(f"planning.{a.name}" for a in node.names)
            elif node.module.split(".")[0] == "planning":
                found.add(node.module)
    return found


def test_interfaces_import_only_the_public_face() -> None:
    """Pages and ui/ call the engine through planning.api/viz/result/scenario/errors/jobs, never its rooms."""
    ui_files = [ROOT / "app.py", *sorted((ROOT / "views").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
    offenders = {
        str(p.relative_to(ROOT)): sorted(bad)
        for p in ui_files
        if (bad := {m for m in _planning_modules(p)
                    if m != "planning" and m.split(".")[1] not in PUBLIC_FACE})
    }
    assert offenders == {}


def test_public_face_check_catches_a_deep_import(tmp_path: Path) -> None:
    page = tmp_path / "page.py"
    page.write_text("from planning import api, viz\nfrom planning.catalog.load import load_catalog\n"
                    "import planning.templates.sets\n")
    assert _planning_modules(page) == {"planning.api", "planning.viz", "planning.catalog.load",
                                       "planning.templates.sets"}


def test_engine_never_imports_the_interfaces() -> None:
    offenders = [p for p in (ROOT / "planning").rglob("*.py") if _imports(p) & {"ui", "views", "app"}]
    assert offenders == []


def test_one_cancelled_and_one_cancel_token() -> None:
    """planning.context owns the run contract: no other module defines a Cancelled or CancelToken class."""
    owners = []
    for p in (ROOT / "planning").rglob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        owners += [(p.relative_to(ROOT).as_posix(), n.name) for n in ast.walk(tree)
                   if isinstance(n, ast.ClassDef) and n.name in {"Cancelled", "CancelToken", "JobCancelled"}]
    assert sorted(owners) == [("planning/context.py", "CancelToken"), ("planning/context.py", "Cancelled")]


def _rooms_imported(room: str) -> set[str]:
    """Top-level planning modules/packages imported anywhere in one room (``planning/<room>`` or ``<room>.py``)."""
    base = ROOT / "planning" / room
    files = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    return {m.split(".")[1] for p in files for m in _planning_modules(p) if m != "planning"} - {room}


ORCHESTRATION = {"api", "api_fanout", "api_simulate", "pipeline", "assemble", "whatif", "jobs", "viz", "commands"}


def test_rooms_import_only_downstream() -> None:
    """The direction catalog → perf → templates → allocate → baselines → result → interfaces."""
    assert _rooms_imported("catalog") <= {"errors", "cli", "safeio"}  # safeio: the bounded loader, a leaf
    parts = {"scenario_demand", "scenario_supply", "scenario_options", "scenario_io", "scenario_finance"}  # scenario.py's split
    assert _rooms_imported("scenario") <= {"errors", "safeio", "scenario_fields"} | parts  # + field validators
    for part in parts:
        assert _rooms_imported(part) <= {"errors", "scenario_fields", "scenario"}, part  # io: Scenario as a type
    assert _rooms_imported("scenario_fields") <= {"errors"}
    assert _rooms_imported("result") <= {"billing"}  # the bill's one definition, a leaf the result carries
    assert _rooms_imported("billing") == set()
    assert _rooms_imported("context") <= {"catalog", "perf"}
    assert not _rooms_imported("perf") & ({"templates", "allocate", "baselines"} | ORCHESTRATION)
    assert not _rooms_imported("templates") & ({"allocate", "baselines"} | ORCHESTRATION)
    assert not _rooms_imported("allocate") & ORCHESTRATION
    assert not _rooms_imported("baselines") & ({"templates"} | ORCHESTRATION)
    # finance: a room (commitments, accounting, bill) whose plan.py runs the pipeline; never the interfaces' face
    assert not _rooms_imported("finance") & {"api", "api_simulate", "api_finance", "whatif", "jobs", "viz", "commands"}
    assert _rooms_imported("api_finance") <= {"result"}
    assert _rooms_imported("pools") <= {"catalog", "errors"}


_SAVING_SHAPES = re.compile(r"1(\.0)? - [^/\n]*(cost|price|only|provisioning|\$/h)[^/\n]* / |100(\.0)? \* \(1 - "
                            r"|\([\w.]+ - [\w.]*cost[\w.]*\) / ")


def test_one_savings_formula() -> None:
    """Savings are computed by ``result.savings_pct`` only: a second copy of the formula drifts (issue 7 §3)."""
    hits = []
    for folder in ("planning", "ui", "views"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _SAVING_SHAPES.search(line) and not (path.name == "result.py" and path.parent.name == "planning"):
                    hits.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert not hits, "use planning.result.savings_pct:\n" + "\n".join(hits)


def test_savings_formula_check_catches_a_copy() -> None:
    assert _SAVING_SHAPES.search("saving = 1 - plan.total_cost / base")
    assert _SAVING_SHAPES.search("pct = 100 * (1 - a / b)")
    assert _SAVING_SHAPES.search("change = (shared - result.comparable_cost) / result.comparable_cost")
    assert _SAVING_SHAPES.search("saving = (1 - provisioning / b.cost_per_hour) if same else None")  # report.py once
    assert _SAVING_SHAPES.search('out["spot saves"] = 1 - out["spot $/h"] / out["on-demand $/h"]')  # ui/markets.py once
    assert not _SAVING_SHAPES.search("return experts * (1.0 - np.power(1.0 - active / experts, t))")
