"""`heterps-exec`'s remaining classes of bad input: each is one line on stderr naming the flag or
file and the problem, exit 2, no traceback, and nothing started or written.

One parametrised test per class, through the real command (`heterps_exec.cli.main`): a
checkpoint directory whose `latest` is not ours, an absurd --slow-replica factor, a seed out
of range (every command that takes one), a links or profile file of the wrong shape, a
generated dataset smaller than one batch, and a run that cannot fit this machine."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from heterps_exec.cli import main
from heterps_exec.launch import capacity, prepare
from heterps_exec.request import RunRequest
from heterps_sim.core.limits import MAX_SEED
from tests.exec.helpers import SCENARIO, tiny_plan

ROOT = Path(__file__).resolve().parents[2]


def refused(argv: list[str], *needles: str) -> str:
    """Run `heterps-exec ARGV`; assert exit 2 and one line holding every needle."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = err.getvalue()
    assert code == 2, (code, text)
    assert "Traceback" not in text, text
    assert len(text.strip().splitlines()) == 1, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


@pytest.fixture
def plan(tmp_path) -> Path:
    return tiny_plan(tmp_path / "plan.json", [10], [1, 1])


def run_argv(plan: Path, tmp_path: Path, *more: str) -> list[str]:
    return ["run", str(plan), "--scenario", SCENARIO, "--steps", "4", "--out",
            str(tmp_path / "run"), *more]


# -- checkpoint directory: `latest` must be our one-line pointer ------------------------------

def _latest_folder(d: Path) -> None:
    (d / "latest").mkdir()


def _latest_binary(d: Path) -> None:
    (d / "latest").write_bytes(b"\xff\xfe\x00step")


def _latest_huge(d: Path) -> None:
    (d / "latest").write_text("step_" + "0" * 10_000)


def _latest_nowhere(d: Path) -> None:
    (d / "latest").write_text("step_00000002\n")  # no such folder


def _latest_negative(d: Path) -> None:
    (d / "step_-1").mkdir()
    (d / "latest").write_text("step_-1\n")


@pytest.mark.parametrize("make, needle", [(_latest_folder, "is a folder"),
                                          (_latest_binary, "not a checkpoint"),
                                          (_latest_huge, "not a checkpoint"),
                                          (_latest_nowhere, "not a checkpoint"),
                                          (_latest_negative, "not a checkpoint")])
def test_a_checkpoint_dir_whose_latest_is_not_ours(tmp_path, plan, make, needle):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    make(ckpt)
    refused(run_argv(plan, tmp_path, "--checkpoint-dir", str(ckpt)), "--checkpoint-dir",
            "latest", needle)
    assert not (tmp_path / "run").exists()


# -- emulated slow units: a factor in [1, 1000] ----------------------------------------------

@pytest.mark.parametrize("value", ["0:0:1e300", "0:0:1001", "0:0:0.5", "0:0:nan", "0:0:inf",
                                   "0:0:-2"])
def test_slow_replica_factor_out_of_range(tmp_path, plan, value):
    refused(run_argv(plan, tmp_path, "--slow-replica", value), "--slow-replica")
    assert not (tmp_path / "run").exists()


def test_a_binding_slowdown_out_of_range(tmp_path, plan):
    binding = tmp_path / "b.yaml"
    binding.write_text("default: {device: cpu, slowdown: 1.0e+300}\n")
    refused(run_argv(plan, tmp_path, "--binding", str(binding)), "slowdown", str(binding))


# -- seeds: 0..2^32-1 on every command that takes one ----------------------------------------

@pytest.mark.parametrize("seed", ["-5", str(MAX_SEED + 1)])
@pytest.mark.parametrize("command", ["run", "validate", "ps-bench"])
def test_a_seed_out_of_range(tmp_path, plan, command, seed):
    argv = {"run": run_argv(plan, tmp_path),
            "validate": ["validate", "--scenario", SCENARIO, "--out", str(tmp_path / "v")],
            "ps-bench": ["ps-bench", "--rows", "1000", "--batches", "2"]}[command]
    refused([*argv, "--seed", seed], "--seed", "0..4,294,967,295")


# -- validate's measured files: links JSON and profile CSV -----------------------------------

LINKS = json.loads((ROOT / "traces/profiles/vm-links.json").read_text())


