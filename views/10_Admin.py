"""Admin page: the whole queue with places, per-user usage, cancel any job (admins only)."""

from __future__ import annotations

import streamlit as st

from ui import admin, widgets

widgets.page("Admin", "Everyone's queued and running jobs, who uses the workers, and a Cancel for any job. "
             "Each user runs at most a few jobs at once; queued jobs start round-robin across users.")

if not admin.admin_here():
    st.error("This page is for admins. Ask an admin to add your e-mail to PLANNING_ADMINS.", icon=":material/lock:")
    st.stop()
admin.render()
