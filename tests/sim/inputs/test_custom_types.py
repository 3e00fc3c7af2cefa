"""Resource types of your own: defined in the scenario or a CSV file, with measured profiles.

Oracles: a type defined with a catalog row's own figures is that catalog type under another
name (the same numeric problem, the same optimal plan, the same cost, bit for bit); a measured
entry attached to a type replaces the roofline's entry exactly.
"""

import csv
import json
import math
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import yaml

from heterps_sim.core.files import UserFileError
from heterps_sim.core.plan import Plan, Stage
from heterps_sim.cost import evaluate_plan
from heterps_sim.inputs.catalog import CATALOG_PATH
from heterps_sim.inputs.custom_types import FIELD_COLUMNS
from heterps_sim.inputs.load import load_input
from heterps_sim.inputs.scenario import build_cluster, parse_scenario
from heterps_sim.schedulers.base import run_scheduler
from heterps_sim.schedulers.registry import make_scheduler

WORKLOAD = {"batch_size": 256, "throughput_limit": 20000, "num_samples": 1e6}


def _catalog_row(name: str) -> dict:
    with CATALOG_PATH.open(newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["name"] == name)


def _definition_like(catalog_name: str, new_name: str) -> dict:
    """A `define` entry carrying the catalog row's own figures (the CSV's text as numbers)."""
    row = _catalog_row(catalog_name)
    d = {"name": new_name, "kind": row["kind"]}
    for field, column in FIELD_COLUMNS.items():
        if row[column].strip():
            d[field] = float(row[column])
    return d


def _write(tmp_path, scenario: dict, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def _scenario(cluster: dict, model="tiny-ctr") -> dict:
    return {"name": "mine", "model": {"name": model}, "cluster": cluster, "workload": WORKLOAD}


def test_a_type_with_catalog_figures_is_the_catalog_type_under_another_name(tmp_path):
    catalog = load_input(_write(tmp_path, _scenario(
        {"types": ["t4", "xeon-icelake-16vcpu", "epyc-milan-32vcpu"]}), "a.yaml")).problem
    mine = load_input(_write(tmp_path, _scenario({
        "types": ["my-t4", "my-xeon", "epyc-milan-32vcpu"],
        "define": [_definition_like("t4", "my-t4"),
                   _definition_like("xeon-icelake-16vcpu", "my-xeon")]}), "b.yaml")).problem
    assert mine.type_names == ("my-t4", "my-xeon", "epyc-milan-32vcpu")
    for field in ("oct_s", "odt_s", "alpha", "network_bytes_per_s", "price_per_hour"):
        np.testing.assert_array_equal(getattr(mine, field), getattr(catalog, field), err_msg=field)
    rename = dict(zip(catalog.type_names, mine.type_names))
    for mode in ("least", "exact"):
        a = run_scheduler(make_scheduler("exact"), catalog, mode)
        b = run_scheduler(make_scheduler("exact"), mine, mode)
        assert [(s.layers, rename[s.resource], s.num_replicas) for s in a.plan.stages] == \
               [(s.layers, s.resource, s.num_replicas) for s in b.plan.stages]
        assert b.result.cost_usd == a.result.cost_usd
        assert b.result.throughput == a.result.throughput
    assert {s.resource for s in b.plan.stages} & {"my-t4", "my-xeon"}


def test_csv_catalog_types_equal_the_same_types_defined_inline(tmp_path):
    fields = ["name", "kind", *FIELD_COLUMNS, "vendor", "year"]
    rows = [{**_definition_like("t4", "lab-t4"), "vendor": "NVIDIA", "year": 2018},
            {**_definition_like("xeon-icelake-16vcpu", "lab-cpu"), "year": 2021}]
    with (tmp_path / "lab.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    from_csv = build_cluster(parse_scenario(_scenario(
        {"types": ["lab-*"], "catalog": "lab.csv"})).cluster, str(tmp_path / "s.yaml"))
    inline = build_cluster(parse_scenario(_scenario(
        {"types": ["lab-*"], "define": rows})).cluster, str(tmp_path / "s.yaml"))
    assert from_csv.type_names == ("lab-t4", "lab-cpu")
    for a, b in zip(from_csv.types, inline.types):
        assert replace(a, source_urls=()) == replace(b, source_urls=())
    assert from_csv.types[1].host_link_bytes_per_s is None
    assert from_csv.types[0].vendor == "NVIDIA"


def test_defined_types_join_the_pool_kind_and_globs_select_from(tmp_path):
    gpu = _definition_like("t4", "lab-gpu")
    cpu = _definition_like("xeon-icelake-16vcpu", "lab-cpu")
    cluster = build_cluster(parse_scenario(_scenario(
        {"types": "all", "kind": "gpu", "define": [gpu, cpu]})).cluster, "s.yaml")
    assert "lab-gpu" in cluster.type_names and "lab-cpu" not in cluster.type_names
    assert cluster.type_names[-1] == "lab-gpu"  # after the catalog's own


