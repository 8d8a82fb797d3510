"""Streamlit helpers shared by app.py and pages/: session state, job wiring, small widgets."""
