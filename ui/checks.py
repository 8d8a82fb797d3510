"""The check list a result carries (planning.checks), on the pages: failed checks as warnings with their cause and
fix, every check in an expander with its figures and basis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from planning.result import Check


def checks_frame(checks: Sequence[Check]) -> pd.DataFrame:
    """One row per check: name, status, the figures compared (as text), basis, cause, fix."""
    rows = [{"check": c.name, "status": c.status, "figures": c.line().split(": ", 1)[1].split(" (")[0]
             if c.figures else "", "basis": c.basis, "cause": c.cause, "fix": c.fix} for c in checks]
    return pd.DataFrame(rows, columns=["check", "status", "figures", "basis", "cause", "fix"])


def checks_section(checks: Sequence[Check] | Sequence[Mapping[str, Any]], *, key: str) -> None:
    """Failed checks as warnings (never silent), then the whole list in an expander."""
    items = [c if isinstance(c, Check) else Check.from_dict(c) for c in checks]
    if not items:
        return
    for c in items:
        if c.failed:
            st.warning(f"**Check failed: {c.name}.** {c.cause}" + (f" Fix: {c.fix}" if c.fix else ""),
                       icon=":material/warning:")
    counts = {s: sum(c.status == s for c in items) for s in ("passed", "failed", "not-applicable")}
    with st.expander(f"Checks: {counts['passed']} passed, {counts['failed']} failed, "
                     f"{counts['not-applicable']} not applicable"):
        st.dataframe(checks_frame(items), hide_index=True, width="stretch", key=f"checks_{key}")