@pytest.mark.parametrize("text, needles", [
    ("[1, 2]", ["expected a mapping"]),
    ("{}", ["latency_s", "Field required"]),
    (json.dumps({**LINKS, "latency_s": -1}), ["latency_s"]),
    (json.dumps({**LINKS, "bytes_per_s": 0}), ["bytes_per_s"]),
    (json.dumps({**LINKS, "bytes_per_s": "fast"}), ["bytes_per_s"]),
    (json.dumps({**LINKS, "allreduce": [{"ranks": 2, "bytes": 4}]}), ["allreduce.0.seconds"]),
    (json.dumps({**LINKS, "allreduce": 5}), ["allreduce"]),
    (json.dumps({**LINKS, "surprise": 1}), ["surprise"]),
    ('{"latency_s": NaN}', ["NaN"]),
    ('{"latency_s": ' * 100 + "1" + "}" * 100, ["nested"]),
])
def test_validate_links_of_the_wrong_shape(tmp_path, text, needles):
    links = tmp_path / "links.json"
    links.write_text(text)
    refused(["validate", "--scenario", SCENARIO, "--links", str(links), "--out",
             str(tmp_path / "v")], str(links), *needles)
    assert not (tmp_path / "v").exists()


PROFILE_HEAD = "model,layer,batch_size,forward_s,backward_s,encode_s,decode_s\n"


@pytest.mark.parametrize("rows, needles", [
    ("tiny-ctr,fc_0,8,abc,0.1,0,0\n", ["line 2", "forward_s"]),
    ("tiny-ctr,fc_0,0,0.1,0.1,0,0\n", ["batch_size"]),
    ("tiny-ctr,fc_0,8,-1,0.1,0,0\n", ["forward_s"]),
    ("tiny-ctr,fc_0,8,1e300,0.1,0,0\n", ["forward_s"]),
    ("other-model,fc_0,8,0.1,0.1,0,0\n", ["no heterps-exec profile rows"]),
])
def test_validate_profile_rows_of_the_wrong_shape(tmp_path, rows, needles):
    profile = tmp_path / "p.csv"
    profile.write_text(PROFILE_HEAD + rows)
    refused(["validate", "--scenario", SCENARIO, "--profile", str(profile), "--links",
             str(ROOT / "traces/profiles/vm-links.json"), "--out", str(tmp_path / "v")],
            str(profile), *needles)


# -- a generated dataset holds at least one batch --------------------------------------------

@pytest.mark.parametrize("samples", ["1", "255"])
def test_a_dataset_smaller_than_one_batch(tmp_path, plan, samples):
    refused(run_argv(plan, tmp_path, "--num-samples", samples), "--num-samples",
            "fewer than one batch", "256")


# -- capacity: memory and cores, before any rank starts --------------------------------------

def test_a_run_that_cannot_fit_memory_is_refused_before_anything_starts(tmp_path, monkeypatch):
    """Seven replicas of 2emb's 2.6 GiB tables (about 21 GiB each at the peak) on a machine
    with 64 GiB available (pinned, so that a larger machine does not start the run)."""
    monkeypatch.setattr(capacity, "available_memory_bytes", lambda: 64 * 2**30)
    monkeypatch.setattr(capacity, "cpu_cores", lambda: 16)
    from heterps_sim.inputs.zoo import get_model
    layers = [la.name for la in get_model("2emb").layers]
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\nmodel: {name: 2emb}\ncluster: {types: [xeon-icelake-16vcpu]}\n"
                        "workload: {batch_size: 256, throughput_limit: 1000, num_samples: 1.0e+6}\n")
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"format_version": 1, "num_microbatches": 2, "schedule": "gpipe",
                                "stages": [{"layers": layers, "resource": "xeon-icelake-16vcpu",
                                            "num_replicas": 7}]}))
    refused(["run", str(plan), "--scenario", str(scenario), "--out", str(tmp_path / "run")],
            "7 rank(s)", "memory", "64.0 GiB available", "--no-capacity-check")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("limit, needles", [("memory", ["memory", "available"]),
                                            ("cores", ["per core", "1 core"])])
def test_the_capacity_check_names_what_does_not_fit(tmp_path, monkeypatch, limit, needles):
    plan = tiny_plan(tmp_path / "p.json", [4, 8], [2, 1, 1])  # 4 ranks
    monkeypatch.setattr(capacity, "available_memory_bytes",
                        lambda: 100 * 2**20 if limit == "memory" else 2**40)
    monkeypatch.setattr(capacity, "cpu_cores", lambda: 1 if limit == "cores" else 64)
    refused(run_argv(plan, tmp_path), *needles)
    assert not (tmp_path / "run").exists()


