"""`heterps-exec run`: its flags are RunRequest's fields (generated from them), and every bad
launch flag or output path is one line naming the flag, exit 2, before anything is loaded or
launched (the request's own checks, then run_plan's for this machine); no traceback."""

from __future__ import annotations

import argparse
import os

import pytest

from heterps_exec.cli import main
from heterps_exec.cli.run import CLI_ONLY, add_arguments, request_of
from heterps_exec.request import MAX_STEPS, RunRequest, flag_of

PLAN = "no-such-plan.json"  # never read: the flags fail first


def _bad_flags(tmp_path):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "a_folder").mkdir()
    return [
        (["--steps", "0"], "--steps"),
        (["--steps", "-3"], "--steps"),
        (["--steps", str(MAX_STEPS + 1)], "--steps"),
        (["--nnodes", "0"], "--nnodes"),
        (["--nnodes", "-1"], "--nnodes"),
        (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:29400"], "--node-rank"),
        (["--node-rank", "-1"], "--node-rank"),
        (["--max-restarts", "-1"], "--max-restarts"),
        (["--warmup-steps", "-1"], "--warmup-steps"),
        (["--num-samples", "-5"], "--num-samples"),
        (["--num-samples", "10000000000000"], "--num-samples"),
        (["--checkpoint-every", "-2"], "--checkpoint-every"),
        (["--timeout", "nan"], "--timeout"),
        (["--timeout", "inf"], "--timeout"),
        (["--timeout", "0"], "--timeout"),
        (["--timeout", "-5"], "--timeout"),
        (["--rank-timeout", "nan"], "--rank-timeout"),
        (["--rank-timeout", "1e300"], "--rank-timeout"),
        (["--table-scale", "nan"], "--table-scale"),
        (["--lr", "inf"], "--lr"),
        (["--ps-hot-fraction", "nan"], "--ps-hot-fraction"),
        (["--rdzv-endpoint", "nohostport"], "--rdzv-endpoint"),
        (["--rdzv-endpoint", "h:99999"], "--rdzv-endpoint"),
        (["--out", str(tmp_path / "a_file")], "--out"),
        (["--out", str(tmp_path / "a_file" / "sub")], "--out"),
        (["--trace", str(tmp_path / "a_folder")], "--trace"),
        (["--trace", str(tmp_path / "a_file" / "t.json")], "--trace"),
        (["--save-state", str(tmp_path / "a_folder")], "--save-state"),
        (["--save-state", "/proc/heterps-none/state.pt"], "--save-state"),
    ]


def test_every_bad_launch_flag_is_one_line_before_anything_starts(tmp_path, capsys):
    before = set(os.listdir(tmp_path))
    for flags, flag in _bad_flags(tmp_path):
        code = main(["run", PLAN, "--scenario", "scenarios/exec-tiny.yaml", *flags])
        err = capsys.readouterr().err
        assert code == 2, (flags, err)
        assert err.count("\n") == 1 and "Traceback" not in err, (flags, err)
        assert err.startswith(f"heterps-exec run: {flag}: "), (flags, err)
    assert set(os.listdir(tmp_path)) == before | {"a_file", "a_folder"}  # nothing written


@pytest.mark.parametrize("flags", [["--steps", "1"], ["--timeout", "5"],
                                   ["--nnodes", "2", "--node-rank", "1",
                                    "--rdzv-endpoint", "[::1]:29400"]])
def test_good_launch_flags_pass_to_the_plan_check(tmp_path, capsys, flags):
    code = main(["run", PLAN, "--scenario", "scenarios/exec-tiny.yaml", *flags,
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and PLAN in err  # got as far as reading the (missing) plan


def _run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run")
    add_arguments(parser)
    return parser


def test_every_request_field_is_a_flag_and_every_flag_a_field():
    """One options object: the command line spells no option of its own (but --json)."""
    actions = {a.dest: a for a in _run_parser()._actions if a.dest != "help"}
    assert set(actions) - CLI_ONLY == set(RunRequest.model_fields)
    for name, action in actions.items():
        if name not in CLI_ONLY:
            assert (action.option_strings or [action.metavar]) == [flag_of(name)], name
            assert action.help.startswith(" ".join(
                RunRequest.model_fields[name].description.split())[:40]), name


def test_flags_not_given_leave_the_request_s_defaults():
    args = _run_parser().parse_args(["p.json", "--scenario", "s.yaml"])
    assert request_of(args) == RunRequest(plan="p.json", scenario="s.yaml")
    args = _run_parser().parse_args(["p.json", "--scenario", "s.yaml", "--overlap", "on",
                                     "--slow-replica", "1:0:2", "--slow-replica", "0:1:3",
                                     "--inject-fault", "3:5:hang", "--no-capacity-check",
                                     "--timeout", "60", "--rank-timeout", "30"])
    assert request_of(args) == RunRequest(
        plan="p.json", scenario="s.yaml", overlap=True, slow_replicas=[(1, 0, 2), (0, 1, 3)],
        fault={"rank": 3, "step": 5, "mode": "hang"}, capacity_check=False,
        run_timeout_s=60, timeout_s=30)
