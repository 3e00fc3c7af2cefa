"""Score the trained model on the held-out rows: log-loss and AUC, after the ranks finish.

    scores = score_holdout(spec, "runs/x/state.pt")   # {"rows", "positives", "log_loss", "auc"}

The launcher rebuilds the whole model from the run's final weights (state.pt, which has the
parameter server's tables too), runs it forward over the held-out batches without gradients,
and takes the probability sigmoid(logit) of the loss's logits (a user model whose output is
already a probability, `model.output: probabilities`, is read as it is). It runs after
training, so it never touches the measured throughput.

- log-loss: mean of -(y log p + (1-y) log(1-p)), computed from the logits as torch's
  binary_cross_entropy_with_logits does (no p = 0 or 1 blow-up);
- AUC: the probability that a random positive scores above a random negative, ties counting
  one half: (sum of the positives' ranks - P(P+1)/2) / (P N), with average ranks for ties
  (Mann-Whitney). Undefined (None) when the slice holds only one class.
Models whose loss is not binary cross-entropy with a label (softmax, hinge, sampled
negatives) are not scored; the result says why.
"""

from __future__ import annotations

import numpy as np


def log_loss(labels: np.ndarray, logits: np.ndarray) -> float:
    """Mean binary cross-entropy of 0/1 labels under sigmoid(logits)."""
    y, z = np.asarray(labels, np.float64), np.asarray(logits, np.float64)
    return float(np.mean(np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))))


def log_loss_of_probabilities(labels: np.ndarray, probs: np.ndarray) -> float:
    """Mean binary cross-entropy of 0/1 labels under probabilities, each log clamped at -100
    as torch's binary_cross_entropy clamps it (p = 0 or 1 stays finite)."""
    y, p = np.asarray(labels, np.float64), np.asarray(probs, np.float64)
    with np.errstate(divide="ignore"):
        log_p, log_q = np.maximum(np.log(p), -100.0), np.maximum(np.log1p(-p), -100.0)
    return float(np.mean(-(y * log_p + (1 - y) * log_q)))


def auc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    """Area under the ROC curve by ranks (ties averaged); None with a single class."""
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, np.float64)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return None
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    ranks = np.empty(len(s))
    starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    avg = (starts + ends + 1) / 2.0  # 1-based average rank of each tie group
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def _logits_name(graph) -> tuple[str | None, str | None, str]:
    """(logits tensor, label tensor, why not) of the model's binary loss."""
    for n in graph.nodes:
        if n.op == "loss":
            if n.attrs["loss"] == "bce" and len(n.consumes) > 1:
                return n.consumes[0], n.consumes[-1], ""
            return None, None, f"the loss is {n.attrs['loss']} without a 0/1 label"
    return None, None, "the model's loss is fused into its last layer"


def score_holdout(spec, state_path) -> dict:
    """{"rows", "positives", "log_loss", "auc"} of the held-out rows, or {"skipped": why}."""
    import torch

    from heterps_exec.data.readers import holdout_batches
    from heterps_exec.model.build import build_model
    from heterps_exec.model.spec_graph import graph_for
    graph = graph_for(spec)
    logits_name, label_name, why = _logits_name(graph)
    if logits_name is None:
        return {"skipped": why}
    if spec.user_model:  # a user's PyTorch module, whole (heterps_exec.model.user_model)
        from heterps_exec.model.user_model import whole_model
        model = whole_model(spec)
    else:
        model = build_model(graph, seed=spec.seed)
    model.load_state_dict(torch.load(state_path))
    model.eval()
    ys, zs = [], []
    with torch.no_grad():
        for batch in holdout_batches(spec):
            env, _ = model({k: torch.from_numpy(np.asarray(v)) for k, v in batch.items()})
            zs.append(env[logits_name].reshape(-1).double().numpy())
            ys.append(np.asarray(batch[label_name]).reshape(-1))
            if zs[-1].size != ys[-1].size:
                return {"skipped": "the loss has several logits per label"}
    if not ys:
        return {"skipped": "no held-out rows"}
    y, z = np.concatenate(ys), np.concatenate(zs)
    kind = (spec.user_model or {}).get("section", {}).get("output") or "logits"
    loss = log_loss_of_probabilities(y, z) if kind == "probabilities" else log_loss(y, z)
    out = {"rows": int(len(y)), "positives": int(y.sum()), "log_loss": loss, "auc": auc(y, z)}
    return {**out, "output": kind} if spec.user_model else out
