"""Library cache: a content key over everything a library depends on, Parquet (zstd) files written atomically."""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

ALGORITHM_VERSION = "templates-exact-2"  # 2: column homogeneous → single_gpu_type


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


@dataclass(frozen=True)
class LibraryCache:
    """Parquet (zstd) files ``<dir>/<key>.parquet``, one per library."""

    directory: Path

    def path(self, key: str) -> Path:
        return Path(self.directory) / f"{key}.parquet"

    def load(self, key: str) -> pl.DataFrame | None:
        """The cached library for ``key`` or ``None``."""
        p = self.path(key)
        return pl.read_parquet(p) if p.exists() else None

    def store(self, key: str, df: pl.DataFrame) -> Path:
        """Write atomically (temp file + rename) and return the path."""
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{threading.get_ident()}")
        df.write_parquet(tmp, compression="zstd")
        tmp.replace(p)
        return p
