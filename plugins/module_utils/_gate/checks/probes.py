# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Active probes: checks over what a probe measured on the node (off unless the profile enables them)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, NotAsked, Skip, outcome, probe_settings, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.bandwidth import (
    parse_h2d, parse_ib_write_bw, parse_nccl_tests, parse_p2p)
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.dcgm import parse_dcgm_diag
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.nccl import parse_nccl_debug
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.checks import roce


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


CHECKS = []
check = registrar(CHECKS)


@check("transport.nccl", "NCCL falling back to TCP sockets: the job runs at about half speed with no error",
       "load nvidia-peermem and the IB modules; check NCCL_IB_HCA and that the rail ports are ACTIVE (ib.ports)", probe="nccl")
def _nccl(ctx):
    probe = probe_settings(ctx, "nccl")
    text = ctx.output("nccl_debug", "NCCL_DEBUG=INFO test run")
    parsed = parse_nccl_debug(text)
    expected = probe.get("transport") or "IB"
    observed = {"transports": sorted(parsed["transports"]), "hcas": parsed["hcas"]}
    if not parsed["transports"]:
        raise CheckError("outputs.nccl_debug: no 'NCCL INFO NET/<transport> : Using' line")
    failures = []
    if parsed["transports"] != set([expected]):
        failures.append("NCCL transports %s" % ", ".join(sorted(parsed["transports"])))
    if probe.get("min_hcas") is not None and len(parsed["hcas"]) < probe["min_hcas"]:
        failures.append("%d HCAs used, expected >= %d" % (len(parsed["hcas"]), probe["min_hcas"]))
    # Over IB, GPUDirect RDMA is expected unless the profile says otherwise (gdr: false): without it
    # every rail's traffic is staged through host memory.
    observed["gdr"] = parsed["gdr"]
    if expected == "IB" and probe.get("gdr") is not False:
        off = sorted(h for h, on in parsed["gdr"].items() if not on)
        if off:
            failures.append("GPU Direct RDMA disabled for %s" % ", ".join(off))
    wanted = {"transport": expected, "min_hcas": probe.get("min_hcas"), "gdr": expected == "IB" and probe.get("gdr") is not False}
    if expected == "IB" and _profile.section(ctx.profile, "roce") is not None:
        wanted.update(_nccl_roce(ctx, parsed, failures, observed))
    return outcome(failures, [], observed, wanted)


# NCCL picks the GID itself (RoCE v2, IPv4: NCCL_IB_ROCE_VERSION_NUM / NCCL_IB_ADDR_FAMILY) from 2.21 on;
# before, an unset NCCL_IB_GID_INDEX means GID 0: the link-local RoCE v1 GID.
NCCL_GID_AUTO = (2, 21)


def _nccl_roce(ctx, parsed, failures, observed):
    """RoCE rails: every HCA NCCL uses is RoCE, on the planned GID index (the index of the wanted
    GID on the rails, roce.gid) and the RDMA traffic class (roce.qos tos); what it expects."""
    gid_index = _roce_gid_index(ctx)
    tos = (ctx.desired("roce_qos", "roce.qos") if _profile.section(ctx.profile, "roce", "qos") is not None else {}).get("tos")
    observed.update(links=parsed["links"], env=dict((k, v) for k, v in parsed["env"].items() if k.startswith("NCCL_IB_")),
                    version=parsed["version"])
    not_roce = sorted(h for h, link in parsed["links"].items() if link != "RoCE")
    if not_roce:
        failures.append("HCAs not on RoCE: %s" % ", ".join(not_roce))
    env_gid = parsed["env"].get("NCCL_IB_GID_INDEX")
    version = tuple(int(x) for x in parsed["version"].split(".")[:2]) if parsed["version"] else None
    if env_gid is None and (version is None or version < NCCL_GID_AUTO):
        failures.append("no NCCL_IB_GID_INDEX and NCCL %s picks GID 0 (link-local RoCE v1); the rails' GID is %s"
                        % (parsed["version"] or "of unknown version (no 'NCCL version' line)", gid_index))
    elif env_gid is not None and gid_index is not None and env_gid != str(gid_index):
        failures.append("NCCL_IB_GID_INDEX %s, the rails' %s GID is at index %s" % (env_gid, "RoCE v2", gid_index))
    env_tc = parsed["env"].get("NCCL_IB_TC")
    if tos is not None and env_tc != str(tos):
        failures.append("NCCL_IB_TC %s, the RDMA traffic class is %d (roce.qos.tos)" % (env_tc or "unset (0)", tos))
    return {"links": "RoCE", "gid_index": gid_index, "tc": tos}


