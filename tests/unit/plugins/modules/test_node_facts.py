"""node_facts through Ansible itself: ad hoc on a fixture tree, in check mode, and on bad input."""
import os

import pytest


@pytest.mark.parametrize("check", [False, True])
def test_adhoc_on_reference_tree(adhoc, unpacked_tree, check):
    root = unpacked_tree("hgx-h100-ref")
    rc, result = adhoc("node_facts", "root=%s" % root, check=check)
    assert rc == 0, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpufleet"]
    assert len(facts["gpus"]) == 8 and facts["cpu"]["siblings"][0] == [0, 104]
    assert [p["affinity"] for p in facts["pairs"]] == ["PIX"] * 8


def test_warning_names_the_path(adhoc, unpacked_tree):
    root = unpacked_tree("cloud-guest")
    os.remove(os.path.join(root, "proc/cmdline"))
    rc, result = adhoc("node_facts", "root=%s" % root)
    assert rc == 0
    assert result["ansible_facts"]["gpufleet"]["kernel"]["cmdline"]["raw"] is None
    assert "[WARNING]: proc/cmdline: file not found (missing)" in result["_stderr"], result["_stderr"]


def test_bad_root_fails_clearly(adhoc):
    rc, result = adhoc("node_facts", "root=/definitely/not/here")
    assert rc != 0
    assert result["msg"].startswith("root /definitely/not/here: not a folder")
