"""Stable colours per GPU type so every chart paints the same GPU the same way."""

from __future__ import annotations

import hashlib

from planning.catalog.schema import shape_gpu
from planning.errors import PlanningError

# Families share a hue: Hopper purple, Ampere datacenter blue, Ada datacenter green/teal, older or
# consumer cards warm or grey. Fixed so a user learns "green = L40S" once.
GPU_COLORS: dict[str, str] = {
    "H100": "#4C2A85",
    "H200": "#9B59B6",
    "A100-80G": "#1F77B4",
    "A100-40G": "#7FB3E0",
    "L40S": "#2CA02C",
    "L40": "#98DF8A",
    "L4": "#17BECF",
    "A10G": "#FF7F0E",
    "A40": "#BCBD22",
    "A6000": "#8C564B",
    "RTX4090": "#D62728",
    "T4": "#E377C2",
    "V100": "#7F7F7F",
}

_FALLBACK = ("#393B79", "#637939", "#8C6D31", "#843C39", "#7B4173", "#3182BD", "#E6550D", "#31A354")


def gpu_color(gpu: str) -> str:
    """Colour of a GPU id; unknown ids get a stable colour from a fallback palette.

    Parameters
    ----------
    gpu:
        GPU id (``"L40S"``) or a shape (``"2xL40S"``), whose GPU part is used.

    Returns
    -------
    str
        ``#rrggbb``.
    """
    gpu = gpu_of_shape(gpu)
    if gpu in GPU_COLORS:
        return GPU_COLORS[gpu]
    digest = int(hashlib.sha256(gpu.encode("utf-8")).hexdigest(), 16)
    return _FALLBACK[digest % len(_FALLBACK)]


def gpu_of_shape(shape: str) -> str:
    """GPU id of a shape key: ``"2xL40S"`` → ``"L40S"``; a bare GPU id (or any label) is returned unchanged."""
    try:
        return shape_gpu(shape)
    except PlanningError:  # "0xL4": a label, not a shape, on a chart
        return shape


def text_color(background: str) -> str:
    """Black or white, whichever reads better on ``background`` (``#rrggbb``)."""
    r, g, b = (int(background[i : i + 2], 16) for i in (1, 3, 5))
    luminance = 0.299 * r + 0.587 * g + 0.114 * b
    return "#111111" if luminance > 150 else "#FFFFFF"
