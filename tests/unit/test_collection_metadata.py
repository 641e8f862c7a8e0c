"""Metadata that must agree (issue 14): the supported ansible-core range in meta/runtime.yml, in
requirements.txt and in the two ends CI tests (requirements-2.16.txt, the venv's ansible-core), the
action groups, and what the tarball leaves out."""
import os
import re

import yaml
from ansible.release import __version__ as ansible_version

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _read(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return handle.read()


def _range(spec):
    low = re.search(r">=\s*([\d.]+)", spec).group(1)
    high = re.search(r"<\s*([\d.]+)", spec).group(1)
    return tuple(int(x) for x in low.split(".")[:2]), tuple(int(x) for x in high.split(".")[:2])


def test_requires_ansible_and_requirements_agree_and_ci_tests_both_ends():
    runtime = yaml.safe_load(_read("meta", "runtime.yml"))
    core = [line for line in _read("requirements.txt").splitlines() if line.startswith("ansible-core")][0]
    assert _range(runtime["requires_ansible"]) == _range(core) == ((2, 16), (2, 20))
    assert _range(_read("requirements-2.16.txt").split("ansible-core", 1)[1])[0] == (2, 16)
    # the main venv (sanity's highest end) sits in the last supported minor
    assert tuple(int(x) for x in ansible_version.split(".")[:2]) == (2, 19)


def test_action_groups_do_not_mix_node_and_bmc_modules():
    groups = yaml.safe_load(_read("meta", "runtime.yml"))["action_groups"]
    assert groups["node"] == ["node_facts", "validate_node", "guest_plan"]   # all read through `root`
    assert groups["bmc"] == ["redfish_bios", "redfish_power"]
    # the washing machine's modules: their root is the OS root, so they never share node's `root`
    assert not set(groups["node_config"]) & set(groups["node"])
    assert "gpufleet" not in groups
    modules = {f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "modules")) if f.endswith(".py")}
    assert set(sum(groups.values(), [])) == modules


def test_the_tarball_leaves_the_lab_out():
    ignore = yaml.safe_load(_read("galaxy.yml"))["build_ignore"]
    for path in ("lab", "inventories/lab", "docs/lab.md", "changelogs/fragments/lab-*.yml", "tests", "extensions/molecule",
                 "collections", "playbooks/collections", "ansible.cfg"):
        assert path in ignore, path
    assert yaml.safe_load(_read("galaxy.yml"))["repository"].startswith("https://")
    assert os.path.exists(os.path.join(REPO, "LICENSE")) and "GNU GENERAL PUBLIC LICENSE" in _read("LICENSE")[:200]
