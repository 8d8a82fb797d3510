"""Coral's T̂_j(g) stage tables of one node shape (vectorized over layers, stages and batches) and their cache.

T̂[S-1, j-1] = max over (tp split, batch) of dp * tokens(batch) / t_stage(j, batch), subject to
t_stage = j layers + step overhead + activation send (S > 1) <= (slo / S) / headroom and memory(j, batch) <= capacity,
times ``load_cap`` (the share of that rate an instance may be planned at, for queueing). Decode pipelines keep S
micro-batches in flight, so every node of an S-stage decode pipeline holds the KV cache of S x batch sequences; a
prefill node holds its layers' KV of the batch it runs, of the (up to S - 1) batches downstream of it, and of the
batch whose KV the decode instance is still pulling: S + 1 batches. A decode node also keeps room for
``kv_sigmas`` standard deviations of its running count, ``sqrt(S · batch / (1 − e))`` with e the elasticity of its
step with the batch (:func:`kv_room`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from planning.perf.curves import Curves, fluctuation_spread, step_elasticity


def best_over_batches(curves: list[Curves], full_in_window: np.ndarray, layers: int, budget: np.ndarray,
                      max_stages: int, kv_extra: float | None = None, load_cap: float = 1.0,
                      kv_sigmas: float = 0.0) -> np.ndarray:
    """The table (max_stages, layers) from the curves of every usable tp split (see module docstring).

    ``kv_extra``: None = one batch of KV per node; else each node of an S-stage pipeline holds S + kv_extra
    batches of KV (decode 0, prefill 1: see the module docstring).
    ``load_cap``: multiplies every entry (usable share of the service rate, see docs/perf-model.md Sec. 3c).
    ``kv_sigmas``: KV room for ``kv_sigmas`` standard deviations of the running count beyond the ``S · batch``
    planned (:func:`kv_room`).
    """
    best = np.zeros((max_stages, layers))
    for c, thr, _t in _per_batch(curves, full_in_window, layers, budget, max_stages, kv_extra, kv_sigmas):
        best = np.maximum(best, thr.max(axis=2) * c.dp * load_cap)
    return best


def batch_curves(curves: list[Curves], full_in_window: np.ndarray, layers: int, budget: np.ndarray,
                 max_stages: int, kv_extra: float | None = None,
                 kv_sigmas: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Per-batch step times of the tp split each entry of :func:`best_over_batches` picks.

    Returns ``dp`` (S, L), the entry's data-parallel copies in the node, and ``tau`` (S, L, B) float32: a node of
    that entry running ``dp`` copies of ``tokens[b]`` sequences takes ``tau`` seconds per step (``inf`` where the
    batch does not fit or misses the per-stage budget). A pipeline runs one micro-batch size through all its
    stages, so its throughput is set by the stages' times at a common batch, not by each stage's own best (see
    ``planning.templates.sets.common_batch_throughput``).
    """
    _best, dp, tau = table_and_batch_curves(curves, full_in_window, layers, budget, max_stages, kv_extra, kv_sigmas)
    return dp, tau


