"""Built-in models: CTR / recommendation networks as chains of layers, plus synthetic chains.

    get_model("dlrm")                      -> ModelSpec (the published Criteo Terabyte DLRM)
    get_model("dlrm", config="kaggle")     -> keyword parameters of the builder
    get_model("synthetic", num_layers=256, seed=3);  synthetic_chain(64, seed=0)
    model_graph("tiny-ctr")                -> the DAG behind a spec (shapes, tensor flow)

Per sample, fp32 = 4 bytes, ids int64 = 8 bytes, labels fp32 (int64 where the source uses a
class index).

Chain with pass-through. Real models are DAGs (DLRM's bottom MLP runs beside its embeddings);
the pipeline runs them as a chain in the order written here. A layer's `output_bytes` is ALL the
activation bytes per sample live after it: its own output plus every earlier output or raw input
(dense features, ids not yet looked up, the label) that a later layer still reads, because a
pipeline cut after it must ship all of them. `input_bytes` is the same for what enters it, so
layer i's input_bytes == layer i-1's output_bytes; the first layer's input_bytes is the raw sample
(it has reads_raw_input=True); the last layer's output_bytes is 0 (nothing is live after the
loss). Known approximation: the cost model moves as many gradient bytes backward as activation
bytes forward, though ids and labels carry no gradient.

FLOPs per sample:
- Linear(in, out): forward 2*in*out, backward 4*in*out (grad input + grad weight), or 2*in*out
  when its input is raw data (no grad input to compute). Bias adds and activations (ReLU, tanh)
  are not counted: exactly what torch.utils.flop_counter.FlopCounterMode reports.
  param_bytes = 4 * (in*out + out).
- Embedding: forward = lookups*dim (pooling adds / row copies), backward = lookups*dim
  (scatter-add of row gradients); param_bytes = 0: the rows (table_rows x table_dim) live on the
  parameter server.
- DLRM dot interaction over F vectors of dim d: F(F-1)/2 dot products = F(F-1)/2 * 2d forward,
  twice that backward (torch's bmm computes all F^2 products: 2x ours). Concatenation: 0.
- Loss (sigmoid + BCE, softmax CE, hinge): 8 forward, 4 backward per logit (rough; negligible).
"""

from __future__ import annotations

import functools
import inspect
import math
import random
from collections.abc import Callable

from heterps_sim.core.spec import ModelSpec
from heterps_sim.inputs.graph import F32, ID_BYTES, GraphBuilder, ModelGraph

CRITEO_NUM_DENSE = 13
CRITEO_KAGGLE_ROWS = (
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27, 14992,
    5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572)
"""Rows of the 26 Criteo Kaggle (Display Advertising Challenge) tables, as in DLRM."""
CRITEO_TERABYTE_10M_ROWS = (
    9980333, 36084, 17217, 7378, 20134, 3, 7112, 1442, 61, 9758201, 1333352, 313829, 10, 2208,
    11156, 122, 4, 970, 14, 9994222, 7267859, 9946608, 415421, 12420, 101, 36)
"""Criteo Terabyte tables with --max-ind-range=10000000 (sub-sample 0.875), as in DLRM."""
CRITEO_TERABYTE_40M_ROWS = (
    39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10, 2208,
    11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36)
"""Criteo Terabyte with --max-ind-range=40000000 (MLPerf training DLRM)."""

_DLRM_REF = ("DLRM: Naumov et al., arXiv 1906.00091; facebookresearch/dlrm (tools/visualize.py, "
             "bench/dlrm_s_criteo_kaggle.sh, bench/dlrm_s_criteo_terabyte.sh)")
DLRM_CONFIGS = {
    "terabyte": {"rows": CRITEO_TERABYTE_10M_ROWS, "dim": 64, "bottom": (512, 256, 64),
                 "top": (512, 512, 256, 1), "note": "Criteo Terabyte, max-ind-range 10M"},
    "kaggle": {"rows": CRITEO_KAGGLE_ROWS, "dim": 16, "bottom": (512, 256, 64, 16),
               "top": (512, 256, 1), "note": "Criteo Kaggle"},
    "mlperf": {"rows": CRITEO_TERABYTE_40M_ROWS, "dim": 128, "bottom": (512, 256, 128),
               "top": (1024, 1024, 512, 256, 1), "note": "MLPerf training, Terabyte, 40M"},
}
"""The DLRM repository's three published Criteo configurations (top MLP includes the logit)."""