def test_no_capacity_check_lets_the_run_be_prepared(tmp_path, monkeypatch):
    """The override skips the check: prepare goes on to write the run folder."""
    monkeypatch.setattr(capacity, "available_memory_bytes", lambda: 1)
    plan = tiny_plan(tmp_path / "p.json", [10], [1, 1])
    req = dict(plan=str(plan), scenario=SCENARIO, steps=2, out_dir=str(tmp_path / "a"))
    with pytest.raises(Exception, match="memory"):
        prepare.prepare(RunRequest(**req))
    spec, _ = prepare.prepare(RunRequest(**{**req, "out_dir": str(tmp_path / "b")},
                                        capacity_check=False))
    assert (Path(spec.out_dir) / "spec.json").is_file()


def test_the_estimate_counts_every_rank_and_the_ps():
    from heterps_sim.core.plan import plan_from_dict
    from heterps_sim.inputs.zoo import get_model
    model = get_model("2emb")
    names = [la.name for la in model.layers]
    plan = plan_from_dict({"format_version": 1, "num_microbatches": 2, "schedule": "gpipe",
                           "stages": [{"layers": names[:3], "resource": "a", "num_replicas": 2},
                                      {"layers": names[3:], "resource": "a", "num_replicas": 1}]})
    tables = sum(la.table_rows * la.table_dim * 4 for la in model.layers)
    local = capacity.run_estimate(model, plan, batch_size=256, table_scale=1.0, ps_shards=0,
                                  ps_hot_fraction=0.05, optimizer="sgd")
    assert [r.label for r in local] == ["stage 0 replica 0", "stage 0 replica 1",
                                       "stage 1 replica 0"]
    assert local[0].params_bytes == tables  # the tables live with stage 0's replicas
    assert local[0].total_bytes >= capacity.PARAM_COPIES["sgd"] * tables
    served = capacity.run_estimate(model, plan, batch_size=256, table_scale=1.0, ps_shards=2,
                                   ps_hot_fraction=0.05, optimizer="sgd")
    assert served[0].params_bytes == 0 and [r.label for r in served][-2:] == [
        "PS shard 0", "PS shard 1"]
    assert capacity.capacity_problem(local, available=1e15, cores=2) is None
    assert "per core" in capacity.capacity_problem(local * 3, available=1e15, cores=2)


def test_ranks_on_a_gpu_are_checked_against_its_free_memory():
    """Stage 0 (the tables) bound to cuda:0: its parameters count on the GPU, only the
    process and its CUDA context on the host; no GPU is needed (its free memory is given)."""
    from heterps_sim.core.plan import plan_from_dict
    from heterps_sim.inputs.zoo import get_model
    model = get_model("2emb")
    names = [la.name for la in model.layers]
    plan = plan_from_dict({"format_version": 1, "num_microbatches": 2, "schedule": "gpipe",
                           "stages": [{"layers": names[:3], "resource": "a", "num_replicas": 2},
                                      {"layers": names[3:], "resource": "a", "num_replicas": 1}]})
    ranks = capacity.run_estimate(model, plan, batch_size=256, table_scale=1.0, ps_shards=0,
                                  ps_hot_fraction=0.05, optimizer="sgd",
                                  devices=["cuda:0", "cpu"])
    gpu = [r for r in ranks if r.device == "cuda:0"]
    assert len(gpu) == 2 and all(r.device_bytes > 8 * r.params_bytes > 0 for r in gpu)
    assert all(r.total_bytes < 2**30 for r in gpu)  # host: the process and its CUDA context
    asked = []

    def free(device):
        asked.append(device)
        return 2 * 2**30

    problem = capacity.capacity_problem(ranks, available=64 * 2**30, cores=16, device_free=free)
    assert asked == ["cuda:0"] and "2 rank(s) on cuda:0" in problem and "2.0 GiB free" in problem
    assert capacity.capacity_problem(ranks, available=64 * 2**30, cores=16,
                                     device_free=lambda d: 1e12) is None


def _ps_step(root: Path, shard: int, step: int, num_shards: int, tables: int = 1,
             **meta) -> Path:
    path = root / f"ps-shard-{shard}" / f"step-{step:09d}"
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"step": step, "shard": shard,
                                                "num_shards": num_shards,
                                                "tables": [{}] * tables, **meta}))
    for i in range(tables):
        (path / f"table-{i}.npz").write_bytes(b"")
    return path


