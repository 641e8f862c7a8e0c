"""validate_node through Ansible itself (ad hoc, module and action plugin): reference tree, report
files written once, check mode, check subsets, command timeouts, bad input."""
import json
import os
import xml.etree.ElementTree as ET

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
# Recorded inputs: nothing installed, no unit, no command run (the tree alone).
NOTHING = {"packages": {}, "services": {}, "commands": {}}


def profile():
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        return yaml.safe_load(handle)


def test_reference_tree_reports_written_once_then_unchanged(adhoc, unpacked_tree, tmp_path):
    root = unpacked_tree("hgx-h100-ref")
    args = dict(NOTHING, root=root, profile=profile(), node="gpu001", report_dir=str(tmp_path / "gate"))
    rc, result = adhoc("validate_node", args)
    assert rc == 0, result
    # Everything the tree can prove passes; what needs packages, services or commands is red
    # (nothing installed, or required by the profile and without data)
    assert sorted(result["failed_checks"]) == ["nvidia.fabricmanager", "ofed.kernel_match", "ofed.version", "packages.held"]
    red = dict((c["id"], c) for c in result["red"])
    assert red["ofed.version"]["reason"].startswith("required by profile, but no data")
    assert red["nvidia.fabricmanager"]["reason"].startswith("nvidia-fabricmanager not installed")
    assert red["packages.held"]["remedy"].startswith("apt-mark hold")
    assert result["checks"]["pcie.acs"] == "pass" and result["checks"]["kernel.grub_sources"] == "pass"
    assert result["summary"].startswith("gpu001 QUARANTINE (profile hgx-h100): nvidia.fabricmanager, ")
    assert "report" not in result and "facts" not in result and result["collected"] == {}
    files = dict((os.path.basename(p), s) for p, s in result["report_files"].items())
    assert files == {"gpu001.json": "written", "gpu001.prom": "written", "gpu001.xml": "written"}
    assert result["changed"] is True
    saved = json.loads((tmp_path / "gate" / "gpu001.json").read_text())
    assert saved["facts"]["schema"] == 1 and len(saved["facts"]["gpus"]) == 8
    assert sorted(saved["report"]["failed"]) == sorted(result["failed_checks"])
    suite = ET.fromstring((tmp_path / "gate" / "gpu001.xml").read_text()).find("testsuite")
    assert suite.get("name") == "gpu001" and len(suite.findall("testcase")) == len(result["checks"])
    prom = (tmp_path / "gate" / "gpu001.prom").read_text()
    assert 'gpufleet_check{node="gpu001",check="nvidia.fabricmanager"} 0' in prom

    # the same verdicts again: the report and JUnit files stay, the .prom file is refreshed for its
    # last-run time (what an alert on a stopped gate reads), and that is no change: changed=false
    before = dict((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "gate").iterdir())
    rc, again = adhoc("validate_node", args)
    assert rc == 0 and again["changed"] is False, again
    files = dict((os.path.basename(p), s) for p, s in again["report_files"].items())
    assert files == {"gpu001.json": "unchanged", "gpu001.prom": "refreshed", "gpu001.xml": "unchanged"}
    after = dict((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "gate").iterdir())
    assert after["gpu001.json"] == before["gpu001.json"] and after["gpu001.xml"] == before["gpu001.xml"]
    assert sorted(after) == sorted(before)   # no temporary file left beside them


def test_check_mode_predicts_the_report_files_and_writes_nothing(adhoc, unpacked_tree, tmp_path):
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=profile(), node="gpu001",
                report_dir=str(tmp_path / "gate"))
    rc, result = adhoc("validate_node", args, check=True)
    assert rc == 0, result
    assert result["changed"] is True and set(result["report_files"].values()) == {"would write"}
    assert not (tmp_path / "gate").exists()


def test_subset_of_checks_and_fail_on_red(adhoc, unpacked_tree):
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=profile(), checks=["pcie.acs", "kernel.grub_sources"])
    rc, result = adhoc("validate_node", args)
    assert rc == 0 and result["checks"] == {"pcie.acs": "pass", "kernel.grub_sources": "pass"}, result
    rc, result = adhoc("validate_node", dict(args, checks=["packages.held", "pcie.acs"], fail_on_red=True))
    # the task fails naming the red check only (pcie.acs passes)
    assert rc != 0, result
    assert ": packages.held fail: " in result["msg"] and "pcie.acs" not in result["msg"], result["msg"]
    rc, result = adhoc("validate_node", dict(args, checks=["pcie.acs", "pcie.acz"]))
    assert rc != 0 and "unknown check id(s): pcie.acz" in result["msg"]


