"""Learn page: every lesson renders with the paper's and the engine's numbers; a control recomputes."""

from __future__ import annotations

import json

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


def test_learn_page_shows_coral_fig1a_and_recomputes_on_the_slo() -> None:
    at = app("views/8_Learn.py")
    assert not at.exception
    assert "One model, one pipeline: mixed GPUs vs one GPU type, per dollar" in [s.value for s in at.subheader]
    frames = [df.value for df in at.dataframe]
    setups = next(f for f in frames if "tok/s per $/h" in f)  # readable headers, not the rows' keys
    assert {"best H100 only", "best mixed pipeline", "the paper's mix (3×1xL40S + 3×2xH100)"} <= set(setups["setup"])
    paper = next(f for f in frames if "figure" in f and "paper's mix ÷ best pure H100 (×)" in set(f["figure"]))
    assert 526.0 in set(paper["value"])
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    chart = next(s for s in specs if s["layout"]["xaxis"]["title"]["text"] == "prompt tok/s per $/h")
    assert list(chart["data"][0]["y"])[::-1] == list(setups["setup"])  # one bar per setup, the table's order
    at.slider(key="learn_fig1a_slo").set_value(3600).run()
    assert not at.exception
    after = next(df.value for df in at.dataframe if "tok/s per $/h" in df.value)
    assert not after.equals(setups)
    assert "Here one GPU type wins" in texts(at)


def test_learn_page_checks_every_tab_against_its_paper() -> None:
    """Each tab with a paper's numbers shows them beside ours with a tolerance, and says why where they differ;
    no table shows a raw column name."""
    at = app("views/8_Learn.py")
    assert not at.exception
    frames = [df.value for df in at.dataframe]
    checks = [f for f in frames if {"paper", "engine", "tolerance", "agrees", "why not"} <= set(f.columns)]
    assert len(checks) >= 4  # Coral Fig. 1(a), Fig. 2, Mélange Fig. 3/9, Fig. 6, Demystifying App. C
    figures = {str(v) for f in checks for v in f["figure"]}
    assert {"Fig. 9 mix saving vs A10G-only (%)", "A10G advantage at 60–160 ms (×)", "t1 + TP-2(t2)"} <= figures
    for f in checks:
        for _, row in f.iterrows():
            # a miss names the input that differs; Coral Fig. 1(a)'s first says it disagrees, in numbers
            assert row["agrees"] == "yes" or row["why not"].startswith("The input") or (
                row["why not"].startswith(f"Disagrees with the paper: {row['engine']:.3f} against {row['paper']:g}")
                and "The input that differs" in row["why not"]), row.to_dict()
    coral = next(r for f in checks for _, r in f.iterrows() if r["figure"] == "paper's mix ÷ best pure H100 (×)")
    assert coral["agrees"] == "no" and coral["why not"].startswith("Disagrees with the paper: 1.024 against 1.09 ± 0.05")
    assert "Coral Fig. 1(a): the paper's mix stage by stage" in texts(at)  # its table, under the check
    for f in frames:
        assert not {"per_dollar", "cost_per_hour", "makespan_s", "price_per_hour", "gpus"} & set(f.columns)
    # Mélange Fig. 9's mix on the three sets of throughputs, side by side, and Fig. 6's request on the paper's profile
    fig9 = next(f for f in frames if "Fig. 9's own steps (read off the plot)" in f.columns)
    assert list(fig9.loc[fig9["quantity"] == "mix saving vs A10G-only there (%)"].iloc[0])[1:] == ["8.1", "17.3", "31.1"]
    assert any("Fig. 6 bars within ± 0.05" in f.columns for f in frames)
    shown = texts(at)
    assert "a few A100s carry the bulk" not in shown and "t1, t2, t3:" in shown
