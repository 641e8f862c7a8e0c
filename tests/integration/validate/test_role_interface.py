"""The validate role's public interface: defaults/main.yml and meta/argument_specs.yml agree."""
import os

import yaml

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "validate")


def load(rel):
    with open(os.path.join(ROLE, rel)) as handle:
        return yaml.safe_load(handle)


def test_defaults_and_argument_specs_agree():
    defaults = load("defaults/main.yml")
    options = load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    assert all(name.startswith("validate_") for name in defaults)
    for name, spec in options.items():
        if "default" in spec:
            assert spec["default"] == defaults[name], name


def test_internal_variables_are_private():
    names = list(load("vars/main.yml"))
    assert names and all(name.startswith("__validate_") for name in names)
