"""`heterps-sim`'s remaining classes of bad input: one line on stderr naming the file, the
field and the problem, exit 2, no traceback; nothing written.

One parametrised test per class, through the real command (`heterps_sim.cli.main`): inputs
nested past the bound, finite numbers no machine has, plot files of the wrong shape,
train-rl's files and seed, and a user's model that ends the process while it is imported or
run."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from heterps_sim.cli import main
from heterps_sim.core.files import MAX_NESTING

ROOT = Path(__file__).resolve().parents[3]
TINY = (ROOT / "scenarios" / "exec-tiny.yaml").read_text()


def refused(argv, capsys, *needles: str) -> str:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.fixture(scope="module")
def problem_json() -> dict:
    from heterps_sim.inputs.load import load_input
    return load_input(str(ROOT / "scenarios" / "exec-tiny.yaml")).problem.to_json_dict()


# -- nesting: refused before PyYAML's recursive composer or json's recursion can fail -----------

@pytest.mark.parametrize("name, text", [
    ("flow.yaml", TINY + "extra: " + "[" * 1000 + "]" * 1000 + "\n"),
    ("block.yaml", TINY + "extra:\n" + "".join("  " * i + "- \n" for i in range(1, 200))),
    ("maps.yaml", TINY + "extra: " + "{a: " * 1000 + "1" + "}" * 1000 + "\n"),
    ("just-past.yaml", TINY + "extra: " + "[" * MAX_NESTING + "]" * MAX_NESTING + "\n"),
    ("aliases.yaml", TINY + "a: &a " + "[" * 40 + "1" + "]" * 40 + "\nb: " + "[" * 40 + "*a"
     + "]" * 40 + "\n"),
    ("deep.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ("deep2.json", '{"a": ' + "[" * 500 + "]" * 500 + "}"),
])
def test_input_nested_past_the_bound(tmp_path, capsys, name, text):
    path = tmp_path / name
    path.write_text(text)
    refused(["check", path], capsys, str(path), f"nested more than {MAX_NESTING} deep")


@pytest.mark.parametrize("inner", ["", "1", "{a: 1}"])
def test_nesting_within_the_bound_reaches_the_schema(tmp_path, capsys, inner):
    """The document's own mapping is level 1: MAX_NESTING - 1 lists inside it (a mapping at
    the bottom makes one level more) pass the bound and meet the schema's unknown field."""
    n = MAX_NESTING - 1 - (inner.startswith("{"))
    path = tmp_path / "ok.yaml"
    path.write_text(TINY + "extra: " + "[" * n + inner + "]" * n + "\n")
    refused(["check", path], capsys, "extra")  # an unknown field, no longer a nesting error


# -- finite numbers no machine has: bounded at the input edge -----------------------------

def _scenario(tmp_path: Path, define: str = "", extra: str = "",
              workload: str = "batch_size: 256, throughput_limit: 20000, num_samples: 1.0e+6"):
    types = "[xeon-icelake-16vcpu, mine]" if define else "[xeon-icelake-16vcpu]"
    text = (f"name: x\nmodel: {{name: tiny-ctr}}\ncluster:\n  types: {types}\n"
            + (f"  define:\n    - {{name: mine, kind: cpu, {define}}}\n" if define else "")
            + f"workload: {{{workload}}}\n{extra}")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


MINE = ("peak_fp32_tflops: 1, memory_gb: 16, memory_bandwidth_gb_per_s: 50, "
        "network_gbit_per_s: {net}, price_per_hour_usd: {price}")


@pytest.mark.parametrize("kind, needles", [
    ("price 1e-308", ["cluster.define.0.price_per_hour_usd"]),
    ("price 1e300", ["cluster.define.0.price_per_hour_usd"]),
    ("network 1e-308", ["cluster.define.0.network_gbit_per_s"]),
    ("latency 1.7e308", ["latency_s", "[0, 60] s"]),
    ("num_samples 1e300", ["workload.num_samples", "1e+15"]),
    ("throughput_limit 1e-300", ["workload.throughput_limit"]),
    ("throughput_limit 1e300", ["workload.throughput_limit"]),
])
def test_extreme_numbers_in_a_scenario(tmp_path, capsys, kind, needles):
    what, value = kind.split()
    if what in ("price", "network"):
        define = MINE.format(net=value if what == "network" else 10,
                             price=value if what == "price" else 0.1)
        path = _scenario(tmp_path, define=define)
    elif what == "latency":
        path = _scenario(tmp_path, extra=f"profile: {{latency_s: {value}}}\n")
    else:
        workload = {"num_samples": "batch_size: 256, throughput_limit: 20000, num_samples: ",
                    "throughput_limit": "batch_size: 256, num_samples: 1.0e+6, throughput_limit: "
                    }[what] + value
        path = _scenario(tmp_path, workload=workload)
    refused(["check", path], capsys, str(path), *needles)