def test_groups_by_verdict_in_the_same_task(adhoc, unpacked_tree):
    # the key group_by returns: the strategy applies it (the playbook test reads the groups back)
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=profile(), ready_group="fleet ready",
                quarantine_group="fleet_quarantine")
    rc, green = adhoc("validate_node", dict(args, checks=["pcie.acs"]))
    assert rc == 0 and green["status"] == "pass", green
    assert (green["add_group"], green["parent_groups"]) == ("fleet-ready", ["all"])
    rc, red = adhoc("validate_node", dict(args, checks=["packages.held"]))
    assert rc == 0 and red["status"] == "fail" and red["add_group"] == "fleet_quarantine", red
    rc, plain = adhoc("validate_node", dict(NOTHING, root=args["root"], profile=profile(), checks=["pcie.acs"]))
    assert rc == 0 and "add_group" not in plain, plain


def test_required_skip_is_red(adhoc, unpacked_tree):
    # gpu.ecc needs nvidia-smi -q: no command, no data; required here, so red
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=profile(), checks=["gpu.ecc"])
    rc, result = adhoc("validate_node", args)
    assert rc == 0 and result["checks"] == {"gpu.ecc": "skip"}
    rc, result = adhoc("validate_node", dict(args, require=["gpu.ecc"]))
    assert rc == 0 and result["checks"] == {"gpu.ecc": "fail"}
    assert result["red"][0]["reason"].startswith("required by profile, but no data: nvidia-smi -q output not collected")


def test_a_command_that_hangs_is_stopped_and_named(adhoc, unpacked_tree):
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=profile(), checks=["gpu.ecc", "gpu.nvlink"],
                commands={"nvidia_smi_q": ["sleep", "30"], "nvidia_smi_nvlink": ["gpufleet-no-such-tool", "-s"]},
                command_timeout=1, return_report=True)
    rc, result = adhoc("validate_node", args)
    assert rc == 0, result
    assert result["collected"]["nvidia_smi_q"] == "sleep 30: timed out after 1 s"
    # the cause reaches the check's reason (it did not while no other output had failed before)
    reasons = dict((c["id"], c["reason"]) for c in result["report"]["checks"])
    assert reasons["gpu.ecc"] == "no data: nvidia-smi -q output not collected (sleep 30: timed out after 1 s)", reasons
    assert result["collected"]["nvidia_smi_nvlink"].startswith("gpufleet-no-such-tool -s: command absent or not executable")
    assert result["checks"] == {"gpu.ecc": "skip", "gpu.nvlink": "skip"}


def test_registered_command_results_become_outputs_or_causes(adhoc, unpacked_tree):
    root = unpacked_tree("hgx-h100-ref")
    outputs = {
        "ofed_info": {"rc": 0, "stdout": "MLNX_OFED_LINUX-23.10-1.1.9.0:", "stderr": "", "cmd": ["ofed_info", "-s"]},
        "modinfo_mlx5_core": {"rc": 2, "stdout": "", "stderr": "", "msg": "Error executing command.",
                              "cmd": ["modinfo", "-F", "vermagic", "mlx5_core"]},
        "nvidia_smi_q": {"skipped": True, "skip_reason": "Conditional result was False"},
    }
    rc, result = adhoc("validate_node", dict(NOTHING, root=root, profile=profile(), outputs=outputs))
    assert rc == 0, result
    red = dict((c["id"], c) for c in result["red"])
    assert result["checks"]["ofed.version"] == "pass"
    assert result["checks"]["ofed.kernel_match"] == "fail"   # required by the profile
    assert "modinfo -F vermagic mlx5_core: rc=2, Error executing command. (command absent or not executable?)" \
        in red["ofed.kernel_match"]["reason"]


def test_packages_read_from_this_machines_package_database(adhoc, unpacked_tree):
    # the real dpkg database of the machine the tests run on: dpkg itself is installed, not held
    if not os.path.exists("/var/lib/dpkg/status"):
        pytest.skip("no dpkg database on this machine")
    prof = dict(profile(), packages={"held": ["dpkg"]})
    rc, result = adhoc("validate_node", {"root": unpacked_tree("hgx-h100-ref"), "profile": prof, "checks": ["packages.held"],
                                         "commands": {"apt_mark_showhold": ["apt-mark", "showhold"]}, "return_report": True})
    assert rc == 0, result
    assert result["collected"] == {"apt_mark_showhold": "ok (read from the package database)"}   # no apt-mark run
    check = result["report"]["checks"][0]
    assert "dpkg: installed, not held" in check["reason"], check