def test_fp16_defaults_to_fp32_and_is_marked_estimated():
    d = _definition_like("xeon-icelake-16vcpu", "lab-cpu")
    del d["peak_fp16_tflops"]
    (t,) = build_cluster(parse_scenario(_scenario({"types": ["lab-cpu"], "define": [d]})).cluster,
                         "s.yaml").types
    assert t.peak_flops_fp16 == t.peak_flops_fp32 == float(
        _catalog_row("xeon-icelake-16vcpu")["peak_fp32_tflops"]) * 1e12
    assert t.estimated_fields == ("peak_flops_fp16",)


def _trace(path, rows, resource="local-cpu", model="tiny-ctr"):
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "layer", "resource", "batch_size", "oct_s", "odt_s"])
        for layer, batch, oct_s in rows:
            w.writerow([model, layer, resource, batch, repr(oct_s), ""])


def test_an_attached_measurement_beats_the_roofline_exactly(tmp_path):
    measured = 0.0123456789
    _trace(tmp_path / "lab.csv", [("fc_0", 32, 9.0), ("fc_0", 256, measured), ("fc_0", 1024, 7.0),
                                  ("fc_1", 128, 0.001), ("fc_1", 1024, 0.5)])
    cpu = _definition_like("xeon-icelake-16vcpu", "lab-cpu")
    base = {"types": ["t4", "lab-cpu"], "define": [cpu]}
    roofline = load_input(_write(tmp_path, _scenario(base), "r.yaml")).problem
    traced = load_input(_write(tmp_path, _scenario(
        {**base, "define": [{**cpu, "trace": "lab.csv"}]}), "t.yaml")).problem
    i, k = roofline.layer_names.index("fc_0"), roofline.layer_names.index("fc_1")
    j = roofline.type_names.index("lab-cpu")
    assert roofline.oct_s[i, j] != measured
    assert traced.oct_s[i, j] == measured
    assert traced.oct_s[k, j] == 0.001 * 256 / 128  # the nearest batch (128), scaled to 256
    changed = np.argwhere(traced.oct_s != roofline.oct_s)
    assert sorted(map(tuple, changed)) == [(i, j), (k, j)]
    names = roofline.layer_names
    plan = Plan(stages=(Stage(layers=names[:i], resource="t4", num_replicas=1),
                        Stage(layers=(names[i],), resource="lab-cpu", num_replicas=1),
                        Stage(layers=names[i + 1:], resource="t4", num_replicas=1)))
    stage = evaluate_plan(traced, plan).stages[1]
    assert stage.oct_s == measured
    assert stage.oct_s - evaluate_plan(roofline, plan).stages[1].oct_s == pytest.approx(
        measured - roofline.oct_s[i, j], rel=1e-12)


@pytest.mark.parametrize("entry, message", [
    ({"peak_fp32_tflops": math.nan}, "cluster.define.0.peak_fp32_tflops: "),
    ({"memory_gb": -16}, "cluster.define.0.memory_gb: Input should be greater than"),
    ({"price_per_hour_usd": None}, "cluster.define.0.price_per_hour_usd"),
    ({"host_link_gb_per_s": None}, "host_link_gb_per_s: required for a gpu"),
    ({"kind": "tpu"}, "cluster.define.0.kind"),
    ({"name": "my gpu"}, "cluster.define.0.name"),
    ({"flops": 3}, "cluster.define.0.flops: Extra inputs are not permitted"),
])
def test_a_bad_definition_is_one_line_naming_the_field(entry, message):
    d = {**_definition_like("t4", "lab-gpu"), **entry}
    d = {k: v for k, v in d.items() if v is not None}
    with pytest.raises(UserFileError) as info:
        parse_scenario(_scenario({"types": ["lab-gpu"], "define": [d]}), "s.yaml")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_field_is_named():
    d = _definition_like("t4", "lab-gpu")
    del d["memory_bandwidth_gb_per_s"]
    with pytest.raises(UserFileError, match="cluster.define.0.memory_bandwidth_gb_per_s: Field required"):
        parse_scenario(_scenario({"types": ["lab-gpu"], "define": [d]}), "s.yaml")


def test_a_cpu_has_no_host_link():
    d = {**_definition_like("xeon-icelake-16vcpu", "lab-cpu"), "host_link_gb_per_s": 16}
    with pytest.raises(UserFileError, match="host_link_gb_per_s: only for kind gpu"):
        parse_scenario(_scenario({"types": ["lab-cpu"], "define": [d]}), "s.yaml")


