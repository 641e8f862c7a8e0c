"""validate_node through Ansible itself (ad hoc): reference tree, check mode, bad profile, outputs."""
import json
import os
import xml.etree.ElementTree as ET

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def profile():
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("check", [False, True])
def test_reference_tree_without_collected_inputs(adhoc, unpacked_tree, check):
    root = unpacked_tree("hgx-h100-ref")
    rc, result = adhoc("validate_node", {"root": root, "profile": profile(), "node": "gpu001"}, check=check)
    assert rc == 0, result
    assert result["changed"] is False
    report = result["report"]
    by_id = dict((c["id"], c) for c in report["checks"])
    # Everything the tree can prove passes. The checks the profile requires that need collected
    # inputs (packages, services, command outputs) have no data: a required skip is a fail.
    needs_inputs = ["nvidia.fabricmanager", "ofed.version", "ofed.kernel_match", "packages.held"]
    assert sorted(report["failed"]) == sorted(needs_inputs)
    for check_id in needs_inputs:
        assert by_id[check_id]["reason"].startswith("required by profile, but no data"), by_id[check_id]
    assert by_id["pcie.acs"]["status"] == "pass" and by_id["nic.rails"]["status"] == "pass"
    assert by_id["kernel.grub_sources"]["status"] == "pass"  # the capture carries /etc/default/grub
    assert result["facts"]["schema"] == 1 and len(result["facts"]["gpus"]) == 8
    suite = ET.fromstring(result["junit"]).find("testsuite")
    assert suite.get("name") == "gpu001" and len(suite.findall("testcase")) == len(report["checks"])
    assert 'gpufleet_check{node="gpu001",check="nvidia.fabricmanager"} 0' in result["prometheus"]
    assert result["summary"].startswith("gpu001 QUARANTINE (profile hgx-h100): nvidia.fabricmanager, ")


def test_registered_command_results_become_outputs_or_causes(adhoc, unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    outputs = {
        "ofed_info": {"rc": 0, "stdout": "MLNX_OFED_LINUX-23.10-1.1.9.0:", "stderr": "", "cmd": ["ofed_info", "-s"]},
        "modinfo_mlx5_core": {"rc": 2, "stdout": "", "stderr": "", "msg": "Error executing command.",
                              "cmd": ["modinfo", "-F", "vermagic", "mlx5_core"]},
        "nvidia_smi_q": {"skipped": True, "skip_reason": "Conditional result was False"},
    }
    rc, result = adhoc("validate_node", {"root": root, "profile": profile(), "outputs": outputs})
    assert rc == 0, result
    by_id = dict((c["id"], c) for c in result["report"]["checks"])
    assert by_id["ofed.version"]["status"] == "pass"
    assert by_id["ofed.kernel_match"]["status"] == "fail"   # required by the profile
    assert "modinfo -F vermagic mlx5_core: rc=2, Error executing command. (command absent or not executable?)" \
        in by_id["ofed.kernel_match"]["reason"]


@pytest.mark.parametrize("bad,message", [
    ({"kernel": {"cmdlne": {"required": []}}}, "profile key kernel.cmdlne: unknown (known: cmdline, grub_sources, packages, release, version)"),
    ({"os": {"version_id": 22.1}}, "profile key os.version_id: must be a string, got float 22.1"),
])
def test_bad_profile_fails_naming_the_key(adhoc, unpacked_tree, bad, message):
    rc, result = adhoc("validate_node", {"root": unpacked_tree("cloud-guest"), "profile": bad})
    assert rc != 0
    assert message in result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_bad_root_fails_clearly(adhoc):
    rc, result = adhoc("validate_node", {"root": "/definitely/not/here", "profile": {"name": "x"}})
    assert rc != 0
    assert result["msg"] == "root /definitely/not/here: not a directory"