def _roce_gid_index(ctx):
    """The one index of the wanted GID on every rail, or None when the facts do not give one."""
    try:
        gid = ctx.desired("roce_gid", "roce.gid")
        found = set()
        for _rail, _nic, port, netdev in roce.rail_ports(ctx):
            found.update(e["index"] for e in roce.wanted_gid(ctx, port, netdev, gid))
    except Skip:
        return None
    return found.pop() if len(found) == 1 else None


@check("nccl.allreduce_bandwidth", "NCCL all-reduce bus bandwidth below the platform's reference (a slow NVLink, "
       "NVSwitch or rail): every collective of every job on the node is slower, no error",
       "gpu.nvlink, nvidia.fabricmanager and transport.nccl first; then nvidia-smi nvlink -e and the NVSwitch state; "
       "re-run all_reduce_perf", probe="nccl")
def _nccl_busbw(ctx):
    probe = probe_settings(ctx, "nccl")
    if probe.get("min_busbw_gbps") is None:
        raise NotAsked("not in profile (probes.nccl.min_busbw_gbps)")
    text = ctx.output("nccl_debug", "NCCL all_reduce_perf run")
    try:
        result = parse_nccl_tests(text)
    except ValueError as exc:
        raise CheckError("outputs.nccl_debug: %s" % exc)
    failures = []
    if result["busbw_gbps"] < probe["min_busbw_gbps"]:
        failures.append("all-reduce bus bandwidth %.1f GB/s < %s%s" % (
            result["busbw_gbps"], probe["min_busbw_gbps"], " (at %d bytes)" % result["size"] if result["size"] else ""))
    if result["wrong"]:
        failures.append("%d wrong results (data corruption)" % result["wrong"])
    return outcome(failures, [], result, {"min_busbw_gbps": probe["min_busbw_gbps"]})


@check("gpu.h2d_bandwidth", "uneven or low host-to-device bandwidth (SNC off, wrong NUMA pinning, degraded link): 29-44 instead of 48 GB/s",
       "numa.layout / gpu.pcie_link remedies first; BIOS SNC per profile; re-run the probe pinned to the GPU's local CPUs", probe="h2d")
def _h2d(ctx):
    probe = probe_settings(ctx, "h2d")
    text = ctx.output("h2d_bandwidth", "H2D bandwidth probe")
    try:
        runs = parse_h2d(text)
    except ValueError as exc:
        raise CheckError("outputs.h2d_bandwidth: %s" % exc)
    per_gpu = dict((gpu, round(_median(values), 2)) for gpu, values in runs.items())
    low, high = min(per_gpu.values()), max(per_gpu.values())
    observed = {"per_gpu_gbps": per_gpu, "min": low, "spread": round(high - low, 2)}
    failures = []
    gpus = ctx.facts.get("gpus")
    if gpus and len(per_gpu) < len(gpus):
        failures.append("%d of %d GPUs measured" % (len(per_gpu), len(gpus)))
    if probe.get("min_gbps") is not None and low < probe["min_gbps"]:
        failures.append("min %.1f GB/s < %s (GPUs %s)" % (low, probe["min_gbps"],
                        ", ".join(g for g, v in sorted(per_gpu.items()) if v < probe["min_gbps"])))
    if probe.get("max_spread_gbps") is not None and high - low > probe["max_spread_gbps"]:
        failures.append("spread %.2f GB/s > %s" % (high - low, probe["max_spread_gbps"]))
    return outcome(failures, [], observed, {"min_gbps": probe.get("min_gbps"), "max_spread_gbps": probe.get("max_spread_gbps")})


