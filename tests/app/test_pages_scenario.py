"""Scenario page: renders the tables, applies edits through the engine's validation, saves and loads."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import app, save_tiny, texts


def _on_tiny(home: Path):  # type: ignore[no-untyped-def]
    save_tiny(home)
    at = app("views/1_Scenario.py")
    load = next(s for s in at.selectbox if s.label == "Preset or saved scenario")
    load.set_value("saved:tiny")
    next(b for b in at.button if b.label == "Load").click()
    at.run()
    return at


def test_scenario_page_renders_tables() -> None:
    at = app("views/1_Scenario.py")
    assert not at.exception
    subheaders = [s.value for s in at.subheader]
    for name in ("Models, SLOs and demand", "Where", "Objective and options", "Prices and availability",
                 "Custom model"):
        assert name in subheaders


def test_load_saved_then_apply_edit(planning_home: Path) -> None:
    at = _on_tiny(planning_home)
    assert not at.exception
    assert at.session_state["scenario"].name == "tiny"
    nmax = next(n for n in at.number_input if n.label.startswith("Nmax"))
    nmax.set_value(4)
    next(b for b in at.button if b.label == "Apply").click()
    at.run()
    assert not at.exception
    assert at.session_state["scenario"].options.nmax == 4
    assert at.session_state["scenario_origin"] == "edited"
    assert "Scenario updated." in texts(at)


def test_removing_every_region_shows_the_engines_message(planning_home: Path) -> None:
    at = _on_tiny(planning_home)
    next(m for m in at.multiselect if m.label == "Regions").set_value([])
    next(b for b in at.button if b.label == "Apply").click()
    at.run()
    assert not at.exception
    errors = "\n".join(str(e.value) for e in at.error)
    assert "regions" in errors and "Fix:" in errors
    assert at.session_state["scenario"].regions == ("aws:us-east-2",)  # the bad edit was not kept


def test_save_to_disk_lists_the_scenario(planning_home: Path) -> None:
    at = _on_tiny(planning_home)
    next(t for t in at.text_input if t.label == "Save as").set_value("my plan")
    next(b for b in at.button if b.label == "Save to my scenarios").click()
    at.run()
    assert (planning_home / "scenarios" / "my-plan.yaml").is_file()
    at.run()
    assert "my-plan (saved)" in next(s for s in at.selectbox if s.label == "Preset or saved scenario").options


def test_invalid_saved_file_shows_the_parse_error(planning_home: Path) -> None:
    folder = planning_home / "scenarios"
    folder.mkdir(parents=True)
    (folder / "broken.yaml").write_text("name: x\nmodels: [\n", encoding="utf-8")
    at = app("views/1_Scenario.py")
    next(s for s in at.selectbox if s.label == "Preset or saved scenario").set_value("saved:broken")
    next(b for b in at.button if b.label == "Load").click()
    at.run()
    assert not at.exception
    assert "not valid YAML" in "\n".join(str(e.value) for e in at.error)


def test_custom_model_without_file_says_what_to_do() -> None:
    at = app("views/1_Scenario.py")
    next(b for b in at.button if b.label == "Add model").click()
    at.run()
    assert "config.json" in "\n".join(str(e.value) for e in at.error)


def test_two_sessions_do_not_share_unsaved_edits(planning_home: Path) -> None:
    first = _on_tiny(planning_home)
    second = _on_tiny(planning_home)
    next(n for n in first.number_input if n.label.startswith("Nmax")).set_value(3)
    next(b for b in first.button if b.label == "Apply").click()
    first.run()
    second.run()
    assert first.session_state["scenario"].options.nmax == 3
    assert second.session_state["scenario"].options.nmax != 3


def test_an_edited_saved_scenario_is_renamed_and_downloads_under_its_new_name(planning_home: Path) -> None:
    """Issue 12 §5: a downloaded YAML of an edited preset/saved scenario never keeps the original's name."""
    at = _on_tiny(planning_home)
    next(n for n in at.number_input if n.label.startswith("Nmax")).set_value(4)
    next(b for b in at.button if b.label == "Apply").click()
    at.run()
    edited = at.session_state["scenario"]
    assert edited.name == "tiny (edited)" and "Edited from saved tiny" in edited.description
    download = next(b for b in at.get("download_button") if b.label == "Download YAML")
    assert "tiny-edited.yaml" in str(download.proto.url) or "tiny (edited)" in edited.to_yaml()
    # a name the user types is kept as typed
    next(t for t in at.text_input if t.label == "Name").set_value("my own")
    next(b for b in at.button if b.label == "Apply").click()
    at.run()
    assert at.session_state["scenario"].name == "my own"


