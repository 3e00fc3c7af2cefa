"""One trainer rank's async run: continuous 1F1B segments between checkpoints.

The async schedule never flushes inside a segment: a replica walks one continuous stream of
forwards and backwards (heterps_sim.core.lanes, the simulator's order), a step end (STEP) where
its part of a step is done starts the stage's all-reduce and goes on. Which weights each step
reads is fixed by heterps_sim.core.asynchrony, not by timing, so a segment may end anywhere
without changing the result: the run flushes only where it checkpoints (and at its end), saves
the older versions the next steps read with the weights, and a resumed run starts a fresh
stream at the checkpoint's step that trains on exactly as an unbroken one. Tables on the
parameter server follow the same rule (PSSteps). The PS keeps one version of its rows, so a
segment ends the PS's steps only up to end - D - 1: the checkpoint holds the rows as the next
steps read them and the pushes of the last D steps pending (ps/checkpoint.py), and the next
segment, or a resumed run, ends those steps as an unbroken run would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from heterps_exec.checkpoint import dcp as checkpoint
from heterps_exec.runtime.versions import Versions, stash_versions
from heterps_sim.core.asynchrony import staleness
from heterps_sim.core.lanes import STEP, B, F

AHEAD = 1
"""Steps ahead whose receives a replica posts with the current step's. Gloo moves a message
once its receive is posted: a sender a step ahead (async never flushes) otherwise waits for
its peer's next step start, and under a full CPU that wait is on the critical path."""


@dataclass
class AsyncRun:
    """What the worker's result needs from the run."""

    losses: list[float] = field(default_factory=list)
    """Summed loss per step run (last stage; 0.0 elsewhere)."""
    step_ends: list[float] = field(default_factory=list)
    measure_from: float | None = None


def plan_staleness(spec) -> int:
    plan = spec.plan_obj()
    return staleness([s.num_replicas for s in plan.stages], plan.num_microbatches)


def segments(start: int, steps: int, every: int) -> list[tuple[int, int]]:
    """[first, end) step ranges: a checkpoint (every `every` steps, 0: none) ends one."""
    cuts = sorted({start, steps} | ({s for s in range(start + 1, steps) if s % every == 0}
                                     if every else set()))
    return list(zip(cuts[:-1], cuts[1:], strict=False))


def make_versions(spec, ctx, module, optimizer, resume: int | None, group,
                  running=None) -> Versions:
    """The replica's weight versions: fresh, or those the checkpoint of step `resume` holds
    (collective over `group`, the trainers: it loads the weights and optimizer state too).
    `running`: the stage's replicated BatchNorm statistics (StageRunner.running)."""
    d = plan_staleness(spec)
    stash = None
    if resume is not None:
        stash = checkpoint.load(spec.checkpoint_dir, resume, module, optimizer, group=group,
                                staleness=d, versions=stash_versions(resume, d))
    return Versions(module, optimizer, d, ctx.group, ctx.comm_device,
                    start=resume or 0, stash=stash, running=running, recorder=ctx.recorder)


