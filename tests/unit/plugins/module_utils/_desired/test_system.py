"""Desired state of the OS layer derived from the profile (_desired.system): what the roles write
and the gate's checks expect. Expectations written by hand from the shipped hgx-h100 profile."""
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))


def _load(name="hgx-h100", **override):
    with open(os.path.join(REPO, "inventories", "profiles", name + ".yml")) as handle:
        data = yaml.safe_load(handle)
    data.update(override)
    return _profile.validate(data)


def test_h100_command_line_and_tuning():
    profile = _load()
    assert _desired.derive("kernel_cmdline", profile) == [
        "intel_iommu=on", "iommu=pt", "transparent_hugepage=never", "numa_balancing=disable",
        "default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128"]
    rules = _desired.derive("kernel_cmdline_rules", profile)
    assert rules["hugepages"] == {"1048576": 128}
    assert rules["hugepage_block"] == ["default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128"]
    assert "console" not in rules["owned_keys"] and "pci" not in rules["owned_keys"]
    assert _desired.derive("hugepages", profile) == {"1048576": 128}
    assert _desired.derive("thp", profile) == "never"
    assert _desired.derive("numa_balancing", profile) == 0
    assert _desired.derive("governor", profile) == "performance"
    assert _desired.derive("kernel_release", profile) == "6.8.0-45-generic"


def test_derived_parameters_without_listing_them():
    profile = _profile.validate({"memory": {"hugepages": {"2M": 1024, "1G": 16}, "thp": "madvise", "numa_balancing": True}})
    assert _desired.derive("kernel_cmdline", profile) == [
        "transparent_hugepage=madvise", "numa_balancing=enable", "hugepagesz=2M", "hugepages=1024", "hugepagesz=1G", "hugepages=16"]
    assert _desired.derive("kernel_cmdline", _profile.validate({})) == []


@pytest.mark.parametrize("data, message", [
    ({"kernel": {"cmdline": {"required": ["transparent_hugepage=always"]}}, "memory": {"thp": "never"}},
     "has transparent_hugepage=always but the profile also asks for transparent_hugepage=never"),
    ({"kernel": {"cmdline": {"required": ["hugepages=4"]}}, "memory": {"hugepages": {"1G": 4}}}, "set hugepage counts in memory.hugepages"),
    ({"kernel": {"cmdline": {"required": ["hugepagesz=2M"]}}, "memory": {"hugepages": {"1G": 4}}}, "no 2M pool"),
    ({"kernel": {"cmdline": {"required": ["iommu=pt"], "forbidden": ["iommu"]}}}, "both required and forbidden"),
])
def test_contradictions_name_the_parameters(data, message):
    with pytest.raises(_desired.DesiredError, match=message):
        _desired.derive("kernel_cmdline", _profile.validate(data))


def test_kernel_packages_per_os_family_and_explicit():
    profile = _load()
    assert _desired.derive("kernel_packages", profile) == [
        {"name": "linux-image-6.8.0-45-generic", "version": None}, {"name": "linux-headers-6.8.0-45-generic", "version": None}]
    assert [p["name"] for p in _desired.derive("kernel_packages", profile, os_family="RedHat")] == [
        "kernel-6.8.0-45-generic", "kernel-devel-6.8.0-45-generic"]
    pinned = _profile.validate({"kernel": {"packages": ["linux-image-x"], "version": "6.8.0-45.45~22.04.1"}})
    assert _desired.derive("kernel_packages", pinned) == [{"name": "linux-image-x", "version": "6.8.0-45.45~22.04.1"}]
    with pytest.raises(_desired.DesiredError, match="no naming rule for OS family 'Suse'"):
        _desired.derive("kernel_packages", profile, os_family="Suse")
    assert _desired.derive("kernel_packages", _profile.validate({})) == []


def test_bios_from_the_profile():
    profile = _profile.validate({"bios": {"settings": {"snc": "snc4", "hyperthreading": True}, "attributes": {"ProcTurboMode": "Enabled"}}})
    assert _desired.derive("bios_settings", profile) == {"snc": "snc4", "hyperthreading": True}
    assert _desired.derive("bios_attributes", profile) == {"ProcTurboMode": "Enabled"}
    assert _desired.derive("bios_settings", _profile.validate({})) == {}
    with pytest.raises(_profile.ProfileError, match=r"bios.settings.snc: 'snc8' is not one of"):
        _profile.validate({"bios": {"settings": {"snc": "snc8"}}})
    with pytest.raises(_profile.ProfileError, match=r"bios.settings.hyperthread: unknown"):
        _profile.validate({"bios": {"settings": {"hyperthread": True}}})
    with pytest.raises(_profile.ProfileError, match=r"bios.attributes.X: must be a string, number or boolean"):
        _profile.validate({"bios": {"attributes": {"X": [1]}}})