def test_a_negative_rate_is_refused_not_clamped(planning_home: Path) -> None:
    """Issue 12 §5: −5 typed in a rate cell is an error naming the field (the editor no longer clamps it)."""
    import pandas as pd

    from planning.errors import PlanningError
    from planning.scenario import Scenario
    from ui import tables

    at = _on_tiny(planning_home)
    scenario = at.session_state["scenario"]
    frame = tables.models_frame(scenario)
    frame.loc[0, "rate_rps"] = -5.0
    data = {**scenario.to_dict(), "models": tables.models_from_frame(scenario, pd.DataFrame(frame))}
    try:
        Scenario.from_dict(data)
    except PlanningError as exc:
        assert "rate_rps" in exc.field and "≥ 0" in exc.problem
    else:
        raise AssertionError("a negative rate was accepted")
    source = (Path(__file__).resolve().parents[2] / "views" / "1_Scenario.py").read_text(encoding="utf-8")
    editor = source[source.index("edited_models = st.data_editor"):source.index('st.subheader("Where")')]
    assert "min_value" not in editor  # a min_value would make the browser clamp −5 to 5 before validation


def test_every_option_has_help_text() -> None:
    """Issue 12: Nmax, ρ, K and the other options explain themselves in one line."""
    at = app("views/1_Scenario.py")
    widgets = [*at.number_input, *at.selectbox, *at.radio]
    options = {w.label: w.help for w in widgets if w.label.split()[0] in
               {"Nmax", "ρ", "K", "Time", "Solver", "Mode", "Pricing", "Objective", "KV"}}
    assert len(options) == 9
    assert all(h and len(h) > 20 for h in options.values()), options


def test_kv_transfer_option_is_applied(planning_home: Path) -> None:
    """Issue 12 §4: cross-region KV transfer is an explicit choice on the page, validated like every option."""
    at = _on_tiny(planning_home)
    assert at.session_state["scenario"].options.kv_transfer == "same-region"
    next(s for s in at.selectbox if s.label.startswith("KV transfer")).set_value("cross-region")
    next(b for b in at.button if b.label == "Apply").click()
    at.run()
    assert not at.exception
    assert at.session_state["scenario"].options.kv_transfer == "cross-region"


def _add_custom(weights: str) -> object:
    import json as _json

    from tests.export.test_weights import LLAMA_3B

    at = app("views/1_Scenario.py")
    next(t for t in at.text_input if t.label == "Model id").set_value("my-3b")
    next(f for f in at.file_uploader if f.label == "config.json").upload(
        "config.json", _json.dumps(LLAMA_3B).encode(), "application/json")
    at.text_input(key="custom_weights").set_value(weights)
    next(b for b in at.button if b.label == "Add model").click()
    at.run()
    assert not at.exception
    return at


def test_custom_model_takes_its_weights_source() -> None:
    """Issue 38 §5: a custom model's weights (a Hugging Face id or a mounted path) reach the scenario the exports
    read; a malformed source is refused with the field and the fix."""
    at = _add_custom("my-org/my-3b")
    model = next(m for m in at.session_state["scenario"].models if m.id == "my-3b")
    assert model.weights == "my-org/my-3b"
    bad = _add_custom("not a repo")
    assert "weights" in "\n".join(str(e.value) for e in bad.error)
    assert all(m.id != "my-3b" for m in bad.session_state["scenario"].models)


def test_load_file_without_a_file_says_so() -> None:
    """Under load a picked file can be lost before Load file (5 browser users, docs/benchmarks.md): the page said
    nothing and the user waited for ever. Now it names the field and the fix; a real file still loads."""
    at = app("views/1_Scenario.py")
    next(b for b in at.button if b.label == "Load file").click()
    at.run()
    assert not at.exception
    errors = "\n".join(str(e.value) for e in at.error)
    assert "Upload a scenario" in errors and "Load file again" in errors
    from planning import api

    text = api.load_preset_scenario("coral-core").with_demand_scaled(1.07).to_yaml().encode()
    next(f for f in at.file_uploader if f.label == "Upload a scenario (YAML or JSON)").upload(
        "light-1.yaml", text, "application/x-yaml")
    next(b for b in at.button if b.label == "Load file").click()
    at.run()
    assert not at.exception and not at.error
    assert at.session_state["scenario_origin"] == "upload:light-1.yaml"
