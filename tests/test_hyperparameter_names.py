"""``hyperparameters(Config, values)`` picks the main parameters that are fields of a config
class, refuses a name that is a misspelling of a field (naming the field) and a value of the
wrong kind; a program that does so stops at start-up with one located line."""

from __future__ import annotations

import dataclasses
import re

import pytest
from conftest import ROOT, build, run_program

from codegen.compiler import front
from codegen.diagnostics import Reporter
from codegen.model import main_parameters
from reactors.model.arguments import Code, parse_value
from rl_algos.config import ConfigError, hyperparameters


@dataclasses.dataclass
class Cfg:
    learning_rate: float = 1e-3
    num_steps: int = 128
    hidden: tuple = (64, 64)


def test_fields_are_picked_and_other_names_pass():
    values = {"seed": 1, "max_steps": 10, "learning_rate": 3e-4, "hidden": [8]}
    assert hyperparameters(Cfg, values) == {"learning_rate": 3e-4, "hidden": (8,)}


def test_a_misspelled_field_is_refused_with_the_close_match():
    with pytest.raises(ConfigError) as e:
        hyperparameters(Cfg, {"seed": 1, "learning_rat": 0.5})
    assert str(e.value) == (
        "'learning_rat' is not a field of Cfg; did you mean 'learning_rate'? "
        "(a parameter that is not a hyperparameter: hyperparameters(Cfg, ..., "
        "others=['learning_rat']))"
    )


def test_a_name_declared_as_another_parameter_passes():
    assert hyperparameters(Cfg, {"learning_rat": 0.5}, others=["learning_rat"]) == {}


def test_a_value_of_the_wrong_kind_is_refused_when_picked():
    with pytest.raises(
        ConfigError, match="^hyperparameter num_steps of Cfg must be a int, not 1.5"
    ):
        hyperparameters(Cfg, {"num_steps": 1.5})


HP = """target Python { fast: true }
preamble {=
import dataclasses
from rl_algos.config import hyperparameters

@dataclasses.dataclass
class Cfg:
  learning_rate: float = 1e-3
=}
reactor Learner(hparams = {= dict() =}) {
  reaction(startup) {= print("learning", self.hparams) =}
}
main reactor Hp(seed = 1, learning_rat = 0.5) {
  learner = new Learner(hparams = {= hyperparameters(Cfg, self.lf_parameters()) =})
}
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_misspelled_hyperparameter_stops_the_program_at_start_up(tmp_path, workers):
    src = tmp_path / "Hp.lf"
    src.write_text(HP)
    r = run_program(build(src, tmp_path / "out"), "-w", workers)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (
        f"ERROR: instantiating Hp.learner failed at {src}:14: 'learning_rat' is not a field of "
        "Cfg; did you mean 'learning_rate'? (a parameter that is not a hyperparameter: "
        "hyperparameters(Cfg, ..., others=['learning_rat']))\n"
    )


def _configs(lf_text: str) -> list[type]:
    """The config classes a program's ``hyperparameters(...)`` calls name."""
    from rl_algos import dqn, grpo, mappo, ppo, sac

    modules = (ppo, dqn, sac, grpo, mappo)
    names = sorted(set(re.findall(r"hyperparameters\((\w+)", lf_text)))
    return [next(getattr(m, n) for m in modules if hasattr(m, n)) for n in names]


def test_no_program_of_lf_src_is_refused():
    checked = 0
    for path in sorted((ROOT / "lf_src").glob("*.lf")):
        configs = _configs(path.read_text())
        if not configs:
            continue
        f = front(str(path), Reporter())
        assert f is not None
        values = {p.name: parse_value(p.default) for p in main_parameters(f.prog)}
        values = {k: v for k, v in values.items() if not isinstance(v, Code)}
        for cls in configs:
            hyperparameters(cls, values)
            checked += 1
    assert checked >= 6