@pytest.mark.parametrize("field, value, needle", [
    ("price_per_hour", lambda p: [1e-308] + p[1:], "price per unit-hour of type"),
    ("network_bytes_per_s", lambda p: [1e-308] + p[1:], "network of type"),
    ("latency_s", lambda p: 1.7e308, "latency_s"),
    ("num_samples", lambda p: 1e300, "workload.num_samples"),
    ("oct_s", lambda p: [[1e300, *r[1:]] for r in p], "oct_s"),
    ("boundary_bytes", lambda p: [1e300] + p[1:], "boundary bytes of layer"),
])
def test_extreme_numbers_in_a_problem_json(tmp_path, capsys, problem_json, field, value, needle):
    data = dict(problem_json)
    data[field] = value(data[field])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    refused(["check", path], capsys, str(path), needle, "core/limits.py")


# -- the simulator's --slow-replica and a scenario's seeds: bounded as the engine's are -------

@pytest.mark.parametrize("command", ["evaluate", "effects"])
def test_simulator_slow_replica_factor_out_of_range(capsys, command):
    """1e300 printed a stage 6.8e299 ms long (evaluate) or ran for ever (effects)."""
    plan = ROOT / "scenarios" / "plans" / "exec-tiny-pipeline.json"
    extra = ["--engine", "des"] if command == "evaluate" else []
    refused([command, ROOT / "scenarios" / "exec-tiny.yaml", plan, *extra,
             "--slow-replica", "0:0:1e300"], capsys, "--slow-replica", "at most 1000")


@pytest.mark.parametrize("old, new", [
    ("schedule:\n  scheduler: exact", "schedule:\n  seed: -5\n  scheduler: exact"),
    ('  types: ["xeon-icelake-16vcpu", "epyc-milan-32vcpu", "t4"]',
     '  types: ["xeon-icelake-16vcpu"]\n  synthetic: {count: 1, seed: -5}')])
def test_a_negative_seed_in_a_scenario(tmp_path, capsys, old, new):
    assert old in TINY
    path = tmp_path / "s.yaml"
    path.write_text(TINY.replace(old, new))
    refused(["check", path], capsys, str(path), "seed", "greater than or equal to 0")


# -- plot: the files it reads must have the shape the figures read ---------------------------

GOOD_SWEEP_HEAD = ("index,scheduler,throughput_limit,feasible,cost_usd,throughput,units,"
                   "single_type_cost_usd,single_type_throughput_same_cost\n")


@pytest.mark.parametrize("file, text, needle", [
    ("result.json", "[1]", "expected a mapping"),
    ("result.json", '{"stages": 5}', "stages"),
    ("result.json", '{"stages": [{"resource": 5}]}', "stages.0.resource"),
    ("result.json", '{"stages": [{"utilisation": "high"}]}', "stages.0.utilisation"),
    ("result.json", '{"bottleneck_stage": "x"}', "bottleneck_stage"),
    ("trace.json", '{"traceEvents": 5}', "traceEvents"),
    ("trace.json", '{"traceEvents": [5]}', "traceEvents.0"),
    ("trace.json", '{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1}]}', "needs ts and dur"),
    ("trace.json", '{"traceEvents": [{"ph": "X", "pid": "a", "tid": 1, "ts": 0, "dur": 1}]}',
     "traceEvents.0.pid"),
    ("trace.json", '{"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]}',
     "traceEvents.0.dur"),
    ("trace.json", '{"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 1, "args": {}}]}',
     "args.name"),
    ("trace.json", "\xff", "not a text file"),
    ("tradeoff.csv", GOOD_SWEEP_HEAD, "no rows"),
    ("tradeoff.csv", GOOD_SWEEP_HEAD + "0,exact,abc,True,2,3,t4 x1,3,1\n", "throughput_limit"),
    ("tradeoff.csv", GOOD_SWEEP_HEAD + "0,exact,1,True,-2,3,t4 x1,3,1\n", "cost_usd"),
    ("tradeoff.csv", GOOD_SWEEP_HEAD + "0,exact,1,True,2,3,t4 xx,3,1\n", "units"),
    ("tradeoff.csv", GOOD_SWEEP_HEAD + "-1,exact,1,True,2,3,t4 x1,3,1\n", "index"),
    ("tradeoff.csv", GOOD_SWEEP_HEAD + "0,exact,1,True,2,3,t4 x1,abc,1\n",
     "single_type_cost_usd"),
    ("tradeoff.csv", "index,scheduler,throughput_limit,feasible,cost_usd,throughput\n"
     "0,exact,1,True,2,3\n", "missing columns"),
])
def test_plot_refuses_files_of_the_wrong_shape(tmp_path, capsys, file, text, needle):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / file).write_bytes(text.encode("latin-1") if text == "\xff" else text.encode())
    refused(["plot", folder], capsys, file, needle)
    assert sorted(p.name for p in folder.iterdir()) == [file]  # no figure written


