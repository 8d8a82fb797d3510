"""Shared helpers for the figure functions: input checks and the empty-input figure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from planning.errors import PlanningError

EMPTY_NAME = "empty-input"


def empty_figure(message: str, title: str = "") -> go.Figure:
    """A blank figure carrying one centred annotation that says why nothing is drawn."""
    fig = go.Figure()
    fig.add_annotation(
        text=message,
        name=EMPTY_NAME,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 14, "color": "#555555"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(title=title or None, template="plotly_white", height=260)
    return fig


def is_empty(data: pd.DataFrame | Sequence[Any] | None) -> bool:
    """True for ``None``, an empty sequence or a DataFrame without rows."""
    if data is None:
        return True
    return len(data) == 0


def require_columns(df: pd.DataFrame, columns: Sequence[str], function: str) -> None:
    """Raise a PlanningError naming the first missing column and the columns expected.

    Raises
    ------
    PlanningError
        If ``df`` is not a DataFrame or lacks one of ``columns``.
    """
    if not isinstance(df, pd.DataFrame):
        raise PlanningError(
            f"{function}.df",
            f"must be a pandas DataFrame, got {type(df).__name__}.",
            "Build one with pandas.DataFrame(rows) (polars: .to_pandas()).",
        )
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise PlanningError(
            f"{function}.df.{missing[0]}",
            f"column missing (have {', '.join(map(str, df.columns))}).",
            f"Provide columns {', '.join(columns)}.",
        )


def money(value: float) -> str:
    """``$1,234.56/h`` style label."""
    return f"${value:,.2f}/h"
