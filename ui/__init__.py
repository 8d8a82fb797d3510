"""Streamlit helpers shared by app.py and views/: session state, job wiring, small widgets."""
