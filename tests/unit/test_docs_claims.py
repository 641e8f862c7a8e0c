"""Claims of the README and the operator guide that are behaviours or facts of the code, checked
against the code (issue 31 section 2: the docs say what happens)."""
import os
import re

import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import ids

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _read(*parts):
    with open(os.path.join(REPO, *parts)) as handle:
        return handle.read()


def test_readme_counts_the_checks_the_gate_has():
    counts = re.findall(r"evaluates all (\d+) checks", _read("README.md"))
    assert counts and set(int(c) for c in counts) == {len(ids.CHECK_IDS)}, (counts, len(ids.CHECK_IDS))


def test_profile_keys_the_operator_guide_tells_a_user_to_change_exist():
    guide = _read("docs", "operator-guide.md")
    section = guide.split("## 3. Adapting a profile", 1)[1].split("\n## ", 1)[0]
    keys = re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", section)
    assert {"kernel.release", "nvidia.driver_version", "kernel.cmdline.required"} <= set(keys), keys
    profile = yaml.safe_load(_read("inventories", "profiles", "hgx-h100.yml"))
    for key in keys:
        node = profile
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, "operator guide section 3 names %s, not a key of hgx-h100.yml" % key
            node = node[part]


def test_one_variable_names_the_profile_in_the_example_and_the_docs():
    # the example's classes name their profile with gpufleet_profile, which every role reads; the
    # gate's validate_profile defaults to it
    for cls in ("hgx_h100", "hgx_h200"):
        data = yaml.safe_load(_read("inventories", "example", "group_vars", cls, "main.yml"))
        assert "gpufleet_profile" in data and "validate_profile" not in data, (cls, sorted(data))
    defaults = yaml.safe_load(_read("roles", "validate", "defaults", "main.yml"))
    assert defaults["validate_profile"] == "{{ gpufleet_profile | default({}) }}"
    for doc in ("README.md", os.path.join("docs", "operator-guide.md")):
        assert "-e validate_profile=" not in _read(doc), doc
        assert not re.search(r"^validate_profile:", _read(doc), re.M), doc
