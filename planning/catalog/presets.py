"""Shipped scenario presets (``data/presets/*.yaml``): list them and load one as a raw dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planning.catalog.load import DATA_DIR
from planning.errors import PlanningError, UnknownIdError

PRESETS_DIR = DATA_DIR / "presets"
MAX_PRESET_BYTES = 1_000_000
"""Largest preset file accepted."""

REQUIRED_KEYS = ("name", "description", "source", "mode", "pricing", "models", "regions", "shapes", "options",
                 "objective")  # fmt: skip


def list_presets(presets_dir: Path | None = None) -> list[str]:
    """Names of the shipped presets, sorted.

    Parameters
    ----------
    presets_dir:
        Folder of ``*.yaml`` presets (default ``data/presets``).

    Returns
    -------
    list[str]
        Preset names (file stems).
    """
    folder = presets_dir or PRESETS_DIR
    return sorted(p.stem for p in folder.glob("*.yaml"))


def load_preset(name: str, presets_dir: Path | None = None) -> dict[str, Any]:
    """Load one preset's YAML as a dict (the Scenario layer validates and converts it).

    Parameters
    ----------
    name:
        Preset name, e.g. ``"coral-core"``.
    presets_dir:
        Folder of presets (default ``data/presets``).

    Returns
    -------
    dict
        The parsed YAML mapping.

    Raises
    ------
    UnknownIdError
        No preset of that name (the message lists the presets).
    PlanningError
        The file is too large, not valid YAML, not a mapping, lacks a required key or its ``name`` differs
        from the file name.
    """
    folder = presets_dir or PRESETS_DIR
    names = list_presets(folder)
    if name not in names:
        raise UnknownIdError("preset", name, names)
    path = folder / f"{name}.yaml"
    size = path.stat().st_size
    if size > MAX_PRESET_BYTES:
        raise PlanningError(
            f"preset {name}", f"is {size} bytes, above {MAX_PRESET_BYTES}.", "shorten the file."
        )
    from planning.safeio import load_yaml, read_text

    data = load_yaml(read_text(path, field=f"preset {name}", max_bytes=MAX_PRESET_BYTES, what="preset"),
                     field=f"preset {name}", origin=path.name)
    if not isinstance(data, dict):
        raise PlanningError(f"preset {name}", "is not a YAML mapping.", "start the file with `name: ...`.")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise PlanningError(
            f"preset {name}", f"missing key(s) {', '.join(missing)}.", "add them (see data/README.md)."
        )
    if data["name"] != name:
        raise PlanningError(
            f"preset {name}.name", f"is {data['name']!r}, not the file name.", f"set `name: {name}`."
        )
    return data
