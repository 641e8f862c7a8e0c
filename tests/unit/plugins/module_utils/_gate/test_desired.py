"""The gate reads the desired state through _desired, the functions the roles apply: what the
kernel_cmdline role writes is what kernel.cmdline and kernel.grub_sources expect (issue 9)."""
import copy
import importlib.util
import os

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate

_SPEC = importlib.util.spec_from_file_location("validate_test_checks_d", os.path.join(os.path.dirname(__file__), "test_checks.py"))
_TC = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_TC)
PROFILE, sample_facts, sample_inputs, _params = _TC.PROFILE, _TC.sample_facts, _TC.sample_inputs, _TC._params


def _check(report, check_id):
    return next(c for c in report["checks"] if c["id"] == check_id)


def _with_cmdline(raw):
    facts = sample_facts()
    facts["kernel"]["cmdline"] = {"raw": raw, "params": _params(raw)}
    return facts


def test_expected_command_line_is_the_one_the_role_writes():
    inputs = sample_inputs()
    report = gate.evaluate(inputs)
    want = _desired.derive("kernel_cmdline", inputs.profile)
    assert _check(report, "kernel.cmdline")["expected"]["params"] == want
    assert _check(report, "kernel.grub_sources")["expected"]["params"] == want
    # written by hand: the profile's required parameters, then the hugepage block from memory.hugepages
    assert want == ["intel_iommu=on", "iommu=pt", "transparent_hugepage=never", "numa_balancing=disable",
                    "hugepagesz=1G", "hugepages=128"]


def test_thp_and_numa_balancing_parameters_follow_memory_keys_even_when_not_listed():
    profile = copy.deepcopy(PROFILE)
    profile["kernel"]["cmdline"]["required"] = ["intel_iommu=on", "iommu=pt"]
    raw = "BOOT_IMAGE=/vmlinuz root=UUID=ab ro intel_iommu=on iommu=pt hugepagesz=1G hugepages=128"
    report = gate.evaluate(sample_inputs(_with_cmdline(raw), profile))
    chk = _check(report, "kernel.cmdline")
    assert chk["status"] == "fail"
    assert "transparent_hugepage=never missing" in chk["reason"]
    assert "numa_balancing=disable missing" in chk["reason"]


def test_hugepage_count_other_than_memory_hugepages_fails_once_per_cause():
    raw = ("BOOT_IMAGE=/vmlinuz root=UUID=ab ro intel_iommu=on iommu=pt hugepagesz=1G hugepages=64 "
           "transparent_hugepage=never numa_balancing=disable")
    chk = _check(gate.evaluate(sample_inputs(_with_cmdline(raw))), "kernel.cmdline")
    assert chk["status"] == "fail"
    assert "hugepages: hugepagesz=1G hugepages=128 expected, found hugepagesz=1G hugepages=64" in chk["reason"]


def test_a_duplicate_is_reported_once_with_its_origins():
    raw = ("BOOT_IMAGE=/vmlinuz root=UUID=ab ro intel_iommu=on iommu=pt iommu=pt hugepagesz=1G hugepages=128 "
           "transparent_hugepage=never numa_balancing=disable")
    chk = _check(gate.evaluate(sample_inputs(_with_cmdline(raw))), "kernel.cmdline")
    assert chk["status"] == "fail"
    assert chk["reason"].count("given 2 times") == 1


def test_acs_kernel_parameter_joins_the_command_line_the_role_writes():
    from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
    profile = copy.deepcopy(PROFILE)
    profile["kernel"]["release"] = "6.11.0-9-generic"
    profile["pcie"] = {"acs_kernel_param": True}
    normal = _profile.validate(profile, gate.CHECK_IDS)
    params = _desired.derive("kernel_cmdline", normal)
    # written by hand (docs/roles.md section 9): bare metal = every ACS bit off, all ACS-capable devices
    assert "pci=config_acs=0000000@pci:0:0" in params
    profile["pcie"] = {"acs_kernel_param": False}
    assert not [p for p in _desired.derive("kernel_cmdline", _profile.validate(profile, gate.CHECK_IDS)) if p.startswith("pci=")]
