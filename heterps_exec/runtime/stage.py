"""One stage replica's training step: forwards, backwards, the stage all-reduce, the update.

    runner = StageRunner(ctx, module)
    for code, mu in actions_of_step:        # layout.Layout.actions (the simulator's order)
        runner.forward(mu, batch) / runner.backward(mu)
    loss_sum = runner.end_step(step)

Point-to-point, not torch.distributed.pipelining: HeterPS plans give stages different replica
counts, so one replica exchanges microbatches with several peers (mu goes to replica
mu mod k of the next stage); the stock stage objects bind one peer per side and cost
1.4-2.9 ms per boundary here. The messages are torch.distributed isend / irecv, one per
microbatch and cut each way (partition.Boundary), each with its own tag, all receives of a step
posted when it starts so transfers overlap compute. Replicas of a stage sum their gradients
(and the step's loss) in ONE all-reduce over the stage's own group, then step the optimizer:
each microbatch's loss is its per-sample sum divided by the global batch size, so the result
is exactly single-process training on the whole batch.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass

import torch
import torch.distributed as dist

from heterps_exec.hps import quantize
from heterps_exec.hps.auto_quantize import AutoLinks
from heterps_exec.hps.overlap import GradReducer
from heterps_exec.model import norm_rules
from heterps_exec.model.batchnorm import RunningStats
from heterps_exec.model.dropout import microbatch
from heterps_exec.model.partition import Boundary
from heterps_exec.runtime.layout import Layout, RunSpec, microbatch_bounds
from heterps_exec.runtime.timeline import Recorder
from heterps_exec.runtime.versions import Versions
from heterps_sim.core.lanes import B, F


@dataclass
class StageContext:
    """A rank's place in the run (built by worker.py)."""

    spec: RunSpec
    layout: Layout
    rank: int
    stage: int
    replica: int
    device: torch.device
    comm_device: torch.device
    """Where messages live: the compute device under NCCL, the CPU under gloo."""
    group: dist.ProcessGroup | None
    """The stage's data-parallel group (None with one replica)."""
    in_boundary: Boundary | None
    out_boundary: Boundary | None
    slowdown: float
    recorder: Recorder


def _tag(mu: int, backward: bool) -> int:
    return 2 * mu + int(backward)


