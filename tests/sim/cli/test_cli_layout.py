"""The heterps-sim CLI as a table: every command served by its module, one error handler, and
`--set help` listing a scheduler's options."""

import json

import pytest

from heterps_sim.cli import COMMANDS, OWN_FLAGS, main
from heterps_sim.core.files import UserFileError, run_command
from heterps_sim.schedulers.fields import type_text
from heterps_sim.schedulers.registry import scheduler_class, scheduler_names


def run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_is_served_by_the_module_the_table_names():
    import importlib
    for name, (module, help_, example) in COMMANDS.items():
        mod = importlib.import_module(module)
        assert help_
        if name in OWN_FLAGS:
            assert callable(mod.main)
        else:
            add_arguments, run_ = mod.HANDLERS[name]
            assert callable(add_arguments) and callable(run_)
            assert example.startswith(f"heterps-sim {name}")
    served = {n for m in {m for m, _, _ in COMMANDS.values()}
              for n in getattr(importlib.import_module(m), "HANDLERS", {})}
    assert served == set(COMMANDS) - set(OWN_FLAGS)


def test_the_error_classes_of_the_commands_are_one_bad_input_error():
    from heterps_sim.cli.des import EffectsError
    from heterps_sim.inputs.catalog import CatalogError
    from heterps_sim.inputs.load import InputError
    from heterps_sim.inputs.roofline import TraceError
    from heterps_sim.inputs.scenario import ScenarioError
    from heterps_sim.plots.redraw import PlotError
    from heterps_sim.studies.report import ReportError
    from heterps_sim.studies.sweep import SweepError
    for error in (EffectsError, CatalogError, InputError, TraceError, ScenarioError, PlotError,
                  ReportError, SweepError):
        assert issubclass(error, UserFileError), error


@pytest.mark.parametrize("raised, code, err", [
    (UserFileError("plan.json: stages:\n  bad"), 2, "heterps-sim plot: plan.json: stages: bad\n"),
    (KeyboardInterrupt(), 130, "heterps-sim plot: interrupted\n")])
def test_the_one_handler(raised, code, err, capsys):
    def fail():
        raise raised
    assert run_command("heterps-sim", "plot", fail) == code
    assert capsys.readouterr().err == err


@pytest.mark.parametrize("name", scheduler_names())
def test_set_help_lists_every_option_with_type_default_and_docstring(name, capsys):
    code, out, _ = run(["schedule", "--scheduler", name, "--set", "help"], capsys)
    assert code == 0 and out.startswith(f"scheduler {name}: options")
    text = " ".join(out.split())
    for field, info in scheduler_class(name).Config.model_fields.items():
        assert info.description, f"{name}.{field} has no docstring"
        default = info.default_factory() if info.default_factory else info.default
        shown = repr(default) if isinstance(default, str) else str(default)
        assert f"  {field}: {type_text(info)} = {shown}\n" in out, field
        assert " ".join(info.description.split()) in text, field
    code, out, _ = run(["simulate", "--scheduler", name, "--set", "help", "--json"], capsys)
    listing = json.loads(out)
    fields = scheduler_class(name).Config.model_fields
    assert code == 0 and listing["scheduler"] == name
    assert [r["name"] for r in listing["options"]] == list(fields)
    for row in listing["options"]:
        info = fields[row["name"]]
        assert row["default"] == (info.default_factory() if info.default_factory else info.default)
        assert row["type"].startswith(getattr(info.annotation, "__name__", "~")) or "|" in \
            row["type"] or "[" in row["type"]
        assert row["description"] == " ".join(info.description.split())


def test_set_help_shows_bounds_and_takes_the_scenarios_scheduler(capsys, tmp_path):
    code, out, _ = run(["schedule", "--scheduler", "genetic", "--set", "help"], capsys)
    assert "  budget: int >= 1 = 20000\n" in out and "  mutation_rate: float >= 0.0, < 1.0" in out
    code, out, _ = run(["schedule", "scenarios/exec-tiny.yaml", "--set", "help", "--json"],
                       capsys)
    assert code == 0 and json.loads(out)["scheduler"] == "exact"  # the scenario's


def test_set_help_for_an_unknown_scheduler_is_one_line(capsys):
    code, out, err = run(["schedule", "--scheduler", "nope", "--set", "help"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "unknown scheduler 'nope'" in err


def test_unknown_scenario_option_is_one_line(capsys, tmp_path):
    import yaml
    data = yaml.safe_load(open("scenarios/exec-tiny.yaml"))
    data["schedule"]["options"] = {"colour": "red"}
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(data))
    code, _, err = run(["schedule", str(scenario)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "colour" in err


def test_train_rl_rejects_an_unknown_trainer_in_one_line(capsys):
    code, _, err = run(["train-rl", "--scheduler", "dqn"], capsys)
    assert code == 2
    assert err == "heterps-sim train-rl: --scheduler: expected rl or rl-paper, got 'dqn'\n"
