"""Stop means stop: Ctrl-C, SIGTERM, a killed launcher and --timeout end torchrun and every
rank within seconds; one run at a time per checkpoint directory.

Each test starts a real 2-rank run of exec-tiny (torchrun + 2 ranks, ~10 s to start here) and
looks at /proc for survivors: every process of the run has the run folder in its command line.
"""

from __future__ import annotations

import signal
import threading

import pytest

from heterps_exec.launch.dir_lock import hold
from heterps_exec.launch.prepare import prepare
from heterps_exec.launch.torchrun import LaunchOptions, launch
from heterps_exec.request import RunRequest
from tests.exec.helpers import SCENARIO, run_exec, tiny_plan
from tests.exec.procs import (
    is_loopback,
    listening,
    run_pids,
    seconds_until_gone,
    start_run,
    wait_for,
    worker_pids,
)

STOP_LIMIT_S = 30.0
"""A stopped run's last process must be gone this soon (measured here: 0.2-4 s alone; over
10 s once with the whole suite on the 2 cores: a limit that catches a process left running,
not a slow machine)."""


def _stop_by(sig: int, tmp_path, check=None) -> tuple[int, float, str]:
    proc, run_dir = start_run(tmp_path)
    try:
        pids = wait_for(lambda: len(worker_pids(run_dir)) == 2 and worker_pids(run_dir), 90,
                        "both ranks to start")
        assert all(p in run_pids(str(run_dir)) for p in pids)
        if check is not None:
            check(proc, run_dir, pids)
        proc.send_signal(sig)
        gone_s = seconds_until_gone(str(run_dir), STOP_LIMIT_S)
        print(f"signal {sig}: every process gone after {gone_s:.2f} s")
        code = proc.wait(timeout=STOP_LIMIT_S)
        return code, gone_s, proc.stderr_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()


def _listens_on_loopback_only(proc, run_dir, ranks) -> None:
    """Once training runs every rank listens (gloo) and torchrun hosts its stores: all of it
    on loopback (the slow test_stop_loopback does the same with a PS rank)."""
    wait_for(lambda: all(listening(p) for p in ranks), 60, "every rank to listen")
    sockets = {pid: listening(pid) for pid in run_pids(str(run_dir))}
    addresses = [a for found in sockets.values() for a in found]
    assert len(addresses) >= 3, sockets  # 2 ranks, torchrun's store(s)
    assert all(is_loopback(a) for a in addresses), sockets


@pytest.mark.timeout(150)
def test_ctrl_c_stops_torchrun_and_every_rank(tmp_path):
    code, gone_s, err = _stop_by(signal.SIGINT, tmp_path, _listens_on_loopback_only)
    assert code == 130 and "interrupted" in err
    assert gone_s < STOP_LIMIT_S


@pytest.mark.slow  # the same path as Ctrl-C (Terminated is a KeyboardInterrupt)
@pytest.mark.timeout(150)
def test_sigterm_stops_torchrun_and_every_rank(tmp_path):
    code, gone_s, err = _stop_by(signal.SIGTERM, tmp_path)
    assert code == 130 and "interrupted" in err
    assert gone_s < STOP_LIMIT_S


@pytest.mark.timeout(150)
def test_a_killed_launcher_takes_torchrun_and_every_rank_with_it(tmp_path):
    """SIGKILL runs no cleanup code: the kernel's parent-death signal does the work."""
    code, gone_s, _ = _stop_by(signal.SIGKILL, tmp_path)
    assert code == -signal.SIGKILL
    assert gone_s < STOP_LIMIT_S


@pytest.mark.timeout(150)
def test_timeout_stops_every_rank_also_a_hung_one(tmp_path):
    """Rank 1 hangs (sleeps 10 x --rank-timeout); the launcher's timeout ends it and torchrun."""
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1])
    run_dir = tmp_path / "run"
    spec, _ = prepare(RunRequest(plan=str(plan), scenario=SCENARIO, steps=50, out_dir=str(run_dir),
                                 num_samples=1024, timeout_s=60.0,
                                 fault={"rank": 1, "step": 2, "mode": "hang"}))
    seen: list[int] = []
    done = threading.Event()

    def watch():
        while not done.is_set() and len(seen) < 2:
            seen[:] = worker_pids(run_dir)
            done.wait(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        outcome = launch(spec, LaunchOptions(timeout_s=20.0))
    finally:
        done.set()
        watcher.join()
    assert outcome.timed_out and outcome.returncode != 0
    assert len(seen) == 2, "the ranks never started: nothing was shown"
    assert not run_pids(str(run_dir))  # launch returns only once all of them are gone


def test_a_second_run_on_a_locked_checkpoint_dir_is_one_line_and_exit_2(tmp_path):
    plan = tiny_plan(tmp_path / "plan.json", [10], [1, 1])
    ckpt = tmp_path / "ckpt"
    with hold(ckpt):  # as a running `heterps-exec run --checkpoint-dir ckpt` would
        code, out, err = run_exec("run", str(plan), "--scenario", SCENARIO, "--steps", "2",
                                  "--checkpoint-dir", str(ckpt), "--out", str(tmp_path / "r"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "is in use by another run" in err
    assert f"(pid {__import__('os').getpid()})" in err
    assert not (tmp_path / "r").exists()  # refused before anything was prepared
    with hold(ckpt) as lock:  # released: the next run gets it
        assert lock is not None


def test_the_lock_lives_as_long_as_a_process_that_inherited_it(tmp_path):
    """torchrun inherits the lock's file: a launcher gone first does not free the directory."""
    import subprocess
    import sys
    ckpt = tmp_path / "ckpt"
    with hold(ckpt) as lock:
        child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                 stdin=subprocess.PIPE, pass_fds=lock.fds)
    try:
        with pytest.raises(Exception, match="in use by another run"), hold(ckpt):
            pass
    finally:
        child.communicate(b"", timeout=30)
    with hold(ckpt) as again:
        assert again is not None
