"""Every heterps-sim command's --seed is 0..2^32-1, checked before any work: one line naming
the flag, exit 2, nothing written."""

import pytest

from heterps_sim.cli import main


@pytest.mark.parametrize("argv", [["simulate", "--seed", "-5"], ["schedule", "--seed", "-1"],
                                  ["tradeoff", "--seed", str(2**32)],
                                  ["compare", "--seed", "-7"]])
def test_a_seed_out_of_range_is_one_line(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--seed: expected an integer in 0..4,294,967,295" in err[0]
    assert not any(tmp_path.iterdir())  # no run folder started
