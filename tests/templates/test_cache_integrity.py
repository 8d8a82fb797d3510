"""The template cache checks itself: damaged, foreign or altered files are discarded with a notice and rebuilt,
and the plan is the clean plan (through the CLI, on a preset that takes the library path)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import planning.context as context
from planning.templates.cache import LibraryCache, content_hash
from planning.templates.library import LibraryRun, build_library
from tests.fuzz.mutators import CACHE_CORRUPTIONS as CORRUPTIONS
from tests.fuzz.mutators import cache_footer as _footer
from tests.fuzz.mutators import template_cache_cases

SHAPES = ["1xL4", "1xL40S", "2xL40S"]
WEIGHT, L = 40.0, 12


@pytest.fixture(scope="module")
def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    base = np.sort(rng.uniform(5, 50, size=(len(SHAPES), 3, L)), axis=2)[:, :, ::-1].copy()
    return base, np.array([24.0, 48.0, 96.0])


def test_footer_records_fingerprint_and_checksum(tmp_path: Path, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    cache = LibraryCache(tmp_path)
    df = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache))
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
    clean = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache))
    (path,) = tmp_path.glob("*.parquet")
    CORRUPTIONS[name](path)
    notices: list[str] = []
    progress: list[str] = []
    again = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache, notice=notices.append, progress=lambda f, m: progress.append(m)))
    assert again.equals(clean)
    assert len(notices) == 1 and path.name in notices[0] and "rebuilt" in notices[0] and "\n" not in notices[0]
    assert notices[0] in progress  # a running job shows it too
    # the rebuilt file passes its checks: the third build is a silent cache hit
    third: list[str] = []
    assert build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache, notice=third.append, progress=lambda f, m: third.append(m))).equals(clean)
    assert third == []


def test_unwritable_cache_is_a_notice_not_a_crash(tmp_path: Path, inputs) -> None:  # type: ignore[no-untyped-def]
    tables, mem = inputs
    blocker = tmp_path / "file"
    blocker.write_text("x")
    notices: list[str] = []
    df = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=LibraryCache(blocker / "templates"), notice=notices.append))
    assert df.height > 0 and len(notices) == 1 and "could not be written" in notices[0]


# ------------------------------------------------------------------------------------------------------------
# end to end: the CLI on a preset that takes the library path (the same cases `make fuzz` runs)


SMALL_DEMYSTIFYING = {"shapes": ["1xA40", "1xA100-80G", "1xH100"], "options": {"nmax": 4, "time_limit_s": 1800}}


@pytest.mark.slow
def test_corrupted_cache_gives_the_clean_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """demystifying with options.templates: library caches two libraries; every corruption of both gives the
    clean plan (exit 0/1, diagnostics aside) and one notice per damaged file (checks in template_cache_cases).
    On three of its GPU types with at most 4 GPUs a template, and a 1800 s limit: every solve is proven optimal
    whatever the machine's load (the preset's own 60 s limit bound at load 17, and a time limit's incumbent is
    not the clean run's plan); the corruptions and the cache are the same."""
    monkeypatch.setenv("PLANNING_HOME", str(tmp_path / "home"))
    context._CTX = None  # a fresh process's context: the cache directory comes from PLANNING_HOME
    try:
        cases = template_cache_cases(tmp_path / "cases", overrides=SMALL_DEMYSTIFYING)
        assert len(cases) == len(CORRUPTIONS)
        for _, description, run in cases:
            out = run()
            assert json.loads(out)["instances"], description
            assert json.loads(out)["status"] == "optimal", description  # no limit bound: the plan is reproducible
        assert len(list((tmp_path / "cases" / "templates").glob("*.parquet"))) == 2
    finally:
        context._CTX = None


def test_footer_written_without_polars_metadata_argument(tmp_path: Path, inputs, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """polars before 1.26 has no ``metadata=`` on write_parquet: the pyarrow path writes the same footer."""
    original = pl.DataFrame.write_parquet

    def old_polars(self, file, **kwargs):  # type: ignore[no-untyped-def]
        if "metadata" in kwargs:
            raise TypeError("write_parquet() got an unexpected keyword argument 'metadata'")
        return original(self, file, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", old_polars)
    tables, mem = inputs
    cache = LibraryCache(tmp_path)
    df = build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache))
    (path,) = tmp_path.glob("*.parquet")
    assert _footer(path)["content_sha256"] == content_hash(df)
    notices: list[str] = []
    assert build_library(SHAPES, mem, tables, WEIGHT, L, nmax=3, rho=6, run=LibraryRun(cache=cache, notice=notices.append)).equals(df)
    assert notices == []
