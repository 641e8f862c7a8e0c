# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gate's check ids in report order, without the checks (a stable interface: docs/checks.md).

The profile lookup checks a profile's ``require`` and ``skip`` lists against these in every forked
worker and task; importing the checks for their ids cost each of those calls 30 ms. gate.py refuses
to import when this list and the registered checks differ, so the two cannot drift apart."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

CHECK_IDS = (
    "os.release", "kernel.version", "kernel.cmdline", "kernel.grub_sources",
    "memory.hugepages", "memory.thp", "memory.numa_balancing",
    "cpu.smt", "cpu.governor", "cpu.vtx", "iommu.enabled", "numa.layout",
    "gpu.count", "gpu.pcie_link", "nvidia.driver", "nvidia.fabricmanager", "nvidia.peermem",
    "gpu.persistence_mode", "gpu.xid", "gpu.ecc", "gpu.throttle", "gpu.nvlink",
    "packages.held", "image.profile",
    "nic.rails", "ib.ports", "ib.counters", "pcie.acs", "nic.ats", "ofed.version", "ofed.kernel_match",
    "roce.link", "roce.mtu", "roce.address", "roce.gid", "roce.qos",
    "firmware.nic", "firmware.nvme",
    "storage.mounts", "nvme.health",
    "guest.numa", "guest.siblings", "guest.memory", "guest.devices",
    "transport.nccl", "nccl.allreduce_bandwidth", "gpu.h2d_bandwidth", "gpu.p2p_bandwidth",
    "ib.gdr_bandwidth", "gpu.dcgm_diag",
)
