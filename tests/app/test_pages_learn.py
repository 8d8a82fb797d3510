"""Learn page: every lesson renders with the paper's and the engine's numbers; a control recomputes."""

from __future__ import annotations

from tests.app.conftest import app, texts


def test_learn_page_renders_and_recomputes() -> None:
    at = app("views/8_Learn.py")
    assert not at.exception
    shown = texts(at)
    assert "Source: Coral" in shown or any("Coral" in t for t in at.caption.values)
    frames = [df.value for df in at.dataframe]
    figures = {str(v) for frame in frames if "figure" in frame for v in frame["figure"]}
    assert {"t1 + TP-2(t2)", "A10G max advantage (×)", "joint ILP: served both"} <= figures
    before = [df.value for df in at.dataframe]
    at.slider(key="learn_a").set_value(4).run()
    assert not at.exception
    after = [df.value for df in at.dataframe]
    assert any(not a.equals(b) for a, b in zip(before, after, strict=False))
