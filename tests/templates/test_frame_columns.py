"""Library frames are built and read from whole columns, with no polars query, and give what polars' own
operations give.

A solve assembles and reads a few library rows at a time hundreds of times (issue 41: catalog-wide ran ~2,000
polars queries a solve, each with a fixed cost larger than its work on so few rows). ``assemble``, ``usage_matrix``, ``_explode``, ``merge_rows`` and
``MultisetSpace.frame`` now work on columns; each is checked here against the polars query it replaced (the
oracle, written out below) on seeded synthetic spaces, and the space's frames are checked to run no query at all.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from planning.templates.frame import SCHEMA, assemble, merge_rows
from planning.templates.search import MultisetSpace
from planning.templates.sets import _explode, usage_matrix
from planning.templates.synthetic import shape_tables

SHAPES = ["1xL4", "2xL4", "1xL40S", "2xL40S", "1xA10G", "1xH100", "4xA10G"]
_STAGES = pl.List(pl.Struct({"layers": pl.Int64, "shapes": pl.List(pl.String)}))


def _space(seed: int) -> MultisetSpace:
    rng = np.random.default_rng(seed)
    layers, weight, slo = (16, 30.0, 900.0) if seed % 2 else (24, 60.0, 1500.0)
    tables, mem = shape_tables(SHAPES, layers, weight, slo, 4)
    tables = tables * rng.uniform(0.7, 1.3, size=(len(SHAPES), 1, 1))
    return MultisetSpace(tuple(SHAPES), mem, tables, weight, layers, nmax=4)


def _library(seed: int) -> pl.DataFrame:
    """Every multiset's row of a seeded space with a positive throughput (hundreds of rows, 1-4 stages)."""
    sp = _space(seed)
    frame = sp.frame(sp.all_multisets())
    assert frame.height > 50 and frame["S"].max() >= 2  # type: ignore[operator]
    return frame


def _usage_by_query(frame: pl.DataFrame, shapes: list[str]) -> np.ndarray:
    usage = np.zeros((frame.height, len(shapes)), dtype=np.int32)
    ex = frame.select(pl.int_range(pl.len()).alias("row"), "shapes", "counts").explode(["shapes", "counts"])
    cols = ex["shapes"].replace_strict({s: k for k, s in enumerate(shapes)}, return_dtype=pl.Int64).to_numpy()
    usage[ex["row"].to_numpy(), cols] = ex["counts"].to_numpy()
    return usage


def _explode_by_query(stages_json: list[str], shapes: list[str]) -> tuple[np.ndarray, ...]:
    index = {s: k for k, s in enumerate(shapes)}
    parsed = pl.DataFrame({"stages": pl.Series([t or "[]" for t in stages_json], dtype=pl.String).str.json_decode(_STAGES)})
    n_stages = parsed["stages"].list.len().fill_null(0).to_numpy().astype(np.int64)
    st = (parsed.with_columns(pl.int_range(pl.len()).alias("row"), pl.col("stages").list.len().alias("depth"))
          .explode("stages").drop_nulls("stages").unnest("stages")
          .with_columns(pl.int_range(pl.len()).alias("stage")))
    nodes = st.select("stage", "shapes").explode("shapes").drop_nulls("shapes")
    return (n_stages, st["row"].to_numpy().astype(np.int64), st["depth"].to_numpy().astype(np.int64),
            st["layers"].to_numpy().astype(np.int64), nodes["stage"].to_numpy().astype(np.int64),
            nodes["shapes"].replace_strict(index, return_dtype=pl.Int64).to_numpy())


@pytest.mark.parametrize("seed", range(3))
def test_usage_and_placements_read_as_the_polars_queries_read_them(seed: int) -> None:
    frame = _library(seed)
    rng = np.random.default_rng(seed)
    for rows in (np.arange(frame.height), rng.choice(frame.height, size=17, replace=False), np.arange(0)):
        part = frame[pl.Series(rows, dtype=pl.get_index_type())]
        got = usage_matrix(part, SHAPES)
        assert got.dtype == np.int32 and np.array_equal(got, _usage_by_query(part, SHAPES))
        stages = [*part["stages_json"].to_list(), "", "[]"]  # an empty placement either way
        for mine, theirs in zip(_explode(stages, SHAPES), _explode_by_query(stages, SHAPES), strict=True):
            assert mine.dtype == np.int64 and np.array_equal(mine, theirs)
    assert usage_matrix(frame, SHAPES).sum() == frame["n_nodes"].sum()