def test_plot_draws_good_files(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "tradeoff.csv").write_text(GOOD_SWEEP_HEAD + "0,exact,1,True,2,3,t4 x2,3,1\n"
                                         "1,exact,2,False,inf,0,,inf,\n")
    (folder / "result.json").write_text(json.dumps({"source": "des", "throughput": 5.0,
                                                    "stages": [{"resource": "t4",
                                                                "num_replicas": 2,
                                                                "utilisation": 0.5}]}))
    assert main(["plot", str(folder)]) == 0
    assert (folder / "utilisation.png").is_file() and (folder / "figures").is_dir()


# -- train-rl: --init read as data only, --out and the seed checked before training ---------

class _Evil:
    def __reduce__(self):
        import os
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("scheduler", ["rl-paper", "rl"])
@pytest.mark.parametrize("case", ["not a checkpoint", "crafted pickle", "other format",
                                  "folder", "out is a folder", "out under a file",
                                  "out in /proc", "negative seed"])
def test_train_rl_files_and_seed(tmp_path, capsys, monkeypatch, scheduler, case):
    import torch
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "junk.pt").write_text("hello")
    (tmp_path / "evil.pt").write_bytes(pickle.dumps(_Evil()))
    torch.save({"format": 1}, tmp_path / "fmt.pt")
    flags, needles = {
        "not a checkpoint": (["--init", "junk.pt"], ["--init junk.pt", "not a heterps-rl"]),
        "crafted pickle": (["--init", "evil.pt"], ["--init evil.pt", "refused"]),
        "other format": (["--init", "fmt.pt"], ["--init fmt.pt", "not a heterps-rl"]),
        "folder": (["--init", str(tmp_path)], ["is a folder"]),
        "out is a folder": (["--out", str(tmp_path)], ["--out", "is a folder"]),
        "out under a file": (["--out", "afile/x.pt"], ["--out", "afile is a file"]),
        "out in /proc": (["--out", "/proc/heterps-policy.pt"], ["--out", "not writable"]),
        "negative seed": (["--seed", "-5"], ["--seed", "0..4,294,967,295"]),
    }[case]
    refused(["train-rl", "--scheduler", scheduler, ROOT / "scenarios" / "exec-tiny.yaml",
             *flags, "--quiet"], capsys, *needles)
    assert not (tmp_path / "pwned").exists()
    assert not list(tmp_path.glob("*.csv"))


@pytest.mark.parametrize("scheduler", ["rl-paper", "rl"])
@pytest.mark.parametrize("case", ["missing", "not a checkpoint", "crafted pickle",
                                  "other format", "folder"])
def test_schedule_set_checkpoint_is_checked_like_init(tmp_path, capsys, monkeypatch, scheduler,
                                                      case):
    """`schedule --set checkpoint=FILE` reads the file as train-rl --init does: one line, exit
    2, nothing in a crafted pickle runs."""
    import torch
    monkeypatch.chdir(tmp_path)
    (tmp_path / "junk.pt").write_text("hello")
    (tmp_path / "evil.pt").write_bytes(pickle.dumps(_Evil()))
    torch.save({"format": 1}, tmp_path / "fmt.pt")
    path, needle = {"missing": ("nope.pt", "cannot read"),
                    "not a checkpoint": ("junk.pt", "not a heterps-rl"),
                    "crafted pickle": ("evil.pt", "refused"),
                    "other format": ("fmt.pt", "not a heterps-rl"),
                    "folder": (str(tmp_path), "is a folder")}[case]
    refused(["schedule", ROOT / "scenarios" / "exec-tiny.yaml", "--scheduler", scheduler,
             "--set", f"checkpoint={path}", "--verify", "none"], capsys,
            f"--set checkpoint {path}", needle)
    assert not (tmp_path / "pwned").exists()


# -- check reads schedule.options as the commands that plan will ---------------------------

