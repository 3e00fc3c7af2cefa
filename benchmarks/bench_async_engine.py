"""The engine's async schedule against the simulator and against 1F1B, on this machine.

    python benchmarks/bench_async_engine.py --steps 40 --repeats 3

exec-tiny layouts of 2 and 3 stages (one replica per stage, and one replicated), each run
for real under 1f1b and async (heterps-exec validate's machinery: the committed profile, this
host's gloo links measured first (--links), its runtime overhead and the CPU of a boundary
message as the engine sends it at each cut the layouts make (validate's calibration runs),
types emulated at their relative speeds, the simulator with the engine's cores and
messages), printed per plan:

- measured throughput (median of --repeats runs) beside the simulator's prediction at the
  run's compute speed (this VM's speed drifts up to 2x; the raw prediction is shown too);
- what each schedule spends on its boundary messages and runtime, per microbatch and boundary:
  the measured step less the simulator's step for the same schedule at the run's speed with
  the messages free (no transfer time, no message CPU; the fill, drain, stage imbalance,
  all-reduces and cores kept), over m x (stages - 1); and the async/1f1b ratio of it;
- beside it the older measure, step time / (m + s - 1) for 1f1b and / m for async less the
  bottleneck's compute per microbatch, which reads 1f1b's unbalanced fill and drain as time
  saved (a 1f1b step of m bottleneck microbatches and a lighter stage's is divided by m + 1);
- cores busy: the ranks' CPU seconds (every thread, gloo's included) per second of the
  measured steps; near the host's core count, the ranks waited for cores;
- the CPU per message and side under async over 1F1B's from validate's two-rank calibration
  runs: what the async runtime itself costs per message, apart from how the layouts' steps
  compose.

--rescore DIR predicts the runs saved in DIR (an earlier --out, copied first) again without
launching anything, e.g. under the other --core-sharing rule: both rules scored on the same
measurements (the printed load is this moment's, not the runs').
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_validate_rescore import _Saved  # noqa: E402

from heterps_exec.calibration import message_cost  # noqa: E402
from heterps_exec.calibration.inputs import read_links, read_profile_rows  # noqa: E402
from heterps_exec.calibration.validate import ValidateRequest, validate  # noqa: E402
from heterps_exec.launch import torchrun  # noqa: E402
from heterps_sim.core.asynchrony import staleness  # noqa: E402
from heterps_sim.core.plan import Plan, Stage  # noqa: E402
from heterps_sim.inputs.zoo import get_model  # noqa: E402

CPU = "xeon-icelake-16vcpu"
LAYOUTS = [([10], [1, 1], 8), ([9, 11], [1, 1, 1], 8), ([10], [2, 1], 8)]


def _plans() -> list[Plan]:
    names = [la.name for la in get_model("tiny-ctr").layers]
    plans = []
    for cuts, replicas, m in LAYOUTS:
        bounds = [0, *cuts, len(names)]
        stages = tuple(Stage(layers=tuple(names[a:b]), resource=CPU, num_replicas=k)
                       for a, b, k in zip(bounds[:-1], bounds[1:], replicas, strict=True))
        for schedule in ("1f1b", "async"):
            plans.append(Plan(stages=stages, num_microbatches=m, schedule=schedule))
    return plans


def _links(choice: str, rescore: str | None, out: Path) -> dict:
    """The links JSON the prediction uses: a file, or measured on this host now (saved in
    the runs' folder; a rescore reads the saved one, or the committed VM's if none)."""
    if choice != "measure":
        return read_links(choice)
    if rescore:
        saved = Path(rescore) / "links.json"
        return read_links(saved if saved.exists() else
                          ROOT / "traces" / "profiles" / "vm-links.json")
    from heterps_exec.calibration.links import profile_links
    links = profile_links(max_ranks=3)  # the layouts' all-reduces have at most 2 ranks
    out.mkdir(parents=True, exist_ok=True)
    (out / "links.json").write_text(json.dumps(links, indent=1) + "\n")
    return links


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="runs/bench-async-engine")
    p.add_argument("--core-sharing", choices=("fifo", "fair"), default="fair",
                   help="how the simulator shares the host's cores between the ranks "
                        "(validate's option)")
    p.add_argument("--rescore", metavar="DIR", default=None,
                   help="predict the runs saved in DIR again, launching nothing")
    p.add_argument("--profile", default=str(ROOT / "traces/profiles/vm-cpu-tiny-ctr.csv"),
                   help="the layer profile the prediction starts from (heterps-exec profile)")
    p.add_argument("--links", default="measure",
                   help="the host's links JSON (latency, bandwidth, all-reduces); default "
                        "'measure': gloo on this host, first (about a minute), saved as "
                        "OUT/links.json, which --rescore reads back")
    p.add_argument("--message-cpu", choices=("calibrate", "links"), default="calibrate",
                   help="a boundary message's CPU: measured at each cut by two-rank runs "
                        "(calibrate), or the links' gloo figure (links; a rescore of runs "
                        "saved with their calibration can score them both ways)")
    args = p.parse_args()
    plans = _plans()
    out = args.out
    links = _links(args.links, args.rescore, Path(out))
    if args.rescore:
        out = str(Path(tempfile.mkdtemp(prefix="rescore-")) / "runs")
        shutil.copytree(args.rescore, out)
        torchrun.launch = lambda spec, options=None: _Saved()
    report = validate(ValidateRequest(
        scenario=str(ROOT / "scenarios" / "exec-tiny.yaml"), plans=tuple(plans),
        steps=args.steps, repeats=args.repeats, max_ranks=3, out_dir=out,
        profile_rows=read_profile_rows(args.profile, "tiny-ctr"),
        links=links, core_sharing=args.core_sharing,
        # measured by two-rank pipeline runs (a folder saved without them: the links' figure)
        calibrate_messages=args.message_cpu == "calibrate" and (
            not args.rescore or message_cost.saved_in(args.rescore))))
    if args.rescore:
        shutil.rmtree(Path(out).parent, ignore_errors=True)
    rows = report["plans"]
    where = (f"the runs saved in {args.rescore}" if args.rescore else
             f"this host ({report['host_cores']} cores, load {report['host_load_before']:.2f} "
             "before)")
    print(f"exec-tiny on {where}, {args.steps} steps, median of {args.repeats} runs, "
          f"cores shared {args.core_sharing}")
    gloo = report["links_message_cpu"] or {}
    print("CPU per message as the engine sends it (two-rank calibration runs; cut after: "
          "upstream / downstream rank): "
          + ("; ".join(f"{k} " + ", ".join(f"{layer} {1e6 * u:.0f} / {1e6 * d:.0f} us"
                                          for layer, (u, d) in v.get("per_cut_s", {}).items())
                       for k, v in report["message_cpu"].items())
             or "not measured (the folder predates it)")
          + (f"; gloo's own (links JSON): send {1e6 * gloo['send_s']:.0f} us, receive "
             f"{1e6 * gloo['recv_s']:.0f} us" if gloo else ""))
    print(f"{'replicas':>8} {'m':>2} {'schedule':>8} {'D':>2} {'measured/s':>11} "
          f"{'sim@speed/s':>12} {'error':>7} {'sim raw/s':>10} {'msgs/mb/bd':>11} "
          f"{'older':>7} {'cores busy':>10}")
    per_mb, older = {}, {}
    errors = []
    for plan, row in zip(plans, rows, strict=True):
        s, m = len(plan.stages), plan.num_microbatches
        step = row["measured_step_s"]
        mb = step / (m if plan.schedule == "async" else m + s - 1)
        compute = max(row["measured_stage_compute_s"]) / m  # the bottleneck's, per microbatch
        left = max(mb - compute, 0.0) / (2 if s > 2 else 1)  # boundaries of the middle stage
        older[row["replicas"], plan.schedule] = left
        messages = (step - row["des_compute_only_step_s"]) / (m * (s - 1))
        per_mb[row["replicas"], plan.schedule] = messages
        err = 100 * (row["des_at_run_speed"] / row["measured"] - 1)
        if plan.schedule == "async":
            errors.append(abs(err))
        d = staleness([x.num_replicas for x in plan.stages], m) if plan.schedule == "async" \
            else "-"
        print(f"{row['replicas']:>8} {m:>2} {plan.schedule:>8} {d:>2} {row['measured']:>11,.0f} "
              f"{row['des_at_run_speed']:>12,.0f} {err:>+6.1f}% {row['des']:>10,.0f} "
              f"{1e3 * messages:>11.3f} {1e3 * left:>7.3f} "
              f"{row['measured_cpu_cores'] or 0:>10.2f}")
    ratios = [per_mb[r, "async"] / per_mb[r, "1f1b"] for r, sch in per_mb if sch == "1f1b"
              and per_mb[r, "1f1b"] > 0]
    old_ratios = [older[r, "async"] / older[r, "1f1b"] for r, sch in older if sch == "1f1b"
                  and older[r, "1f1b"] > 0]
    print(f"async vs simulator at run speed: median |error| {statistics.median(errors):.1f}%, "
          f"worst {max(errors):.1f}%")
    print("async / 1f1b messages and runtime per microbatch and boundary (ms, the step less "
          "the schedule's own with messages free): "
          + ", ".join(f"{x:.2f}" for x in ratios) + f" (median {statistics.median(ratios):.2f})")
    cuts = {k: v.get("per_cut_s", {}) for k, v in report["message_cpu"].items()}
    both = [c for c in cuts.get("async", {}) if sum(cuts.get("1f1b", {}).get(c, ())) > 0]
    if both:
        print("async / 1f1b CPU per message (both ranks), two-rank calibration runs, per cut: "
              + ", ".join(f"{c} {sum(cuts['async'][c]) / sum(cuts['1f1b'][c]):.2f}"
                          for c in both))
    print("older measure (bubbles by count, bottleneck compute out): "
          + ", ".join(f"{x:.2f}" for x in old_ratios))


if __name__ == "__main__":
    main()
