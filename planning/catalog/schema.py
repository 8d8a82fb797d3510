"""Frozen catalog records: GPU types, purchasable node configs, regions, models, SLO presets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from planning.errors import PlanningError

Provenance = Literal["measured", "calibrated", "roofline"]
QualityFlag = Literal["ok", "anomaly", "estimated", "hypothetical"]


@dataclass(frozen=True)
class GPU:
    """One GPU type (a single device).

    ``memory_gb`` is the marketed size (display only); ``memory_mib`` is the memory the driver reports
    (``nvidia-smi`` total, MiB, ECC on where clouds ship it on), which every capacity computation uses through
    :attr:`memory_bytes` (``None``: not known, read conservatively as ``memory_gb`` × 10^9 bytes).
    ``hbm_bw_gbps`` is decimal GB/s; TFLOPS are dense (no sparsity) tensor-core rates;
    ``fp8_tflops`` is ``None`` where the GPU has no FP8 tensor cores.
    ``intra_link_gbps`` is per-direction GB/s between GPUs of one node (NVLink or PCIe); ``p2p`` is False where
    the GPUs of one node cannot reach each other directly (no NVLink and no PCIe peer-to-peer: NCCL goes
    through host memory).
    """

    id: str
    memory_gb: float
    hbm_bw_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    intra_link: str
    intra_link_gbps: float
    generation: str
    source: str
    as_of: str
    memory_mib: float | None = None
    memory_source: str = ""
    memory_as_of: str = ""
    p2p: bool = True
    p2p_source: str = ""

    @property
    def memory_bytes(self) -> float:
        """Device memory in bytes as the driver reports it (``memory_mib`` × 2^20); without a reading, the marketed
        ``memory_gb`` × 10^9, which is below every driver total in the catalog (conservative)."""
        if self.memory_mib is not None:
            return float(self.memory_mib) * 2.0**20
        return float(self.memory_gb) * 1e9

    @property
    def memory_gib(self) -> float:
        """:attr:`memory_bytes` in GiB."""
        return self.memory_bytes / 2.0**30


def shape_key(gpu_id: str, gpu_count: int) -> str:
    """Region-independent key of a node shape, e.g. ``"2xL40S"``."""
    return f"{gpu_count}x{gpu_id}"


def parse_shape(shape: str, field: str = "shape", *, bare_gpu: bool = False) -> tuple[int, str]:
    """The inverse of :func:`shape_key`: ``"2xL40S"`` → ``(2, "L40S")``.

    Parameters
    ----------
    shape:
        A shape key ``"{count}x{gpu}"``.
    field:
        Field path named in the error.
    bare_gpu:
        Read text that is not ``{count}x{gpu}`` as one device of that name (``"L4"`` → ``(1, "L4")``) instead
        of refusing it; used where ids need not be catalog shapes (explicit allocation problems, figures).

    Raises
    ------
    PlanningError
        Not ``{count}x{gpu}`` (unless ``bare_gpu``), or a count below 1.
    """
    count, sep, gpu = shape.partition("x")
    if not (sep and count.isascii() and count.isdigit() and gpu):  # no Unicode digits such as '２'
        if bare_gpu:
            return 1, shape
        raise PlanningError(field, f"{shape!r} is not a node shape.", 'write "{count}x{GPU}", e.g. "2xL40S".')
    if int(count) < 1:
        raise PlanningError(field, f"shape {shape!r} has {int(count)} GPUs.", 'use a positive count, e.g. "2xL40S".')
    return int(count), gpu


def shape_gpu(shape: str) -> str:
    """GPU id of a shape key (``"2xL40S"`` → ``"L40S"``; a bare GPU id is returned unchanged)."""
    return parse_shape(shape, bare_gpu=True)[1]


def shape_order(shape: str) -> tuple[str, int]:
    """Sort key that lists shapes by GPU, then GPU count (``1xL4`` before ``2xL4`` before ``1xL40S``)."""
    count, gpu = parse_shape(shape, bare_gpu=True)
    return gpu, count


@dataclass(frozen=True)
class NodeConfig:
    """A node (VM) that can be rented in one region: ``gpu_count`` GPUs of type ``gpu_id``.

    ``shape`` (``"4xL4"``) is the region-independent configuration the templates are built from;
    ``id`` is unique per row (``"aws:us-east-2:g6.12xlarge"``).
    Prices are USD per hour for the whole node; ``price_spot`` is ``None`` when no spot market.
    ``network_gbps`` is the node's network bandwidth in Gbit/s where the cloud publishes it.
    ``quality`` flags anomalies that are kept, not silently fixed; ``hypothetical`` rows are
    shapes a paper used that the cloud does not sell, priced as that paper did.
    """

    id: str
    cloud: str
    region: str
    instance_type: str
    gpu_id: str
    gpu_count: int
    vcpus: int | None
    memory_gib: float | None
    price_on_demand: float
    price_spot: float | None
    network_gbps: float | None
    quality: QualityFlag
    notes: str
    source: str
    as_of: str

    @property
    def shape(self) -> str:
        return shape_key(self.gpu_id, self.gpu_count)

    @property
    def region_key(self) -> str:
        """``"aws:us-east-2"`` — clouds reuse region names, so regions are always cloud-qualified."""
        return f"{self.cloud}:{self.region}"

    @property
    def hypothetical(self) -> bool:
        return self.quality == "hypothetical"


@dataclass(frozen=True)
class Region:
    """A cloud region (``key`` = ``"cloud:region"``)."""

    key: str
    cloud: str
    region: str
    display_name: str
    source: str
    as_of: str


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of one LLM, from its public ``config.json``.

    ``sliding_window`` is the window in tokens (``None`` = all layers full attention);
    ``layer_types`` lists, per layer, ``"full"`` or ``"sliding"`` (empty = all full).
    MoE models have ``experts_total > 0`` and ``moe_intermediate_size`` per expert;
    ``params_total``/``params_active`` are counts of parameters (not billions).
    """

    id: str
    display_name: str
    hf_repo: str
    layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    experts_total: int
    experts_active: int
    moe_intermediate_size: int
    sliding_window: int | None
    layer_types: tuple[str, ...]
    params_total: float
    params_active: float
    dtype: str
    tie_embeddings: bool
    source: str
    as_of: str
    # Added by the catalog: bytes of the released checkpoint when it mixes precisions (gpt-oss: MoE experts in
    # MXFP4, everything else BF16); ``None`` = params_total x bytes of ``dtype``.
    weight_bytes_native: float | None = None
    notes: str = ""

    @property
    def is_moe(self) -> bool:
        return self.experts_total > 0

    @property
    def bytes_per_param(self) -> float:
        """Mean bytes per parameter of the model's own weights (mixed-precision checkpoints averaged)."""
        if self.weight_bytes_native is not None and self.params_total > 0:
            return self.weight_bytes_native / self.params_total
        return {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp4": 0.53, "fp32": 4.0}.get(self.dtype, 2.0)

    def weight_bytes(self, dtype: str | None = None) -> float:
        """Bytes of all weights at ``dtype`` (default: the model's own, mixed precision included)."""
        if (dtype is None or dtype == self.dtype) and self.weight_bytes_native is not None:
            return self.weight_bytes_native
        bpp = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "mxfp4": 0.53, "fp32": 4.0}[dtype or self.dtype]
        return self.params_total * bpp


