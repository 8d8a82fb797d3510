"""Home page (catalog browser) renders every tab's table without exceptions (Streamlit AppTest)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from planning.catalog.load import load_catalog

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_home_renders_all_catalog_tabs() -> None:
    at = AppTest.from_file(APP, default_timeout=60).run()
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
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.multiselect(key="cfg_cloud").set_value(["aws"]).run()
    at.multiselect(key="cfg_gpu").set_value(["L40S"]).run()
    assert not at.exception
    configs = at.dataframe[1].value
    assert len(configs) > 0
    assert set(configs["shape"].str.split("x").str[1]) == {"L40S"}
    assert configs["region_key"].str.startswith("aws:").all()
