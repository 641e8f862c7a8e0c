"""Known-good inputs for the reference tree hgx-h100-ref, and helpers that break one thing in it.

The tree is the node's hardware/kernel state; the inputs are what the validate role collects with
standard modules on that node (package_facts, service_facts, command outputs), as dicts.
"""
import copy
import json
import os
import struct
import types

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.collect import PciDevices
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired
from ansible_collections.gpufleet.provision.plugins.module_utils._os import image as _image
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root

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


# The reference node's GPUs and their PIX rail NICs in PCI order (tests/fixtures/trees/hgx-h100-ref.yml).
REF_GPUS = ("0000:18:00.0", "0000:29:00.0", "0000:3a:00.0", "0000:4b:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:bc:00.0", "0000:cd:00.0")
REF_NICS = ("0000:19:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:9b:00.0", "0000:ac:00.0", "0000:bd:00.0", "0000:ce:00.0")


def reference_guest():
    """The reference node's own layout, stated as a guest plan's ``guest`` section states a guest's
    (the guest checks judge whatever machine they run on against it), by hand from DOMAIN.md section
    2: SNC4, node n holds cores 13n..13n+12 and their second threads (+104), 116 GiB; CPU c and c+104
    are one core; GPU n and its rail NIC on node n under one switch."""
    return {
        "numa": [{"id": n, "cpus": list(range(13 * n, 13 * n + 13)) + list(range(104 + 13 * n, 117 + 13 * n)),
                  "memory_mib": 116 * 1024, "host_node": n} for n in range(8)],
        "siblings": [[c, c + 104] for c in range(104)],
        "devices": [d for n in range(8) for d in (
            {"kind": "gpu", "guest_pci": REF_GPUS[n], "numa_node": n, "pair": n, "partner": REF_NICS[n]},
            {"kind": "nic", "guest_pci": REF_NICS[n], "numa_node": n, "pair": n, "partner": REF_GPUS[n]})],
    }


def reference_profile():
    """The shipped hgx-h100 profile, with what a captured tree can prove: probes on (their outputs
    are captured), ATS asked for, mount sizes left out (statvfs only means something on a live root),
    the node's own layout as the guest checks' plan."""
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        profile = yaml.safe_load(handle)
    for probe in ("nccl", "h2d", "p2p", "gdr", "dcgm"):
        profile["probes"][probe]["enabled"] = True
    profile["nic"]["ats"] = True
    profile["health"]["nvme"]["count"] = 2      # the reference tree's drives (a site value: unset in the shipped profile)
    for mount in profile["storage"]["mounts"]:
        mount.pop("min_size_gb", None)
        mount.pop("min_free_gb", None)
    profile["guest"] = reference_guest()
    return profile


