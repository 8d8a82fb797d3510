"""Assembly of a library DataFrame (polars) from the chunk solver's arrays, without Python objects per row.

The frame is built from whole columns (numpy; the list columns reshaped from flat ones) and sorted by one gather:
no polars query runs here. A solve assembles a few rows at a time hundreds of times (catalog-wide: ~2,000 queries
before), and a query's fixed cost outweighs the work on so few rows (coral-extended's allocation: 5.32 → 4.93 CPU-s,
docs/benchmarks.md "Polars queries out of the solve").
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from planning.catalog.schema import parse_shape
from planning.templates.chunks import ChunkResult
from planning.templates.partitions import Block, multiset_partitions

SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "template_id": pl.Utf8,
    "shapes": pl.List(pl.Utf8),
    "counts": pl.List(pl.Int64),
    "n_nodes": pl.Int64,
    "n_gpus": pl.Int64,
    "n_gpu_types": pl.Int64,
    "single_gpu_type": pl.Boolean,
    "mem_gb": pl.Float64,
    "throughput": pl.Float64,
    "S": pl.Int64,
    "stages_json": pl.Utf8,
}


def _list_column(name: str, blocks: list[np.ndarray], inner: type[pl.DataType]) -> pl.Series:
    """List column from 2-D blocks (one per pattern: its rows × their common length): each block's flat values
    reshaped to fixed-width rows, then cast to lists. No Python list per row, no polars query, no pyarrow (which a
    CLI solve does not import)."""
    parts = [pl.Series(name, b.ravel().astype(str) if inner == pl.Utf8 else b.ravel().astype(np.int64), dtype=inner)
             .reshape(b.shape).cast(pl.List(inner)) for b in blocks]
    return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=True)


def _join_columns(cols: list[np.ndarray], sep: str) -> np.ndarray:
    """Element-wise ``sep.join`` of equally long object arrays of str (C loop over Python str adds)."""
    out = cols[0].copy()
    for c in cols[1:]:
        out = out + sep + c
    return out


def assemble(
    shapes: list[str], mem: np.ndarray, tasks: list[tuple[Block, np.ndarray]], results: list[ChunkResult | None],
    codes: list[np.ndarray] | None = None,
) -> pl.DataFrame:
    """Library rows (``SCHEMA``) of the chunks' multisets with throughput > 0, sorted by ``template_id``.

    ``codes``, one array per task (a value per row of its ids), adds an Int64 column ``code`` carrying each row's
    value along (``MultisetSpace`` passes the multisets' codes)."""
    gpus = [parse_shape(s) for s in shapes]
    gpu_count = np.asarray([g[0] for g in gpus])
    type_names = sorted({g[1] for g in gpus})
    gpu_type = np.asarray([type_names.index(g[1]) for g in gpus])
    name_rank = np.argsort(np.argsort(np.asarray(shapes, dtype=object)))  # rank of each shape by its key
    names = np.asarray(shapes, dtype=object)
    quoted = np.asarray([json.dumps(s) for s in shapes], dtype=object)
    count_prefix = np.asarray([f"{c}x" for c in range(64)], dtype=object)
    ids_out: list[np.ndarray] = []
    stages_out: list[np.ndarray] = []
    flat_shapes: list[np.ndarray] = []
    flat_counts: list[np.ndarray] = []
    num: dict[str, list[np.ndarray]] = {
        k: [] for k in ("n_nodes", "n_gpus", "n_gpu_types", "mem_gb", "throughput", "S", "code")
    }
    tags = [np.zeros(len(ids), dtype=np.int64) for _, ids in tasks] if codes is None else codes
    merged: dict[Block, list[tuple[np.ndarray, ChunkResult, np.ndarray]]] = {}
    for (pattern, ids), res, tag in zip(tasks, results, tags, strict=True):
        if res is None:
            raise RuntimeError(f"chunk of pattern {pattern} was not solved")  # build_library fills every slot
        merged.setdefault(pattern, []).append((ids, res, tag))
    for pattern, items in merged.items():
        ids = np.concatenate([it[0] for it in items])
        best, best_s, best_pi, splits = (np.concatenate([it[1][f] for it in items]) for f in range(4))
        keep = np.flatnonzero(best > 0)
        if keep.size == 0:
            continue
        num["code"].append(np.concatenate([it[2] for it in items])[keep])
        rows = ids[keep]
        m = rows.shape[0]
        cnt = np.asarray(pattern)
        order = np.argsort(name_rank[rows], axis=1)
        srt = np.take_along_axis(rows, order, axis=1)
        scnt = cnt[order]
        flat_shapes.append(names[srt])  # (m, nodes kinds): every row of a pattern has its length
        flat_counts.append(scnt)
        ids_out.append(
            _join_columns([count_prefix[scnt[:, p]] + names[srt[:, p]] for p in range(len(pattern))], "+")
        )
        types = np.sort(gpu_type[rows], axis=1)
        num["n_nodes"].append(np.full(m, sum(pattern)))
        num["n_gpus"].append((gpu_count[rows] * cnt).sum(axis=1))
        num["n_gpu_types"].append(1 + (types[:, 1:] != types[:, :-1]).sum(axis=1))
        num["mem_gb"].append((mem[rows] * cnt).sum(axis=1))
        num["throughput"].append(best[keep])
        num["S"].append(best_s[keep])
        stage_str = np.empty(m, dtype=object)
        s_k = best_s[keep]
        pi_k = best_pi[keep]
        sp_k = splits[keep]
        for S in np.unique(s_k).tolist():
            parts = multiset_partitions(pattern, S)
            for pi in np.unique(pi_k[s_k == S]).tolist():
                sel = np.flatnonzero((s_k == S) & (pi_k == pi))
                pieces = []
                for b, block in enumerate(parts[pi]):
                    members = [quoted[rows[sel, p]] for p, c in enumerate(block) for _ in range(c)]
                    layers = np.asarray(
                        [f'{{"layers":{j},"shapes":[' for j in sp_k[sel, b].tolist()], dtype=object
                    )
                    pieces.append(layers + _join_columns(members, ",") + "]}")
                stage_str[sel] = "[" + _join_columns(pieces, ",") + "]"
        stages_out.append(stage_str)
    schema = SCHEMA if codes is None else {**SCHEMA, "code": pl.Int64}
    if not ids_out:
        return pl.DataFrame(schema=schema)
    template_id = np.concatenate(ids_out)
    cat = {k: np.concatenate(v) for k, v in num.items()}
    columns = {
        "template_id": pl.Series("template_id", template_id.tolist(), dtype=pl.Utf8),
        "shapes": _list_column("shapes", flat_shapes, pl.Utf8),
        "counts": _list_column("counts", flat_counts, pl.Int64),
        "n_nodes": cat["n_nodes"].astype(np.int64),
        "n_gpus": cat["n_gpus"].astype(np.int64),
        "n_gpu_types": cat["n_gpu_types"].astype(np.int64),
        "single_gpu_type": cat["n_gpu_types"] == 1,
        "mem_gb": cat["mem_gb"].astype(np.float64),
        "throughput": cat["throughput"].astype(np.float64),
        "S": cat["S"].astype(np.int64),
        "stages_json": pl.Series("stages_json", np.concatenate(stages_out).tolist(), dtype=pl.Utf8),
    }
    if codes is not None:
        columns["code"] = cat["code"].astype(np.int64)
    order = np.argsort(template_id, kind="stable")  # code-point order of str = polars' byte order of UTF-8
    return pl.DataFrame(columns, schema=schema)[pl.Series(order, dtype=pl.get_index_type())]


def merge_rows(first: pl.DataFrame, second: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``first`` and those of ``second`` whose ``template_id`` is not in ``first``, sorted by
    ``template_id`` (both frames sorted by it, ids unique in each); gathered by position, no polars query."""
    if second.height == 0:
        return first
    ids = first.get_column("template_id").to_list()
    seen = set(ids)
    other = second.get_column("template_id").to_list()
    extra = [i for i, t in enumerate(other) if t not in seen]
    both = first.vstack(second[pl.Series(extra, dtype=pl.get_index_type())])
    keys = ids + [other[i] for i in extra]
    return both[pl.Series(sorted(range(len(keys)), key=keys.__getitem__), dtype=pl.get_index_type())]