@pytest.mark.parametrize("case, shards, needle", [
    ("complete", 2, None),
    ("no PS checkpoint now", 0, "resume with the same --ps-shards"),
    ("fewer shards now", 1, "num_shards 2, expected num_shards 1"),
    ("more shards now", 3, "num_shards 2, expected num_shards 3"),
    ("a shard's meta is garbage", 2, "expected a mapping"),
    ("a table file missing", 2, "table-0.npz missing"),
    ("written by another shard count", 2, "num_shards 4"),
])
def test_a_ps_checkpoint_that_cannot_resume_this_run(tmp_path, case, shards, needle):
    """--checkpoint-dir with --ps-shards: the PS's half of the step, checked before launch."""
    from heterps_exec.ps.checkpoint import resume_problem
    root = tmp_path / "ps"
    for s in range(2):
        path = _ps_step(root, s, 5, 4 if case.startswith("written") else 2)
    if case == "a shard's meta is garbage":
        (path / "meta.json").write_text("[1]")
    if case == "a table file missing":
        (path / "table-0.npz").unlink()
    problem = resume_problem(str(root), 5, shards)
    if needle is None:
        assert problem is None
    else:
        assert problem is not None and needle in problem, problem


# -- numbers past what a run can use, refused before the launch --------------------------------

@pytest.mark.parametrize("flag, value", [("--table-scale", "1e-308"), ("--lr", "1e308"),
                                         ("--timeout", "1e-308"), ("--rank-timeout", "0.001"),
                                         ("--steps", "abc")])
def test_run_numbers_past_what_a_run_can_use(tmp_path, plan, flag, value):
    """table_scale 1e-308 and lr 1e308 failed in the ranks after the launch (exit 1); a
    timeout of 1e-308 s timed the run out at once."""
    refused(run_argv(plan, tmp_path, flag, value), flag)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, needle", [(["run"], "required"), (["no-such"], "invalid choice"),
                                          (["ps-bench", "--zipf", "1e308"], "--zipf")])
def test_exec_command_line_errors_are_one_line(argv, needle):
    assert "usage:" not in refused(argv, needle)


# -- an existing --out: a run never overwrites what it did not write ---------------------------

def test_run_out_holding_the_users_files_is_refused_and_they_are_kept(tmp_path, plan):
    """The run folder was written into whatever it held: a user's result.json beside their
    notes was overwritten (the simulator's run folders refuse such a folder)."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "result.json").write_text('{"mine": true}')
    refused(run_argv(plan, tmp_path), "--out", "holds 'notes.txt'")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "result.json"]
    assert (out / "result.json").read_text() == '{"mine": true}'


def test_an_earlier_runs_folder_may_be_run_into_again(tmp_path, plan):
    from heterps_exec.api import _check_this_machine
    out = tmp_path / "run"
    (out / "data").mkdir(parents=True)
    for name in ("plan.json", "spec.json", "torchrun.log", "torchrun.node1.log", "ranks.json",
                 "state.pt", "result.json", "done.json"):
        (out / name).write_text("x")
    _check_this_machine(RunRequest(plan=str(plan), scenario=SCENARIO, out_dir=str(out)))


# -- a run that fails inside validate: one line, exit 1, as `run`'s ------------------------------

def test_a_validation_whose_run_fails_is_one_line_and_exit_1(tmp_path, monkeypatch):
    """A plan's failed run was a RuntimeError traceback."""
    from heterps_exec.api import RunFailed
    from heterps_exec.calibration import validate as calibration_validate

    def failing(request, progress=None):
        raise RunFailed("plan p0 failed (exit 1); see run/torchrun.log")
    monkeypatch.setattr(calibration_validate, "validate", failing)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "--scenario", SCENARIO, "--plans", "2", "--profile",
                     str(ROOT / "traces" / "profiles" / "vm-cpu-tiny-ctr.csv"), "--links",
                     str(ROOT / "traces" / "profiles" / "vm-links.json"), "--out",
                     str(tmp_path / "val"), "--quiet"])
    assert code == 1 and "Traceback" not in err.getvalue(), err.getvalue()
    assert err.getvalue().strip() == ("heterps-exec validate: plan p0 failed (exit 1); see "
                                      "run/torchrun.log")
