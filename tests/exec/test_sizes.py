"""Benchmarks and profiles refuse sizes that cannot fit before allocating anything
(cli/sizes.py): one line naming the flag and the limit, exit 2, in a second."""

from __future__ import annotations

import time

import pytest

from heterps_exec.cli import main, sizes
from heterps_sim.core.limits import MAX_BATCH

GIB = 2**30


def _refused(argv, capsys, *needles):
    start = time.perf_counter()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert time.perf_counter() - start < 15


@pytest.mark.parametrize("argv, needles", [
    (["--batch", str(MAX_BATCH + 1)], ["--batch", f"{MAX_BATCH:,}"]),
    (["--batch", "1000000000"], ["--batch"]),
    (["--rows", str(10**11)], ["memory", "available"]),
    (["--rows", "100000000", "--dim", "4096"], ["memory", "32.0 GiB this machine has"]),
    (["--dim", "100000"], ["--dim"]),
    (["--batches", "100000000"], ["--batches"]),
    (["--zipf", "nan"], ["--zipf"]),
    (["--zipf", "inf"], ["--zipf"]),
    (["--hot-fraction", "nan"], ["--hot-fraction"]),
])
def test_ps_bench_refuses_what_cannot_fit(monkeypatch, capsys, argv, needles):
    monkeypatch.setattr(sizes, "available_memory_bytes", lambda: 32 * GIB)
    _refused(["ps-bench", *argv], capsys, *needles)


def test_ps_bench_estimate_is_monotone_and_admits_the_default():
    ok = sizes.ps_bench_problem(10_000_000, 16, 4096, 200, 0.05, 0.2)
    assert ok is None  # the documented default fits on any machine with 2 GiB
    assert sizes.ps_bench_problem(10**10, 16, 4096, 200, 0.05, 0.2) is not None


@pytest.mark.parametrize("argv, needles", [
    (["--model", "2emb"], ["--model 2emb", "--table-scale"]),
    (["--model", "tiny-ctr", "--batch", str(MAX_BATCH + 1)], ["--batch"]),
    (["--model", "tiny-ctr", "--repeats", "0"], ["--repeats"]),
    (["--model", "tiny-ctr", "--threads", "0"], ["--threads"]),
    (["--model", "tiny-ctr", "--table-scale", "nan"], ["--table-scale"]),
])
def test_profile_refuses_what_cannot_fit(monkeypatch, capsys, tmp_path, argv, needles):
    # 2emb's tables (11 M rows x 64 floats, 2.6 GiB) peak at about 9 copies (measured)
    monkeypatch.setattr(sizes, "available_memory_bytes", lambda: 8 * GIB)
    _refused(["profile", *argv, "--out", str(tmp_path / "p")], capsys, *needles)
    assert not (tmp_path / "p").exists()


def test_profile_refuses_an_unwritable_out_before_measuring(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    _refused(["profile", "--model", "tiny-ctr", "--out", str(tmp_path / "f")], capsys,
             "--out", "not a folder")


@pytest.mark.parametrize("flag, value", [("--max-ranks", "0"), ("--max-ranks", "1000"),
                                         ("--steps", "0"), ("--plans", "100000")])
def test_validate_refuses_bad_sizes(flag, value, tmp_path, capsys):
    _refused(["validate", flag, value, "--out", str(tmp_path / "v")], capsys, flag)