def table_and_batch_curves(curves: list[Curves], full_in_window: np.ndarray, layers: int, budget: np.ndarray,
                           max_stages: int, kv_extra: float | None = None,
                           kv_sigmas: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(:func:`best_over_batches` at ``load_cap`` 1, then :func:`batch_curves`'s ``dp`` and ``tau``) in one pass over
    the curves: a decode node's T̂ table and the step times behind it cost one evaluation instead of two
    (catalog-wide, cold: the second pass was 0.3 of the 2.3 CPU-s to its first tight bound)."""
    best = np.zeros((max_stages, layers))
    tau = np.full((max_stages, layers, len(curves[0].tokens) if curves else 0), np.inf, dtype=np.float32)
    dp = np.ones((max_stages, layers))
    for c, thr, t in _per_batch(curves, full_in_window, layers, budget, max_stages, kv_extra, kv_sigmas):
        top = thr.max(axis=2) * c.dp
        better = top > best
        best = np.where(better, top, best)
        tau = np.where(better[:, :, None], np.where(thr > 0, t, np.inf), tau).astype(np.float32)
        dp = np.where(better, float(c.dp), dp)
    return best, dp, tau


def kv_room(stages: np.ndarray, batches: np.ndarray, step_s: np.ndarray, sigmas: float) -> np.ndarray:
    """Batches of KV one copy of an S-stage pipeline node holds, (S, L, B): its S micro-batches of ``batches``
    sequences and room for the running count's fluctuation, ``sigmas`` standard deviations of it.

    Requests arrive at random (Poisson) and each holds a slot for about O steps, so the running count fluctuates
    around its mean n = S·b. If the step did not depend on the batch, the count would be Poisson-like with standard
    deviation √n (the square-root staffing this rule had). But a step grows with the batch: with e = d ln t / d ln b
    its elasticity, the departures, n / (O t(n)), rise only by (1 − e) / (O t) per extra sequence, so the count
    is pulled back to its mean (1 − e) times as fast and its variance is n / (1 − e) (the Ornstein–Uhlenbeck
    linearisation of arrivals λ against departures n / (O t(n))). A decode step that reads mostly KV (e → 1, a
    multi-head-attention model at large batches) gains almost no rate from extra slots, and its running count
    wanders far above the mean: such a node needs that much more room, or a smaller batch. ``step_s`` (S, L, B):
    the node's step time per batch; e by the backward difference on the batch grid (0 at the first point).
    """
    b = np.maximum(np.asarray(batches, dtype=float), 1.0)
    n = stages[:, None, None] * b[None, None, :]
    spread = fluctuation_spread(step_elasticity(b, step_s))
    return np.asarray(stages[:, None, None] + sigmas * np.sqrt(n * spread) / b[None, None, :], dtype=float)


def entry_point(curves: list[Curves], full_in_window: np.ndarray, layers: int, budget: np.ndarray, stages: int,
                j: int, kv_extra: float | None = None,
                kv_sigmas: float = 0.0) -> tuple[int, float, float, float, float] | None:
    """The operating point of entry ``[stages - 1, j - 1]`` of :func:`best_over_batches` (before ``load_cap``) whose
    per-stage budgets are ``budget`` (one per stage count, ``max_stages = budget.size``): (index of the winning
    curve, batch per copy, step seconds, node throughput, step elasticity at that batch), None where nothing is
    feasible."""
    best: tuple[int, float, float, float, float] | None = None
    for k, (c, thr, t) in enumerate(_per_batch(curves, full_in_window, layers, budget, int(budget.size), kv_extra,
                                               kv_sigmas)):
        row = thr[stages - 1, j - 1]
        i = int(np.argmax(row))
        if row[i] > 0 and (best is None or row[i] * c.dp > best[3]):
            e = step_elasticity(c.tokens, t[stages - 1, j - 1])[i]
            best = (k, float(c.batches[i]), float(t[stages - 1, j - 1, i]), float(row[i] * c.dp), float(e))
    return best


def _per_batch(curves: list[Curves], full_in_window: np.ndarray, layers: int, budget: np.ndarray, max_stages: int,
               kv_extra: float | None, kv_sigmas: float) -> Iterator[tuple[Curves, np.ndarray, np.ndarray]]:
    """(curve, per-copy tokens/s where feasible else 0, step seconds), arrays (S, L, B), per tp split."""
    stages = np.arange(1, max_stages + 1, dtype=float)
    j = np.arange(1, layers + 1, dtype=float)
    nf = full_in_window  # (L,)
    ns = j - nf
    for c in curves:
        run = nf[:, None] * c.t_full[None, :] + ns[:, None] * c.t_slide[None, :] + c.step_s  # (L, B)
        kv = nf[:, None] * c.kv_full[None, :] + ns[:, None] * c.kv_slide[None, :]  # (L, B)
        send = np.where(stages[:, None] > 1, c.transfer_s[None, :], 0.0)  # (S, B)
        t = run[None, :, :] + send[:, None, :]  # (S, L, B)
        copies = stages + kv_extra if kv_extra is not None else np.ones_like(stages)  # (S,)
        held = copies[:, None, None] * np.ones_like(t)  # (S, L, B) batches of KV a node holds
        if kv_sigmas > 0:  # decode: room for the fluctuation of the S micro-batches' running count
            held = kv_room(stages, c.tokens, t, kv_sigmas)
        mem = (j[:, None] * c.w_layer + c.mem_fixed[None, :])[None, :, :] + held * kv[None, :, :]
        fits = mem <= c.capacity  # (S, L, B)
        ok = (t <= budget[:, None, None]) & fits
        yield c, np.where(ok, c.tokens[None, None, :] / t, 0.0), t


_CODE_FP: str | None = None
DISK_CACHE_MAX_BYTES = 256 * 2**20  # per kind (tables, batch curves): the oldest files go beyond this
PRUNE_EVERY = 512  # writes between two checks of the directory's size (the first write checks too)


def code_fingerprint() -> str:
    """Hash of the perf model's source files: part of every on-disk table's name, so a code change (even one that
    forgets ``PHYSICS_VERSION``) never reads tables an older model computed."""
    global _CODE_FP
    if _CODE_FP is None:
        h = hashlib.sha256()
        for path in sorted(Path(__file__).parent.glob("*.py")):
            h.update(path.name.encode())
            h.update(path.read_bytes())
        _CODE_FP = h.hexdigest()[:16]
    return _CODE_FP


class TableCache:
    """LRU of computed tables in memory, optionally mirrored as ``<prefix>_<key>.npy`` files in ``cache_dir``.

    The files make a second process's tables a read instead of a computation (catalog-wide: 672 tables, 0.38 CPU-s
    computed, a few hundredths read), which is most of what a cold solve on a busy machine spends before its first
    bound. The file name also carries :func:`code_fingerprint`; a file that does not load is a miss (and removed).
    Writes go to a private temporary name and are renamed into place, so concurrent processes never read half a
    file."""

    def __init__(self, cache_dir: Path | None, size: int, prefix: str = "T") -> None:
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._mem: OrderedDict[str, np.ndarray] = OrderedDict()
        self._size = size
        self._prefix = prefix
        self._writes = 0

    @staticmethod
    def key(parts: tuple[object, ...]) -> str:
        """Stable content key of everything a table depends on."""
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:32]

    def _path(self, key: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / f"{self._prefix}_{code_fingerprint()}_{key}.npy"

    def get(self, key: str) -> np.ndarray | None:
        """The cached table or None."""
        if key in self._mem:
            self._mem.move_to_end(key)
            return self._mem[key]
        if self.cache_dir is not None:
            path = self._path(key)
            if path.exists():
                try:
                    table = np.load(path, allow_pickle=False)
                except (OSError, ValueError, EOFError):  # damaged (a full disk, an old format): compute it again
                    path.unlink(missing_ok=True)
                    return None
                self.put(key, table, write=False)
                return table
        return None

    def put(self, key: str, table: np.ndarray, write: bool = True) -> None:
        """Store a (read-only) table; writes the .npy file atomically when a cache dir is set (best effort: a
        read-only or full disk leaves the table in memory only)."""
        table.setflags(write=False)
        self._mem[key] = table
        self._mem.move_to_end(key)
        while len(self._mem) > self._size:
            self._mem.popitem(last=False)
        if write and self.cache_dir is not None:
            path = self._path(key)
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp.npy")
            try:
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                if self._writes % PRUNE_EVERY == 0:
                    self.prune()
                self._writes += 1
                np.save(tmp, table, allow_pickle=False)
                tmp.replace(path)
            except OSError:
                tmp.unlink(missing_ok=True)

    def prune(self, max_bytes: int = DISK_CACHE_MAX_BYTES) -> int:
        """Remove this cache's files of older code (another :func:`code_fingerprint`), then the least recently
        written ones until the directory holds at most ``max_bytes``; returns how many files went."""
        if self.cache_dir is None or not self.cache_dir.is_dir():
            return 0
        current = f"{self._prefix}_{code_fingerprint()}_"
        files: list[tuple[float, int, Path]] = []
        removed = 0
        for entry in os.scandir(self.cache_dir):
            if not entry.name.startswith(f"{self._prefix}_") or not entry.name.endswith(".npy"):
                continue
            try:
                st = entry.stat()
            except OSError:
                continue
            if not entry.name.startswith(current):
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
            else:
                files.append((st.st_mtime, st.st_size, Path(entry.path)))
        total = sum(size for _t, size, _p in files)
        for _t, size, path in sorted(files):
            if total <= max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed
