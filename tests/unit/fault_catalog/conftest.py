"""Known-good inputs for the reference tree hgx-h100-ref, and helpers that break one thing in it.

The tree is the node's hardware/kernel state; the inputs are what the validate role collects with
standard modules on that node (package_facts, service_facts, command outputs), as dicts.
"""
import copy
import os
import struct

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils import _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._fs import Root

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TREES = os.path.join(REPO, "tests", "fixtures", "trees")

GRUB = """# If you change this file, run 'update-grub' afterwards to update /boot/grub/grub.cfg.
GRUB_DEFAULT=0
GRUB_TIMEOUT_STYLE=hidden
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G hugepages=128 intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable pci=realloc=off"
"""


def reference_profile():
    """The shipped hgx-h100 profile, with what a captured tree can prove: probes on (their outputs
    are captured), ATS asked for, mount sizes left out (statvfs only means something on a live root)."""
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        profile = yaml.safe_load(handle)
    profile["probes"]["nccl"]["enabled"] = True
    profile["probes"]["h2d"]["enabled"] = True
    profile["nic"]["ats"] = True
    for mount in profile["storage"]["mounts"]:
        mount.pop("min_size_gb", None)
        mount.pop("min_free_gb", None)
    return profile


def nvidia_smi_q(gpus, state="Completed", host_max=None):
    """``nvidia-smi -q`` as driver 550 prints it (trimmed to the blocks the checks read)."""
    host_max = host_max or {}
    out = ["", "==============NVSMI LOG==============", "", "Driver Version                            : 550.90.07",
           "CUDA Version                              : 12.4", "", "Attached GPUs                             : %d" % len(gpus)]
    for pci in gpus:
        gen = host_max.get(pci, 5)
        out += ["GPU 0000%s" % pci, "    Product Name                          : NVIDIA H100 80GB HBM3",
                "    PCI", "        Bus Id                            : 0000%s" % pci, "        GPU Link Info",
                "            PCIe Generation", "                Max                       : %d" % min(5, gen),
                "                Current                   : 1", "                Device Current            : 1",
                "                Device Max                : 5", "                Host Max                  : %d" % gen,
                "            Link Width", "                Max                       : 16x",
                "                Current                   : 16x",
                "    Fabric", "        State                             : %s" % state,
                "        Status                            : Success",
                "        CliqueId                          : 32766", ""]
    return "\n".join(out) + "\n"


def mlxconfig(pci, value="True(1)"):
    return ("\nDevice #1:\n----------\n\nDevice type:        ConnectX7\nName:               MCX75310AAS-NEA_Ax\n"
            "PCI device:         %s\n\nConfigurations:                              Next Boot\n"
            "        ATS_ENABLED                         %s\n" % (pci, value))


def nccl(hcas):
    return ("gpu001:4242:4242 [0] NCCL INFO Bootstrap : Using ibp25s0:10.0.0.1<0>\n"
            "gpu001:4242:4242 [0] NCCL INFO NET/IB : Using %s ; OOB ibp25s0:10.0.0.1<0>\n"
            "gpu001:4242:4242 [0] NCCL INFO Using network IB\n" % " ".join("[%d]%s:1/IB" % (i, h) for i, h in enumerate(hcas)))


def h2d(values):
    return ("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           " + "".join("%10d" % i for i in range(len(values))) + "\n"
            " 0 " + "".join("%10.2f" % v for v in values) + "\n\nSUM host_to_device_memcpy_ce %.2f\n" % sum(values))


