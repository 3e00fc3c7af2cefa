"""Both RL trainers' flags are generated from their pydantic `Args`: one flag per field, its
docstring as the help, its default as the parsed default."""

import argparse

import pytest
from pydantic import BaseModel, ConfigDict, Field

from heterps_sim.schedulers.fields import add_flags, field_rows, plain_message, type_text
from heterps_sim.schedulers.rl.paper import train as paper
from heterps_sim.schedulers.rl.stagewise import train as stagewise

TRAINERS = [pytest.param(paper, id="rl-paper"), pytest.param(stagewise, id="rl")]


def _flags(module) -> dict[str, argparse.Action]:
    """The trainer's parser's actions, by destination."""
    return {a.dest: a for a in module.parser()._actions}


@pytest.mark.parametrize("module", TRAINERS)
def test_every_field_has_a_flag_with_its_docstring_as_help(module):
    actions = _flags(module)
    for name, info in module.Args.model_fields.items():
        assert info.description, f"{name} has no docstring"
        action = actions[name]
        assert action.option_strings[0] == "--" + name.replace("_", "-")
        first_words = " ".join(info.description.split()[:4]).replace("%", "%%")
        assert first_words in " ".join(action.help.split()), (name, action.help)


@pytest.mark.parametrize("module", TRAINERS)
def test_parsed_defaults_are_the_models_defaults(module):
    parsed = module.parse_args([])
    assert parsed.model_dump() == module.Args().model_dump()


@pytest.mark.parametrize("module", TRAINERS)
def test_flags_parse_to_their_fields(module):
    parsed = module.parse_args(["a.yaml", "--seed", "7", "--batch", "16", "--lr", "0.5",
                                "--mode", "exact", "--out", "x.pt"])
    assert (parsed.seed, parsed.batch, parsed.lr, parsed.mode, parsed.out) == (
        7, 16, 0.5, "exact", "x.pt")
    assert parsed.problems == ["a.yaml"]


def test_paper_progress_is_a_boolean_flag():
    assert paper.parse_args(["--no-progress"]).progress is False
    assert paper.parse_args([]).progress is True


@pytest.mark.parametrize("module", TRAINERS)
def test_bad_values_read_as_the_validators_sentence(module, capsys):
    with pytest.raises(ValueError, match=r"^batch must be > 0, got 0$"):
        module.parse_args(["--batch", "0"])
    assert module.main(["--batch", "0"]) == 2
    assert capsys.readouterr().err.strip() == "heterps-sim train-rl: batch must be > 0, got 0"


@pytest.mark.parametrize("module", TRAINERS)
def test_args_forbid_unknown_fields(module):
    with pytest.raises(ValueError, match="nonsense"):
        module.Args(nonsense=1)


class _Toy(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    budget: int = Field(default=300, ge=1)
    """Plan evaluations to spend (100% of them)."""
    rate: float = Field(default=0.5, ge=0, lt=1)
    names: list[str] = Field(default_factory=list)
    """Some names."""
    verbose: bool = False
    """Say more."""


def test_rows_name_type_bounds_default_and_docstring():
    assert field_rows(_Toy) == [
        {"name": "budget", "type": "int >= 1", "default": 300,
         "description": "Plan evaluations to spend (100% of them)."},
        {"name": "rate", "type": "float >= 0, < 1", "default": 0.5, "description": ""},
        {"name": "names", "type": "list[str]", "default": [], "description": "Some names."},
        {"name": "verbose", "type": "bool", "default": False, "description": "Say more."}]
    assert type_text(_Toy.model_fields["budget"]) == "int >= 1"


def test_add_flags_types_lists_booleans_and_percent_signs():
    ap = argparse.ArgumentParser()
    add_flags(ap, _Toy)
    ns = ap.parse_args(["--budget", "5", "--names", "a", "b", "--verbose"])
    assert (ns.budget, ns.rate, ns.names, ns.verbose) == (5, 0.5, ["a", "b"], True)
    assert "100% of them" in ap.format_help()


def test_plain_message_keeps_the_field_of_a_type_error():
    try:
        _Toy(budget="many")
    except ValueError as exc:
        assert plain_message(exc).startswith("budget: ")
