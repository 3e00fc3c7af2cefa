"""The capture cache (inputs/torch_model/cache.py): a second load reads the ModelSpec from
disk; an edit of the model's source (its module or one it imports from its package), other
kwargs, or a broken entry means a fresh capture; off, or with no writable folder, it captures
every time; a hit says what the capture said; and a hit never imports torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import heterps_sim.inputs.torch_model as torch_model
from heterps_sim.inputs.torch_model import cache, notices, section_model_spec
from heterps_sim.inputs.torch_model.section import TorchModelSection

ROOT = Path(__file__).resolve().parents[4]
BLOCKS = "WIDTH = {width}\n"
MODEL = """import torch
from torch import nn

from .blocks import WIDTH


class Model(nn.Module):
    def __init__(self, fields, dim):
        super().__init__()
        self.embedding = nn.Embedding(fields, dim)
        self.mlp = nn.Sequential(nn.Linear(2 * dim, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1))

    def forward(self, ids):
        return torch.sigmoid(self.mlp(self.embedding(ids).flatten(1))).squeeze(1)
"""


@pytest.fixture
def model_package(tmp_path, monkeypatch):
    """A package `models_<n>` under tmp_path (model.py imports WIDTH from blocks.py), the
    cache in tmp_path/cache, and a counter of captures."""
    name = f"models_{tmp_path.name.replace('-', '_')}"
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(MODEL)
    (package / "blocks.py").write_text(BLOCKS.format(width=8))
    monkeypatch.setenv("HETERPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HETERPS_CAPTURE_CACHE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # an edit is read, not a stale .pyc
    captures = []
    real = torch_model._captured_spec

    def counted(*args):
        captures.append(args)
        return real(*args)

    monkeypatch.setattr(torch_model, "_captured_spec", counted)
    yield package, captures
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


def load(package: Path, **kwargs):
    """The section's spec as a fresh process would get it (no in-process memo; the package
    imported afresh, so an edit on disk is what gets captured)."""
    torch_model._SPECS.clear()
    for mod in [m for m in sys.modules if m == package.name or m.startswith(package.name + ".")]:
        del sys.modules[mod]
    section = TorchModelSection.model_validate({
        "module": f"{package.name}.model:Model", "kwargs": {"fields": 10, "dim": 4, **kwargs},
        "inputs": [{"name": "ids", "shape": [2], "dtype": "int64", "cardinality": 10}],
        "output": "probabilities"})
    return section_model_spec(section, source="s.yaml", search_paths=[package.parent])


def entries(package: Path) -> list[Path]:
    return sorted((package.parent / "cache" / "capture").glob("*.json"))


def test_a_second_load_reads_the_cache(model_package):
    package, captures = model_package
    first = load(package)
    assert len(captures) == 1 and len(entries(package)) == 1
    assert load(package) == first and len(captures) == 1
    assert [la.name for la in first.layers] == ["embedding", "mlp.0", "mlp.2", "loss"]


def test_an_edit_of_the_model_or_a_module_it_imports_captures_afresh(model_package):
    package, captures = model_package
    narrow = load(package)
    (package / "blocks.py").write_text(BLOCKS.format(width=16))  # imported by model.py
    wide = load(package)
    assert len(captures) == 2 and len(entries(package)) == 2
    by = {la.name: la for la in wide.layers}
    assert by["mlp.0"].param_bytes == (8 * 16 + 16) * 4
    assert by["mlp.0"].param_bytes != {la.name: la for la in narrow.layers}["mlp.0"].param_bytes
    (package / "model.py").write_text(MODEL + "\n# a comment is an edit too\n")
    load(package)
    assert len(captures) == 3


def test_other_kwargs_are_another_entry(model_package):
    package, captures = model_package
    load(package)
    load(package, dim=8)
    load(package)
    assert len(captures) == 2 and len(entries(package)) == 2


@pytest.mark.parametrize("garbage", [b"\x00\xffnot json", b'{"format": 1, "key"',
                                     b'{"format": 1}', b"[]"])
def test_a_broken_entry_is_captured_again_and_rewritten(model_package, garbage):
    package, captures = model_package
    first = load(package)
    [entry] = entries(package)
    entry.write_bytes(garbage)
    assert load(package) == first and len(captures) == 2
    assert json.loads(entry.read_text())["format"] == cache.CAPTURE_FORMAT
    assert load(package) == first and len(captures) == 2  # rewritten: a hit again


def test_an_entry_with_impossible_numbers_is_captured_again(model_package):
    package, captures = model_package
    load(package)
    [entry] = entries(package)
    data = json.loads(entry.read_text())
    data["spec"]["layers"][1]["forward_flops"] = -1.0  # Layer refuses it
    entry.write_text(json.dumps(data))
    assert load(package).layers[1].forward_flops > 0 and len(captures) == 2


def test_off_or_unwritable_it_captures_every_time(model_package, monkeypatch):
    package, captures = model_package
    monkeypatch.setenv("HETERPS_CAPTURE_CACHE", "0")
    load(package)
    load(package)
    assert len(captures) == 2 and not entries(package)
    monkeypatch.delenv("HETERPS_CAPTURE_CACHE")
    blocker = package.parent / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HETERPS_CACHE_DIR", str(blocker))  # no folder can be made there
    load(package)
    assert len(captures) == 3


def test_a_hit_says_what_the_capture_said(model_package, monkeypatch, capsys):
    """Undeclared, the output is detected as probabilities (a line on stderr); a hit in a
    new process says it again."""
    package, captures = model_package
    monkeypatch.setattr(notices, "SAID", set())
    section = TorchModelSection.model_validate({
        "module": f"{package.name}.model:Model", "kwargs": {"fields": 10, "dim": 4},
        "inputs": [{"name": "ids", "shape": [2], "dtype": "int64", "cardinality": 10}]})
    torch_model._SPECS.clear()
    section_model_spec(section, source="s.yaml", search_paths=[package.parent])
    said = capsys.readouterr().err
    assert "its output is read as probabilities" in said
    monkeypatch.setattr(notices, "SAID", set())  # a new process
    torch_model._SPECS.clear()
    section_model_spec(section, source="s.yaml", search_paths=[package.parent])
    assert len(captures) == 1 and capsys.readouterr().err == said


def test_a_hit_never_imports_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("HETERPS_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("HETERPS_CAPTURE_CACHE", raising=False)
    code = ("import sys; from heterps_sim.inputs.load import load_input; "
            "p = load_input('tests/fixtures/ctr_models/deepfm.yaml').problem; "
            "print(p.num_layers, 'torch' in sys.modules)")
    torch_model._SPECS.clear()
    from heterps_sim.inputs.load import load_input
    load_input("tests/fixtures/ctr_models/deepfm.yaml")  # here: fills the cache
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert out.stdout.split() == ["7", "False"]