def test_a_stage_without_nodes_and_an_unknown_shape() -> None:
    text = json.dumps([{"layers": 3, "shapes": []}, {"layers": 5, "shapes": ["1xL4", "1xL4"]}])
    mine, theirs = _explode([text], SHAPES), _explode_by_query([text], SHAPES)
    assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
    assert mine[4].tolist() == [1, 1]  # both nodes in the second stage
    with pytest.raises(KeyError):
        _explode([json.dumps([{"layers": 1, "shapes": ["1xB200"]}])], SHAPES)


@pytest.mark.parametrize("seed", range(3))
def test_assemble_sorts_and_types_as_polars_would(seed: int) -> None:
    sp = _space(seed)
    P = sp.all_multisets()
    sp.throughput(P)
    rng = np.random.default_rng(seed)
    codes = rng.permutation(np.unique(sp.codes(P)))  # any order in, sorted by id out
    tasks = [(sp.cache[c][1][0], sp.cache[c][1][1][None, :]) for c in codes.tolist()]
    results = [tuple(np.asarray(r)[None, ...] for r in sp.cache[c][1][2]) for c in codes.tolist()]
    got = assemble(list(sp.shapes), sp.mem_gb, tasks, results)  # type: ignore[arg-type]
    assert dict(got.schema) == dict(SCHEMA)
    assert got.equals(got.sort("template_id")) and got["template_id"].n_unique() == got.height
    tagged = assemble(list(sp.shapes), sp.mem_gb, tasks, results,  # type: ignore[arg-type]
                      codes=[np.array([c]) for c in codes.tolist()])
    assert tagged.drop("code").equals(got)
    assert np.array_equal(sp.usage_codes(_usage_by_query(tagged, SHAPES)), tagged["code"].to_numpy())
    lists = got.select(pl.col("shapes").list.len(), pl.col("counts").list.sum())
    assert (lists["shapes"] >= got["n_gpu_types"]).all()  # 1xL4 and 2xL4: two shapes, one GPU type
    assert lists["counts"].to_list() == got["n_nodes"].to_list()


@pytest.mark.parametrize("seed", range(3))
def test_merge_rows_is_the_sorted_union(seed: int) -> None:
    frame = _library(seed)
    rng = np.random.default_rng(seed)
    a = frame[pl.Series(np.sort(rng.choice(frame.height, 40, replace=False)), dtype=pl.get_index_type())]
    b = frame[pl.Series(np.sort(rng.choice(frame.height, 60, replace=False)), dtype=pl.get_index_type())]
    oracle = pl.concat([a, b.filter(~pl.col("template_id").is_in(a["template_id"].implode()))]).sort("template_id")
    assert merge_rows(a, b).equals(oracle)
    assert merge_rows(a, b[:0]).equals(a) and merge_rows(a[:0], b).equals(b)


def test_a_space_answers_its_frames_without_a_polars_query(monkeypatch: pytest.MonkeyPatch) -> None:
    sp = _space(5)
    P = sp.all_multisets()
    first = sp.frame(P[::2])
    queries: list[str] = []
    for name in ("collect", "_collect_eager"):  # a lazy query's and an eager operation's way in
        real = getattr(pl.LazyFrame, name)

        def counted(self: pl.LazyFrame, *args: object, _real: object = real, **kwargs: object) -> pl.DataFrame:
            queries.append("query")
            return _real(self, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(pl.LazyFrame, name, counted)
    first.sort("template_id")  # the counter sees a query
    assert queries == ["query"]
    queries.clear()
    again = sp.frame(P[::2])  # kept rows
    more = sp.frame(P)  # new rows assembled, old ones gathered
    usage_matrix(more, SHAPES)
    _explode(more["stages_json"].to_list(), SHAPES)
    assert queries == []
    monkeypatch.undo()
    assert again.equals(first)
    assert more.filter(pl.col("template_id").is_in(first["template_id"].implode())).equals(first)
