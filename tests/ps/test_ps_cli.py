"""`heterps-exec ps-bench`: bad input exits 2 with one line; a tiny real run reports it all."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from heterps_exec.cli import main


@pytest.mark.parametrize("argv, message", [
    (["--rows", "0"], "--rows: must be >= 1, got 0"),
    (["--zipf", "-1"], "--zipf: must be in (0, 100]"),
    (["--hot-fraction", "1.5"], "--hot-fraction: must be in (0, 1]"),
    (["--policy", "fifo"], "--policy: unknown policy 'fifo'; choose one of lru, lfu, paddle"),
    (["--shards", "0"], "--shards: must be in [1, 8], got 0"),
    (["--batches", "1"], "--batches: must be >= 2"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(["ps-bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"heterps-exec ps-bench: {message}" or err.startswith(
        f"heterps-exec ps-bench: {message}")
    assert "\n" not in err


def test_cli_module_is_cheap_to_import():
    code = ("import sys, heterps_exec.cli.ps_bench, heterps_exec.ps; "
            "print(','.join(m for m in ('torch', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.timeout(150)
def test_tiny_run_reports_rates_hits_and_belady(capsys):
    argv = ["ps-bench", "--rows", "20000", "--batch", "256", "--batches", "4", "--shards", "2",
            "--policy", "lru", "--json"]
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["pull_rows_per_s"] > 0 and r["push_rows_per_s"] > 0
    assert r["raw_p2p_rows_per_s"] > 0 and r["embedding_bag_rows_per_s"] > 0
    assert r["hit_rates_measured"] == r["hit_rates_replayed"]  # same code, same stream
    assert r["belady_hot_hit_rate"] >= r["hit_rates_measured"]["hot"]
    assert len(r["servers"]) == 2
