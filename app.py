"""Entry point of the workbench: the page list (the first entry reads "Home", Material icons need no emoji font);
a share link opens only its plan, and with sign-in configured nothing but the sign-in page shows until signed in."""

from __future__ import annotations

import streamlit as st

from ui import admin, state, team

PAGES = [
    st.Page("views/0_Home.py", title="Home", icon=":material/home:", default=True),
    st.Page("views/1_Scenario.py", title="Scenario", icon=":material/edit:"),
    st.Page("views/2_Templates.py", title="Templates", icon=":material/extension:"),
    st.Page("views/3_Plan.py", title="Plan", icon=":material/insights:"),
    st.Page("views/4_What-if.py", title="What-if", icon=":material/alt_route:"),
    st.Page("views/5_Jobs.py", title="Jobs", icon=":material/schedule:"),
    st.Page("views/6_Catalog.py", title="Catalog", icon=":material/menu_book:"),
    st.Page("views/7_Timeline.py", title="Timeline", icon=":material/timeline:"),
    st.Page("views/8_Learn.py", title="Learn", icon=":material/school:"),
    st.Page("views/9_Measurements.py", title="Measurements", icon=":material/speed:"),
]

# Worker processes are spawned, and a spawned child re-runs the main module (this script) as "__mp_main__" before
# it takes work: it must neither start more workers nor render the app.
if __name__ != "__mp_main__":
    state.runner()  # the job runner's worker process starts (and imports the engine) while the user picks a scenario
    if st.query_params.get("share"):  # read-only, no account: this one plan, no navigation to anything else
        team.only_page(team.shared_plan_page, "Shared plan")
    elif not state.signed_in():  # every page and every ?job= link: the sign-in page only
        team.only_page(team.sign_in_page, "Sign in")
    else:
        team.user_sidebar()
        page = st.navigation([*PAGES, *admin.pages()])  # the Admin page is listed only for admins
        if page.title != "What-if":
            state.stop_planning_ahead()  # the What-if page's prefetch ends when one leaves it
        page.run()