def nvidia_smi_q(gpus, state="Completed", host_max=None, persistence=None, reasons=None, ecc=None, remap=None):
    """``nvidia-smi -q`` as driver 550 prints it (trimmed to the blocks the checks read; the layout
    of tests/fixtures/realdata/gpu-node/hgx-h100/nvidia-smi-q.535.183.01.txt). Per-GPU overrides:
    persistence {pci: "Disabled"}, reasons {pci: [reason, ...] Active}, ecc {pci: DRAM Uncorrectable
    count}, remap {pci: (pending, failure)}."""
    host_max = host_max or {}
    persistence, reasons, ecc, remap = persistence or {}, reasons or {}, ecc or {}, remap or {}
    out = ["", "==============NVSMI LOG==============", "", "Driver Version                            : 550.90.07",
           "CUDA Version                              : 12.4", "", "Attached GPUs                             : %d" % len(gpus)]
    for pci in gpus:
        gen = host_max.get(pci, 5)
        active = reasons.get(pci, [])
        pending, failure = remap.get(pci, ("No", "No"))

        def reason(name, indent=8):
            return " " * indent + "%-*s: %s" % (38 - indent, name, "Active" if name in active else "Not Active")
        out += ["GPU 0000%s" % pci, "    Product Name                          : NVIDIA H100 80GB HBM3",
                "    Persistence Mode                      : %s" % persistence.get(pci, "Enabled"),
                "    PCI", "        Bus Id                            : 0000%s" % pci, "        GPU Link Info",
                "            PCIe Generation", "                Max                       : %d" % min(5, gen),
                "                Current                   : 1", "                Device Current            : 1",
                "                Device Max                : 5", "                Host Max                  : %d" % gen,
                "            Link Width", "                Max                       : 16x",
                "                Current                   : 16x",
                "    Performance State                     : P0",
                "    Clocks Event Reasons", reason("Idle"), reason("Applications Clocks Setting"), reason("SW Power Cap"),
                reason("HW Slowdown"), reason("HW Thermal Slowdown", 12), reason("HW Power Brake Slowdown", 12),
                reason("Sync Boost"), reason("SW Thermal Slowdown"), reason("Display Clock Setting"),
                "    ECC Mode", "        Current                           : Enabled",
                "        Pending                           : Enabled",
                "    ECC Errors", "        Volatile",
                "            SRAM Correctable              : 0", "            SRAM Uncorrectable Parity     : 0",
                "            SRAM Uncorrectable SEC-DED    : 0", "            DRAM Correctable              : 3",
                "            DRAM Uncorrectable            : %d" % ecc.get(pci, 0),
                "        Aggregate", "            DRAM Correctable              : 12",
                "            DRAM Uncorrectable            : 0",
                "    Remapped Rows", "        Correctable Error                 : 0",
                "        Uncorrectable Error               : 0",
                "        Pending                           : %s" % pending,
                "        Remapping Failure Occurred        : %s" % failure,
                "        Bank Remap Availability Histogram", "            Max                           : 2560 bank(s)",
                "    Fabric", "        State                             : %s" % state,
                "        Status                            : Success",
                "        CliqueId                          : 32766", ""]
    return "\n".join(out) + "\n"


def mlxconfig(pci, value="True(1)", next_boot=None):
    """``mlxconfig -e -d <pci> q ATS_ENABLED`` (Default, Current, Next Boot; ``*``: not the default)."""
    return ("\nDevice #1:\n----------\n\nDevice type:        ConnectX7\nName:               MCX75310AAS-NEA_Ax\n"
            "PCI device:         %s\n\nConfigurations:                              Default         Current         Next Boot\n"
            "*        ATS_ENABLED                         False(0)        %-15s %s\n" % (pci, value, next_boot or value))


def nccl(hcas, busbw=482.31, gdr="enabled", link="IB", env=None):
    """NCCL_DEBUG=INFO all_reduce_perf -b 16G -e 16G -g 8, as nccl-tests 2.13 and NCCL 2.21 print it.
    ``link="RoCE"``: the HCAs as NCCL lists Ethernet ports (``[0]mlx5_0:1/RoCE ... [RO]; OOB``), the
    ``NCCL version`` line and one ``<VAR> set by environment to <value>.`` line per ``env`` item (the
    lines of a public RoCE run: vllm-project/vllm#27521, and the NCCL 2.2x logs of NVIDIA/nccl#1131)."""
    oob = "ibp25s0" if link == "IB" else "ens21np0"
    head = ("# nThread 1 nGpus 8 minBytes 17179869184 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n"
            "gpu001:4242:4242 [0] NCCL INFO Bootstrap : Using %s:10.0.0.1<0>\n" % oob)
    if link == "RoCE":
        head += "NCCL version 2.21.5+cuda12.4\n"
    devices = " ".join("[%d]%s:1/%s" % (i, h, link) for i, h in enumerate(hcas))
    head += ("gpu001:4242:4242 [0] NCCL INFO NET/IB : Using %s%s OOB %s:10.0.0.1<0>\n"
             "gpu001:4242:4242 [0] NCCL INFO Using network IB\n" % (devices, " ;" if link == "IB" else " [RO];", oob))
    head += "".join("gpu001:4242:4250 [0] NCCL INFO %s set by environment to %s.\n" % kv for kv in sorted((env or {}).items()))
    head += "".join("gpu001:4242:4250 [0] NCCL INFO NET/IB : GPU Direct RDMA %s for HCA %d '%s'\n"
                    % ("(nvidia-peermem) enabled" if gdr == "enabled" else "Disabled", i, h) for i, h in enumerate(hcas))
    table = ("#\n#                                                              out-of-place                       in-place\n"
             "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
             " 17179869184    4294967296     float     sum      -1  %8.0f  %6.2f  %6.2f      0  %8.0f  %6.2f  %6.2f      0\n"
             "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %.3f\n#\n"
             % (17179869184 / (busbw * 1e3 / 1.75), busbw / 1.75, busbw, 17179869184 / (busbw * 1e3 / 1.75), busbw / 1.75, busbw, busbw))
    return head + table