class Node:
    """One node: a writable copy of a tree plus its collected inputs (dicts to break)."""

    def __init__(self, root, profile=None):
        self.root = root
        self.profile = profile or reference_profile()
        facts = collect(root)[0]
        gpus = self.gpus = [g["pci"] for g in facts["gpus"]]
        rails = [n for n in facts["nics"] if n.get("role") == "rail"]
        self.packages = {
            "nvidia-driver-550-server": [{"name": "nvidia-driver-550-server", "version": "550.90.07-0ubuntu1", "arch": "amd64", "source": "apt"}],
            "nvidia-fabricmanager-550": [{"name": "nvidia-fabricmanager-550", "version": "550.90.07-1", "arch": "amd64", "source": "apt"}],
            "linux-image-6.8.0-45-generic": [{"name": "linux-image-6.8.0-45-generic", "version": "6.8.0-45.45", "arch": "amd64", "source": "apt"}],
        }
        self.services = {
            "nvidia-fabricmanager.service": {"name": "nvidia-fabricmanager.service", "state": "running", "status": "enabled", "source": "systemd"},
        }
        self.outputs = {
            "nvidia_smi_q": nvidia_smi_q(gpus),
            "ofed_info": "MLNX_OFED_LINUX-23.10-1.1.9.0:\n",
            "modinfo_mlx5_core": "6.8.0-45-generic SMP preempt mod_unload modversions \n",
            "apt_mark_showhold": "linux-image-6.8.0-45-generic\nnvidia-driver-550-server\nnvidia-fabricmanager-550\n",
            "nccl_debug": nccl([n["name"] for n in rails]),
            "h2d_bandwidth": h2d([48.9, 48.87, 48.95, 48.9, 48.88, 48.93, 48.86, 48.92][:len(gpus)]),
        }
        for nic in rails:
            self.outputs["mlxconfig_%s" % nic["pci"]] = mlxconfig(nic["pci"])
        self.write("etc/default/grub", GRUB)

    def host_slot_generation(self, per_gpu):
        """nvidia-smi -q as it reads when GPUs sit behind host ports of another PCIe generation."""
        self.outputs["nvidia_smi_q"] = nvidia_smi_q(self.gpus, host_max=per_gpu)

    # -- file faults
    def path(self, rel):
        return os.path.join(self.root, rel)

    def write(self, rel, text, mode="w"):
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full) and not os.path.isdir(full):
            os.chmod(full, 0o644)
        with open(full, mode) as handle:
            handle.write(text)

    def read(self, rel):
        with open(self.path(rel)) as handle:
            return handle.read()

    def set_acs(self, bdf, **bits):
        """Set ACS control bits in a bridge's config space (the capability found as lspci finds it)."""
        rel = "sys/bus/pci/devices/%s/config" % bdf
        with open(self.path(rel), "rb") as handle:
            data = bytearray(handle.read())
        offset = 0x100
        while offset:
            header = struct.unpack_from("<I", data, offset)[0]
            if header & 0xFFFF == 0x000D:
                break
            offset = (header >> 20) & 0xFFC
        assert offset, "no ACS capability in %s" % rel
        ctl = struct.unpack_from("<H", data, offset + 6)[0]
        for name, on in bits.items():
            bit = 1 << _ACS_BITS.index(name)
            ctl = (ctl | bit) if on else (ctl & ~bit)
        struct.pack_into("<H", data, offset + 6, ctl)
        os.chmod(self.path(rel), 0o644)
        with open(self.path(rel), "wb") as handle:
            handle.write(bytes(data))

    def move_device(self, bdf, new_parent):
        """Re-plug a PCI device (a NIC in another slot): move its sysfs folder under ``new_parent``
        (a folder relative to the root) and repoint the symlinks that lead to it."""
        link = "sys/bus/pci/devices/" + bdf
        old = os.path.normpath(os.path.join(os.path.dirname(self.path(link)), os.readlink(self.path(link))))
        new = os.path.join(self.path(new_parent), bdf)
        os.rename(old, new)
        os.remove(self.path(link))
        os.symlink(os.path.relpath(new, os.path.dirname(self.path(link))), self.path(link))
        ib = self.path("sys/class/infiniband")
        for name in os.listdir(ib):
            target = os.path.normpath(os.path.join(ib, os.readlink(os.path.join(ib, name))))
            if target.startswith(old + os.sep):
                os.remove(os.path.join(ib, name))
                os.symlink(os.path.relpath(new + target[len(old):], ib), os.path.join(ib, name))

    # -- evaluation
    def inputs(self):
        prof = _profile.validate(copy.deepcopy(self.profile), gate.CHECK_IDS)
        facts = collect(self.root)[0]
        return gate.Inputs(facts, prof, packages=self.packages, services=self.services, outputs=self.outputs,
                           grub=gate.read_grub_sources(Root(self.root)))

    def report(self):
        return gate.evaluate(self.inputs(), node="gpu001")

    def statuses(self):
        return dict((c["id"], c["status"]) for c in self.report()["checks"])


_ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


@pytest.fixture
def tree(unpacked_tree):
    """tree(name) -> a Node over a fresh copy of tests/fixtures/trees/<name>.ttar."""
    def _make(name="hgx-h100-ref"):
        if not os.path.exists(os.path.join(TREES, name + ".ttar")):
            pytest.skip("fixture tree %s.ttar is absent (tests/fixtures/trees, made by lab/hw/render.py)" % name)
        return Node(unpacked_tree(name))
    return _make
