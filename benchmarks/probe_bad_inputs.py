"""Probe every command of `heterps-sim` and `heterps-exec` with bad input, and classify what
each does against the project's rule: one line on stderr naming the file, field and problem,
exit 2, no traceback.

The matrix, generated (commands and their flags are read from the real parsers):
  - each file-taking argument: missing, a folder, empty, binary junk, the wrong top-level
    type (a list), malformed, nested 1,000 deep;
  - each numeric flag (type int/float in the parser, plus the engine's and train-rl's numeric
    flags): -1, 0, nan, inf, 1e308, 1e-308, abc;
  - each text flag without a fixed set of choices (and not a file or output, probed above):
    "xyz";
  - each number in scenarios/exec-tiny.yaml and in a user-model scenario
    (tests/fixtures/ctr_models/dcn.yaml), checked with `heterps-sim check`: the same values;
    each text field of both: "xyz" (names and descriptions take any word); an unknown
    scheduler option;
  - each output path: an existing folder holding the user's own files (`notes.txt`, and a
    `result.json` named as a command's output), a file under a file, a file in /proc (not
    writable), a file in a folder that does not exist. After each case the user's files must
    be as they were ("nothing already written is lost").

Outcome classes: ok (exit 2, one stderr line, no traceback); traceback; argparse (exit 2 with
argparse's usage block: the error line is there, but not alone); multi-line (exit 2, several
lines, no traceback); wrong-exit (another non-zero code); hang (ran past its time limit; the
process group is killed); silent-success (exit 0 on a value that is bad everywhere); lost (a
file the user had in an output folder was changed or removed, whatever the exit); accepted
(on a value that may be legitimate - 0, 1e-308, a missing output folder that is then
created, an existing folder given as a run folder - exit 0, or the documented exit 1 with one
line: the input was fine but no plan met the limit). "accepted" is listed, not counted as a
failure.

Each case runs in a forked child of this process (the CLIs are imported once, so a case costs
milliseconds, not an interpreter start): the child makes its own session, so a case that
launches torchrun is killed with its whole process group at the timeout.

    .venv/bin/python benchmarks/probe_bad_inputs.py                 # the whole matrix
    .venv/bin/python benchmarks/probe_bad_inputs.py --only exec     # cases whose name holds it
    .venv/bin/python benchmarks/probe_bad_inputs.py --json out.json --timeout 60 --jobs 2
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import select
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "exec-tiny.yaml"
USER_SCENARIO = ROOT / "tests" / "fixtures" / "ctr_models" / "dcn.yaml"
BAD_NUMBERS = ["-1", "0", "nan", "inf", "1e308", "1e-308", "abc"]
MAYBE_GOOD = {"0", "1e-308"}
"""Values some fields legitimately take (a seed of 0, a lr of 1e-308 is merely silly)."""
FAILURES = ("traceback", "argparse", "multi-line", "wrong-exit", "hang", "silent-success",
            "lost")
USER_FILES = {"notes.txt": "the user's notes\n", "result.json": '{"mine": true}\n'}
"""What each existing output folder holds before its case: the user's, never to be lost."""
SLOW_BASES = {("exec", "ps-bench"): 180.0, ("exec", "validate"): 300.0}
"""Seconds a case may take, where the valid base command itself runs long on the 2-core VM
(ps-bench starts two process worlds, 40-60 s; validate runs its plans and calibration, 85 s):
a case is a hang only past max(--timeout, this)."""


@dataclass
class Case:
    name: str
    prog: str                      # "sim" or "exec"
    argv: list[str]
    maybe: bool = False            # exit 0 is "accepted", not "silent-success"
    timeout: float = 0.0           # 0: the run's --timeout
    keep: Path | None = None       # a folder of USER_FILES that must survive the case
    outcome: str = ""
    code: int | None = None
    err: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


# -- the files ---------------------------------------------------------------------------------