def mlnx_qos(trust="dscp", pfc=(0, 0, 0, 1, 0, 0, 0, 0)):
    """``mlnx_qos -i <if>`` as MLNX_OFED 5.x prints it (the layout of a real run, att/netarbiter
    nvmf/OUTPUTSAMPLE.setup-nic-lossless-layer3.sh.md): trust state, DSCP to priority map, PFC table."""
    rows = ["DCBX mode: OS controlled", "Priority trust state: %s" % trust, "dscp2prio mapping:"]
    rows += ["        prio:%d dscp:%s," % (p, ",".join("%02d" % d for d in range(8 * p + 7, 8 * p - 1, -1))) for p in range(8)]
    rows += ["Cable len: 7", "PFC configuration:", "        priority    0   1   2   3   4   5   6   7",
             "        enabled     " + "   ".join(str(f) for f in pfc) + "   "]
    for tc in range(8):
        rows += ["tc: %d ratelimit: unlimited, tsa: vendor" % tc, "         priority:  %d" % (1 if tc == 0 else 0 if tc == 1 else tc)]
    return "\n".join(rows) + "\n"


ROCE_NCCL_ENV = {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}


def roce_profile():
    """The reference profile for the RoCE twin (hgx-h100-roce): Ethernet rails, the site's per-rail
    subnets (rail k: 10.64.<16k>.0/20), MTU 9000, lossless RDMA class on DSCP 26 / priority 3, RoCE v2
    IPv4 GIDs. The link state of an Ethernet rail is roce.link's (ib.ports keeps link layer and rate)."""
    profile = reference_profile()
    profile["ib"] = {"link_layer": "Ethernet", "min_rate_gbps": 400, "scope": "rail"}
    profile["roce"] = {"addressing": {"rails": [{"rail": k, "subnet": "10.64.%d.0/20" % (16 * k)} for k in range(8)]},
                       "mtu": 9000, "qos": {"trust": "dscp", "dscp": 26, "pfc_priority": 3, "ecn": True},
                       "gid": {"type": "RoCE v2", "family": "ipv4"}}
    return profile


def nvlink_status(gpus, inactive=None):
    """``nvidia-smi nvlink -s``: 18 NVLink4 links per H100 SXM5 at 26.562 GB/s; inactive {index: [links]}."""
    inactive = inactive or {}
    out = []
    for index, _pci in enumerate(gpus):
        out.append("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-%08x-0000-0000-0000-000000000000)" % (index, index))
        out += ["\t Link %d: %s" % (n, "<inactive>" if n in inactive.get(index, []) else "26.562 GB/s") for n in range(18)]
    return "\n".join(out) + "\n"


KERNEL_LOG = ("Dec 01 06:00:01 gpu001 kernel: Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) #45-Ubuntu SMP\n"
              "Dec 01 06:00:09 gpu001 kernel: nvidia-nvswitch: Probing device 0000:e4:00.0, Vendor Id = 0x10de, Device Id = 0x22a3\n"
              "Dec 01 06:00:12 gpu001 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024\n"
              # XID 31 (an application's MMU fault) is not in the critical set: it must not turn the GPU red.
              "Dec 01 07:13:44 gpu001 kernel: NVRM: Xid (PCI:0000:18:00): 31, pid=20411, name=python3, Ch 00000008, intr 00000000. "
              "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f1c_e0000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ\n")