def _criteo_raw(b: GraphBuilder, slots: list[str], label_bytes: int = F32) -> None:
    b.raw(dense=CRITEO_NUM_DENSE * F32, **dict.fromkeys(slots, ID_BYTES), label=label_bytes)


def dlrm(*, config: str = "terabyte", embedding_dim: int | None = None,
         bottom_mlp: tuple[int, ...] | None = None, top_mlp: tuple[int, ...] | None = None
         ) -> ModelGraph:
    """DLRM on Criteo: bottom MLP on 13 dense features, one layer per table (26), dot
    interaction, top MLP ending in one logit, sigmoid + BCE."""
    if config not in DLRM_CONFIGS:
        raise ValueError(f"dlrm: config must be one of {sorted(DLRM_CONFIGS)}, got {config!r}")
    cfg = DLRM_CONFIGS[config]
    dim = embedding_dim or cfg["dim"]
    bottom, top = tuple(bottom_mlp or cfg["bottom"]), tuple(top_mlp or cfg["top"])
    if bottom[-1] != dim or top[-1] != 1:
        raise ValueError(f"dlrm: bottom MLP must end at the embedding dim ({dim}) and the top "
                         f"MLP at 1 logit; got {bottom} and {top}")
    src = (f"{_DLRM_REF}; config {config!r} ({cfg['note']}): dim {dim}, bottom 13-"
           f"{'-'.join(map(str, bottom))}, top {'-'.join(map(str, top))}, dot interaction "
           f"without self-interaction, sigmoid + BCE; one embedding layer per table")
    b = GraphBuilder("dlrm", src)
    slots = [f"ids_{k}" for k in range(len(cfg["rows"]))]
    _criteo_raw(b, slots)
    b.input()
    x = b.mlp("bot", "dense", bottom)
    embs = [b.embedding(f"emb_{k}", [s], rows=r, dim=dim) for k, (s, r) in
            enumerate(zip(slots, cfg["rows"]))]
    z = b.dot_interaction("interaction", x, embs, dim)
    z = b.mlp("top", z, top[:-1])
    b.loss("loss", b.linear(f"top_{len(top) - 1}", z, 1, activation=None), label="label")
    return b.build()


def ctr_dnn(*, embedding_dim: int = 10, hash_rows: int = 1_000_001,
            fc_sizes: tuple[int, ...] = (400, 400, 400)) -> ModelGraph:
    """PaddleRec's CTR-DNN on Criteo: 26 one-hot slots into ONE shared hashed table."""
    src = ("PaddlePaddle/models PaddleRec/ctr/dnn (network_conf.py ctr_dnn_model, train.py "
           f"defaults): 26 sparse slots C1..C26 + 13 dense; one shared table 'SparseFeatFactors' "
           f"of {hash_rows} rows (hashed ids) x dim {embedding_dim}; concat; fc "
           f"{'-'.join(map(str, fc_sizes))} relu; fc 2 + softmax cross-entropy (int64 label)")
    b = GraphBuilder("ctr-dnn", src)
    slots = [f"C{k}" for k in range(1, 27)]
    _criteo_raw(b, slots, label_bytes=ID_BYTES)
    b.input()
    emb = b.embedding("emb", slots, rows=hash_rows, dim=embedding_dim, pooling="mean")
    x = b.mlp("fc", b.concat("concat", [emb, "dense"]), fc_sizes)
    logits = b.linear(f"fc_{len(fc_sizes)}", x, 2, activation=None)
    b.loss("loss", logits, label="label", loss="softmax_ce")
    return b.build()


