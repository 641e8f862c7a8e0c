"""The gate on real outputs (tests/fixtures/realdata/gpu-node/hgx-h100, captured on a real HGX H100 by
third parties): every verdict below is what an operator reading the same capture would say, written
by hand."""
import copy
import importlib.util
import os
import shutil

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers import nvidia_smi

_SPEC = importlib.util.spec_from_file_location("validate_test_checks_rd", os.path.join(os.path.dirname(__file__), "test_checks.py"))
_SAMPLE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_SAMPLE)

HEALTH = {"ecc": True, "persistence_mode": True, "peermem": True,
          "throttle_reasons": ["HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown"],
          "ib_counters": {"symbol_error": 10, "link_downed": 0, "link_error_recovery": 0}}
# The eight GPUs of each capture (read by hand from its "GPU 0000..." headers).
GPUS_183 = ["00000000:%s:00.0" % b for b in ("53", "64", "75", "86", "97", "a8", "b9", "ca")]
GPUS_161 = ["00000000:%s:00.0" % b for b in ("19", "3b", "4c", "5d", "9b", "bb", "cb", "db")]


def _read(realdata, name):
    with open(os.path.join(realdata, "gpu-node", "hgx-h100", name)) as handle:
        return handle.read()


def _report(smi, **profile_overrides):
    profile = copy.deepcopy(_SAMPLE.PROFILE)
    profile["health"] = copy.deepcopy(HEALTH)
    profile.update(profile_overrides)
    ctx = _SAMPLE.sample_inputs(profile=profile)
    ctx.outputs["nvidia_smi_q"] = smi
    return dict((c["id"], c) for c in gate.evaluate(ctx)["checks"])


def test_parse_query_reads_every_gpu_of_both_captures(realdata):
    for name, buses in (("nvidia-smi-q.535.183.01.txt", GPUS_183), ("nvidia-smi-q.535.161.08.txt", GPUS_161)):
        query = nvidia_smi.parse_query(_read(realdata, name))
        assert query["attached"] == 8 and sorted(query["gpus"]) == buses
        gpu = query["gpus"][buses[0]]
        assert gpu["Persistence Mode"] == "Enabled"
        assert nvidia_smi.section(gpu, "ECC Errors", "Volatile")["DRAM Uncorrectable"] == "0"
        assert nvidia_smi.section(gpu, "Remapped Rows")["Pending"] == "No"
        assert nvidia_smi.section(gpu, "Fabric")["State"] == "Completed"


def test_capture_183_passes_ecc_persistence_fabric_and_flags_the_one_braked_gpu(realdata):
    got = _report(_read(realdata, "nvidia-smi-q.535.183.01.txt"))
    for check_id in ("gpu.ecc", "gpu.persistence_mode", "nvidia.fabricmanager", "gpu.pcie_link"):
        assert got[check_id]["status"] == "pass", (check_id, got[check_id]["reason"])
    # GPU 75 of this capture reads "HW Power Brake Slowdown : Active" and "SW Thermal Slowdown :
    # Active" (its SW Power Cap is active too, which is no fault and not in the profile's list);
    # the seven others are Idle with no reason active.
    throttle = got["gpu.throttle"]
    assert throttle["status"] == "fail"
    assert throttle["reason"] == "GPU 00000000:75:00.0: HW Power Brake Slowdown, SW Thermal Slowdown"
    assert [b for b, active in throttle["observed"].items() if active] == ["00000000:75:00.0"]


def test_power_brake_asserted_on_every_gpu_is_a_throttle_failure(realdata):
    # nvidia-smi-q.535.161.08.txt: "HW Slowdown : Active" and "HW Power Brake Slowdown : Active" on
    # all eight GPUs at idle (the board's power brake is asserted).
    got = _report(_read(realdata, "nvidia-smi-q.535.161.08.txt"))
    throttle = got["gpu.throttle"]
    assert throttle["status"] == "fail"
    for bus in GPUS_161:
        assert "GPU %s: HW Power Brake Slowdown, HW Slowdown" % bus in throttle["reason"]
    assert got["gpu.ecc"]["status"] == "pass" and got["gpu.persistence_mode"]["status"] == "pass"


