"""The Scenario page's control for ``options.measurements``: plan on your own benchmarks (auto | use | ignore).

Kept beside the page's options form (which derives its widgets from the Options metadata) as one small form of its
own; the choice goes through ``Scenario.from_dict`` like every other field (docs/measurements.md).
"""

from __future__ import annotations

import streamlit as st

from planning.errors import PlanningError
from planning.scenario import Scenario, option_specs
from ui import widgets

# the words for each choice; the choices themselves are the option's (planning.scenario_options: one source)
CHOICES = {
    "auto": ("Use them when there are some (auto)",
             "Plan on the trusted fits of this scenario's models when `planning measurements fit` (or the "
             "Measurements page) has kept any; else on the shipped model. The default."),
    "use": ("Use them (use)",
            "Plan on the kept fits of this scenario's models; the plan says so when none is kept."),
    "ignore": ("Ignore them (ignore)",
               "Plan on the shipped performance model only, whatever is kept: the plan without your measurements."),
}


def measurements_form(scenario: Scenario) -> Scenario | None:
    """A radio for ``options.measurements`` and its Apply button; the scenario with the choice when applied and
    changed, else None (an invalid one shows the engine's error)."""
    with st.form("measurements_form"):
        st.subheader("Your measurements")
        st.caption("Instances planned on a setting you measured carry the band \"measured (yours)\" and name the "
                   "fit and its files in the plan, the report and the exports.")
        now = scenario.options.measurements
        choices = list(option_specs()["measurements"].choices)
        pick = st.radio("Plan on your measurements (options.measurements)", choices,
                        index=choices.index(now) if now in choices else 0,
                        format_func=lambda c: CHOICES.get(c, (c, ""))[0],
                        captions=[CHOICES.get(c, ("", ""))[1] for c in choices])
        if not st.form_submit_button("Apply measurements choice") or pick == now:
            return None
    data = scenario.to_dict()
    data["options"] = {**data.get("options", {}), "measurements": pick}
    try:
        return Scenario.from_dict(data)
    except PlanningError as exc:
        widgets.show_error(exc)
        return None