@pytest.mark.parametrize("scheduler, options, needle", [
    ("exact", "{nope: 1}", "schedule.options: nope: Extra inputs are not permitted"),
    ("random", "{budget: -5}", "schedule.options: budget"),
    ("random", "{budget: 50}", None)])
def test_check_reads_schedule_options(tmp_path, capsys, scheduler, options, needle):
    """An option the scheduler's Config refuses passed `check` (exit 0) and failed the first
    command that planned."""
    path = tmp_path / "s.yaml"
    path.write_text(TINY.replace("scheduler: exact", f"scheduler: {scheduler}\n  options: "
                                 f"{options}"))
    if needle is None:
        assert main(["check", str(path)]) == 0, capsys.readouterr().err
        return
    refused(["check", path], capsys, str(path), needle)


# -- a user's PyTorch model that ends the process ---------------------------------------------

EXITING = {
    "at import": "import sys\nsys.exit(0)\n",
    "in its factory": "import torch\ndef make():\n    raise SystemExit(0)\n",
    "in forward": ("import sys, torch\nclass M(torch.nn.Module):\n    def __init__(self):\n"
                   "        super().__init__()\n        self.fc = torch.nn.Linear(3, 1)\n"
                   "    def forward(self, x):\n        sys.exit(0)\ndef make():\n    return M()\n"),
}


@pytest.mark.parametrize("where", sorted(EXITING))
def test_a_model_module_that_calls_sys_exit(tmp_path, capsys, where):
    name = "exiting_" + where.replace(" ", "_")
    (tmp_path / f"{name}.py").write_text(EXITING[where])
    target = f"{name}:M" if where == "at import" else f"{name}:make"
    path = tmp_path / "s.yaml"
    path.write_text(f"name: u\nmodel:\n  module: {target}\n  inputs: [{{name: x, shape: [3], "
                    "dtype: float32}]\ncluster: {types: [xeon-icelake-16vcpu]}\n"
                    "workload: {batch_size: 64, throughput_limit: 100, num_samples: 1.0e+6}\n")
    refused(["check", path], capsys, str(path), "model.module", "sys.exit(0)")


# -- a user's model whose kwargs build nonsense the meta-device capture cannot see -----------

BUILT_FROM_KWARGS = """import torch
class M(torch.nn.Module):
    def __init__(self, rows, blocks, scale):
        super().__init__()
        self.emb = torch.nn.Embedding(rows, 4)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(blocks))
        self.head = torch.nn.Linear(4, 1)
        self.scale = scale
    def forward(self, ids):
        x = self.emb(ids).sum(1)
        for block in self.blocks:
            x = block(x)
        return self.head(x).squeeze(1) / self.scale
"""


@pytest.mark.parametrize("kwargs, needles", [
    ("{rows: 100, blocks: 1, scale: 1.0}", None),  # the good model passes
    ("{rows: -1, blocks: 1, scale: 1.0}", ["model.kwargs", "raised RuntimeError"]),
    ("{rows: 10, blocks: 1, scale: 1.0}",  # ids up to 99 in a table of 10 rows
     ["model.kwargs", "example batch of model.inputs (ids[4, 2])", "IndexError"]),
    ("{rows: 100, blocks: -1, scale: 1.0}", ["model.layers", "'blocks' does no computation"]),
    ("{rows: 100, blocks: 1, scale: 0.0}", ["model.kwargs", "non-finite"]),
])
def test_a_user_models_kwargs_that_build_nonsense(tmp_path, capsys, monkeypatch, kwargs,
                                                  needles):
    """Built on the meta device the capture sees shapes only: a table smaller than the ids,
    a named layer built empty, a division by zero all passed `check` (exit 0)."""
    monkeypatch.setenv("HETERPS_CAPTURE_CACHE", "0")
    (tmp_path / "kw_model.py").write_text(BUILT_FROM_KWARGS)
    path = tmp_path / "s.yaml"
    path.write_text(f"name: u\nmodel:\n  module: kw_model:M\n  kwargs: {kwargs}\n"
                    "  inputs: [{name: ids, shape: [2], dtype: int64, cardinality: 100}]\n"
                    "  layers: [emb, blocks, head]\ncluster: {types: [xeon-icelake-16vcpu]}\n"
                    "workload: {batch_size: 64, throughput_limit: 100, num_samples: 1.0e+6}\n")
    if needles is None:
        assert main(["check", str(path)]) == 0, capsys.readouterr().err
        return
    refused(["check", path], capsys, str(path), *needles)


# -- flags: one line at parse time, whether or not the command uses them ----------------------