def make_files(tmp: Path) -> dict[str, dict[str, Path]]:
    """Bad files per suffix: {"yaml": {"missing": ..., "folder": ..., ...}, "json": ...}."""
    (tmp / "afolder").mkdir()
    (tmp / "afile").write_text("x")
    files = {}
    for suffix in ("yaml", "json", "pt", "csv"):
        d = tmp / f"bad-{suffix}"
        d.mkdir()
        kinds = {
            "missing": d / f"nope.{suffix}",
            "folder": d / f"folder.{suffix}",
            "empty": d / f"empty.{suffix}",
            "binary": d / f"binary.{suffix}",
            "list": d / f"list.{suffix}",
            "malformed": d / f"malformed.{suffix}",
            "deep": d / f"deep.{suffix}",
        }
        kinds["folder"].mkdir()
        kinds["empty"].write_text("")
        kinds["binary"].write_bytes(bytes(range(256)) * 8)
        kinds["list"].write_text("[1, 2]")
        kinds["malformed"].write_text('{"a": [1, ' if suffix == "json" else "a: [1,\n b: }")
        kinds["deep"].write_text("[" * 1000 + "]" * 1000)
        files[suffix] = kinds
    return files


def outputs(tmp: Path, name: str, folder: bool) -> dict[str, tuple[Path, bool]]:
    """Bad output paths: kind -> (path, maybe). "folder" is a fresh folder of USER_FILES
    (legitimate for a run folder, `folder`, if it is written beside them)."""
    own = tmp / "user-folders" / name
    own.mkdir(parents=True)
    for file, text in USER_FILES.items():
        (own / file).write_text(text)
    return {"folder": (own, folder),
            "under-a-file": (tmp / "afile" / name, False),
            "in-proc": (Path("/proc") / f"heterps-probe-{name}", False),
            "missing-parent": (tmp / "no" / "such" / name, True)}


def tiny_plan(path: Path) -> Path:
    from heterps_sim.inputs.zoo import get_model
    layers = [la.name for la in get_model("tiny-ctr").layers]
    cpu = "xeon-icelake-16vcpu"
    path.write_text(json.dumps({"format_version": 1, "num_microbatches": 2, "schedule": "1f1b",
                                "stages": [{"layers": layers[:10], "resource": cpu,
                                            "num_replicas": 1},
                                           {"layers": layers[10:], "resource": cpu,
                                            "num_replicas": 1}]}))
    return path


# -- the matrix ---------------------------------------------------------------------------------

def parser_flags(prog: str) -> dict[str, list[argparse.Action]]:
    if prog == "sim":
        import heterps_sim.cli as cli
        ap = cli._parser()
    else:
        import heterps_exec.cli as cli
        ap = cli._parser(cli.COMMANDS)
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    return {name: [a for a in p._actions if a.dest != "help"] for name, p in sub.choices.items()}


TRAIN_RL_NUMBERS = ["--seconds", "--updates", "--seed", "--hidden", "--embed", "--lr", "--batch",
                    "--entropy", "--baseline-decay", "--max-grad-norm", "--threads",
                    "--save-every"]
EXEC_RUN_NUMBERS = ["--steps", "--seed", "--num-samples", "--table-scale", "--lr",
                    "--warmup-steps", "--rank-timeout", "--timeout", "--checkpoint-every",
                    "--max-restarts", "--ps-shards", "--ps-hot-fraction", "--nnodes",
                    "--node-rank"]
EXEC_PROFILE_NUMBERS = ["--batch", "--table-scale", "--threads", "--repeats"]