@check("gpu.p2p_bandwidth", "low GPU-to-GPU bandwidth on a pair (a degraded NVLink/NVSwitch path, P2P off): "
       "tensor-parallel jobs slow down, no error",
       "gpu.nvlink and nvidia.fabricmanager first; nvidia-smi topo -m; reset the GPUs or reboot; a pair that stays slow: RMA", probe="p2p")
def _p2p(ctx):
    probe = probe_settings(ctx, "p2p")
    if probe.get("min_gbps") is None:
        raise NotAsked("not in profile (probes.p2p.min_gbps)")
    text = ctx.output("p2p_bandwidth", "nvbandwidth -t device_to_device_memcpy_read_ce")
    try:
        result = parse_p2p(text)
    except ValueError as exc:
        raise CheckError("outputs.p2p_bandwidth: %s" % exc)
    pairs = result["pairs"]
    low = sorted((v, k) for k, v in pairs.items() if v < probe["min_gbps"])
    observed = {"case": result["case"], "pairs": len(pairs), "min_gbps": min(pairs.values())}
    failures = ["GPU pairs below %s GB/s: %s" % (probe["min_gbps"], ", ".join("%s %.1f" % (k, v) for v, k in low[:8]))] if low else []
    return outcome(failures, [], observed, {"min_gbps": probe["min_gbps"]})


@check("ib.gdr_bandwidth", "GPUDirect RDMA slow or off on a rail (peermem missing, ACS redirect, NIC on the wrong "
       "switch): that rail's share of every collective halves, no error",
       "nvidia.peermem, pcie.acs and nic.rails first; ib_write_bw --use_cuda on the rail alone; check the NIC's PCIe link", probe="gdr")
def _gdr(ctx):
    probe = probe_settings(ctx, "gdr")
    if probe.get("min_gbps") is None:
        raise NotAsked("not in profile (probes.gdr.min_gbps)")
    text = ctx.output("gdr_bandwidth", "ib_write_bw --use_cuda per rail")
    try:
        per_rail = parse_ib_write_bw(text)
    except ValueError as exc:
        raise CheckError("outputs.gdr_bandwidth: %s" % exc)
    failures = []
    missing = sorted(k for k, v in per_rail.items() if v is None)
    if missing:
        failures.append("no result for %s" % ", ".join(missing))
    rails = [n for n in ctx.facts.get("nics") or [] if n.get("role") == "rail"]
    measured = set(k.split()[0] for k in per_rail if k)
    if rails and per_rail.keys() != {""} and len(measured) < len(rails):
        failures.append("%d of %d rails measured" % (len(measured), len(rails)))
    low = ["%s %.1f Gb/s" % (k or "rail", v) for k, v in sorted(per_rail.items()) if v is not None and v < probe["min_gbps"]]
    if low:
        failures.append("below %s Gb/s: %s" % (probe["min_gbps"], ", ".join(low)))
    return outcome(failures, [], per_rail, {"min_gbps": probe["min_gbps"]})


@check("gpu.dcgm_diag", "a GPU that fails NVIDIA's own diagnostics (memory, PCIe, NVLink, power, thermals) while "
       "every passive check is green",
       "read the failing test's warning in the report; dcgmi diag -r 3 for the long run; reset the GPU, then RMA what "
       "fails again", probe="dcgm")
def _dcgm(ctx):
    probe_settings(ctx, "dcgm")
    text = ctx.output("dcgm_diag", "dcgmi diag -j")
    try:
        diag = parse_dcgm_diag(text)
    except ValueError as exc:
        raise CheckError("outputs.dcgm_diag: %s" % exc)
    failed = [r for r in diag["results"] if r["status"] in ("fail", "failed")]
    warned = [r for r in diag["results"] if r["status"] in ("warn", "warning")]
    failures = ["%s (GPU %s)%s" % (r["test"], r["gpus"], ": " + r["info"] if r["info"] else "") for r in failed]
    if failures:
        failures[0] = "DCGM diagnostics failed: " + failures[0]
    observed = {"version": diag["version"], "tests": len(diag["results"]), "failed": len(failed), "warned": len(warned)}
    if not failed and not any(r["status"] in ("pass", "passed") for r in diag["results"]):
        raise Skip("no data: every DCGM test was skipped")
    return outcome(failures, [], observed, "every test Pass or Skip")
