"""Distributed checkpoints (torch.distributed.checkpoint) with an atomic "latest" pointer.

    DIR/step_00000010/     one DCP checkpoint: every stage's parameters and optimizer state
    DIR/latest             "step_00000010", replaced atomically after the save completed

Keys are the model's original parameter names ("model.fc_0.weight", "optim.fc_0.weight.sum"),
the same under every plan: replicas of a stage write the same keys (DCP keeps one copy), and a
rank of ANY later plan loads just the keys of its own layers - restart after a failure and
elastic re-planning are the same operation. A crash during a save leaves `latest` on the
previous complete checkpoint. Loading reads only data (trust.py): DCP's pickled
metadata through an unpickler that admits DCP's own classes, values with weights_only.

An async run also saves the older weight versions that the steps after the checkpoint read
("stash.V.fc_0.weight": W(V), heterps_sim.core.asynchrony) and its staleness D; a resume
needs the same D (its later steps must read the same versions).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

from heterps_exec.checkpoint.trust import TrustedLoadPlanner, TrustedReader

LATEST = "latest"
LATEST_MAX_BYTES = 64
"""`latest` holds one line, "step_00000010"; a longer file is not one of ours."""


def _state(module: torch.nn.Module, optimizer: torch.optim.Optimizer,
           stash: dict[int, dict[str, torch.Tensor]] | None = None,
           staleness: int | None = None) -> dict:
    names = {id(p): n for n, p in module.named_parameters()}
    optim = {names[id(p)]: dict(s) for p, s in optimizer.state.items()
             if s and id(p) in names}  # (a parameter-free stage steps a placeholder)
    state = {"model": module.state_dict(), "optim": optim}
    if staleness is not None:
        state["async"] = {"staleness": torch.tensor([staleness]),
                          "stash": {str(v): dict(t) for v, t in (stash or {}).items()}}
    return state


def latest_step(ckpt_dir: str | Path) -> int | None:
    """The step of the last complete checkpoint in ckpt_dir, or None."""
    pointer = Path(ckpt_dir) / LATEST
    try:
        with open(pointer, "rb") as fh:
            raw = fh.read(LATEST_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ValueError(f"{pointer}: is a folder, expected the file naming the last "
                         "checkpoint") from None
    except OSError as exc:
        raise ValueError(f"{pointer}: cannot read ({exc.strerror or exc})") from None
    name = raw.decode(errors="replace").strip()
    digits = name.removeprefix("step_")
    if (len(raw) > LATEST_MAX_BYTES or not name.startswith("step_") or not digits.isdigit()
            or not digits.isascii() or not (Path(ckpt_dir) / name).is_dir()):
        raise ValueError(f"{pointer}: points at {name[:80]!r}, which is not a checkpoint here")
    return int(digits)


def agreed_step(ckpt_dir: str | Path, rank: int) -> int | None:
    """Collective over all ranks: the step every rank resumes from. Rank 0 reads `latest` once
    and broadcasts it; ranks reading it themselves could disagree if it moved in between."""
    if not ckpt_dir:
        return None
    # objects travel over gloo (an NCCL world would need each rank's device set first)
    group = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
    box = [latest_step(ckpt_dir) if rank == 0 else None]
    dist.broadcast_object_list(box, src=0, group=group)
    return box[0]


def step_dir(ckpt_dir: str | Path, step: int) -> Path:
    return Path(ckpt_dir) / f"step_{step:08d}"


def save(ckpt_dir: str | Path, step: int, module: torch.nn.Module,
         optimizer: torch.optim.Optimizer, *, rank: int, group=None,
         before_commit=None, stash: dict | None = None, staleness: int | None = None) -> None:
    """Collective over `group` (the trainers): every rank saves its part, `before_commit`
    runs on the rank that passes one (the parameter server's checkpoint of the same step),
    then rank 0 moves `latest` to this step. An async run passes its `staleness` and the
    `stash` of older versions later steps read ({version: {name: tensor}})."""
    path = step_dir(ckpt_dir, step)
    dcp.save(_state(module, optimizer, stash, staleness), checkpoint_id=path,
             process_group=group)
    if before_commit is not None:
        before_commit()
    dist.barrier(group=group)
    if rank == 0:
        fd, tmp = tempfile.mkstemp(dir=ckpt_dir, prefix=".latest.")
        with os.fdopen(fd, "w") as fh:
            fh.write(path.name + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, Path(ckpt_dir) / LATEST)
    dist.barrier(group=group)


def load(ckpt_dir: str | Path, step: int, module: torch.nn.Module,
         optimizer: torch.optim.Optimizer, *, group=None, staleness: int | None = None,
         versions: list[int] = ()) -> dict[int, dict[str, torch.Tensor]]:
    """Collective over `group`: fill this rank's parameters and optimizer state in place.
    An async run passes its `staleness` and the older `versions` it reads; returns them
    ({version: {name: tensor}}); the launcher checked the checkpoint holds them
    (saved_staleness)."""
    path = step_dir(ckpt_dir, step)  # read as data only (trust.py)
    live = {n: p for n, p in module.named_parameters() if p.requires_grad}
    stash = {v: {n: torch.empty_like(p) for n, p in live.items()} for v in versions}
    state = _state(module, optimizer, stash, staleness if versions else None)
    if not versions:
        state.pop("async", None)
    dcp.load(state, storage_reader=TrustedReader(path), planner=TrustedLoadPlanner(),
             process_group=group)
    module.load_state_dict(state["model"])
    return stash


def saved_staleness(path: str | Path) -> int | None:
    """The staleness an async run saved the checkpoint at `path` with; None: a synchronous
    run's. Read in one process (the launcher, before any rank starts), as data only."""
    reader = TrustedReader(path)
    if "async.staleness" not in reader.read_metadata().state_dict_metadata:
        return None
    box = {"async": {"staleness": torch.tensor([-1])}}
    dcp.load(box, storage_reader=TrustedReader(path), planner=TrustedLoadPlanner(),
             no_dist=True)
    return int(box["async"]["staleness"][0])