def bases(tmp: Path, plan: Path) -> dict[tuple[str, str], list[str]]:
    """A valid, quick command line per command: each probe replaces one argument of it."""
    s, p = str(SCENARIO), str(plan)
    return {
        ("sim", "check"): ["check", s],
        ("sim", "problem"): ["problem", s, "--json"],
        ("sim", "schedule"): ["schedule", s, "--verify", "none", "--quiet"],
        ("sim", "simulate"): ["simulate", s, "--out", str(tmp / "sim-out"), "--quiet"],
        ("sim", "compare"): ["compare", s, "--schedulers", "exact", "--budget", "20", "--quiet"],
        ("sim", "evaluate"): ["evaluate", s, p, "--quiet"],
        ("sim", "convert-plan"): ["convert-plan", p, "-o", str(tmp / "conv.json")],
        ("sim", "effects"): ["effects", s, p, "--steps", "2", "--quiet"],
        ("sim", "tradeoff"): ["tradeoff", s, "--schedulers", "exact", "--points", "2",
                              "--out", str(tmp / "trade"), "--quiet"],
        ("sim", "plot"): ["plot", str(tmp / "afolder")],
        ("sim", "report"): ["report", "--scenarios", "exec-tiny", "--points", "2",
                            "--out", str(tmp / "report"), "--quiet"],
        ("sim", "train-rl"): ["train-rl", s, "--updates", "1", "--batch", "2", "--seconds", "5",
                              "--out", str(tmp / "p.pt"), "--quiet"],
        ("exec", "run"): ["run", p, "--scenario", s, "--steps", "2", "--out",
                          str(tmp / "exec-run"), "--quiet"],
        ("exec", "profile"): ["profile", "--scenario", s, "--no-links", "--repeats", "1",
                              "--as-type", "xeon-icelake-16vcpu", "--out", str(tmp / "prof"),
                              "--quiet"],
        ("exec", "validate"): ["validate", "--scenario", s, "--plans", "2", "--steps", "2",
                               "--max-ranks", "2", "--profile",
                               str(ROOT / "traces" / "profiles" / "vm-cpu-tiny-ctr.csv"),
                               "--links", str(ROOT / "traces" / "profiles" / "vm-links.json"),
                               "--out", str(tmp / "val"), "--quiet"],
        ("exec", "ps-bench"): ["ps-bench", "--rows", "1000", "--batches", "2",
                               "--work-dir", str(tmp / "psb"), "--quiet"],
    }


FILE_ARGS = {
    # (prog, command): [(argument, suffix)]; a positional is named by its place "#1"
    ("sim", "check"): [("#1", "yaml")],
    ("sim", "problem"): [("#1", "yaml"), ("#1", "json")],
    ("sim", "schedule"): [("#1", "yaml"), ("#1", "json")],
    ("sim", "simulate"): [("#1", "yaml")],
    ("sim", "compare"): [("#1", "yaml")],
    ("sim", "evaluate"): [("#1", "yaml"), ("#2", "json")],
    ("sim", "convert-plan"): [("#1", "json")],
    ("sim", "effects"): [("#1", "yaml"), ("#2", "json")],
    ("sim", "tradeoff"): [("#1", "yaml")],
    ("sim", "train-rl"): [("#1", "yaml"), ("--init", "pt")],
    ("exec", "run"): [("#1", "json"), ("--scenario", "yaml"), ("--binding", "yaml"),
                      ("--checkpoint-dir", "yaml")],
    ("exec", "profile"): [("--scenario", "yaml")],
    ("exec", "validate"): [("--scenario", "yaml"), ("--binding", "yaml"),
                           ("--profile", "yaml"), ("--links", "json")],
}
OUT_ARGS = {
    ("sim", "schedule"): [("--out", "plan.json")],
    ("sim", "simulate"): [("--out", "run")],
    ("sim", "compare"): [("--out", "c.csv")],
    ("sim", "evaluate"): [("--trace", "t.json")],
    ("sim", "convert-plan"): [("-o", "plan.json")],
    ("sim", "tradeoff"): [("--out", "trade")],
    ("sim", "report"): [("--out", "report")],
    ("sim", "train-rl"): [("--out", "p.pt"), ("--log", "log.csv")],
    ("exec", "run"): [("--out", "run"), ("--trace", "t.json"), ("--save-state", "s.pt")],
    ("exec", "profile"): [("--out", "prof")],
    ("exec", "validate"): [("--out", "val")],
    ("exec", "ps-bench"): [("--work-dir", "psb")],
}
FOLDER_OUTS = {("sim", "simulate", "--out"), ("sim", "tradeoff", "--out"),
               ("sim", "report", "--out"), ("exec", "run", "--out"),
               ("exec", "profile", "--out"), ("exec", "validate", "--out"),
               ("exec", "ps-bench", "--work-dir")}
"""Outputs that are folders: an existing one is a legitimate value."""


