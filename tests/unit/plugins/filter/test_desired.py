"""The contract filters: desired() dispatches to _desired's registry, reboot_requests() makes records."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import desired as flt


def test_reboot_requests_records():
    assert flt.reboot_requests(["GRUB will boot hugepages=128", "BIOS pending"], "kernel_cmdline") == [
        {"role": "kernel_cmdline", "reason": "GRUB will boot hugepages=128"},
        {"role": "kernel_cmdline", "reason": "BIOS pending"},
    ]
    assert flt.reboot_requests([], "kernel") == []
    with pytest.raises(AnsibleFilterError, match="expected a list of reasons"):
        flt.reboot_requests("one string", "kernel")


def test_desired_unknown_area_and_not_a_profile():
    with pytest.raises(AnsibleFilterError, match=r"desired\(no_such_area\): unknown desired-state area"):
        flt.desired({"name": "x"}, "no_such_area")
    with pytest.raises(AnsibleFilterError, match="expected the profile mapping"):
        flt.desired("hgx-h100", "kernel_cmdline")