def smart_log(critical_warning=0, avail_spare=100, media_errors=0):
    """``nvme smart-log -o json /dev/nvme0`` (nvme-cli 1.16)."""
    return ('{\n  "critical_warning" : %d,\n  "temperature" : 306,\n  "avail_spare" : %d,\n  "spare_thresh" : 10,\n'
            '  "percent_used" : 1,\n  "endurance_grp_critical_warning_summary" : 0,\n  "data_units_read" : 12345678,\n'
            '  "data_units_written" : 23456789,\n  "host_read_commands" : 345678901,\n  "host_write_commands" : 456789012,\n'
            '  "controller_busy_time" : 321,\n  "power_cycles" : 42,\n  "power_on_hours" : 8123,\n  "unsafe_shutdowns" : 7,\n'
            '  "media_errors" : %d,\n  "num_err_log_entries" : 0,\n  "warning_temp_time" : 0,\n  "critical_comp_time" : 0\n}\n'
            % (critical_warning, avail_spare, media_errors))


def p2p(count, slow=None, value=372.4):
    """nvbandwidth -t device_to_device_memcpy_read_ce (v0.7 layout): GPU(row) -> GPU(column), N/A on the diagonal."""
    slow = slow or {}
    rows = ["Running device_to_device_memcpy_read_ce.", "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
            "           " + "".join("%10d" % i for i in range(count))]
    for r in range(count):
        rows.append("%2d " % r + "".join("%10s" % ("N/A" if r == c else "%.2f" % slow.get((r, c), value)) for c in range(count)))
    return "\n".join(rows) + "\n\nSUM device_to_device_memcpy_read_ce %.2f\n" % (value * count * (count - 1))


def gdr(pairs, slow=None):
    """The probe's ib_write_bw --use_cuda loopback per rail: one '# gdr <nic> cuda <n> (<bdf>)' section each."""
    slow = slow or {}
    out = []
    for index, (nic, pci) in enumerate(pairs):
        bw = slow.get(nic, 392.44)
        out += ["# gdr %s cuda %d (%s)" % (nic, index, pci),
                "---------------------------------------------------------------------------------------",
                "                    RDMA_Write BW Test",
                " Dual-port       : OFF\t\tDevice         : %s" % nic,
                " Number of qps   : 1\t\tTransport type : IB",
                " Connection type : RC\t\tUsing SRQ      : OFF",
                "---------------------------------------------------------------------------------------",
                " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
                " 8388608    5000             %.2f             %.2f  \t\t   %.6f" % (bw + 0.05, bw, bw / 8 / 8388608 * 1e3),
                "---------------------------------------------------------------------------------------"]
    return "\n".join(out) + "\n"


def dcgm_diag(fail=None):
    """dcgmi diag -r 1 -j (DCGM 3.3): Deployment tests for all GPUs at once."""
    import json
    tests = []
    for name in ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
                 "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"):
        result = {"gpu_ids": "0,1,2,3,4,5,6,7", "status": "Pass"}
        if name == fail:
            warning = "GPU 3 had uncorrectable memory errors and row remapping failed. Run nvidia-smi -q."
            result = {"gpu_ids": "3", "status": "Fail", "warnings": [{"warning": warning, "error_id": 95}]}
        tests.append({"name": name, "results": [result]})
    return "Successfully ran diagnostic for group.\n" + json.dumps({"DCGM GPU Diagnostic": {
        "test_categories": [{"category": "Deployment", "tests": tests}], "version": "3.3.5"}}, indent=2) + "\n"


def h2d(values):
    return ("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "           " + "".join("%10d" % i for i in range(len(values))) + "\n"
            " 0 " + "".join("%10.2f" % v for v in values) + "\n\nSUM host_to_device_memcpy_ce %.2f\n" % sum(values))