@pytest.mark.parametrize("cluster, message", [
    ({"types": ["t4"], "define": [_definition_like("t4", "t4")]},
     "s.yaml: cluster.define.0: name 't4' is a catalog type"),
    ({"types": ["x"], "define": [_definition_like("t4", "x"), _definition_like("t4", "x")]},
     "s.yaml: cluster.define.1: type 'x' is defined twice (also at s.yaml: cluster.define.0)"),
    ({"types": ["x"], "catalog": "nope.csv"}, "cluster.catalog:"),
])
def test_clashes_and_missing_files_are_one_line(tmp_path, cluster, message):
    with pytest.raises(UserFileError) as info:
        load_input(_write(tmp_path, _scenario(cluster)))
    assert message.replace("s.yaml", str(tmp_path / "s.yaml")) in str(info.value)


@pytest.mark.parametrize("header, row, message", [
    ("name,kind,peak_fp32_tflops,memory_gb,memory_bandwidth_gb_per_s,network_gbit_per_s,"
     "price_per_hour_usd", "c1,cpu,nan,64,100,10,0.5", "line 2 (c1)"),
    ("name,kind,peak_fp32_tflops,memory_gb,memory_bandwidth_gb_per_s,network_gbit_per_s,"
     "price_per_hour_usd", "c1,cpu,1.5,64,-100,10,0.5",
     "line 2: column 'memory_bandwidth_gb_per_s': Input should be greater than"),
    ("name,kind,peak_fp32_tflops,memory_gb,memory_bandwidth_gb_per_s,network_gbit_per_s",
     "c1,cpu,1.5,64,100,10", "line 2: column 'price_per_hour_usd': Field required"),
    ("name,kind,tflops", "c1,cpu,1", "unknown column 'tflops'"),
])
def test_a_bad_csv_catalog_names_file_line_and_column(tmp_path, header, row, message):
    (tmp_path / "lab.csv").write_text(f"{header}\n{row}\n")
    with pytest.raises(UserFileError) as info:
        load_input(_write(tmp_path, _scenario({"types": ["c1"], "catalog": "lab.csv"})))
    text = str(info.value)
    assert str(tmp_path / "lab.csv") in text and "\n" not in text
    assert message.replace("line 2 (c1)", "line 2") in text
    if "nan" in row:
        assert "column 'peak_fp32_tflops': " in text and "finite number" in text


@pytest.mark.parametrize("resources, model, message", [
    (("a", "b"), "tiny-ctr", "holds rows of several resources (a, b)"),
    (("a",), "dlrm", "has no row for model 'tiny-ctr' (its rows are for dlrm)"),
])
def test_an_unusable_attached_trace_is_refused(tmp_path, resources, model, message):
    with (tmp_path / "p.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "layer", "resource", "batch_size", "oct_s", "odt_s"])
        for r in resources:
            w.writerow([model, "fc_0", r, 256, 0.1, ""])
    d = {**_definition_like("xeon-icelake-16vcpu", "lab-cpu"), "trace": "p.csv"}
    with pytest.raises(UserFileError) as info:
        load_input(_write(tmp_path, _scenario({"types": ["lab-cpu"], "define": [d]})))
    assert "cluster.define.0" in str(info.value) and message in str(info.value)


def test_the_cli_exits_2_with_one_line(tmp_path):
    d = {**_definition_like("t4", "lab-gpu"), "memory_gb": float("nan")}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_scenario({"types": ["lab-gpu"], "define": [d]})))
    assert "memory_gb: .nan" in path.read_text()
    proc = subprocess.run([sys.executable, "-m", "heterps_sim.cli", "schedule", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0
    assert "cluster.define.0.memory_gb: " in proc.stderr and "finite number" in proc.stderr


def test_schedule_simulate_and_des_run_on_a_defined_type(tmp_path):
    """The command lines with the user's types: the plan names them, the simulator runs it."""
    gpu = {**_definition_like("t4", "onprem-gpu"), "price_per_hour_usd": 0.05}
    path = _write(tmp_path, _scenario({"types": ["onprem-gpu", "xeon-icelake-16vcpu"],
                                       "define": [gpu], "available": {"onprem-gpu": 2}}))
    plan_path = tmp_path / "plan.json"
    cli = [sys.executable, "-m", "heterps_sim.cli"]

    def run(*args):
        proc = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    run("schedule", str(path), "--out", str(plan_path))
    assert [s["resource"] for s in json.loads(plan_path.read_text())["stages"]] == ["onprem-gpu"]
    run("simulate", str(path), "--out", str(tmp_path / "sim"))
    analytic = json.loads((tmp_path / "sim" / "result.json").read_text())
    assert analytic["feasible"] and analytic["units_per_type"] == {"onprem-gpu": 1}
    des = json.loads(run("evaluate", str(path), str(plan_path), "--engine", "des", "--json"))
    assert des["source"] == "des" and des["feasible"]
    assert [s["resource"] for s in des["stages"]] == ["onprem-gpu"]
    assert des["cost_per_hour"] == pytest.approx(0.05)
