"""node_facts through Ansible itself: ad hoc on a fixture tree, in check mode, and on bad input."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")


def run_adhoc(args, check=False):
    if not os.path.exists(ANSIBLE):
        pytest.skip("ansible CLI not in this virtualenv: %s" % ANSIBLE)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal",
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    cmd = [ANSIBLE, "localhost", "-m", "gpufleet.provision.node_facts", "-a", args] + (["--check"] if check else [])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    # minimal callback: "localhost | SUCCESS => {...}"; warnings go to stderr
    head, sep, body = proc.stdout.partition(" => ")
    assert sep, proc.stdout + proc.stderr
    result = json.loads(body)
    result["_stderr"] = proc.stderr
    return proc.returncode, result


@pytest.mark.parametrize("check", [False, True])
def test_adhoc_on_reference_tree(unpacked_tree, check):
    root = unpacked_tree("hgx-h100-ref")
    rc, result = run_adhoc("root=%s" % root, check=check)
    assert rc == 0, result
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpufleet"]
    assert len(facts["gpus"]) == 8 and facts["cpu"]["siblings"][0] == [0, 104]
    assert [p["affinity"] for p in facts["pairs"]] == ["PIX"] * 8


def test_warning_names_the_path(unpacked_tree):
    root = unpacked_tree("cloud-guest")
    os.remove(os.path.join(root, "proc/cmdline"))
    rc, result = run_adhoc("root=%s" % root)
    assert rc == 0
    assert result["ansible_facts"]["gpufleet"]["kernel"]["cmdline"]["raw"] is None
    assert "[WARNING]: proc/cmdline: file not found (missing)" in result["_stderr"], result["_stderr"]


def test_bad_root_fails_clearly():
    rc, result = run_adhoc("root=/definitely/not/here")
    assert rc != 0
    assert result["msg"].startswith("root /definitely/not/here: not a folder")