def with_arg(argv: list[str], arg: str, value: str) -> list[str]:
    """`argv` with argument `arg` (a flag, or "#N": the N-th positional after the command)
    set to `value`."""
    argv = list(argv)
    if arg.startswith("#"):
        n, seen = int(arg[1:]), 0
        for i, a in enumerate(argv[1:], 1):
            if not a.startswith("-") and not argv[i - 1].startswith("-"):
                seen += 1
                if seen == n:
                    argv[i] = value
                    return argv
        return argv[:1] + [value] + argv[1:]
    if arg in argv:
        argv[argv.index(arg) + 1] = value
        return argv
    return argv + [arg, value]


def numeric_flags(prog: str, command: str, actions) -> list[str]:
    if (prog, command) == ("sim", "train-rl"):
        return TRAIN_RL_NUMBERS
    if (prog, command) == ("exec", "run"):
        return EXEC_RUN_NUMBERS
    found = [a.option_strings[-1] for a in actions
             if a.option_strings and a.type in (int, float)]
    if (prog, command) == ("exec", "profile"):
        found = sorted(set(found) | set(EXEC_PROFILE_NUMBERS))
    return found


FREE_TEXT = {"--rdzv-id"}
"""Text flags any word is a legitimate value of (a rendezvous name)."""


def text_flags(prog: str, command: str, actions, covered: set[str]) -> list[str]:
    """Optional flags taking text with no fixed choices, not numbers, files or outputs."""
    numbers = set(numeric_flags(prog, command, actions))
    found = []
    for a in actions:
        flag = a.option_strings[-1] if a.option_strings else ""
        if (not flag or a.choices or a.nargs == 0 or a.type in (int, float)
                or getattr(a.type, "__name__", "") in ("int", "float")
                or flag in numbers or set(a.option_strings) & covered):
            continue
        found.append(flag)
    return found


def scenario_numbers(path: Path, kind: type | tuple = (int, float)) -> list[tuple[str, list]]:
    """(dotted path, key path) of each number (or value of `kind`) in a scenario (lists:
    their first item)."""
    found = []

    def walk(node, keys):
        if isinstance(node, bool):
            return
        if isinstance(node, kind):
            found.append((".".join(map(str, keys)), keys))
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, [*keys, k])
        elif isinstance(node, list) and node:
            walk(node[0], [*keys, 0])
    walk(yaml.safe_load(path.read_text()), [])
    return found


FREE_FIELDS = {"name", "description"}
"""Scenario text fields any word is a legitimate value of (labels)."""


def scenario_cases(tmp: Path, path: Path, label: str) -> list[Case]:
    data = yaml.safe_load(path.read_text())
    cases = []
    for dotted, keys in scenario_numbers(path, str):  # each text field: "xyz"
        doc = json.loads(json.dumps(data))
        node = doc
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = "xyz"
        out = tmp / "scen" / f"{label}-{dotted}-xyz.yaml"
        out.parent.mkdir(exist_ok=True)
        out.write_text(yaml.safe_dump(doc, sort_keys=False))
        cases.append(Case(f"scenario {label} {dotted}=xyz", "sim", ["check", str(out)],
                          maybe=keys[-1] in FREE_FIELDS))
    if "schedule" in data:  # an option its scheduler does not have
        doc = json.loads(json.dumps(data))
        doc["schedule"].setdefault("options", {})["nope"] = 1
        out = tmp / "scen" / f"{label}-schedule.options.nope.yaml"
        out.parent.mkdir(exist_ok=True)
        out.write_text(yaml.safe_dump(doc, sort_keys=False))
        cases.append(Case(f"scenario {label} schedule.options.nope=1", "sim",
                          ["check", str(out)]))
    for dotted, keys in scenario_numbers(path):
        for value in BAD_NUMBERS:
            doc = json.loads(json.dumps(data))
            node = doc
            for k in keys[:-1]:
                node = node[k]
            node[keys[-1]] = value  # a string; yaml.dump writes it unquoted where it can
            text = yaml.safe_dump(doc, sort_keys=False)
            if value != "abc":
                text = text.replace(f"'{value}'", value)  # nan/inf as YAML floats: .nan, .inf
                text = re.sub(r"(?<![\w.])nan(?![\w.])", ".nan", text)
                text = re.sub(r"(?<![\w.-])inf(?![\w.])", ".inf", text)
            out = tmp / "scen" / f"{label}-{dotted}-{value}.yaml"
            out.parent.mkdir(exist_ok=True)
            out.write_text(text)
            cases.append(Case(f"scenario {label} {dotted}={value}", "sim", ["check", str(out)],
                              maybe=value in MAYBE_GOOD))
    return cases