def wide_deep(*, embedding_dim: int = 32, deep: tuple[int, ...] = (1024, 512, 256),
              table_rows: tuple[int, ...] = CRITEO_KAGGLE_ROWS, num_crosses: int = 325,
              cross_buckets: int = 10_000_000) -> ModelGraph:
    """Wide & Deep on Criteo: a linear (dim-1) wide part over the raw ids and hashed pairwise
    crosses, and a deep part (embeddings + MLP); their logits add before sigmoid + BCE."""
    src = ("Wide & Deep: Cheng et al., arXiv 1606.07792 (deep ReLU 1024-512-256, 32-dim "
           "embeddings, wide = raw sparse + cross products, joint logistic output). The paper's "
           "Google Play features are not public: here Criteo's 26 sparse (Kaggle cardinalities, "
           f"one table each, grouped in one layer) + 13 dense features; wide = {num_crosses} "
           f"pairwise crosses hashed into {cross_buckets} rows + the raw ids (our choice)")
    b = GraphBuilder("wide-deep", src)
    slots = [f"C{k}" for k in range(1, 27)]
    _criteo_raw(b, slots)
    b.input()
    wide = b.embedding("wide", slots, rows=(*table_rows, cross_buckets), dim=1, bags=1,
                       extra_lookups=num_crosses)
    emb = b.embedding("deep_emb", slots, rows=table_rows, dim=embedding_dim)
    x = b.mlp("fc", b.concat("concat", [emb, "dense"]), deep)
    logit = b.linear(f"fc_{len(deep)}", x, 1, activation=None)
    b.loss("loss", b.add("combine", [logit, wide]), label="label")
    return b.build()


def two_emb(*, rows: tuple[int, int] = (10_000_000, 1_000_000), embedding_dim: int = 64,
            ids_per_sample: tuple[int, int] = (50, 10),
            mlp: tuple[int, ...] = (512, 256, 128)) -> ModelGraph:
    """2EMB: two multi-hot, sum-pooled embedding tables, concatenated, then an MLP."""
    src = ("2EMB, named among HeterPS's workloads (Liu et al., arXiv 2111.10635): two embedding "
           "tables + MLP; the paper publishes no sizes, so these are ours: tables "
           f"{rows[0]} and {rows[1]} rows x dim {embedding_dim}, {ids_per_sample[0]} and "
           f"{ids_per_sample[1]} ids per sample (sum-pooled), MLP {'-'.join(map(str, mlp))}-1, "
           "sigmoid + BCE")
    b = GraphBuilder("2emb", src)
    b.raw(ids_0=ids_per_sample[0] * ID_BYTES, ids_1=ids_per_sample[1] * ID_BYTES, label=F32)
    b.input()
    embs = [b.embedding(f"emb_{k}", [f"ids_{k}"], rows=rows[k], dim=embedding_dim)
            for k in range(2)]
    x = b.mlp("fc", b.concat("concat", embs), mlp)
    b.loss("loss", b.linear(f"fc_{len(mlp)}", x, 1, activation=None), label="label")
    return b.build()


def matchnet(*, vocab_rows: int = 1_000_001, embedding_dim: int = 128,
             hidden: tuple[int, ...] = (128,), query_len: int = 79, pos_len: int = 99,
             neg_len: int = 90) -> ModelGraph:
    """Two towers + match: query and title bags of words (bow, sum-pooled) from one shared
    table, a query tower and a title tower (shared by the positive and the negative title),
    cosine match, pairwise hinge loss."""
    src = ("MATCHNET, named among HeterPS's workloads; architecture of PaddleRec "
           "models/match/multiview-simnet (bow encoders, shared table 'emb' of "
           f"{vocab_rows} x {embedding_dim}, q_fc/t_fc hidden {hidden}, cosine, pairwise hinge "
           f"margin 0.1, one negative title); words per sample {query_len}/{pos_len}/{neg_len} "
           "(query/pos/neg) from its config_bigdata.yaml padded lengths")
    b = GraphBuilder("matchnet", src)
    b.raw(q_ids=query_len * ID_BYTES, pt_ids=pos_len * ID_BYTES, nt_ids=neg_len * ID_BYTES)
    b.input()
    q, pt, nt = ["q_emb", "pt_emb", "nt_emb"]
    b.embedding("emb", ["q_ids", "pt_ids", "nt_ids"], rows=vocab_rows, dim=embedding_dim,
                outputs=[q, pt, nt])
    acts = ["relu"] * (len(hidden) - 1) + [None]
    for k, (w, act) in enumerate(zip(hidden, acts)):
        q = b.linear(f"q_fc_{k}", q, w, activation=act)
    t = [pt, nt]
    for k, (w, act) in enumerate(zip(hidden, acts)):
        t = b.linear(f"t_fc_{k}", t, w, activation=act, count=2)
    b.loss("loss", b.scores("match", q, t, hidden[-1], op="cosine"), label=None, loss="hinge")
    return b.build()


