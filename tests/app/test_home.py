"""Catalog page (views/6_Catalog.py, the catalog browser) renders every tab's table without exceptions (Streamlit AppTest)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from planning.catalog.load import load_catalog

APP = str(Path(__file__).resolve().parents[2] / "app.py")
CATALOG_PAGE = "views/6_Catalog.py"  # app.py became the workbench Home; the browser moved here


def _catalog_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page(CATALOG_PAGE)
    return at.run()


def test_home_renders_all_catalog_tabs() -> None:
    at = _catalog_page()
    assert not at.exception
    assert [t.label for t in at.tabs] == ["GPUs", "Node configs", "Models", "SLO presets", "Presets"]
    catalog = load_catalog()
    frames = [df.value for df in at.dataframe]
    assert len(frames) == 5
    gpus, configs, models, slos, presets = frames
    assert set(gpus["id"]) == set(catalog.gpus)
    assert len(configs) == len(catalog.configs)
    assert configs["hypothetical"].any() and (configs["age_days"] >= 0).all()
    assert set(models["id"]) == set(catalog.models)
    assert set(slos["id"]) == set(catalog.slo_presets)
    assert "coral-core" in set(presets["name"])


def test_config_filters_narrow_the_table() -> None:
    at = _catalog_page()
    at.multiselect(key="cfg_cloud").set_value(["aws"]).run()
    at.multiselect(key="cfg_gpu").set_value(["L40S"]).run()
    assert not at.exception
    configs = at.dataframe[1].value
    assert len(configs) > 0
    assert set(configs["shape"].str.split("x").str[1]) == {"L40S"}
    assert configs["region_key"].str.startswith("aws:").all()


def test_navigation_first_entry_reads_home_with_font_free_icons() -> None:
    """Issue 12: the sidebar's first entry is "Home" (not "app"); every icon is a Material icon (no emoji font)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    tree = ast.parse((root / "app.py").read_text(encoding="utf-8"))
    pages = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Page"]
    kwargs = [{k.arg: ast.literal_eval(k.value) for k in p.keywords} for p in pages]
    paths = [ast.literal_eval(p.args[0]) for p in pages]
    assert kwargs[0]["title"] == "Home" and kwargs[0].get("default") is True
    assert all(kw["icon"].startswith(":material/") for kw in kwargs)
    from ui import admin  # the Admin page is listed by ui/admin.py, only for admins

    assert sorted([*paths, admin.PAGE]) == sorted(f"views/{p.name}" for p in (root / "views").glob("*.py"))