class PSSteps:
    """The parameter server's half of the staleness rule, for a replica whose stage pulls
    table rows: step t's pulls must see the rows after step t - D - 1 and before step t - D
    (heterps_sim.core.asynchrony), and its pushes apply as step t's update.

    Pushes name their step (PSClient.push_step), so the PS keeps a later step's pushes apart.
    The PS applies step k once every client has ended it (ps/server.py); this replica ends
    step k as soon as both its pushes of step k are out (its step end) and its pulls of
    step k + D are done (its last forward of that step), without waiting, and waits for
    step k only before its first forward of step k + D + 1, whose rows it brings. The
    staleness bound puts that forward after both points, so the wait cannot close a cycle.

    A segment ends steps up to end - D - 1 only: steps end - D..end - 1 stay pending on the
    PS (their pushes are in, the next steps' pulls must not see them), are saved so by a
    checkpoint, and are ended in the next segment after its pulls of steps end..end + D - 1
    (or by `end_all` at the run's end). Those pulls depend on no later forward, so the
    waits of the segment's first steps cannot close a cycle either.
    """

    def __init__(self, client, d: int, start: int = 0) -> None:
        self.client, self.d = client, d
        self.points: dict[int, list[int]] = {}
        self.next_end = max(0, start - d)
        """The first step this replica has not ended (a resumed run's PS holds the D steps
        before `start` pending, as the segment that saved it left them)."""
        self.waited = self.next_end - 1
        """The last step known applied on every shard."""

    def plan_segment(self, actions: list, m: int, first: int, end: int) -> None:
        """Where in this segment's `actions` each step's end goes out (after that index;
        before the first action: now)."""
        at_step = {mu: i for i, (code, mu) in enumerate(actions) if code == STEP}
        last_forward: dict[int, int] = {}
        for i, (code, mu) in enumerate(actions):
            if code == F:
                last_forward[mu // m] = i
        self.points = {}
        for k in range(self.next_end, end - self.d):
            at = max(at_step.get(k, -1), last_forward.get(k + self.d, -1))
            self.points.setdefault(at, []).append(k)
        self.after(-1)

    def after(self, index: int) -> None:
        for k in self.points.pop(index, ()):
            self.client.end_step_async(k)
            self.next_end = k + 1

    def before_forward(self, step: int) -> None:
        k = step - self.d - 1
        if k > self.waited:
            if k >= self.next_end:
                raise RuntimeError(f"step {step} reads the rows after step {k}, which this "
                                   "replica has not ended (the staleness bound was broken)")
            self.client.wait_step(k)
            self.waited = k

    def finish(self) -> None:
        """The segment's end: its pushes are on the PS, the steps it ended applied."""
        self.client.wait_pushes()
        if self.next_end - 1 > self.waited:
            self.client.wait_step(self.next_end - 1)
            self.waited = self.next_end - 1

    def end_all(self, end: int) -> None:
        """The run's end: end the steps left pending and wait until all are applied."""
        for k in range(self.next_end, end):
            self.client.end_step_async(k)
        self.next_end = end
        self.finish()


def run_async(spec, ctx, runner, stream, start: int, module, optimizer, groups, *,
              fail) -> AsyncRun:
    """Walk this replica's streams from step `start`; `fail(step)` is the fault hook."""
    plan = spec.plan_obj()
    m = plan.num_microbatches
    out = AsyncRun()
    batches: dict[int, dict] = {}

    def batch_of(step: int) -> dict | None:
        if stream is None:
            return None
        while step not in batches:  # the stream yields steps in order
            n, batch = stream.next_batch()
            batches[n] = batch
        return batches[step]

    d = runner.versions.d
    rec = ctx.recorder
    measured_after = min(start + spec.warmup_steps, spec.steps - 1)  # as the flushed loop
    if measured_after == start:
        out.measure_from = rec.now()
        rec.measuring = True
    for first, end in segments(start, spec.steps, spec.checkpoint_every
                               if spec.checkpoint_dir else 0):
        actions = ctx.layout.actions("async", ctx.stage, ctx.replica, m, end - first,
                                     first_step=first)
        ps = runner.ps_steps
        if ps is not None:
            ps.plan_segment(actions, m, first, end)
        chunks = _chunks(actions)
        fail(first)
        for j, (chunk, stop) in enumerate(chunks):
            _run_chunk(runner, chunk, batch_of, ahead=chunks[j + 1:j + 1 + AHEAD])
            if stop is None:
                continue
            i, mu = stop
            runner.end_step_async(mu)
            if ps is not None:
                ps.after(i)
            batches.pop(mu, None)
            out.step_ends.append(rec.now())
            if mu == measured_after - 1:  # steps ending after this one are measured
                out.measure_from = out.step_ends[-1]
                rec.measuring = True
            if mu + 1 < end:
                fail(mu + 1)
        if ps is not None:
            ps.finish()
        losses = runner.finish_async(end)
        out.losses += [losses.get(step, 0.0) for step in range(first, end)]
        if spec.checkpoint_dir and spec.checkpoint_every and end % spec.checkpoint_every == 0:
            stash = runner.versions.saved_stash()
            assert sorted(stash) == stash_versions(end, d), (sorted(stash), end, d)
            checkpoint.save(spec.checkpoint_dir, end, module, optimizer, rank=ctx.rank,
                            group=groups.trainers, stash=stash, staleness=d,
                            before_commit=_ps_checkpoint(ps, spec, end))
    if ps is not None:
        ps.end_all(spec.steps)
    return out


def _ps_checkpoint(ps: PSSteps | None, spec, end: int):
    """The PS's part of the checkpoint after `end` steps, asked by every replica with tables
    once all have saved (their pushes are on the PS by then); the first request writes it."""
    if ps is None:
        return None
    from heterps_exec.ps import bridge as ps_bridge
    return lambda: ps_bridge.checkpoint(ps.client, spec, end)


def _chunks(actions: list) -> list[tuple[list, tuple[int, int] | None]]:
    """The actions between two step ends, each with the step end after it ((index, step);
    None for the segment's tail): [(index, code, mu)]."""
    out, chunk = [], []
    for i, (code, mu) in enumerate(actions):
        if code == STEP:
            out.append((chunk, (i, mu)))
            chunk = []
        else:
            chunk.append((i, code, mu))
    if chunk:
        out.append((chunk, None))
    return out


def _run_chunk(runner, chunk: list, batch_of, ahead=()) -> None:
    """The actions between two step ends: their receives, and those of the next AHEAD
    chunks, posted first (they overlap compute)."""
    if not chunk:
        return
    later = ([] if runner.auto is not None  # per-step encodings: posted with their step
             else [(code, mu) for c, _ in ahead for _, code, mu in c])
    runner.post_receives([(code, mu) for _, code, mu in chunk], ahead=later)
    ps = runner.ps_steps
    for i, code, mu in chunk:
        if code == F:
            runner.forward(mu, batch_of(mu // runner.m))
        elif code == B:
            runner.backward(mu)
        if ps is not None:
            ps.after(i)
