"""The README's map of the documentation names every page under docs/ (issue 38 §6: docs/finance.md was missing)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_names_every_doc_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout and documentation"):]
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert "finance.md" in pages
    missing = [name for name in pages if f"`{name}`" not in layout]
    assert missing == [], f"name these in README.md, Layout and documentation: {missing}"
