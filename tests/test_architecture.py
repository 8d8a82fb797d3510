"""House rules enforced by parsing the code (STYLE habit 1): one import direction."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _house_rules() -> ModuleType:
    """``tools/house_rules.py`` (a script, not a package): the counts of the house rules."""
    spec = importlib.util.spec_from_file_location("house_rules", ROOT / "tools" / "house_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("house_rules", module)  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


HOUSE = _house_rules()


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
PAPERS_DIR = "/".join(("shared", "papers"))  # spelled in parts: this file names no such path itself


def test_runtime_code_never_reads_shared_reference() -> None:
    """No runtime file (engine, app, pages, ui) names the CI-only reference or papers folder: a user's clone has
    neither (the Learn lessons restate the papers' numbers in data/learn)."""
    runtime = [*(ROOT / "planning").rglob("*.py"), ROOT / "app.py", *(ROOT / "views").glob("*.py"),
               *(ROOT / "ui").glob("*.py")]
    offenders = [p for p in runtime if p.exists()
                 and any(d in p.read_text(encoding="utf-8") for d in (REFERENCE_DIR, PAPERS_DIR))]
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


FACE = {"api", "api_fanout", "api_finance", "api_outputs", "api_simulate", "api_timeline", "cli"}
ORCHESTRATION = {"pipeline", "assemble", "whatif", "jobs", "viz"} | FACE


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
    assert not _rooms_imported("finance") & ({"pipeline", "whatif", "jobs", "viz"} | FACE)  # pipeline: passes solve
    assert _rooms_imported("api_finance") <= {"result"}
    assert _rooms_imported("pools") <= {"catalog", "errors"}
    # the rooms above the solve: each may run the pipeline, none calls the face or a room that uses it
    assert not _rooms_imported("sharing") & ({"timeline", "simulate", "jobs", "export", "viz", "whatif"} | FACE)
    assert not _rooms_imported("timeline") & ({"simulate", "jobs", "export", "viz", "whatif"} | FACE)
    assert not _rooms_imported("simulate") & ({"pipeline", "allocate", "templates", "sharing", "timeline"}
                                               | ORCHESTRATION)
    assert not _rooms_imported("export") & ({"pipeline", "sharing", "timeline", "simulate"} | ORCHESTRATION)
    assert _rooms_imported("jobs") <= {"context", "errors", "spawning"}  # runs any job function; knows no room
    assert not _rooms_imported("viz") & ({"pipeline", "allocate", "templates", "sharing", "jobs"} | FACE)
    for name in ("parallel", "spawning", "safeio", "errors", "context"):  # the core every room may use
        assert not _rooms_imported(name) & ({"templates", "allocate", "sharing", "timeline"} | ORCHESTRATION), name


def test_no_module_below_the_face_imports_it() -> None:
    """``planning.api*`` and ``planning.cli`` are imported only by the interfaces and each other (lazy imports
    inside functions count too): the engine never calls up."""
    graph = HOUSE.import_graph(HOUSE.modules(ROOT))
    assert HOUSE.face_imports_below(graph) == []


def test_no_import_circle_spans_two_rooms() -> None:
    """Modules that import each other (a strongly connected component of the import graph) live in one room."""
    graph = HOUSE.import_graph(HOUSE.modules(ROOT))
    assert HOUSE.circles_across_rooms(graph) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_import_checks_catch_a_lazy_circle_and_a_call_up(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "planning/__init__.py": "",
        "planning/api.py": "from planning.pipeline import solve\n",
        "planning/pipeline.py": "def solve():\n    from planning.finance.plan import run\n",
        "planning/finance/__init__.py": "",
        "planning/finance/plan.py": "def run():\n    from planning import pipeline\n",
        "planning/timeline/__init__.py": "",
        "planning/timeline/jobs.py": "def job():\n    from planning import api\n",
        "planning/sharing/__init__.py": "from planning.sharing.plan import x\n",
        "planning/sharing/plan.py": "from planning.sharing import y\n",  # a circle inside one room: allowed
    })
    graph = HOUSE.import_graph(HOUSE.modules(root))
    assert HOUSE.circles_across_rooms(graph) == [["planning.finance.plan", "planning.pipeline"]]
    assert HOUSE.face_imports_below(graph) == ["planning.timeline.jobs → planning.api"]


# The figures after issue 39 (before: 18 face imports below it, 4 cross-room circles, 25, 50, 3): they may only go
# down; lower them when you cut more (python tools/house_rules.py).
CEILINGS = {"face_imports_below": 0, "circles_across_rooms": 0, "functions_over_100_lines": 0,
            "functions_over_8_parameters": 0, "modules_over_600_lines": 0}


def test_house_rule_counts_only_go_down() -> None:
    """Functions over 100 lines, over 8 parameters, modules over 600 lines, face imports below it and import
    circles across rooms stay at or below their ceilings (``python tools/house_rules.py --list`` names them)."""
    counts = {rule: len(offenders) for rule, offenders in HOUSE.report(ROOT).items()}
    over = {rule: f"{n} > {CEILINGS[rule]}" for rule, n in counts.items() if n > CEILINGS[rule]}
    assert not over, f"house rules broken (python tools/house_rules.py --list): {over}"


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


def test_sharing_results_are_built_with_keywords() -> None:
    """Issue 39: a SharingResult has 20 fields; built positionally, one moved field silently swaps two numbers."""
    positional = []
    for path in (ROOT / "planning").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "SharingResult" and node.args:
                positional.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert positional == []