class StageRunner:
    """Walks one replica's actions; owns its module, optimizer and in-flight messages."""

    def __init__(self, ctx: StageContext, module: torch.nn.Module,
                 optimizer: torch.optim.Optimizer) -> None:
        self.ctx, self.module, self.optimizer = ctx, module, optimizer
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.bounds = microbatch_bounds(ctx.spec.batch_size, ctx.spec.plan["num_microbatches"])
        self.m = len(self.bounds)
        self.last = ctx.stage == ctx.layout.num_stages - 1
        self.stash: dict[int, tuple] = {}
        self.inbox: dict[tuple[str, int], tuple[dict, list]] = {}
        self.sends: list = []
        """(message, work, dst, mu, backward) of the sends not waited on yet."""
        self.most_sends = 0
        """The most sends this replica had not waited on at once (async keeps it bounded)."""
        self.bytes_sent = 0
        """Boundary message bytes this replica has sent (activations and gradients)."""
        self.loss_sum = 0.0
        self.embeddings = [m for m in module.modules() if hasattr(m, "prefetch")
                           and any(hasattr(t, "client") for t in getattr(m, "tables", ()))]
        """Embedding layers on a parameter server: their next rows are prefetched."""
        self.next_forward: dict[int, int] = {}
        self.assignments: list[list[int]] | None = None
        """Speed-aware sharing: this step's replica of each microbatch, per stage (None: the
        equal split, microbatch mu on replica mu mod k)."""
        self.step_compute_s = 0.0
        self.step_microbatches = 0
        self.reducer = (GradReducer(self.params, ctx.group, ctx.comm_device)
                        if ctx.spec.overlap and ctx.group is not None and self.params else None)
        """--overlap on: buckets all-reduced during the step's last backward (hps/overlap.py)."""
        self.last_backward: int | None = None
        auto, bound = quantize.parse_choice(ctx.spec.quantize)
        self.auto = (AutoLinks(ctx.in_boundary, ctx.out_boundary, bound)
                     if auto == quantize.AUTO else None)
        """--quantize auto: per-link encodings, re-chosen every step (hps/auto_quantize.py)."""
        self.versions: Versions | None = None
        """The async schedule's weight versions (versions.py); None for gpipe and 1f1b."""
        self.step_loss: dict[int, float] = {}
        """Async: each step's summed loss so far at the last stage (steps overlap there)."""
        self.step = 0
        """The step being run (gpipe, 1f1b: set by the worker; async: mu // m)."""
        self.dropouts = getattr(module, "dropouts", 0)
        """Dropout calls in the stage: each draws its mask by (seed, step, microbatch,
        layer), model/dropout.py (none: no RNG work at all)."""
        rule = norm_rules.rule_of(ctx.spec) if ctx.group is not None else None
        self.running = RunningStats.of(module, self.m) if rule == "exact" else None
        """A replicated stage's BatchNorm running statistics, summed over its replicas at
        each step end as one process updates them (model.batchnorm: exact,
        model/batchnorm.py; async: in each step's gradient all-reduce, versions.py); None
        otherwise."""
        self.broadcast = (norm_rules.BroadcastBuffers.of(module, ctx.group)
                          if rule == "broadcast" else None)
        """model.batchnorm: broadcast: replica 0's BatchNorm buffers, sent to the stage's
        replicas at each step start (DDP's broadcast_buffers); None otherwise."""
        if rule == "sync":  # the stage's BatchNorms normalise over each round of k forwards
            norm_rules.use_sync_batch_norm(module, ctx.group)
        self.ps_steps = None
        """Async with tables on the parameter server: the PSSteps that keeps the rows each
        step pulls at its version (async_steps.py); None otherwise."""
        self.extra_loss = getattr(module, "extra_loss", None) if ctx.replica == 0 else None
        """A user model's extra loss (model.extra_loss): replica 0 adds its gradient to the
        stage's parameters at each step's start (model/extra_loss.py; async: to the version's
        tensors at the step's first forward); None otherwise."""
        self.extra_next = 0
        """Async: the first step whose extra loss replica 0 has not added (steps start in
        order)."""

    # -- messages ------------------------------------------------------------------------
    def post_receives(self, actions, *, ahead=()) -> None:
        """Post every receive this step will need, in action order (overlaps compute), and
        those of the actions `ahead` (later steps': async) not posted yet."""
        forwards = [mu for code, mu in actions if code == F]
        self.next_forward = dict(zip(forwards, forwards[1:]))
        backwards = [mu for code, mu in actions if code == B]
        self.last_backward = backwards[-1] if backwards else None
        self._post([*actions, *ahead])

    def begin_step(self) -> None:
        """Before the step's first backward: the extra loss's gradient, once per step (the
        stage all-reduce then sums it with the replicas' data gradients); model.batchnorm:
        broadcast: replica 0's BatchNorm buffers to every replica of the stage."""
        if self.broadcast is not None:
            with self.ctx.recorder.span("broadcast buffers", "allreduce"):
                self.broadcast()
        if self.extra_loss is not None:
            with self.ctx.recorder.span("extra loss", "compute"):
                self.extra_loss()

    def _post(self, actions) -> None:
        c = self.ctx
        for code, mu in actions:
            if ("F" if code == F else "B", mu) in self.inbox:
                continue  # posted ahead
            size = self._size(mu)
            if code == F and c.in_boundary is not None:
                src = self.route(c.stage - 1, mu)
                buf = self._boundary("in", src).empty(size, c.comm_device)
                self.inbox["F", mu] = (buf, dist.irecv(buf, src=src, tag=_tag(mu, False)))
            elif code == B and c.out_boundary is not None and c.out_boundary.has_grad:
                src = self.route(c.stage + 1, mu)
                buf = self._boundary("out", src).empty_grad(size, c.comm_device)
                self.inbox["B", mu] = (buf, dist.irecv(buf, src=src, tag=_tag(mu, True)))

    def _boundary(self, side: str, peer: int) -> Boundary:
        """The cut on `side` ("in": upstream, "out": downstream) as it travels to/from peer."""
        if self.auto is not None:
            return self.auto.boundary(side, peer)
        return self.ctx.in_boundary if side == "in" else self.ctx.out_boundary

    def _receive(self, key: tuple[str, int]) -> torch.Tensor:
        buf, work = self.inbox.pop(key)
        with self.ctx.recorder.span(f"recv {key[0]}{key[1]}", "transfer"):
            work.wait()
        return buf.to(self.ctx.device)

    def _send(self, buf: torch.Tensor, dst: int, mu: int, backward: bool) -> None:
        msg = buf.detach().to(self.ctx.comm_device).contiguous()
        self.bytes_sent += msg.numel() * msg.element_size()
        self.sends.append((msg, dist.isend(msg, dst=dst, tag=_tag(mu, backward)), dst, mu,
                           backward))
        self.most_sends = max(self.most_sends, len(self.sends))

    def _settle(self, delivered) -> None:
        """Async: wait for, and forget, the sends that `delivered(dst, mu, backward)` knows have
        reached their receiver (so the wait returns at once). gloo reports a send complete only
        once it is waited on (Work.is_completed stays False), and the stream never drains at
        a step end, so otherwise every message sent would stay here to the segment's end."""
        keep = []
        for entry in self.sends:
            if delivered(*entry[2:]):
                entry[1].wait()
            else:
                keep.append(entry)
        self.sends = keep

    def route(self, stage: int, mu: int) -> int:
        """The rank that runs microbatch mu at `stage`."""
        layout = self.ctx.layout
        if self.assignments is None:
            return layout.rank_of(stage, mu)
        return layout.first_rank(stage) + self.assignments[stage][mu % self.m]

    def _size(self, mu: int) -> int:
        lo, hi = self.bounds[mu % self.m]
        return hi - lo

    # -- compute -------------------------------------------------------------------------
    def _compute(self, name: str, fn):
        """Run fn, timed; on an emulated slower type, idle the extra time (the device is busy)."""
        with self.ctx.recorder.span(name, "compute"):
            t0 = time.perf_counter()
            out = fn()
            if self.ctx.device.type == "cuda":
                torch.cuda.synchronize(self.ctx.device)
            if self.ctx.slowdown > 1:
                time.sleep((time.perf_counter() - t0) * (self.ctx.slowdown - 1))
            self.step_compute_s += time.perf_counter() - t0
            self.step_microbatches += name.startswith("F")
        return out

    def forward(self, mu: int, batch: dict | None) -> None:
        c = self.ctx
        if c.in_boundary is None:
            lo, hi = self.bounds[mu % self.m]
            env = {k: torch.from_numpy(v[lo:hi]).to(c.device) for k, v in batch.items()}
            leaf = None
        else:
            src = self.route(c.stage - 1, mu)
            message = self._receive(("F", mu))
            if self.versions is not None and mu // self.m > self.versions.d:
                # src ran this forward at W(step - D), so it had applied update step - D - 1,
                # after its every backward of that step: it has our gradients up to there
                done = mu // self.m - self.versions.d - 1
                self._settle(lambda dst, x, back: back and dst == src and x // self.m <= done)
            # unpacking the message is the receiving layer's work in the cost model
            # (calibration/calibrate.py folds the profiled decode in): timed, and dilated, so
            env, leaf = self._compute(f"decode F{mu}",
                                      lambda: self._boundary("in", src).decode(message))
            if self.auto is not None:
                self.auto.observe_forward("in", src, message)
        with ExitStack() as stack:
            if self.versions is not None:
                # the weights this microbatch's step reads (stashed for its backward); first,
                # as bringing them may apply an earlier step's update, BatchNorm statistics
                # included, which must not land in the zeroed buffers of running.microbatch
                params = self.versions.params_for(mu // self.m)
                if self.ps_steps is not None:  # and the table rows of the same version
                    self.ps_steps.before_forward(mu // self.m)
                stack.enter_context(self.versions.reading(params))
                if self.extra_loss is not None and mu // self.m >= self.extra_next:
                    # the step's first forward here: the term at the version it reads
                    self.extra_next = mu // self.m + 1
                    with c.recorder.span("extra loss", "compute"):
                        self.extra_loss([params[n] for n, _ in self.versions.named])
            if self.dropouts:
                step = self.step if self.versions is None else mu // self.m
                stack.enter_context(microbatch(c.spec.seed, step, mu % self.m))
            if self.running is not None:  # (async: steps overlap, terms kept per step)
                stack.enter_context(self.running.microbatch(
                    mu, 0 if self.versions is None else mu // self.m))
            out_env, loss = self._compute(f"F{mu}", lambda: self.module(env))
        nxt = self.next_forward.get(mu)
        if self.embeddings and nxt is not None and nxt // self.m == mu // self.m:
            self._prefetch(nxt, batch)  # (rows of the same step's batch only)
        if self.last:
            self.stash[mu] = (leaf, loss)
            return
        dst = self.route(c.stage + 1, mu)
        message, grad_out = self._compute(f"encode F{mu}",  # (as decode above)
                                          lambda: self._boundary("out", dst).encode(out_env))
        if self.auto is not None:
            self.auto.observe_forward("out", dst, message)
        self.stash[mu] = (leaf, grad_out)
        self._send(message, dst, mu, backward=False)

    def _prefetch(self, mu: int | None, batch: dict | None) -> None:
        """Pull microbatch mu's rows now (they travel while this replica does other work),
        when its ids are already here: always at stage 0, else once its message arrived."""
        c = self.ctx
        if mu is None:
            return
        if c.in_boundary is None:
            lo, hi = self.bounds[mu % self.m]
            env = {k: torch.from_numpy(v[lo:hi]) for k, v in batch.items()}
        else:
            buf, work = self.inbox.get(("F", mu), (None, None))
            if work is None or not work.is_completed():
                return
            env = self._boundary("in", self.route(c.stage - 1, mu)).decode(buf)[0]
        for layer in self.embeddings:
            layer.prefetch(env)

    def backward(self, mu: int) -> None:
        c = self.ctx
        leaf, out = self.stash.pop(mu)
        if self.ps_steps is not None:
            self.ps_steps.client.push_step = mu // self.m  # the step its pushes belong to
        if self.reducer is not None and mu == self.last_backward:
            self.reducer.arm()
        if self.last:
            if self.versions is None:
                self.loss_sum += float(out.detach())
            else:
                step = mu // self.m
                self.step_loss[step] = self.step_loss.get(step, 0.0) + float(out.detach())
            self._compute(f"B{mu}", lambda: (out / c.spec.batch_size).backward())
        elif out is not None:
            dst = self.route(c.stage + 1, mu)
            grad = self._boundary("out", dst).decode_grad(self._receive(("B", mu)))
            if self.versions is not None:  # mu's gradient came back: its forward arrived
                self._settle(lambda to, x, back: not back and x == mu)
            if self.auto is not None:
                self.auto.observe_backward("out", dst, grad)
            if out.requires_grad:
                self._compute(f"B{mu}", lambda: torch.autograd.backward([out], [grad]))
        if leaf is not None:
            g = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)
            src = self.route(c.stage - 1, mu)
            boundary = self._boundary("in", src)
            message = boundary.encode_grad(g)
            if self.auto is not None:
                self.auto.observe_backward("in", src, boundary.decode_grad(message))
            self._send(message, src, mu, backward=True)

    # -- step end ------------------------------------------------------------------------
    def seconds_per_microbatch(self) -> float:
        """Compute seconds per forward+backward in the step so far (0: none ran here)."""
        return self.step_compute_s / self.step_microbatches if self.step_microbatches else 0.0

    def end_step(self) -> float:
        """All-reduce gradients (+ loss) over the stage's replicas, update, drain sends.
        Returns the step's summed loss at the last stage (0.0 elsewhere)."""
        c = self.ctx
        loss = torch.tensor([self.loss_sum], dtype=torch.float32)
        if self.reducer is not None:
            with c.recorder.span("allreduce", "allreduce"):
                self.reducer.finish()
                loss = loss.to(c.comm_device)
                dist.all_reduce(loss, group=c.group)
                loss = loss.cpu()
        elif c.group is not None:
            with c.recorder.span("allreduce", "allreduce"):
                grads = [p.grad if p.grad is not None else torch.zeros_like(p)
                         for p in self.params]
                flat = torch.cat([g.reshape(-1).to(c.comm_device, torch.float32)
                                  for g in grads] + [loss.to(c.comm_device)])
                dist.all_reduce(flat, group=c.group)
                offset = 0
                for p, g in zip(self.params, grads, strict=True):
                    n = g.numel()
                    p.grad = flat[offset:offset + n].reshape(g.shape).to(p.device, p.dtype)
                    offset += n
                loss = flat[-1:].cpu()
        if self.running is not None:
            with c.recorder.span("allreduce", "allreduce"):
                self.running.sync(c.group, c.comm_device)
        with c.recorder.span("optimizer", "optimizer"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        with c.recorder.span("drain sends", "transfer"):
            for entry in self.sends:
                entry[1].wait()
        self.sends.clear()
        if self.auto is not None:
            self.auto.end_step()
        self.loss_sum = 0.0
        self.step_compute_s, self.step_microbatches = 0.0, 0
        if self.stash or self.inbox:
            raise RuntimeError(f"rank {c.rank}: step ended with unfinished microbatches")
        return float(loss[0])

    # -- async step ends -----------------------------------------------------------------
    def end_step_async(self, step: int) -> None:
        """This replica's part of step `step` is done: its gradient goes to the stage's
        all-reduce (applied when a later forward reads the new weights). Nothing waits here:
        the stream goes on with the next steps' microbatches."""
        self.versions.end_step(step, self.step_loss.pop(step, 0.0))
        if self.auto is not None:
            self.auto.end_step()
        self.step_compute_s, self.step_microbatches = 0.0, 0

    def finish_async(self, step: int) -> dict[int, float]:
        """The end of a segment before `step` (a checkpoint or the run's end): every update
        applied, every send delivered. Returns the segment's summed losses by step (over the
        stage's replicas; meaningful at the last stage)."""
        self.versions.finish()
        with self.ctx.recorder.span("drain sends", "transfer"):
            for entry in self.sends:
                entry[1].wait()
        self.sends.clear()
        if self.stash or self.inbox or self.step_loss:
            raise RuntimeError(f"rank {self.ctx.rank}: segment ended with unfinished "
                               "microbatches")
        losses, self.versions.losses = self.versions.losses, {}
        self.versions.close_segment(step)
        return losses