def build_cases(tmp: Path, user_scenario: bool) -> list[Case]:
    plan = tiny_plan(tmp / "plan.json")
    files, base = make_files(tmp), bases(tmp, plan)
    cases = []
    for prog in ("sim", "exec"):
        for command, actions in parser_flags(prog).items():
            argv = base.get((prog, command))
            if argv is None:
                continue
            for arg, suffix in FILE_ARGS.get((prog, command), []):
                for kind, path in files[suffix].items():
                    value = str(path)
                    maybe = False
                    if arg == "--checkpoint-dir":  # a folder whose `latest` is bad
                        if kind == "folder":
                            continue
                        maybe = kind == "missing"  # a new checkpoint folder: made
                        d = tmp / f"ckpt-{kind}"
                        d.mkdir()
                        if kind != "missing":
                            (d / "latest").write_bytes(path.read_bytes() if path.is_file()
                                                       else b"")
                        value = str(d)
                    cases.append(Case(f"{prog} {command} {arg} {suffix}:{kind}", prog,
                                      with_arg(argv, arg, value), maybe=maybe))
            for arg, name in OUT_ARGS.get((prog, command), []):
                folder = (prog, command, arg) in FOLDER_OUTS
                for kind, (path, maybe) in outputs(tmp, f"{command}-{name}", folder).items():
                    cases.append(Case(f"{prog} {command} {arg} out:{kind}", prog,
                                      with_arg(argv, arg, str(path)), maybe=maybe,
                                      keep=path if kind == "folder" else None))
            for flag in numeric_flags(prog, command, actions):
                for value in BAD_NUMBERS:
                    cases.append(Case(f"{prog} {command} {flag}={value}", prog,
                                      with_arg(argv, flag, value), maybe=value in MAYBE_GOOD))
            covered = {a for a, _ in [*FILE_ARGS.get((prog, command), []),
                                      *OUT_ARGS.get((prog, command), [])]}
            for flag in text_flags(prog, command, actions, covered):
                cases.append(Case(f"{prog} {command} {flag}=xyz", prog,
                                  with_arg(argv, flag, "xyz"), maybe=flag in FREE_TEXT))
    # plot: the folder itself
    for kind in ("missing", "empty", "binary"):
        cases.append(Case(f"sim plot #1 folder:{kind}", "sim",
                          ["plot", str(files["json"][kind])]))
    cases += scenario_cases(tmp, SCENARIO, "exec-tiny")
    if user_scenario:
        cases += scenario_cases(tmp, USER_SCENARIO, "dcn")
    for case in cases:
        case.timeout = SLOW_BASES.get((case.prog, case.argv[0]), 0.0)
    return cases


# -- running a case ------------------------------------------------------------------------------

def _child(case: Case, out_path: str, err_path: str) -> None:
    os.setsid()
    fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd_out, 1)
    os.dup2(fd_err, 2)
    os.environ["HETERPS_PROGRESS"] = "0"
    code = 1
    try:
        if case.prog == "sim":
            from heterps_sim.cli import main
        else:
            from heterps_exec.cli import main
        code = main(case.argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what the interpreter would print
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code or 0))


def start(case: Case, scratch: Path):
    out, err = scratch / f"{id(case)}.out", scratch / f"{id(case)}.err"
    pid = os.fork()
    if pid == 0:
        _child(case, str(out), str(err))
    return pid, time.monotonic(), err


def lost_files(folder: Path | None) -> list[str]:
    """The USER_FILES of `folder` that are no longer as they were."""
    if folder is None:
        return []
    return [f for f, text in USER_FILES.items()
            if not (folder / f).is_file() or (folder / f).read_text() != text]


def classify(case: Case) -> str:
    lines = [ln for ln in case.err.strip().splitlines() if ln.strip()]
    if case.code is None:
        return "hang"
    if "Traceback" in case.err:
        return "traceback"
    if case.extra.get("lost"):
        return "lost"
    if case.code == 0:
        return "accepted" if case.maybe else "silent-success"
    if case.code == 1 and case.maybe and len(lines) == 1:
        return "accepted"  # the documented exit 1: the input was fine, no plan met the limit
    if case.code != 2:
        return "wrong-exit"
    if len(lines) == 1:
        return "ok"
    if any(ln.startswith("usage:") for ln in lines):
        return "argparse"
    return "multi-line"


