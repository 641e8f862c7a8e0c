"""Every role's public interface (STYLE: defaults/main.yml is the interface, prefixed with the role
name; meta/argument_specs.yml describes it; internals are __<role>_*), kept in step here."""
import glob
import os

import pytest
import yaml

ROLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "roles"))
NAMES = sorted(os.listdir(ROLES))


def load(role, rel):
    path = os.path.join(ROLES, role, rel)
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return yaml.safe_load(handle)


def test_every_role_is_checked():
    assert {"bios", "fabric", "reboot", "validate"} <= set(NAMES)


@pytest.mark.parametrize("role", NAMES)
def test_defaults_and_argument_specs_agree(role):
    defaults = load(role, "defaults/main.yml") or {}
    specs = load(role, "meta/argument_specs.yml")
    assert specs, "roles/%s has no meta/argument_specs.yml" % role
    entries = specs["argument_specs"]
    assert "main" in entries
    assert all(name.startswith(role + "_") for name in defaults), [n for n in defaults if not n.startswith(role + "_")]
    options = {}
    for entry, spec in entries.items():
        for name, option in (spec.get("options") or {}).items():
            assert name.startswith(role + "_"), (entry, name)
            assert name in defaults, "roles/%s: option %s (entry %s) has no default in defaults/main.yml" % (role, name, entry)
            if "default" in option:
                assert option["default"] == defaults[name] or "{{" in str(defaults[name]), (entry, name)
            options[name] = option
    assert sorted(options) == sorted(defaults), "defaults without an argument spec: %s" % sorted(set(defaults) - set(options))


@pytest.mark.parametrize("role", NAMES)
def test_internal_variables_are_private(role):
    internal = load(role, "vars/main.yml") or {}
    assert all(name.startswith("__%s_" % role) for name in internal), list(internal)
    for path in glob.glob(os.path.join(ROLES, role, "tasks", "*.yml")) + glob.glob(os.path.join(ROLES, role, "handlers", "*.yml")):
        with open(path) as handle:
            tasks = yaml.safe_load(handle) or []
        for task in _walk(tasks):
            if "register" in task:
                assert task["register"].startswith("__%s_" % role), (path, task["register"])


def _walk(tasks):
    for task in tasks:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key) or [])
