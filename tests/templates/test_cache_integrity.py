"""The template cache checks itself: damaged, foreign or altered files are discarded with a notice and rebuilt,
and the plan is the clean plan (through the CLI, on a preset that takes the library path)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

import planning.api as api
from planning.templates.cache import META_KEY, LibraryCache, content_hash
from planning.templates.library import build_library

SHAPES = ["1xL4", "1xL40S", "2xL40S"]
WEIGHT, L = 40.0, 12


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    base = np.sort(rng.uniform(5, 50, size=(len(SHAPES), 3, L)), axis=2)[:, :, ::-1].copy()
    return base, np.array([24.0, 48.0, 96.0])


def _footer(path: Path) -> dict[str, Any]:
    meta = pq.read_metadata(path).metadata
    return dict(json.loads(meta[META_KEY.encode()]))


def _rewrite(path: Path, df: pl.DataFrame, footer: dict[str, Any] | None) -> None:
    """Write ``df`` over ``path`` keeping ``footer`` (what a tool that edits the data but copies the metadata does)."""
    df.write_parquet(path, metadata={META_KEY: json.dumps(footer)} if footer is not None else None)


def _times_ten(path: Path) -> None:
    _rewrite(path, pl.read_parquet(path).with_columns(pl.col("throughput") * 10), _footer(path))


def _drop_90(path: Path) -> None:
    df = pl.read_parquet(path)
    _rewrite(path, df.head(max(1, df.height // 10)), _footer(path))


def _wrong_schema(path: Path) -> None:
    footer = _footer(path)
    _rewrite(path, pl.DataFrame({"template_id": ["x"], "throughput": [1e9]}), footer)


def _renamed_column(path: Path) -> None:
    _rewrite(path, pl.read_parquet(path).rename({"throughput": "tput"}), _footer(path))


def _no_footer_times_ten(path: Path) -> None:
    _rewrite(path, pl.read_parquet(path).with_columns(pl.col("throughput") * 10), None)


def _other_key(path: Path) -> None:
    footer = _footer(path)
    _rewrite(path, pl.read_parquet(path), {**footer, "key": "0" * 32})


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


def _empty(path: Path) -> None:
    path.write_bytes(b"")


CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "truncated": _truncate, "garbage": _garbage, "empty": _empty, "wrong-schema": _wrong_schema,
    "renamed-column": _renamed_column, "throughput-x10": _times_ten, "rows-dropped-90pct": _drop_90,
    "x10-without-footer": _no_footer_times_ten, "other-key": _other_key,
}


def test_footer_records_fingerprint_and_checksum(tmp_path: Path, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    cache = LibraryCache(tmp_path)
    df = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, cache=cache)
    (path,) = tmp_path.glob("*.parquet")
    footer = _footer(path)
    assert footer["key"] == path.stem and footer["rows"] == df.height > 0
    assert footer["content_sha256"] == content_hash(df)
    assert "throughput:Float64" in footer["schema"]
    assert content_hash(df.with_columns(pl.col("throughput") * 1.000001)) != content_hash(df)
    assert content_hash(df.head(df.height - 1)) != content_hash(df)


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_damaged_file_is_discarded_with_a_notice_and_rebuilt(name: str, tmp_path: Path, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    cache = LibraryCache(tmp_path)
    clean = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, cache=cache)
    (path,) = tmp_path.glob("*.parquet")
    CORRUPTIONS[name](path)
    notices: list[str] = []
    progress: list[str] = []
    again = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, cache=cache, notice=notices.append,
                          progress=lambda f, m: progress.append(m))
    assert again.equals(clean)
    assert len(notices) == 1 and path.name in notices[0] and "rebuilt" in notices[0] and "\n" not in notices[0]
    assert notices[0] in progress  # a running job shows it too
    # the rebuilt file passes its checks: the third build is a silent cache hit
    third: list[str] = []
    assert build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, cache=cache, notice=third.append,
                         progress=lambda f, m: third.append(m)).equals(clean)
    assert third == []


def test_unwritable_cache_is_a_notice_not_a_crash(tmp_path: Path, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    blocker = tmp_path / "file"
    blocker.write_text("x")
    notices: list[str] = []
    df = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, cache=LibraryCache(blocker / "templates"),
                       notice=notices.append)
    assert df.height > 0 and len(notices) == 1 and "could not be written" in notices[0]


# ------------------------------------------------------------------------------------------------------------
# end to end: the CLI on a preset that takes the library path


def _plan(scenario_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    from planning.cli import main

    api._CTX = None  # a fresh process's context (the cache directory is read from PLANNING_HOME)
    code = main(["solve", str(scenario_path), "--json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return dict(json.loads(out))


def _comparable(plan: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plan.items() if k not in ("timings", "diagnostics", "stats")}


@pytest.mark.slow
def test_corrupted_cache_gives_the_clean_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    scenario = api.load_preset_scenario("demystifying").to_dict()
    scenario["options"]["templates"] = "library"
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    home = tmp_path / "home"
    monkeypatch.setenv("PLANNING_HOME", str(home))
    try:
        clean = _plan(path, capsys)
        files = sorted((home / "templates").glob("*.parquet"))
        assert len(files) == 2 and clean["instances"]
        pristine = {f: f.read_bytes() for f in files}
        for name, corrupt in CORRUPTIONS.items():
            for f in files:
                f.write_bytes(pristine[f])
                corrupt(f)
            plan = _plan(path, capsys)
            assert _comparable(plan) == _comparable(clean), name
            notes = [d for d in plan["diagnostics"] if "template cache file" in d]
            assert len(notes) == len(files), (name, plan["diagnostics"])
            assert all(f.exists() for f in files)  # rebuilt and stored again
    finally:
        api._CTX = None
