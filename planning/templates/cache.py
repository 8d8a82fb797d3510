"""Library cache: a content key over everything a library depends on, self-checking Parquet (zstd) files.

A cached library is ``<dir>/<key>.parquet``, written atomically (temp file + rename). Its Parquet footer carries
what it was built with and a checksum of what it holds (key-value metadata ``planning.library``, JSON):

- ``format`` (:data:`CACHE_FORMAT`), ``key`` (the content key of the inputs, :func:`library_key`),
  ``algorithm`` (:data:`ALGORITHM_VERSION`) and ``schema`` (the column names and types of
  :data:`planning.templates.frame.SCHEMA`): the fingerprint;
- ``rows`` and ``content_sha256``: a SHA-256 over the decoded columns in a canonical layout
  (:func:`content_hash`), so it does not depend on how Parquet encoded or compressed them.

:meth:`LibraryCache.load` checks all of it. A file that cannot be read (truncated, empty, garbage), lacks the
footer (written by hand or by an older planner), was built for other inputs, algorithm or columns, or whose
content no longer matches its checksum (altered throughputs, dropped rows) is deleted and reported in one line
through the caller's ``notice``; the caller rebuilds and stores a fresh copy. A cache is disposable: it never
decides a plan, it only saves the time of rebuilding one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

ALGORITHM_VERSION = "templates-exact-2"  # 2: column homogeneous → single_gpu_type
CACHE_FORMAT = "planning-template-library/1"
META_KEY = "planning.library"
HASH_ROWS = 65_536  # rows per hashed block: bounds the temporary bytes of a string column

Notice = Callable[[str], None]
"""``notice(line)``: one sentence about a cache file that was discarded or could not be written."""


def library_key(
    shapes: list[str],
    shape_mem_gb: npt.ArrayLike,
    tables: npt.ArrayLike,
    weight_gb: float,
    layers: int,
    nmax: int,
    rho: float,
    extra: str = "",
) -> str:
    """Content hash of everything a library depends on (plus ``extra``, e.g. model/phase/SLO/calibration)."""
    h = hashlib.sha256()
    h.update(ALGORITHM_VERSION.encode())
    h.update(
        json.dumps(
            [
                list(shapes),
                [float(m) for m in np.asarray(shape_mem_gb, dtype=float)],
                float(weight_gb),
                int(layers),
                int(nmax),
                float(rho),
                extra,
            ]
        ).encode()
    )
    arr = np.ascontiguousarray(np.asarray(tables, dtype=np.float64))
    h.update(str(arr.shape).encode())
    h.update(arr.tobytes())
    return h.hexdigest()[:32]


def schema_text(schema: pl.Schema | dict[str, pl.DataType | type[pl.DataType]]) -> str:
    """Column names and types as one comparable string (``name:Type`` joined by ``,``)."""
    return ",".join(f"{name}:{pl.Schema({name: dtype})[name]!s}" for name, dtype in dict(schema).items())


def _hash_series(h: hashlib._Hash, s: pl.Series) -> None:
    """Feed one column into ``h`` in a layout that depends only on its values: list lengths then the flat
    values; strings as UTF-8 byte lengths then their bytes; numbers and booleans as little-endian arrays."""
    if isinstance(s.dtype, pl.List):
        h.update(s.list.len().cast(pl.UInt32).fill_null(0).to_numpy().astype("<u4").tobytes())
        s = s.explode().drop_nulls()
    if s.dtype == pl.Utf8:
        for lo in range(0, s.len(), HASH_ROWS):
            block = s.slice(lo, HASH_ROWS)
            h.update(block.str.len_bytes().cast(pl.UInt32).fill_null(0).to_numpy().astype("<u4").tobytes())
            h.update(str(block.str.join("").item() or "").encode())
    elif s.dtype == pl.Boolean:
        h.update(s.cast(pl.UInt8).to_numpy().tobytes())
    else:
        arr = s.to_numpy()
        h.update(arr.astype(arr.dtype.newbyteorder("<")).tobytes())


def content_hash(df: pl.DataFrame) -> str:
    """SHA-256 of a frame's column names, types and values (independent of the Parquet encoding)."""
    h = hashlib.sha256()
    h.update(schema_text(df.schema).encode())
    h.update(str(df.height).encode())
    for name in df.columns:
        h.update(name.encode())
        _hash_series(h, df[name])
    return h.hexdigest()