@pytest.mark.parametrize("bad,message", [
    ({"kernel": {"cmdlne": {"required": []}}}, "profile key kernel.cmdlne: unknown (known: cmdline, grub_sources, packages, release, version)"),
    ({"os": {"version_id": 22.1}}, "profile key os.version_id: must be a string, got float 22.1"),
])
def test_bad_profile_fails_naming_the_key(adhoc, unpacked_tree, bad, message):
    rc, result = adhoc("validate_node", {"root": unpacked_tree("cloud-guest"), "profile": bad})
    assert rc != 0
    assert message in result["msg"]
    assert "Traceback" not in json.dumps(result)


def test_bad_root_and_bad_report_dir_fail_clearly(adhoc, unpacked_tree, tmp_path):
    rc, result = adhoc("validate_node", {"root": "/definitely/not/here", "profile": {"name": "x"}})
    assert rc != 0
    assert result["msg"] == "root /definitely/not/here: not a directory"
    (tmp_path / "file").write_text("x")
    rc, result = adhoc("validate_node", dict(NOTHING, root=unpacked_tree("cloud-guest"), profile={"name": "x"},
                                             node="n1", report_dir=str(tmp_path / "file")))
    assert rc != 0
    assert result["msg"] == "validate_node on n1: reports not stored: report_dir %s: exists and is not a folder" % (tmp_path / "file")


# A stand-in for the shipped probe script, sent as probe_script: for gdr it prints what
# ib_write_bw prints per rail, one section per --pair it was given (the pairs come from the node's
# fact tree), so the check passes only when every rail NIC of the tree reached the script.
GDR_SCRIPT = r'''
import sys
args = sys.argv[1:]
assert args[0] == "gdr", args
for index, pair in enumerate(a.split("=", 1)[1] for a in args[1:]):
    nic, bdf = pair.split("=")
    print("# gdr %s cuda %d (%s)" % (nic, index, bdf))
    print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
    print(" 8388608    5000             392.45             392.40               0.005847")
'''


def probing(**enabled):
    data = profile()
    for name in enabled:
        data["probes"][name]["enabled"] = True
    return data


def test_enabled_probes_run_in_the_same_call_each_under_its_timeout(adhoc, unpacked_tree):
    checks = ["transport.nccl", "gpu.h2d_bandwidth", "ib.gdr_bandwidth", "gpu.p2p_bandwidth"]
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=probing(nccl=1, h2d=1, gdr=1), checks=checks,
                probes={"h2d": ["printf", "GPU 0000:18:00.0: 48.90 GB/s\nGPU 0000:2a:00.0: 31.20 GB/s\n"],
                        "nccl": ["sleep", "30"], "p2p": ["gpufleet-never-run"]},
                probe_timeout=1, probe_script=GDR_SCRIPT)
    rc, result = adhoc("validate_node", args)
    assert rc == 0, result
    assert result["collected"] == {"h2d_bandwidth": "ok", "gdr_bandwidth": "ok", "nccl_debug": "sleep 30: timed out after 1 s"}
    red = dict((c["id"], c) for c in result["red"])
    # the command's output reached the check: two GPUs measured, one slow
    assert red["gpu.h2d_bandwidth"]["reason"] == "2 of 8 GPUs measured; min 31.2 GB/s < 48.0 (GPUs 0000:2a:00.0); spread 17.70 GB/s > 1.1", red
    assert red["transport.nccl"]["reason"].endswith("output not collected (sleep 30: timed out after 1 s)"), red
    # every rail of the tree measured: the script got the node's GPU-NIC pairs
    assert result["checks"]["ib.gdr_bandwidth"] == "pass", red
    # p2p is not enabled: its command never ran, the check is not asked
    assert result["checks"]["gpu.p2p_bandwidth"] == "skip"


def test_the_shipped_probe_script_is_sent_and_a_recorded_output_is_not_probed(adhoc, unpacked_tree):
    args = dict(NOTHING, root=unpacked_tree("hgx-h100-ref"), profile=probing(nccl=1, dcgm=1),
                checks=["transport.nccl", "gpu.dcgm_diag"], outputs={"dcgm_diag": '{"DCGM GPU Diagnostic": {}}'})
    rc, result = adhoc("validate_node", args)
    assert rc == 0, result
    # this machine has no nccl-tests: the shipped script (sent by the action) says so, exit 3
    assert list(result["collected"]) == ["nccl_debug"], result["collected"]
    assert result["collected"]["nccl_debug"].startswith(
        "gpufleet_probe.py nccl: rc=3, no data: nccl-tests (all_reduce_perf) is not on this node"), result["collected"]
    assert result["checks"]["transport.nccl"] == "fail"