def run_all(cases: list[Case], timeout: float, jobs: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="probe-io-"))
    pending, running = list(cases), {}
    while pending or running:
        while pending and len(running) < jobs:
            case = pending.pop(0)
            pid, t0, err = start(case, scratch)
            running[pid] = (case, t0, err)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (case, t0, err) in list(running.items()):
                if now - t0 > max(timeout, case.timeout):
                    with _suppress():
                        os.killpg(p, signal.SIGKILL)
                    os.waitpid(p, 0)
                    finish(case, None, now - t0, err)
                    del running[p]
            select.select([], [], [], 0.02)
            continue
        if pid in running:
            case, t0, err = running.pop(pid)
            with _suppress():
                os.killpg(pid, signal.SIGKILL)  # anything it left behind
            finish(case, os.waitstatus_to_exitcode(status), time.monotonic() - t0, err)


def finish(case: Case, code, seconds, err: Path) -> None:
    case.code, case.seconds = code, seconds
    case.err = err.read_text(errors="replace")[-4000:] if err.exists() else ""
    case.extra["lost"] = lost_files(case.keep)
    case.outcome = classify(case)
    line = case.err.strip().splitlines()[-1][:150] if case.err.strip() else ""
    if case.extra["lost"]:
        line = f"lost {', '.join(case.extra['lost'])} | {line}"
    print(f"{case.outcome:15s} {seconds:5.1f}s  {case.name}  | {line}", flush=True)


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return exc[0] is not None and issubclass(exc[0], (ProcessLookupError, PermissionError,
                                                            ChildProcessError))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="run the cases whose name holds this text")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-user-scenario", action="store_true",
                    help="skip the numbers of the user-model scenario (slow: each captures)")
    ap.add_argument("--json", default="", help="write every case and its outcome here")
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    os.environ["HETERPS_PROGRESS"] = "0"
    for module in ("heterps_exec.cli", "heterps_sim.cli", "heterps_sim.inputs.load",
                   "heterps_sim.planner", "torch"):  # imported once, before the forks
        __import__(module)
    tmp = Path(tempfile.mkdtemp(prefix="heterps-probe-"))
    cases = [c for c in build_cases(tmp, not args.no_user_scenario) if args.only in c.name]
    print(f"{len(cases)} cases, timeout {args.timeout:g} s, {args.jobs} at a time, "
          f"scratch {tmp}", flush=True)
    t0 = time.monotonic()
    run_all(cases, args.timeout, args.jobs)
    summary(cases, time.monotonic() - t0)
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"name": c.name, "argv": c.argv, "outcome": c.outcome, "code": c.code,
              "seconds": round(c.seconds, 2), "stderr": c.err[-600:],
              "lost": c.extra.get("lost", [])} for c in cases],
            indent=1))
    return 1 if any(c.outcome in FAILURES for c in cases) else 0


def summary(cases: list[Case], seconds: float) -> None:
    by_cmd = collections.defaultdict(collections.Counter)
    for c in cases:
        by_cmd[" ".join(c.name.split()[:2])][c.outcome] += 1
    classes = ["ok", "accepted", *FAILURES]
    print(f"\n{'command':24s}" + "".join(f"{k:>15s}" for k in classes))
    for cmd in sorted(by_cmd):
        print(f"{cmd:24s}" + "".join(f"{by_cmd[cmd][k]:15d}" for k in classes))
    total = collections.Counter(c.outcome for c in cases)
    print(f"{'total':24s}" + "".join(f"{total[k]:15d}" for k in classes))
    print(f"\n{len(cases)} cases in {seconds:.0f} s; failures: "
          f"{sum(total[k] for k in FAILURES)}")
    for k in FAILURES:
        for c in cases:
            if c.outcome == k:
                last = c.err.strip().splitlines()[-1][:160] if c.err.strip() else ""
                print(f"  {k:15s} {c.name}  | {last}")


if __name__ == "__main__":
    sys.exit(main())
