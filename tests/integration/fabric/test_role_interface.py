"""The fabric role's public interface: defaults/main.yml and meta/argument_specs.yml agree."""
import os

import yaml

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles", "fabric")


def load(rel):
    with open(os.path.join(ROLE, rel)) as handle:
        return yaml.safe_load(handle)


def test_defaults_and_argument_specs_agree():
    defaults = load("defaults/main.yml")
    specs = load("meta/argument_specs.yml")["argument_specs"]
    assert sorted(specs) == ["collect", "main"]
    assert sorted(defaults) == sorted(specs["main"]["options"])
    assert all(name.startswith("fabric_") for name in defaults)
    for entry, spec in specs.items():
        for name, option in spec["options"].items():
            assert name in defaults, (entry, name)
            if "default" in option:
                assert option["default"] == defaults[name], (entry, name)


def test_registered_variables_are_private():
    for tasks in ("main.yml", "collect.yml"):
        for task in load(os.path.join("tasks", tasks)):
            if "register" in task:
                assert task["register"].startswith("__fabric_"), task["register"]