PLAN = ROOT / "scenarios" / "plans" / "exec-tiny-pipeline.json"


@pytest.mark.parametrize("command", ["evaluate", "effects"])
@pytest.mark.parametrize("flag, value", [
    ("--microbatches", "-1"), ("--steps", "-1"), ("--ps-hot-fraction", "nan"),
    ("--ps-warm-fraction", "1e308"), ("--ps-zipf", "inf"), ("--ps-zipf", "-1"),
    ("--ps-rows", "-1"), ("--ps-ids", "-1"), ("--ps-batch", "-1"), ("--steps", "abc")])
def test_a_simulator_flag_out_of_range_even_when_unused(capsys, command, flag, value):
    """The analytic engine ignores the des flags: they exited 0 with -1, NaN or 1e308."""
    refused([command, ROOT / "scenarios" / "exec-tiny.yaml", PLAN, flag, value], capsys,
            f"argument {flag}", value)


@pytest.mark.parametrize("flag, value, needle", [
    ("--slow-replica", "xyz", "STAGE:REPLICA:FACTOR"),
    ("--slow-replica", "9:9:2", "no such replica"),
    ("--effects", "xyz", "unknown effect(s) xyz"),
    ("--ps-stream", "no-such.npy", "cannot read a .npy array"),
    ("--ps-stream", str(ROOT / "README.md"), "not a .npy file")])
def test_a_simulator_text_flag_is_checked_under_the_analytic_engine(capsys, flag, value,
                                                                    needle):
    """The analytic engine ignores the des flags: a bad effect name, replica or stream file
    exited 0 there."""
    refused(["evaluate", ROOT / "scenarios" / "exec-tiny.yaml", PLAN, flag, value], capsys,
            flag, needle)


def test_a_scheduler_name_is_checked_where_a_given_plan_leaves_it_unused(capsys):
    """`effects SCENARIO PLAN --scheduler nope` exited 0: the plan made the flag unused."""
    refused(["effects", ROOT / "scenarios" / "exec-tiny.yaml", PLAN, "--scheduler", "nope",
             "--steps", "2"], capsys, "argument --scheduler", "unknown scheduler 'nope'")


@pytest.mark.parametrize("argv, needle", [(["schedule", "--seed", "abc"], "--seed"),
                                          (["no-such-command"], "invalid choice"),
                                          (["evaluate"], "required")])
def test_argparse_errors_are_one_line(capsys, argv, needle):
    err = refused(argv, capsys, needle, "--help")
    assert "usage:" not in err


@pytest.mark.parametrize("scheduler", ["rl-paper", "rl"])
@pytest.mark.parametrize("flag, value", [("--lr", "1e308"), ("--entropy", "1e308"),
                                         ("--seconds", "1e308"), ("--hidden", "100000000"),
                                         ("--batch", "abc")])
def test_train_rl_settings_bounded_above(tmp_path, capsys, scheduler, flag, value):
    if scheduler == "rl" and flag == "--seconds":
        flag = "--ppo-seconds"
    refused(["train-rl", "--scheduler", scheduler, ROOT / "scenarios" / "exec-tiny.yaml",
             flag, value, "--out", tmp_path / "p.pt", "--quiet"], capsys,
            flag.lstrip("-").replace("-", "_") if value != "abc" else flag)
    assert not list(tmp_path.iterdir())


def test_train_rl_out_in_a_missing_folder_is_made(tmp_path, capsys):
    """A checked --out whose folder does not exist yet: made, as other outputs' folders are
    (the CSV log opened in place was a FileNotFoundError traceback)."""
    out = tmp_path / "no" / "such" / "p.pt"
    code = main(["train-rl", str(ROOT / "scenarios" / "exec-tiny.yaml"), "--updates", "1",
                 "--batch", "2", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code in (0, 1) and "Traceback" not in err, err
    assert out.is_file() and out.with_suffix(".csv").is_file()


@pytest.mark.parametrize("scheduler", ["rl-paper", "rl"])
@pytest.mark.parametrize("argv, needle", [
    (["--batch", "0"], "batch must be > 0"),                 # the trainer's Args
    ([ROOT / "scenarios" / "no-such.yaml"], "no such file"),  # its scenario files
    ([ROOT / "README.md"], "README.md")])
def test_train_rl_errors_read_as_every_commands(capsys, scheduler, argv, needle):
    """The trainers' own messages began "error:"; every other command's begin with the
    command's name."""
    err = refused(["train-rl", "--scheduler", scheduler, *argv, "--quiet"], capsys, needle)
    assert err.startswith("heterps-sim train-rl: ") and "error:" not in err, err
