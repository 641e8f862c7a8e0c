"""The renderer derives boot-time state the way the kernel does; the committed archives match it."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._node import pcie as _pcie
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from lab.hw import fixtures, render

REF_CMDLINE = "BOOT_IMAGE=/vmlinuz ro hugepagesz=1G hugepages=64 intel_iommu=on"


@pytest.fixture(scope="module")
def model():
    return fixtures.load_model("hgx-h100")


def read(root, rel):
    with open(os.path.join(root, rel)) as handle:
        return handle.read().strip()


@pytest.mark.parametrize("name", fixtures.names())
def test_committed_archive_matches_a_fresh_render(name):
    with open(os.path.join(fixtures.TREES, name + ".ttar")) as handle:
        assert handle.read() == fixtures.build(name), "stale: run python -m lab.hw.fixtures"


def test_second_hugepages_without_hugepagesz_is_ignored(model, tmp_path):
    # "HugeTLB: hugepages= specified twice without interleaving hugepagesz=, ignoring"
    state = {"kernel": {"cmdline": "ro hugepagesz=1G hugepages=64 hugepages=128 hugepagesz=2M hugepages=512"}}
    render.render(model, state, str(tmp_path))
    assert read(tmp_path, "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages") == "64"
    assert read(tmp_path, "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") == "512"
    assert read(tmp_path, "sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages") == "8"


def test_bios_settings_change_the_topology(model, tmp_path):
    render.render(model, {"bios": {"snc": "snc2", "hyperthreading": False, "vtx": False, "vtd": True},
                          "kernel": {"cmdline": "ro"}}, str(tmp_path))
    assert read(tmp_path, "sys/devices/system/node/online") == "0-3"
    assert read(tmp_path, "sys/devices/system/node/node1/cpulist") == "26-51"
    assert read(tmp_path, "sys/devices/system/cpu/online") == "0-103"
    assert read(tmp_path, "sys/devices/system/cpu/smt/active") == "0"
    assert " vmx " not in read(tmp_path, "proc/cpuinfo")
    assert not os.path.exists(os.path.join(str(tmp_path), "dev/kvm"))
    # VT-d on but intel_iommu=on missing: no IOMMU groups
    assert os.listdir(os.path.join(str(tmp_path), "sys/kernel/iommu_groups")) == []


def test_cmdline_decides_thp_balancing_governor(model, tmp_path):
    cmd = "ro transparent_hugepage=never numa_balancing=disable cpufreq.default_governor=performance"
    render.render(model, {"kernel": {"cmdline": cmd}, "thp": {"enabled": "always"}, "numa_balancing": 1,
                          "governor": {"default": "powersave", "cpus": {"7": "schedutil"}}}, str(tmp_path))
    assert read(tmp_path, "sys/kernel/mm/transparent_hugepage/enabled") == "always madvise [never]"
    assert read(tmp_path, "proc/sys/kernel/numa_balancing") == "0"
    assert read(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") == "performance"
    assert read(tmp_path, "sys/devices/system/cpu/cpu7/cpufreq/scaling_governor") == "schedutil"


def test_acs_state_is_written_into_config_space(model, tmp_path):
    render.render(model, {"acs": {"0000:17:00.0": ["ReqRedir", "CmpltRedir"]}}, str(tmp_path))
    with open(os.path.join(str(tmp_path), "sys/bus/pci/devices/0000:17:00.0/config"), "rb") as handle:
        config = handle.read()
    # hand check of the bytes: ACS header (id 0x000D, version 1) at 0x100, control 0x000c at 0x106
    assert config[0x100:0x104] == b"\x0d\x00\x01\x00"
    assert config[0x106:0x108] == b"\x0c\x00"
    assert [k for k, v in _pcie.parse_acs(config)["ctl"].items() if v] == ["ReqRedir", "CmpltRedir"]


def test_bios_acs_enables_switch_ports_only(model, tmp_path):
    render.render(model, {"bios": {"acs": True}}, str(tmp_path))
    facts = collect(str(tmp_path))[0]
    bridges = facts["pcie"]["bridges"]
    assert bridges["0000:17:00.0"]["acs"]["ctl"]["ReqRedir"] is True       # switch port
    assert bridges["0000:15:01.0"]["acs"]["ctl"]["ReqRedir"] is False      # root port


def test_port_down_and_cabling_override(model, tmp_path):
    devices = render.render(model, {"ib_ports": {"mlx5_3": {"1": {"state": "DOWN"}}},
                                    "cabling": {"mlx5_3": {"leaf": "su1-leaf-r5"}}}, str(tmp_path))
    assert read(tmp_path, "sys/class/infiniband/mlx5_3/ports/1/state") == "1: DOWN"
    assert read(tmp_path, "sys/class/infiniband/mlx5_3/ports/1/phys_state") == "3: Disabled"
    nic = [d for d in devices if d.get("name") == "mlx5_3"][0]
    assert nic["cable"] == {"leaf": "su1-leaf-r5", "port": 1}


def test_unknown_mode_is_a_clear_error(model, tmp_path):
    with pytest.raises(render.ModelError, match="NUMA mode 'nps4' not offered by model hgx-h100"):
        render.render(model, {"bios": {"snc": "nps4"}}, str(tmp_path))