def nce(*, vocab_rows: int = 354_051, embedding_dim: int = 300, num_negatives: int = 5
        ) -> ModelGraph:
    """word2vec skip-gram with negative sampling: input embedding of the centre word, output
    embedding rows (+ bias) of the true context word and the sampled negatives, dot scores."""
    src = ("NCE / word2vec, named among HeterPS's workloads; PaddleRec models/recall/word2vec "
           f"(config_bigdata.yaml: vocabulary {vocab_rows}, dim {embedding_dim}, neg_num "
           f"{num_negatives}; tables emb, emb_w, emb_b), Mikolov et al. arXiv 1310.4546; "
           "negatives are drawn by the reader, so they arrive as raw ids")
    b = GraphBuilder("nce", src)
    b.raw(center=ID_BYTES, context=ID_BYTES, negatives=num_negatives * ID_BYTES)
    b.input()
    h = b.embedding("in_emb", ["center"], rows=vocab_rows, dim=embedding_dim)
    k = 1 + num_negatives
    w = b.embedding("out_emb_w", ["context", "negatives"], rows=vocab_rows, dim=embedding_dim,
                    bags=k, pooling="none")
    bias = b.embedding("out_emb_b", ["context", "negatives"], rows=vocab_rows, dim=1, bags=k,
                       pooling="none")
    b.loss("loss", b.scores("logits", h, w, embedding_dim, bias=bias), label=None)
    return b.build()


def tiny_ctr(*, num_sparse: int = 8, rows: int = 1000, embedding_dim: int = 8,
             num_dense: int = 13, mlp: tuple[int, ...] = (64, 32)) -> ModelGraph:
    """A CTR model small enough to train on 2 CPU cores in seconds (execution-engine tests)."""
    src = (f"ours, DLRM/CTR-DNN-shaped: {num_sparse} one-hot tables of {rows} x {embedding_dim} "
           f"(one layer each) + {num_dense} dense, concat, MLP {'-'.join(map(str, mlp))}-1, "
           "sigmoid + BCE")
    b = GraphBuilder("tiny-ctr", src)
    slots = [f"ids_{k}" for k in range(num_sparse)]
    b.raw(dense=num_dense * F32, **dict.fromkeys(slots, ID_BYTES), label=F32)
    b.input()
    embs = [b.embedding(f"emb_{k}", [s], rows=rows, dim=embedding_dim) for k, s in
            enumerate(slots)]
    x = b.mlp("fc", b.concat("concat", [*embs, "dense"]), mlp)
    b.loss("loss", b.linear(f"fc_{len(mlp)}", x, 1, activation=None), label="label")
    return b.build()


