"""What the stop and listener tests look at: a run's processes and their listening sockets,
read from /proc (no psutil), and `heterps-exec run` started as a real child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.exec.helpers import SCENARIO, tiny_plan


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def run_pids(marker: str, *, without: str = "\0") -> list[int]:
    """Live processes (not zombies, not this one) whose command line contains `marker` (and
    not `without`)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd and without not in cmd and _alive(int(name)):
            out.append(int(name))
    return out


def worker_pids(run_dir: Path) -> list[int]:
    """The ranks (torchrun's command line names the same module and spec)."""
    return run_pids(f"proctree rank heterps_exec.runtime.worker {run_dir}/spec.json",
                    without="proctree torchrun")


def listening(pid: int) -> list[str]:
    """Local addresses ("127.0.0.1:4711", "[::]:80") of the TCP sockets `pid` listens on."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    out = []
    for table, v6 in (("tcp", False), ("tcp6", True)):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # state LISTEN, one of this pid's sockets
                out.append(_address(f[1], v6))
    return out


def is_loopback(address: str) -> bool:
    import ipaddress
    return ipaddress.ip_address(address.rsplit(":", 1)[0].strip("[]")).is_loopback


def _address(hex_addr: str, v6: bool) -> str:
    host, port = hex_addr.split(":")
    raw = bytes.fromhex(host)
    if not v6:
        return f"{'.'.join(str(b) for b in raw[::-1])}:{int(port, 16)}"
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]  # /proc prints 4 host-order words
    import ipaddress
    return f"[{ipaddress.IPv6Address(b''.join(words))}]:{int(port, 16)}"


def start_run(tmp_path: Path, *extra: str, replicas=(1, 1)) -> tuple[subprocess.Popen, Path]:
    """`heterps-exec run` of exec-tiny for (practically) ever, as a child process."""
    plan = tiny_plan(tmp_path / "plan.json", [10], list(replicas))
    run_dir = tmp_path / "run"
    log = open(tmp_path / "launcher.err", "w")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [sys.executable, "-m", "heterps_exec.cli", "run", str(plan), "--scenario", SCENARIO,
         "--steps", "1000000", "--out", str(run_dir), "--num-samples", "1024", *extra],
        stdout=subprocess.DEVNULL, stderr=log, cwd=tmp_path,
        # as a shell starts a foreground job: Ctrl-C not ignored, whatever the test process
        # inherited (a child started with SIGINT ignored keeps ignoring it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.stderr_path = tmp_path / "launcher.err"
    return proc, run_dir


def wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def seconds_until_gone(marker: str, limit_s: float) -> float:
    """Seconds until no process with `marker` in its command line is alive (fails past
    `limit_s`, naming the survivors)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if not run_pids(marker):
            return time.monotonic() - t0
        time.sleep(0.05)
    left = run_pids(marker)
    raise AssertionError(f"still alive {limit_s:.0f} s later: {left}")