def _read_footer(path: Path) -> dict[str, object] | None:
    """The ``planning.library`` footer of a Parquet file (None when absent); raises on an unreadable file."""
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path).metadata or {}
    raw = meta.get(META_KEY.encode())
    if raw is None:
        return None
    data = json.loads(raw.decode("utf-8"))
    return data if isinstance(data, dict) else None


def _write(df: pl.DataFrame, path: Path, metadata: dict[str, str]) -> None:
    """Parquet (zstd) with file key-value ``metadata``: polars writes it since 1.26 (2x faster than pyarrow
    on a 1M-row library); older polars, which the project's ``polars>=1.0`` allows, go through pyarrow."""
    try:
        df.write_parquet(path, compression="zstd", metadata=metadata)
    except TypeError:  # polars < 1.26: no `metadata` argument
        import pyarrow.parquet as pq

        table = df.to_arrow()
        meta = {**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in metadata.items()}}
        pq.write_table(table.replace_schema_metadata(meta), path, compression="zstd")


@dataclass(frozen=True)
class LibraryCache:
    """Parquet (zstd) files ``<dir>/<key>.parquet``, one per library, each checked on load (module docstring).

    Parameters
    ----------
    directory:
        Where the files live (created on the first store).
    schema:
        The columns a library must have (default :data:`planning.templates.frame.SCHEMA`).
    """

    directory: Path
    schema: dict[str, pl.DataType | type[pl.DataType]] | None = None

    def path(self, key: str) -> Path:
        return Path(self.directory) / f"{key}.parquet"

    def _schema(self) -> dict[str, pl.DataType | type[pl.DataType]]:
        if self.schema is not None:
            return self.schema
        from planning.templates.frame import SCHEMA

        return SCHEMA

    def fingerprint(self, key: str) -> dict[str, object]:
        """What a library for ``key`` must have been built with."""
        return {"format": CACHE_FORMAT, "key": key, "algorithm": ALGORITHM_VERSION,
                "schema": schema_text(self._schema())}

    def load(self, key: str, notice: Notice | None = None) -> pl.DataFrame | None:
        """The cached library for ``key``, or ``None`` when there is none or it failed a check.

        A file that fails (unreadable, no footer, other fingerprint, checksum mismatch) is deleted and
        ``notice`` gets one line saying which file and why.
        """
        p = self.path(key)
        if not p.exists():
            return None
        problem, df = self._check(p, key)
        if problem is None:
            return df
        with contextlib.suppress(OSError):
            p.unlink()
        if notice is not None:
            notice(f"template cache file {p.name} {problem}; discarded it and rebuilt the library")
        return None

    def _check(self, p: Path, key: str) -> tuple[str | None, pl.DataFrame | None]:
        """(problem, frame): problem None when the file passes every check."""
        try:
            footer = _read_footer(p)
            if footer is None:
                return "has no checksum footer (written by hand or by an older planner)", None
            expected = self.fingerprint(key)
            for field in ("format", "key", "algorithm", "schema"):
                if footer.get(field) != expected[field]:
                    return f"was built with another {field} ({str(footer.get(field))[:60]!r})", None
            df = pl.read_parquet(p)
        except Exception as exc:  # any read failure means "rebuild": the cache is disposable
            return f"cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})", None
        if schema_text(df.schema) != expected["schema"]:
            return "has other columns than its footer says", None
        if df.height != footer.get("rows"):
            return f"holds {df.height:,} rows, its footer says {footer.get('rows')}", None
        if content_hash(df) != footer.get("content_sha256"):
            return "does not match its checksum (content altered or damaged)", None
        return None, df

    def store(self, key: str, df: pl.DataFrame, notice: Notice | None = None) -> Path | None:
        """Write atomically (temp file + rename) with the checksum footer; the path, or None when the
        directory cannot be written (``notice`` says why; the library in memory is unaffected)."""
        p = self.path(key)
        tmp = p.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
        footer = {**self.fingerprint(key), "rows": df.height, "content_sha256": content_hash(df)}
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            _write(df, tmp, {META_KEY: json.dumps(footer)})
            tmp.replace(p)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            if notice is not None:
                notice(f"template cache could not be written ({exc.strerror or exc}) under {p.parent.name}/; "
                       "the plan is unaffected, the next solve rebuilds the library")
            return None
        return p
