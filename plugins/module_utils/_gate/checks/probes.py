# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Active probes: checks over what a probe measured on the node (off unless the profile enables them)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, outcome, probe_settings, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.bandwidth import parse_h2d
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.nccl import parse_nccl_debug


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
    return outcome(failures, [], observed, {"transport": expected, "min_hcas": probe.get("min_hcas")})


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
