"""`heterps-exec`: help, bindings, and bad input refused before any process starts."""

from __future__ import annotations

import json

import pytest

from heterps_exec.launch.binding import BindingFile, TypeBinding, stage_bindings
from heterps_sim.core.plan import plan_from_dict
from heterps_sim.inputs.catalog import load_catalog
from tests.exec.helpers import CPU_TYPE, SCENARIO, run_exec, tiny_plan


def test_help_lists_run_and_shows_an_example():
    code, out, _ = run_exec()
    assert code == 0 and "run" in out
    with pytest.raises(SystemExit) as exc:
        run_exec("run", "--help")
    assert exc.value.code == 0


def _write(path, text):
    path.write_text(text)
    return str(path)


BAD = {
    "missing plan": (lambda t: ["run", str(t / "nope.json"), "--scenario", SCENARIO],
                     "nope.json: no such file"),
    "unknown layer": (lambda t: ["run", _write(t / "p.json", json.dumps(
        {"stages": [{"layers": ["input", "nope"], "resource": CPU_TYPE, "num_replicas": 1}]})),
        "--scenario", SCENARIO], "p.json"),
    "async": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1], schedule="async")),
                         "--scenario", SCENARIO, "--share", "speed"],
              "schedule async runs without --share speed"),
    "type without binding": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])),
                                        "--scenario", SCENARIO, "--binding",
                                        _write(t / "b.yaml", "types: {t4: {device: cpu}}\n")],
                             f"no binding for resource type '{CPU_TYPE}'"),
    "bad device": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])), "--scenario",
                              SCENARIO, "--binding", _write(t / "b.yaml",
                                                            "default: {device: gpu0}\n")],
                   "default.device"),
    "absent gpu": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])), "--scenario",
                              SCENARIO, "--binding", _write(t / "b.yaml",
                                                            "default: {device: 'cuda:7'}\n")],
                   "cuda:7 but this machine has"),
    "unknown binding field": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])),
                                         "--scenario", SCENARIO, "--binding", _write(
                                             t / "b.yaml", "default: {device: cpu, speed: 2}\n")],
                              "default.speed: Extra inputs are not permitted"),
    "problem json": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])), "--scenario",
                                _write(t / "x.json", "{}")], "x.json"),
    "checkpoint every without dir": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])),
                                                "--scenario", SCENARIO, "--checkpoint-every", "2"],
                                     "--checkpoint-every needs --checkpoint-dir"),
    "nnodes without endpoint": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])),
                                           "--scenario", SCENARIO, "--nnodes", "2"],
                                "--rdzv-endpoint"),
    "bad fault": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])), "--scenario",
                             SCENARIO, "--inject-fault", "x"], "--inject-fault"),
    "too many microbatches": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1],
                                                              m=1000)),
                                         "--scenario", SCENARIO], "exceeds the batch size 256"),
    "zero steps": (lambda t: ["run", str(tiny_plan(t / "p.json", [10], [1, 1])), "--scenario",
                              SCENARIO, "--steps", "0"], "--steps: expected 1..10,000,000, got 0"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_starts_nothing(tmp_path, case):
    args, expected = BAD[case]
    out_dir = tmp_path / "run"
    code, out, err = run_exec(*args(tmp_path), "--out", str(out_dir))
    assert code == 2, err
    assert expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (out_dir / "torchrun.log").exists()


def test_emulated_types_keep_their_peak_speed_ratios():
    types = {t.name: t for t in load_catalog()}
    plan = plan_from_dict({"stages": [
        {"layers": ["input"], "resource": CPU_TYPE, "num_replicas": 1},
        {"layers": ["loss"], "resource": "t4", "num_replicas": 1}]})
    emulate = BindingFile(default=TypeBinding(emulate=True))
    cpu, gpu = stage_bindings(emulate, plan, types, "b.yaml", num_gpus=0)
    assert gpu.slowdown == 1.0 and gpu.emulated
    ratio = types["t4"].peak_flops_fp32 / types[CPU_TYPE].peak_flops_fp32
    assert cpu.slowdown == pytest.approx(ratio) and cpu.slowdown > 1
    fixed = BindingFile(types={"t4": TypeBinding(slowdown=3.0)}, default=TypeBinding())
    cpu, gpu = stage_bindings(fixed, plan, types, "b.yaml", num_gpus=0)
    assert (cpu.slowdown, cpu.emulated, gpu.slowdown, gpu.emulated) == (1.0, False, 3.0, True)


def test_shipped_bindings_validate_against_the_shipped_plan():
    from pathlib import Path

    from heterps_exec.launch.binding import BindingError, load_binding
    root = Path(__file__).resolve().parents[2]
    types = {t.name: t for t in load_catalog()}
    plan = plan_from_dict(json.loads((root / "scenarios/plans/exec-tiny-pipeline.json").read_text()))
    emulated = stage_bindings(load_binding(str(root / "scenarios/bindings/emulated.yaml")), plan,
                              types, "emulated.yaml", num_gpus=0)
    assert all(b.emulated and b.device == "cpu" for b in emulated)
    gpu = load_binding(str(root / "scenarios/bindings/cpu-and-gpu.yaml"))
    assert [b.device for b in stage_bindings(gpu, plan, types, "g.yaml", num_gpus=1)] == \
        ["cpu", "cuda:0", "cpu"]
    with pytest.raises(BindingError, match="cuda:0 but this machine has 0"):
        stage_bindings(gpu, plan, types, "g.yaml", num_gpus=0)
