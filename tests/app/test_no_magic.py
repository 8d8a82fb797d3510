"""Streamlit magic is off, and no page needs it.

Magic re-parses each page with ``ast.parse`` in its script thread; on CPython before 3.11.9 that races between
threads (python/cpython#106905) and once failed a page in the suite with "AST constructor recursion depth
mismatch". With magic off a page shows only what it writes with ``st.*``, so a bare expression in a page (which
magic would have displayed) would silently vanish: this test finds any.
"""

from __future__ import annotations

import ast
from pathlib import Path

from streamlit import config

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "app.py", *sorted((ROOT / "views").glob("*.py"))]


def _displayed_by_magic(tree: ast.Module) -> list[str]:
    """Expression statements magic would display: anything but a call, an await or a docstring."""
    docstrings = {id(body[0]) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                  for body in [node.body] if body}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Expr) or id(node) in docstrings:
            continue
        if isinstance(node.value, ast.Call | ast.Await | ast.Yield | ast.YieldFrom):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)[:60]}")
    return found


def test_magic_is_off_in_the_project_config() -> None:
    """The project's .streamlit/config.toml (read by the server and AppTest from the repo root) turns magic off."""
    assert config.get_option("runner.magicEnabled") is False


def test_no_page_writes_by_magic() -> None:
    """Every page writes with st.* calls; a bare expression would need magic to show."""
    assert len(PAGES) > 5
    offenders = {p.name: found for p in PAGES if (found := _displayed_by_magic(ast.parse(p.read_text())))}
    assert offenders == {}


def test_the_check_finds_a_bare_expression() -> None:
    """The scan is not vacuous: a page with a bare name or f-string is reported, a docstring and a call are not."""
    tree = ast.parse('"""doc"""\nimport streamlit as st\ndef f():\n    """d"""\n    return 1\nst.write(1)\nx = 2\nx\nf"{x}"\n')
    assert [s.split(":")[0] for s in _displayed_by_magic(tree)] == ["line 8", "line 9"]