def synthetic_graph(num_layers: int = 64, *, seed: int = 0,
                    num_embedding_layers: int | None = None,
                    width_range: tuple[int, int] = (16, 1024),
                    rows_range: tuple[float, float] = (1e3, 1e8),
                    dims: tuple[int, ...] = (8, 16, 32, 64, 128), max_bag: int = 20,
                    num_dense: int = CRITEO_NUM_DENSE) -> ModelGraph:
    """A random CTR-like chain of exactly `num_layers` layers, deterministic per seed.

    n >= 3: input, E embedding layers (E drawn in 1..8 unless given, capped at n-3; tables of
    log-uniform rows, dims from `dims`, 70% one-hot else 2..max_bag ids sum-pooled), n-2-E
    Linear+ReLU layers of log-uniform widths (multiples of 8) ending in 1 logit, loss.
    n = 2: a Linear on the raw dense features, then the loss. n = 1: that Linear alone, with
    the loss folded in (it reads the raw sample and is the last layer).
    """
    from heterps_sim.core.limits import MAX_LAYERS
    if not 1 <= num_layers <= MAX_LAYERS:
        raise ValueError(f"num_layers: a synthetic chain has 1..{MAX_LAYERS:,} layers, got "
                         f"{num_layers:,}")
    rng = random.Random(seed)
    middle = num_layers - 2
    n_emb = 0 if middle < 2 else min(
        middle - 1, rng.randint(1, 8) if num_embedding_layers is None else num_embedding_layers)
    src = (f"synthetic CTR-like chain: num_layers={num_layers}, seed={seed}, "
           f"{n_emb} embedding layers, width_range={width_range} (heterps_sim.inputs.zoo)")
    b = GraphBuilder(f"synthetic-{num_layers}-s{seed}", src)
    bags = [1 if rng.random() < 0.7 else rng.randint(2, max_bag) for _ in range(n_emb)]
    b.raw(dense=num_dense * F32, **{f"ids_{k}": n * ID_BYTES for k, n in enumerate(bags)},
          label=F32)
    if num_layers >= 3:
        b.input()
    embs = [b.embedding(f"emb_{k}", [f"ids_{k}"], rows=_log_uniform(rng, *rows_range),
                        dim=rng.choice(dims)) for k in range(n_emb)]
    x: str | list[str] = [*embs, "dense"]
    n_fc = max(1, middle - n_emb)
    lo, hi = width_range
    for k in range(n_fc - 1):
        x = b.linear(f"fc_{k}", x, max(8, 8 * round(_log_uniform(rng, lo, hi) / 8)))
    if num_layers == 1:
        b.linear("fc_0", x, 1, activation=None, loss_label="label")
    else:
        b.loss("loss", b.linear(f"fc_{n_fc - 1}", x, 1, activation=None), label="label")
    return b.build()


def _log_uniform(rng: random.Random, lo: float, hi: float) -> int:
    return round(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def synthetic_chain(num_layers: int, *, seed: int, **options) -> ModelSpec:
    """A synthetic CTR-like ModelSpec of exactly `num_layers` layers (see `synthetic_graph`)."""
    return synthetic_graph(num_layers, seed=seed, **options).to_spec()


GRAPHS: dict[str, Callable[..., ModelGraph]] = {
    "2emb": two_emb, "ctr-dnn": ctr_dnn, "matchnet": matchnet, "nce": nce, "dlrm": dlrm,
    "wide-deep": wide_deep, "tiny-ctr": tiny_ctr, "synthetic": synthetic_graph,
}
"""Model name -> builder of its DAG (keyword parameters, all with defaults)."""


def _spec_builder(graph_fn: Callable[..., ModelGraph]) -> Callable[..., ModelSpec]:
    @functools.wraps(graph_fn)
    def build(**params) -> ModelSpec:
        return graph_fn(**params).to_spec()
    return build


MODELS: dict[str, Callable[..., ModelSpec]] = {n: _spec_builder(f) for n, f in GRAPHS.items()}
"""Model name -> builder of its ModelSpec; call with no arguments for the published sizes."""


def model_names() -> tuple[str, ...]:
    return tuple(MODELS)


def model_graph(name: str, **params) -> ModelGraph:
    """The DAG behind `get_model(name, **params)`: Linear shapes, tables, tensor flow."""
    if name not in GRAPHS:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(model_names())}")
    fn = GRAPHS[name]
    known = list(inspect.signature(fn).parameters)
    bad = sorted(set(params) - set(known))
    if bad:
        raise TypeError(f"model {name!r} has no parameter(s) {bad}; it takes {known}")
    return fn(**params)


def get_model(name: str, **params) -> ModelSpec:
    """A built-in model by name; `params` override the builder's keyword defaults."""
    return model_graph(name, **params).to_spec()