def test_truncated_output_is_no_data_never_a_pass_or_a_crash(realdata):
    got = _report(_read(realdata, "nvidia-smi-q.535.183.01.truncated.txt"))
    for check_id in ("gpu.ecc", "gpu.persistence_mode", "gpu.throttle"):
        assert got[check_id]["status"] == "skip", (check_id, got[check_id])
        assert got[check_id]["reason"] == "no data: nvidia-smi -q output incomplete (1 of 8 GPU blocks: cut short?)"
    # fabricmanager is required by the sample profile: no data turns it red, naming the cause.
    fm = got["nvidia.fabricmanager"]
    assert fm["status"] == "fail" and "nvidia-smi -q output incomplete (1 of 8 GPU blocks" in fm["reason"]
    assert "not Completed" not in fm["reason"]


def test_a100_fabric_state_not_reported_is_no_data_not_a_fail(realdata):
    # An A100 HGX prints the Fabric block with "State : N/A" (the block means something from Hopper
    # on); PCIe cards print "Not Supported". Rewritten from the real H100 capture, nothing else changed.
    text = _read(realdata, "nvidia-smi-q.535.183.01.txt")
    for state in ("N/A", "Not Supported"):
        smi = text.replace("State                             : Completed", "State                             : %s" % state)
        smi = smi.replace("Status                            : Success", "Status                            : N/A")
        profile = copy.deepcopy(_SAMPLE.PROFILE)
        profile["require"] = []
        fm = _report(smi, require=[])["nvidia.fabricmanager"]
        assert fm["status"] == "skip", fm
        assert "Fabric State %s (not reported by this GPU generation)" % state in fm["reason"]
    # The real failure still fails: one GPU whose fabric is not trained.
    smi = text.replace("State                             : Completed", "State                             : In Progress", 1)
    assert _report(smi)["nvidia.fabricmanager"]["status"] == "fail"


@pytest.fixture
def real_ib_root(realdata, tmp_path):
    """A root whose sys/class/infiniband is the real capture (it has no device links: the class
    folder was captured alone)."""
    dest = tmp_path / "sys" / "class" / "infiniband"
    shutil.copytree(os.path.join(realdata, "gpu-node", "hgx-h100", "sys-class-infiniband"), str(dest), symlinks=True)
    return str(tmp_path)


def test_real_rdma_devices_without_device_link_are_kept_with_their_counters(real_ib_root):
    facts, _warnings = collect(real_ib_root)
    names = [n["name"] for n in facts["nics"]]
    assert names == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9", "mlx5_bond_0"]
    nic = facts["nics"][1]
    assert nic["pci"] is None and nic["role"] == "non-rail" and nic["fw_ver"] == "28.41.1000"
    assert nic["ports"][0]["state"] == "ACTIVE" and nic["ports"][0]["rate_gbps"] == 400.0
    assert nic["ports"][0]["counters"]["link_downed"] == 255
    assert nic["ports"][0]["counters"]["symbol_error"] == 0
    # The capture has no device links and no node_guid files: absent files, never a dropped NIC.
    assert not [p for p in facts["problems"] if p["path"].endswith("/device") or p["kind"] != "missing"]


def test_real_flapping_link_fails_ib_counters_and_rails_have_no_data(real_ib_root):
    facts, _warnings = collect(real_ib_root)
    profile = {"name": "real", "ib": {"scope": "all", "state": "ACTIVE"}, "health": {"ib_counters": HEALTH["ib_counters"]},
               "nic": {"rails": 8}}
    prof = _profile.validate(profile, gate.CHECK_IDS)
    got = dict((c["id"], c) for c in gate.evaluate(gate.Inputs(facts, prof))["checks"])
    # mlx5_1's link_downed reads 255 (the 8-bit counter saturated): the flapping link of the issue.
    assert got["ib.counters"]["status"] == "fail"
    assert got["ib.counters"]["reason"] == "mlx5_1/1 link_downed 255 > 0"
    assert got["ib.ports"]["status"] == "pass"
    # No device link: which NIC is whose rail cannot be said.
    assert got["nic.rails"]["status"] == "skip"
    assert "no device link" in got["nic.rails"]["reason"] and "mlx5_0" in got["nic.rails"]["reason"]
