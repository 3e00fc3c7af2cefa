"""core.outputs: every file whole or absent, durable, with normal permissions; unwritable
targets are one line of bad input; folders carry a completion marker written last."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heterps_sim.core.files import UserFileError
from heterps_sim.core.outputs import (
    MARKER,
    OutputError,
    atomic_write,
    check_target,
    is_complete,
    mark_complete,
    prepare_folder,
    save_figure,
    write_json,
    write_via,
)

ROOT = os.geteuid() == 0


def _leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp" in p.name]


def test_written_file_has_umask_permissions_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a.json", "{}\n")
        os.umask(0o002)
        atomic_write(tmp_path / "b.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o664


def test_parents_are_created_and_content_is_exact(tmp_path):
    target = tmp_path / "x" / "y" / "plan.json"
    atomic_write(target, "héllo\n")
    atomic_write(tmp_path / "raw.bin", b"\x00\x01")
    assert target.read_text() == "héllo\n"
    assert (tmp_path / "raw.bin").read_bytes() == b"\x00\x01"


def _bad_targets(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("x")
    cases = {"a folder": tmp_path / "a_folder",
             "under a regular file": tmp_path / "a_file" / "out.json",
             "deep under a regular file": tmp_path / "a_file" / "d" / "out.json",
             "under /proc": Path("/proc/heterps-no-such/out.json")}
    if not ROOT:  # root may write anywhere; permissions only bind other users
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        ro_file = tmp_path / "ro.json"
        ro_file.write_text("{}")
        ro_file.chmod(0o444)
        cases.update({"in a read-only folder": ro / "out.json", "a read-only file": ro_file})
    return cases


@pytest.mark.parametrize("kind", ["check", "text", "figure", "json"])
def test_unwritable_targets_are_one_line_of_bad_input(tmp_path, kind):
    import matplotlib.figure
    for why, target in _bad_targets(tmp_path).items():
        with pytest.raises(OutputError) as err:
            if kind == "check":
                check_target(target)
            elif kind == "text":
                atomic_write(target, "data")
            elif kind == "figure":
                save_figure(matplotlib.figure.Figure(), target.with_suffix(".svg")
                            if target.suffix else target)
            else:
                write_json(target, {"a": 1})
        msg = str(err.value)
        assert isinstance(err.value, UserFileError)
        assert "\n" not in msg and str(target.parent) in msg, (why, msg)
    for folder in (tmp_path, tmp_path / "a_folder"):
        assert _leftovers(folder) == []


def test_a_failing_writer_leaves_neither_temp_nor_target(tmp_path):
    def boom(tmp: Path) -> None:
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_via(tmp_path / "f.svg", boom)
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_rewrite_keeps_the_old_file_whole(tmp_path):
    target = tmp_path / "result.json"
    atomic_write(target, "old\n")

    def torn(tmp: Path) -> None:
        tmp.write_text("ne")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space left"):
        write_via(target, torn)
    assert target.read_text() == "old\n" and _leftovers(tmp_path) == []


def test_nan_is_refused_in_json(tmp_path):
    with pytest.raises(OutputError, match="non-finite"):
        write_json(tmp_path / "r.json", {"throughput": float("nan")})
    assert list(tmp_path.iterdir()) == []


def test_figure_is_written_atomically_in_its_format(tmp_path):
    import matplotlib.figure
    fig = matplotlib.figure.Figure()
    fig.add_subplot().plot([0, 1], [1, 0])
    save_figure(fig, tmp_path / "f.svg")
    save_figure(fig, tmp_path / "f.png")
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _leftovers(tmp_path) == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["a.json", "b.csv", "plans", "figures", MARKER, ".a.json.x.tmp"]),
                unique=True), st.booleans())
def test_prepare_folder_clears_only_its_own_files(tmp_path_factory, entries, foreign):
    folder = tmp_path_factory.mktemp("out")
    for e in entries:
        if e in ("plans", "figures"):
            (folder / e).mkdir()
            (folder / e / "old.json").write_text("stale")
        else:
            (folder / e).write_text("stale")
    if foreign:
        (folder / "notes.txt").write_text("mine")
        with pytest.raises(OutputError, match="notes.txt"):
            prepare_folder(folder, ["a.json", "b.csv", "plans", "figures"])
        assert (folder / "notes.txt").read_text() == "mine"
        return
    prepare_folder(folder, ["a.json", "b.csv", "plans", "figures"])
    assert list(folder.iterdir()) == [] and not is_complete(folder)


def test_marker_lists_every_file_and_comes_last(tmp_path):
    atomic_write(tmp_path / "a.json", "{}")
    atomic_write(tmp_path / "plans" / "exact" / "0.json", "{}")
    assert not is_complete(tmp_path)
    import json
    marker = json.loads(mark_complete(tmp_path, "tradeoff").read_text())
    assert marker["files"] == ["a.json", "plans/exact/0.json"] and marker["kind"] == "tradeoff"
    assert is_complete(tmp_path)


def test_prepare_folder_refuses_a_file_and_creates_a_missing_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        prepare_folder(tmp_path / "f", [])
    with pytest.raises(OutputError, match="is a file"):
        prepare_folder(tmp_path / "f" / "sub", [])
    assert prepare_folder(tmp_path / "new" / "deep", []).is_dir()
