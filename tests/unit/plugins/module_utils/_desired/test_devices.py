"""_desired.devices: what the pcie, storage and firmware roles make and the gate's checks must expect,
from shipped and hand-written profiles."""
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def shipped(name, **changes):
    with open(os.path.join(REPO, "inventories", "profiles", name + ".yml")) as handle:
        data = yaml.safe_load(handle)
    data.update(changes)
    return _profile.validate(data)


def test_acs_per_host_mode():
    assert _desired.derive("acs", shipped("hgx-h100")) == {"host_mode": "bare_metal", "ctl": {
        "SrcValid": False, "TransBlk": False, "ReqRedir": False, "CmpltRedir": False,
        "UpstreamFwd": False, "EgressCtrl": False, "DirectTrans": False}}
    assert _desired.derive("acs", shipped("hgx-h100-virt"))["ctl"] == {
        "SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
        "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": True}
    assert _desired.derive("acs", _profile.validate({"name": "x"})) is None


def test_acs_kernel_param():
    assert _desired.derive("acs_kernel_param", shipped("hgx-h100")) == []
    newer = {"release": "6.11.0-19-generic"}
    assert _desired.derive("acs_kernel_param", shipped("hgx-h100", pcie={"acs_kernel_param": True}, kernel=newer)) == [
        "pci=config_acs=0000000@pci:0:0"]
    assert _desired.derive("acs_kernel_param", shipped("hgx-h100-virt", pcie={"acs_kernel_param": True}, kernel=newer)) == [
        "pci=config_acs=1011101@pci:0:0"]   # bit 0 (SrcValid) last: DirectTrans, -, UpstreamFwd, CmpltRedir, ReqRedir, -, SrcValid
    with pytest.raises(_desired.DesiredError, match="needs Linux 6.11 or later, kernel.release is 6.8.0-45-generic"):
        _desired.derive("acs_kernel_param", shipped("hgx-h100", pcie={"acs_kernel_param": True}))
    with pytest.raises(_desired.DesiredError, match="needs host_mode"):
        _desired.derive("acs_kernel_param", _profile.validate({"pcie": {"acs_kernel_param": True}}))


def test_ats():
    assert _desired.derive("ats", shipped("hgx-h100")) is None
    assert _desired.derive("ats", shipped("hgx-h100-virt")) is True
    assert _desired.derive("ats", shipped("hgx-h100", nic={"ats": False})) is False
    assert _desired.derive("ats", _profile.validate({"host_mode": "virtualization"})) is True


def test_storage_mounts():
    mounts = _desired.derive("storage_mounts", shipped("hgx-h100", storage={"mounts": [
        {"path": "/raid", "fstype": "xfs", "device": "/dev/disk/by-id/nvme-X", "options": "noatime", "min_size_gb": 7000},
        {"path": "/scratch"}]}))
    assert mounts == [
        {"path": "/raid", "device": "/dev/disk/by-id/nvme-X", "fstype": "xfs", "options": "noatime", "min_size_gb": 7000.0, "min_free_gb": None},
        {"path": "/scratch", "device": None, "fstype": None, "options": "defaults", "min_size_gb": None, "min_free_gb": None}]
    for mounts_spec, message in (
            ([{"path": "/raid", "device": "/dev/sdb"}], r"storage.mounts\[0\].fstype: required with device"),
            ([{"path": "raid"}], r"storage.mounts\[0\].path: 'raid' is not an absolute path"),
            ([{"path": "/raid", "device": "sdb", "fstype": "ext4"}], r"storage.mounts\[0\].device: 'sdb' is not a /dev path"),
            ([{"path": "/raid"}, {"path": "/raid"}], "/raid listed twice")):
        with pytest.raises(_desired.DesiredError, match=message):
            _desired.derive("storage_mounts", shipped("hgx-h100", storage={"mounts": mounts_spec}))


def test_firmware_and_the_schema_keys():
    assert _desired.derive("firmware", shipped("hgx-h100")) == {
        "nic": {"MT4129": "28.39.1002"}, "nvme": {"SAMSUNG MZWLR3T8HBLS": "MPK7525Q"}, "allow_downgrade": False}
    got = _desired.derive("firmware", shipped("hgx-h100", firmware={"nic": {"MT4129": "28.40.1000"}, "allow_downgrade": True}))
    assert got == {"nic": {"MT4129": "28.40.1000"}, "nvme": {}, "allow_downgrade": True}
    with pytest.raises(_profile.ProfileError, match="profile key pcie.acs_kernel_parm: unknown"):
        shipped("hgx-h100", pcie={"acs_kernel_parm": True})
    with pytest.raises(_profile.ProfileError, match="profile key firmware.allow_downgrade: must be true or false"):
        shipped("hgx-h100", firmware={"allow_downgrade": "yes"})