@dataclass(frozen=True)
class SLOPreset:
    """Latency targets for one model: prefill (TTFT) and decode (TPOT) in milliseconds."""

    id: str
    model_id: str | None
    prefill_ms: float | None
    decode_ms: float
    source: str
    as_of: str


@dataclass(frozen=True)
class EgressPrice:
    """Data-transfer prices of one cloud ($/GB): between its own regions, and out to the internet (another cloud)."""

    cloud: str
    inter_region_usd_per_gb: float
    internet_usd_per_gb: float
    source: str
    as_of: str


@dataclass(frozen=True)
class WanLink:
    """One scope of inter-region links (``same-continent`` / ``other-continent``): one-way ms, per-transfer Gbit/s."""

    scope: str
    one_way_ms: float
    gbps: float
    quality: str
    source: str
    as_of: str


@dataclass(frozen=True)
class ReservationTerms:
    """A cloud's published commitment discount for one term and payment option (``data/reservations.csv``): the
    share off the on-demand price over the term, and the share of the term's cost paid upfront."""

    cloud: str
    term_years: int
    payment: str
    discount: float
    upfront_share: float
    quality: str
    source: str
    as_of: str


@dataclass(frozen=True)
class SpotInterruption:
    """Share of spot nodes interrupted per month for a (cloud, region, GPU), ``*`` = any
    (``data/spot_interruptions.csv``; AWS Spot Instance Advisor bands and stated assumptions)."""

    cloud: str
    region: str
    gpu: str
    per_month: float
    band: str
    quality: str
    source: str
    as_of: str


@dataclass(frozen=True)
class Availability:
    """Illustrative (editable) count of nodes of one config available in one region."""

    config_id: str
    nodes: int
    illustrative: bool
    source: str
    as_of: str


@dataclass(frozen=True)
class Catalog:
    """Everything loaded from ``data/`` (plus user overrides), validated and indexed by id."""

    gpus: dict[str, GPU]
    configs: dict[str, NodeConfig]
    regions: dict[str, Region]
    models: dict[str, ModelSpec]
    slo_presets: dict[str, SLOPreset]
    availability: dict[str, Availability]
    overridden: frozenset[str] = field(default_factory=frozenset)
