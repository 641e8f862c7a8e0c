"""Desired state of the driver/FM/OFED area, on the shipped profiles (expectations written by hand)."""
import copy
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import drivers as D
from ansible_collections.gpufleet.provision.plugins.module_utils._os.packages import matches

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def load(name="hgx-h100", **changes):
    with open(os.path.join(REPO, "inventories", "profiles", name + ".yml")) as handle:
        raw = yaml.safe_load(handle)
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        raw.setdefault(section, {})[key] = value
    return _profile.validate(raw)


def test_h100_driver_packages_ubuntu():
    got = _desired.derive("nvidia_driver", load())
    assert got["version"] == "550.90.07" and got["branch"] == "550" and got["flavor"] == "server"
    assert got["driver"] == {"name": "nvidia-driver-550-server", "version": "550.90.07", "replaces": ["nvidia-driver-[0-9]*"]}
    assert got["fabricmanager"]["name"] == "nvidia-fabricmanager-550"
    assert got["fabricmanager"]["replaces"] == ["nvidia-fabricmanager", "nvidia-fabricmanager-[0-9]*"]
    assert got["precompiled"]["name"] == "linux-modules-nvidia-550-server-6.8.0-45-generic"
    assert got["precompiled"]["version"] is None
    assert got["dkms"]["name"] == "nvidia-dkms-550-server"
    assert got["fabricmanager_required"] is None                       # unset: where NVSwitches are
    assert got["nvlsm_required"] is False and got["imex_required"] is False
    assert got["peermem"] is True and got["persistenced"] is True


def test_flavors_and_the_kernel_that_will_boot():
    got = _desired.derive("nvidia_driver", load(nvidia__flavor="server-open"), kernel_release="6.8.0-50-generic")
    assert got["driver"]["name"] == "nvidia-driver-550-server-open"
    assert got["precompiled"]["name"] == "linux-modules-nvidia-550-server-open-6.8.0-50-generic"
    assert _desired.derive("nvidia_driver", load(nvidia__flavor="open"))["dkms"]["name"] == "nvidia-dkms-550-open"


def test_rhel_names():
    got = _desired.derive("nvidia_driver", load(), os_family="RedHat")
    assert got["driver"]["name"] == "nvidia-driver" and got["fabricmanager"]["name"] == "nvidia-fabric-manager"
    assert got["dkms"]["name"] == "kmod-nvidia-latest-dkms" and got["precompiled"] is None


def test_fabricmanager_required_by_profile_or_nvswitches():
    assert D.fabricmanager_expected(load(), nvswitch_present=True) == {"required": True, "version": "550.90.07"}
    assert D.fabricmanager_expected(load(), nvswitch_present=False)["required"] is False
    assert D.fabricmanager_expected(load(), None)["required"] is None
    assert D.fabricmanager_expected(load(nvidia__fabricmanager=False), nvswitch_present=True)["required"] is False


def test_nvlsm_by_generation_unless_profile_says():
    b200 = load(gpu__model="B200")
    assert D.nvlsm_expected(b200, nvswitch_present=True) is True
    assert D.nvlsm_expected(b200, nvswitch_present=False) is False
    assert D.nvlsm_expected(load(), True) is False
    assert D.nvlsm_expected(load(nvidia__nvlsm=True), False) is True


def test_bad_driver_version_names_the_key():
    profile = load()
    profile["nvidia"]["driver_version"] = "550"
    with pytest.raises(_desired.DesiredError, match="nvidia.driver_version: '550'"):
        _desired.derive("nvidia_driver", profile)


def test_no_driver_no_ofed_gives_none():
    profile = load()
    profile["nvidia"]["driver_version"] = None
    profile["ofed"]["version"] = None
    assert _desired.derive("nvidia_driver", profile) is None and _desired.derive("ofed", profile) is None


def test_ofed_packages_match_the_archive_versions():
    got = _desired.derive("ofed", load())
    assert got["release"] == "23.10-1.1.9.0" and got["distribution"] == "mlnx_ofed"
    assert [p["name"] for p in got["packages"]] == ["mlnx-ofed-kernel-utils", "mlnx-ofed-kernel-dkms"]
    pattern = got["packages"][1]["version"]
    assert matches(pattern, "23.10.OFED.23.10.1.1.9.1-1")               # as MLNX_OFED 23.10-1.1.9.0 names it
    assert not matches(pattern, "24.04.OFED.24.04.0.7.0.1-1")
    assert not matches(pattern, "23.10.OFED.23.10.1.1.90.1-1")
    doca = _desired.derive("ofed", load(ofed__distribution="doca_ofed"))
    assert doca["packages"][-1] == {"name": "doca-ofed", "version": None, "replaces": []}
    with pytest.raises(_desired.DesiredError, match="ofed.version: '23.10'"):
        D.ofed_package_version("23.10")


def test_ofed_kernel_is_the_kernel_that_will_boot():
    assert D.ofed_kernel_expected(load(), running_release="6.8.0-40-generic") == "6.8.0-45-generic"
    assert D.ofed_kernel_expected(load(ofed__kernel_match=False), "6.8.0-40-generic") is None
    profile = load()
    profile["kernel"]["release"] = None
    assert D.ofed_kernel_expected(profile, "6.8.0-40-generic") == "6.8.0-40-generic"


def test_held_packages_profile_plus_pins():
    held = D.held_expected(load(), nvswitch_present=True)
    assert held[:3] == ["nvidia-driver-550-server", "nvidia-fabricmanager-550", "linux-image-6.8.0-45-generic"]
    assert "mlnx-ofed-kernel-dkms" in held and "mlnx-ofed-kernel-utils" in held
    assert "nvidia-fabricmanager-550" in D.held_expected(load(), nvswitch_present=True)
    # no NVSwitch: no FM pinned by the role (the profile's own list still counts)
    profile = load()
    profile["packages"]["held"] = []
    assert not any("fabricmanager" in n for n in D.held_expected(profile, nvswitch_present=False))


def test_held_packages_r580_pattern_covers_the_unversioned_fm():
    profile = load(nvidia__driver_version="580.65.06", nvidia__imex=True)
    profile["packages"]["held"] = []
    held = D.held_expected(profile, nvswitch_present=True)
    assert "nvidia-fabricmanager*" in held and "nvidia-imex*" in held and "nvidia-driver-580-server" in held


def test_derive_does_not_mutate_profile():
    profile = load()
    before = copy.deepcopy(profile)
    _desired.derive("nvidia_driver", profile)
    _desired.derive("held_packages", profile)
    assert profile == before
