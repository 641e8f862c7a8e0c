"""The washing machine's lab tests (issue 9) run on the lab tests' private lab
(tests/integration/lab/conftest.py: ports shifted by GPUFLEET_LABTEST_SHIFT, containers prefixed
GPUFLEET_LABTEST_PREFIX), with one change to the default inventory: twin1's only kernel is the older
6.8.0-40 (with its headers), so the kernel role has a fault to fix in the same reboot as twin1's BIOS,
GRUB, hugepage, THP and NUMA balancing faults. Run this folder alone to get one lab for all of it."""
import glob
import importlib.util
import os

import pytest
import yaml

_SPEC = importlib.util.spec_from_file_location(
    "gpufleet_lab_conftest_provision", os.path.join(os.path.dirname(__file__), "..", "lab", "conftest.py"))
_LAB = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_LAB)
# Its own lab beside the other folders' (one pytest run brings several up): own ports and names.
_LAB.PORT_SHIFT += 40
_LAB.PREFIX += "prov-"
REPO = _LAB.REPO
OLD_KERNEL = ["linux-image-6.8.0-40-generic=6.8.0-40.40~22.04.3", "linux-headers-6.8.0-40-generic=6.8.0-40.40~22.04.3"]


class ProvisionLab(_LAB.Lab):
    def write_inventory(self):
        super().write_inventory()
        path = os.path.join(self.inventory_dir, "hosts.yml")
        with open(path) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]
        baseline = group["vars"]["gpufleet_lab_baseline"]["packages"]
        twin1 = group["hosts"]["twin1"]["gpufleet_lab_twin"]
        twin1["packages"] = OLD_KERNEL + [p for p in baseline if not p.startswith("linux-")]
        twin1["faults"] = list(twin1.get("faults") or []) + ["only the older kernel 6.8.0-40 installed"]
        self.hosts["twin1"]["gpufleet_lab_twin"] = twin1
        with open(path, "w") as handle:
            yaml.safe_dump(inv, handle, sort_keys=False)

    def snapshot(self, host):
        """Everything check mode must leave alone on a twin and at its BMC."""
        state = {
            "dpkg": self.ssh(host, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort").stdout,
            "holds": self.ssh(host, "apt-mark showhold | sort").stdout,
            "files": self.ssh(host, "cd / && md5sum etc/default/grub etc/default/grub.d/* boot/grub/grub.cfg "
                                    "etc/sysctl.d/* etc/apt/preferences.d/* 2>/dev/null; "
                                    "ls -la etc/systemd/system etc/systemd/system/*.wants usr/local/sbin; true").stdout,
            "runtime": self.ssh(host, "cd /run/twin && cat sys/kernel/mm/transparent_hugepage/enabled proc/sys/kernel/numa_balancing "
                                      "sys/kernel/mm/hugepages/*/nr_hugepages sys/devices/system/cpu/cpu*/cpufreq/scaling_governor "
                                      "| md5sum").stdout,
            "boot_id": self.boot_id(host),
        }
        for path in sorted(glob.glob(os.path.join(self.state, "bmc", host, "*.json"))):
            with open(path) as handle:
                state["bmc:" + os.path.basename(path)] = handle.read()
        return state


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The private test lab with twin1 on the older kernel (see the module docstring)."""
    yield from _LAB.lab_of(ProvisionLab, tmp_path_factory)
