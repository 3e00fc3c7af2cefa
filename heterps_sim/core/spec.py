"""The nouns of heterps: resource types, layers, models, clusters and workloads.

Frozen, slotted, keyword-only dataclasses in SI units (seconds, bytes, FLOP, samples/s, USD).
They are validated at the edge (inputs/scenario.py, with pydantic); `__post_init__` here only rejects
values no caller could mean, with a sentence a user understands. No simpy, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RESOURCE_KINDS = ("cpu", "gpu")
LAYER_KINDS = ("input", "embedding", "dense", "interaction", "loss")
BYTES_PER_FLOAT32 = 4


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceType:
    """One rentable unit: a GPU (with its share of a host) or a CPU VM."""

    name: str
    kind: str
    """"cpu" or "gpu" (accelerators such as Gaudi count as "gpu": device memory + host link)."""
    peak_flops_fp32: float
    """Peak dense fp32 FLOP/s of one unit."""
    peak_flops_fp16: float
    """Peak fp16/bf16 FLOP/s (tensor cores where present); equals fp32 where there is no fast path."""
    memory_bytes: float
    """Device memory for a GPU, host RAM for a CPU VM."""
    memory_bandwidth_bytes_per_s: float
    host_link_bytes_per_s: float | None
    """Host-device link (PCIe/NVLink-C2C) for a GPU; None for a CPU (data is already in RAM)."""
    network_bytes_per_s: float
    """Network bandwidth available to one unit (its share of the instance NIC)."""
    price_per_hour: float
    """USD per unit-hour, on demand."""
    vendor: str = ""
    arch: str = ""
    year: int = 0
    estimated_fields: tuple[str, ...] = ()
    """Names of fields filled by a documented rule rather than a published figure."""
    source_urls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require(bool(self.name), "a resource type needs a name")
        _require(self.kind in RESOURCE_KINDS, f"{self.name}: kind must be one of {RESOURCE_KINDS}")
        for attr in ("peak_flops_fp32", "peak_flops_fp16", "memory_bytes",
                     "memory_bandwidth_bytes_per_s", "network_bytes_per_s", "price_per_hour"):
            _require(getattr(self, attr) > 0, f"{self.name}: {attr} must be > 0")
        _require(self.host_link_bytes_per_s is None or self.host_link_bytes_per_s > 0,
                 f"{self.name}: host_link_bytes_per_s must be > 0 when given")


@dataclass(frozen=True, slots=True, kw_only=True)
class Layer:
    """One layer of a model; `name` is also the torch module name in heterps_exec.

    Per-sample quantities: a batch of B samples costs B x these (dense parameters excepted).
    """

    name: str
    kind: str
    """One of LAYER_KINDS: input (reads raw features), embedding (sparse lookups), dense,
    interaction (feature crosses / dot products / concatenation), loss."""
    forward_flops: float
    backward_flops: float
    param_bytes: float = 0.0
    """Dense parameter bytes (fp32), resident on the unit that runs the layer."""
    table_rows: int = 0
    """Sparse embedding rows (summed over the layer's tables); held by the parameter server."""
    table_dim: int = 0
    lookups_per_sample: int = 0
    """Embedding rows read per sample (one per sparse feature for one-hot features)."""
    input_bytes: float = 0.0
    """Bytes per sample this layer reads as input."""
    output_bytes: float = 0.0
    """Activation bytes per sample this layer emits (a stage boundary after it moves these
    forward and as many gradient bytes backward)."""
    output_grad_bytes: float | None = None
    """Gradient bytes per sample sent back across a cut after this layer: the part of
    output_bytes that carries a gradient (raw ids, labels and features do not). None = all."""
    reads_raw_input: bool = False
    """True when the layer's input is the raw training data (read from storage / host)."""

    def __post_init__(self) -> None:
        _require(bool(self.name), "a layer needs a name")
        _require(self.kind in LAYER_KINDS, f"layer {self.name}: kind must be one of {LAYER_KINDS}")
        for attr in ("forward_flops", "backward_flops", "param_bytes", "table_rows", "table_dim",
                     "lookups_per_sample", "input_bytes", "output_bytes"):
            _require(getattr(self, attr) >= 0, f"layer {self.name}: {attr} must be >= 0")
        _require(self.output_grad_bytes is None or 0 <= self.output_grad_bytes <= self.output_bytes,
                 f"layer {self.name}: output_grad_bytes must lie in [0, output_bytes]")

    @property
    def flops(self) -> float:
        """Forward + backward FLOPs per sample."""
        return self.forward_flops + self.backward_flops

    @property
    def boundary_bytes(self) -> float:
        """Bytes per sample a pipeline cut after this layer moves: activations forward plus
        their gradients backward."""
        grad = self.output_bytes if self.output_grad_bytes is None else self.output_grad_bytes
        return self.output_bytes + grad

    @property
    def sparse_bytes(self) -> float:
        """Embedding row bytes read per sample (the same again is pushed back as gradients)."""
        return float(self.lookups_per_sample * self.table_dim * BYTES_PER_FLOAT32)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A model as an ordered chain of layers (the order the pipeline runs them in)."""

    name: str
    layers: tuple[Layer, ...]
    source: str = ""
    """Where the architecture comes from (paper, repository)."""

    def __post_init__(self) -> None:
        _require(len(self.layers) > 0, f"model {self.name!r} has no layers")
        names = [layer.name for layer in self.layers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        _require(not dupes, f"model {self.name!r}: duplicate layer names {dupes}")

    @property
    def layer_names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """The resource types a scenario may rent, with how many units of each exist."""

    types: tuple[ResourceType, ...]
    available: tuple[int | None, ...] = ()
    """Units available per type, aligned with `types`; None = unlimited. Empty = all unlimited."""

    def __post_init__(self) -> None:
        _require(len(self.types) > 0, "a cluster needs at least one resource type")
        if not self.available:
            object.__setattr__(self, "available", (None,) * len(self.types))
        _require(len(self.available) == len(self.types), "cluster: one availability per type")
        names = [t.name for t in self.types]
        dupes = sorted({n for n in names if names.count(n) > 1})
        _require(not dupes, f"cluster: duplicate resource types {dupes}")
        for t, a in zip(self.types, self.available):
            _require(a is None or a >= 0, f"cluster: available units of {t.name} must be >= 0")

    @property
    def type_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.types)


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """How much training to do and how fast it must go."""

    batch_size: int
    """B: samples per training step (the unit the cost model times)."""
    throughput_limit: float
    """TL: the floor on training throughput, samples/s."""
    num_samples: float
    """N: samples x epochs to train in total."""

    def __post_init__(self) -> None:
        _require(self.batch_size > 0, "batch_size must be > 0")
        _require(self.throughput_limit > 0, "throughput_limit must be > 0")
        _require(self.num_samples > 0, "num_samples must be > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileOptions:
    """Knobs of the roofline profile (inputs/roofline.py documents each default)."""

    efficiency: dict[str, float] = field(default_factory=dict)
    """Overrides of the achieved fraction of peak, keyed "layer_kind/resource_kind"."""
    alpha: dict[str, float] = field(default_factory=dict)
    """Overrides of the Amdahl parallel fraction, keyed by layer kind."""
    use_fp16: bool = False
    """Time dense GPU layers at the fp16/bf16 peak (mixed precision) instead of fp32."""
    latency_s: float = 5e-5
    """One-way latency of a stage-boundary transfer."""
    odt_parallel: bool = True
    """Data transfer overlaps compute (True) or adds to it serially (False)."""