class Node:
    """One node: a writable copy of a tree plus its collected inputs (dicts to break). ``build``
    holds the output builders above, for faults that rewrite an output."""

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
            "linux-headers-6.8.0-45-generic": [{"name": "linux-headers-6.8.0-45-generic", "version": "6.8.0-45.45", "arch": "amd64", "source": "apt"}],
            "mlnx-ofed-kernel-utils": [{"name": "mlnx-ofed-kernel-utils", "version": "23.10.OFED.23.10.1.1.9.1-1", "arch": "amd64", "source": "apt"}],
            "mlnx-ofed-kernel-dkms": [{"name": "mlnx-ofed-kernel-dkms", "version": "23.10.OFED.23.10.1.1.9.1-1", "arch": "all", "source": "apt"}],
        }
        self.services = {
            "nvidia-fabricmanager.service": {"name": "nvidia-fabricmanager.service", "state": "running", "status": "enabled", "source": "systemd"},
        }
        self.outputs = {
            "nvidia_smi_q": nvidia_smi_q(gpus),
            "ofed_info": "MLNX_OFED_LINUX-23.10-1.1.9.0:\n",
            "modinfo_mlx5_core": "6.8.0-45-generic SMP preempt mod_unload modversions \n",
            "apt_mark_showhold": ("linux-headers-6.8.0-45-generic\nlinux-image-6.8.0-45-generic\nmlnx-ofed-kernel-dkms\n"
                                  "mlnx-ofed-kernel-utils\nnvidia-driver-550-server\nnvidia-fabricmanager-550\n"),
            "nccl_debug": nccl([n["name"] for n in rails]),
            "h2d_bandwidth": h2d([48.9, 48.87, 48.95, 48.9, 48.88, 48.93, 48.86, 48.92][:len(gpus)]),
            "kernel_log": KERNEL_LOG,
            "nvidia_smi_nvlink": nvlink_status(gpus),
            "p2p_bandwidth": p2p(len(gpus)),
            "gdr_bandwidth": gdr([(n["name"], n["pci"]) for n in rails]),
            "dcgm_diag": dcgm_diag(),
        }
        for drive in facts["nvme"]:
            self.outputs["nvme_smart_%s" % drive["name"]] = smart_log()
        for nic in rails:
            self.outputs["mlxconfig_%s" % nic["pci"]] = mlxconfig(nic["pci"])
        self.write("etc/default/grub", GRUB)
        if self.profile.get("roce"):
            self.outputs["nccl_debug"] = nccl([n["name"] for n in rails], link="RoCE", env=ROCE_NCCL_ENV)
            for name, info in facts["netdevs"].items():
                if info["nic"] in [n["name"] for n in rails]:
                    self.outputs["mlnx_qos_%s" % name] = mlnx_qos()
        self.write_image(self.profile)

    def write_image(self, profile):
        """etc/gpufleet/image.json as playbooks/image.yml writes it, for an image built from ``profile``."""
        want = _desired.derive("image", _profile.validate(copy.deepcopy(profile), gate.CHECK_IDS))
        cfg = "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic root=UUID=1 ro %s\n}\n" % " ".join(want["desired"]["kernel_cmdline"])
        manifest = _image.build(want, self.packages, self.outputs["apt_mark_showhold"].split(), cfg, built="2026-12-03T09:00:00Z")
        self.write("etc/gpufleet/image.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")

    def host_slot_generation(self, per_gpu):
        """nvidia-smi -q as it reads when GPUs sit behind host ports of another PCIe generation."""
        self.outputs["nvidia_smi_q"] = nvidia_smi_q(self.gpus, host_max=per_gpu)

    def smi(self, **overrides):
        """nvidia-smi -q with per-GPU overrides (see nvidia_smi_q)."""
        self.outputs["nvidia_smi_q"] = nvidia_smi_q(self.gpus, **overrides)

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
                           grub=gate.read_grub_sources(Root(self.root)), pci=PciDevices(self.root))

    def report(self):
        return gate.evaluate(self.inputs(), node="gpu001")

    def statuses(self):
        return dict((c["id"], c["status"]) for c in self.report()["checks"])


Node.build = types.SimpleNamespace(mlxconfig=mlxconfig, nccl=nccl, mlnx_qos=mlnx_qos, nvlink_status=nvlink_status, smart_log=smart_log,
                                   p2p=p2p, gdr=gdr, dcgm_diag=dcgm_diag, nvidia_smi_q=nvidia_smi_q)
_ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


@pytest.fixture
def tree(unpacked_tree):
    """tree(name) -> a Node over a fresh copy of tests/fixtures/trees/<name>.ttar."""
    def _make(name="hgx-h100-ref"):
        return Node(unpacked_tree(name), profile=roce_profile() if "roce" in name else None)
    return _make
