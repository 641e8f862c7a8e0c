# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the GPUs and the NVIDIA stack: count and model, PCIe link, driver, fabric manager."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import drivers
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, NotAsked, Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.kernel_log import XID_MEANING, parse_xids
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.nvidia_smi import (
    parse_fabric_state, parse_gpu_link, parse_nvlink_status, parse_query, section)
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.packages import upstream_version


_GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def _speed_gts(text):
    """``32.0 GT/s PCIe`` -> 32.0; ``Unknown`` -> None."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


_FABRIC_UNREPORTED = ("N/A", "Not Supported")


def _smi_gpus(ctx):
    """The GPU blocks of ``nvidia-smi -q`` ({bus id: tree}), or Skip when it was not collected or
    is cut short (fewer GPU blocks than "Attached GPUs"): a truncated output is no data."""
    query = ctx.parsed("nvidia_smi_q", "nvidia-smi -q", parse_query)
    gpus = query["gpus"]
    if not gpus:
        raise Skip("no data: nvidia-smi -q shows no GPU block")
    if query["attached"] is not None and len(gpus) != query["attached"]:
        raise Skip("no data: nvidia-smi -q output incomplete (%d of %d GPU blocks: cut short?)" % (len(gpus), query["attached"]))
    return gpus


def _per_gpu(ctx, names, what):
    """{bus id: the section ``names`` of each GPU}; a GPU without it is no data (a cut output)."""
    out = {}
    for bus, tree in sorted(_smi_gpus(ctx).items()):
        node = section(tree, *names)
        if node is None:
            raise Skip("no data: nvidia-smi -q has no %s for GPU %s" % (what, bus))
        out[bus] = node
    return out


CHECKS = []
check = registrar(CHECKS)


@check("gpu.count", "a GPU fallen off the bus or the wrong GPU model in the node",
       "reseat or replace the GPU / baseboard (RMA); check the BMC event log")
def _gpu_count(ctx):
    want = ctx.want("gpu")
    if want.get("count") is None and want.get("model") is None and want.get("device_id") is None:
        raise Skip("not in profile (gpu.count, gpu.model, gpu.device_id)")
    gpus = ctx.need(ctx.facts.get("gpus"), ["sys/bus/pci/devices*"])
    failures = []
    if want.get("count") is not None and len(gpus) < want["count"]:
        # a device whose vendor or class could not be read is not known to be no GPU: "7 GPUs" would
        # be a count made up from what could not be read
        unread = ctx.no_data(["sys/bus/pci/devices/*/vendor", "sys/bus/pci/devices/*/class"])
        if isinstance(unread, CheckError):
            raise unread
    if want.get("count") is not None and len(gpus) != want["count"]:
        failures.append("%d GPUs, expected %d" % (len(gpus), want["count"]))
    for gpu in gpus:
        if want.get("device_id") and gpu.get("device_id") != want["device_id"].lower():
            failures.append("%s device %s" % (gpu.get("pci"), gpu.get("device_id")))
        if want.get("model") and want["model"].lower() not in (gpu.get("model") or "").lower():
            failures.append("%s model %r" % (gpu.get("pci"), gpu.get("model")))
    observed = {"count": len(gpus), "models": sorted(set(str(g.get("model")) for g in gpus))}
    return outcome(failures, [], observed, want)


@check("gpu.pcie_link", "a GPU trained at a lower PCIe width/generation (bad riser or retimer): H2D bandwidth halved, no error",
       "reseat the GPU / check the retimer and riser cables; BIOS PCIe link speed settings")
def _gpu_link(ctx):
    want = ctx.want("gpu")
    min_speed, min_width = want.get("min_link_speed_gts"), want.get("min_link_width")
    if min_speed is None and min_width is None:
        raise Skip("not in profile (gpu.min_link_speed_gts, gpu.min_link_width)")
    gpus = ctx.need(ctx.facts.get("gpus"), ["sys/bus/pci/devices*"])
    if not gpus:
        raise Skip("no data: no GPU found")
    # GPUs drop the link generation at idle (2.5 GT/s while idle is normal): the speed compared by
    # default is what the link trained to at most (max_link_speed); the width does not idle down.
    # nvidia-smi, when collected, knows what the link can train to (device AND host slot): a Gen5
    # GPU in a Gen4 slot shows Max 4 there, while sysfs max_link_speed still says 32 GT/s.
    smi = parse_gpu_link(str(ctx.outputs["nvidia_smi_q"])) if ctx.outputs.get("nvidia_smi_q") is not None else {}
    current = bool(want.get("check_current_speed"))
    speed_key = "speed" if current else "max_speed"
    failures, observed = [], {}
    for gpu in gpus:
        link = gpu.get("link") or {}
        base = "sys/bus/pci/devices/%s/" % gpu.get("pci")
        speed = _speed_gts(link.get(speed_key))
        width = link.get("width")
        nv = smi.get("0000" + (gpu.get("pci") or "")) or smi.get(gpu.get("pci") or "") or {}
        gen = nv.get("gen_current" if current else "gen_max")
        # Two views of one link: the worse one counts.
        if gen in _GEN_GTS and (speed is None or _GEN_GTS[gen] < speed):
            speed, speed_key = _GEN_GTS[gen], "nvidia-smi PCIe generation %s (Gen%d)" % ("current" if current else "max", gen)
        if nv.get("width_current") is not None and (width is None or nv["width_current"] < width):
            width = nv["width_current"]
        observed[gpu.get("pci")] = "%s x%s" % (link.get("speed"), width) + (" (nvidia-smi Gen%s max, x%s)" % (
            nv.get("gen_max"), nv.get("width_current")) if nv else "")
        if min_speed is not None:
            if speed is None:
                raise ctx.no_data([base + "*link_speed"], "%s link speed" % gpu.get("pci"))
            if speed < min_speed:
                failures.append("%s %s %.1f GT/s" % (gpu.get("pci"), speed_key, speed))
        if min_width is not None:
            if width is None:
                raise ctx.no_data([base + "*link_width"], "%s link width" % gpu.get("pci"))
            if width < min_width:
                failures.append("%s width x%d" % (gpu.get("pci"), width))
    return outcome(failures, [], observed, {"min_speed_gts": min_speed, "min_width": min_width, "speed": speed_key})


@check("nvidia.driver", "a node on another NVIDIA driver than the fleet: benchmarks diverge, FM mismatch",
       "install the profile's driver version (pin the upstream version, any revision), apt-mark hold it, reboot or reload the modules")
def _driver(ctx):
    want = drivers.driver_expected(ctx.profile) or ctx.want("nvidia", "driver_version")
    nv = ctx.facts.get("nvidia") or {}
    if nv.get("loaded") is False:
        return "fail", None, want, "nvidia kernel module not loaded"
    version = ctx.need(nv.get("driver_version"), ["sys/module/nvidia/version"])
    failures = [] if version == want else ["loaded %s" % version]
    proc = nv.get("proc_version")
    if proc is not None and proc != version:
        failures.append("proc/driver/nvidia/version says %s" % proc)
    return outcome(failures, [], {"module": version, "proc": proc}, want)


def _fm_packages(packages):
    """Installed fabric manager packages: Ubuntu/CUDA apt ``nvidia-fabricmanager-550``, from R580
    the unversioned ``nvidia-fabricmanager``, CUDA's RPM ``nvidia-fabric-manager``."""
    out = []
    for name, entries in sorted((packages or {}).items()):
        if re.match(r"^nvidia-fabric-?manager(-\d+)?$", name):
            for entry in entries or []:
                out.append((name, str(entry.get("version"))))
    return out


@check("nvidia.fabricmanager", "fabric manager missing, stopped or of another version than the driver: every GPU "
       "listed, but CUDA returns 802 (system not ready) at the first multi-GPU job",
       "install the fabric manager package of exactly the driver version (apt-cache madison), apt-mark hold it and "
       "the driver, systemctl enable --now nvidia-fabricmanager")
def _fabricmanager(ctx):
    nv = ctx.facts.get("nvidia") or {}
    # what the nvidia_driver role installs: the profile's choice, else where NVSwitches are (_desired)
    fm = drivers.fabricmanager_expected(ctx.profile, nv.get("nvswitch_present"))
    required = fm["required"]
    if required is None:
        required = ctx.need(None, ["proc/driver/nvidia-nvswitch*"], "NVSwitch presence")
    if not required:
        if not ctx.facts.get("gpus"):
            raise Skip("no data: no GPU found")
        return "pass", {"nvswitches": nv.get("nvswitch_count")}, {"required": False}, "not required: no NVSwitch"
    driver = fm["version"] or nv.get("driver_version")
    failures, unknown, observed = [], [], {"nvswitches": nv.get("nvswitch_count")}
    if ctx.packages is None:
        unknown.append(ctx.not_collected("packages"))
    else:
        pkgs = _fm_packages(ctx.packages)
        observed["packages"] = ["%s %s" % p for p in pkgs]
        if not pkgs:
            failures.append("nvidia-fabricmanager not installed")
        elif driver is None:
            unknown.append("driver version unknown")
        else:
            failures += ["%s %s != driver %s" % (n, v, driver) for n, v in pkgs if upstream_version(v) != driver]
    if ctx.services is None:
        unknown.append(ctx.not_collected("services"))
    else:
        svc = ctx.services.get("nvidia-fabricmanager.service") or ctx.services.get("nvidia-fabricmanager")
        observed["service"] = svc.get("state") if svc else None
        if svc is None and getattr(ctx.services, "cause", None):   # systemd could not be asked
            unknown.append(ctx.not_collected("services"))
        elif svc is None:
            failures.append("nvidia-fabricmanager.service not present")
        elif svc.get("state") != "running":
            failures.append("nvidia-fabricmanager.service %s" % svc.get("state"))
    try:
        _smi_gpus(ctx)
        states = parse_fabric_state(ctx.outputs["nvidia_smi_q"])
    except Skip as exc:
        unknown.append(str(exc).replace("no data: ", "", 1))
        states = None
    if states is not None:
        observed["fabric"] = sorted(set(str(s.get("State")) for s in states.values()))   # a block without State: "None"
        # No Fabric block (drivers before it, a stand-in nvidia-smi), or a state the GPU generation
        # does not report (A100 HGX: "N/A"; PCIe cards: "Not Supported"): unknown, not bad.
        unreported = [g for g, s in sorted(states.items()) if s.get("State") in _FABRIC_UNREPORTED]
        if not states:
            unknown.append("nvidia-smi -q shows no Fabric block")
        elif unreported:
            unknown.append("nvidia-smi -q Fabric State %s (not reported by this GPU generation) on %s" % (
                "/".join(sorted(set(states[g].get("State") for g in unreported))), ", ".join(unreported)))
        bad = ["%s %s/%s" % (g, s.get("State"), s.get("Status")) for g, s in sorted(states.items())
               if s.get("State") not in ("Completed",) + _FABRIC_UNREPORTED]
        if bad:
            failures.append("fabric state not Completed: %s" % ", ".join(bad))
    return outcome(failures, unknown, observed, {"version": driver, "service": "running", "fabric": "Completed"})


@check("nvidia.peermem", "nvidia_peermem not loaded: GPUDirect RDMA off, every rail's traffic bounced through host memory",
       "modprobe nvidia_peermem and load it at boot (/etc/modules-load.d/nvidia-peermem.conf); it needs the OFED that the driver was built against")
def _peermem(ctx):
    if not ctx.want("health", "peermem"):
        raise NotAsked("not in profile (health.peermem: false)")
    nv = ctx.facts.get("nvidia") or {}
    if not ctx.facts.get("gpus"):
        raise ctx.no_data(["sys/bus/pci/devices*"], "no GPU found")
    loaded = nv.get("peermem_loaded")
    return outcome([] if loaded else ["nvidia_peermem (or nv_peer_mem) not loaded (no sys/module/nvidia_peermem)"], [],
                   nv.get("peermem_module"), "nvidia_peermem loaded")


@check("gpu.persistence_mode", "persistence mode off: the driver tears down and re-initialises the GPU between jobs "
       "(seconds of start-up latency, lost state; DCGM diagnostics refuse to run)",
       "nvidia-persistenced enabled and running (systemctl enable --now nvidia-persistenced), or nvidia-smi -pm 1")
def _persistence(ctx):
    if not ctx.want("health", "persistence_mode"):
        raise NotAsked("not in profile (health.persistence_mode: false)")
    modes = dict((bus, tree.get("Persistence Mode")) for bus, tree in sorted(_smi_gpus(ctx).items()))
    unknown = [bus for bus, mode in modes.items() if mode is None]
    if unknown:
        raise Skip("no data: nvidia-smi -q has no Persistence Mode for GPU %s" % ", ".join(unknown))
    off = ["%s %s" % (bus, mode) for bus, mode in modes.items() if mode != "Enabled"]
    return outcome(["persistence mode not Enabled: " + ", ".join(off)] if off else [], [], modes, "Enabled")


@check("gpu.xid", "a GPU that logged a critical XID since boot (fallen off the bus, double-bit ECC, GSP timeout...): "
       "jobs crash or hang on it",
       "drain the node; reset the GPU (nvidia-smi -r) or reboot; a repeated XID 48/63/64/79/92/119 is an RMA (check the BMC log)")
def _xid(ctx):
    critical = ctx.want("health", "xid_critical")
    events = ctx.parsed("kernel_log", "journalctl -k -b 0", parse_xids)
    seen = {}
    for event in events:
        if event["xid"] in critical:
            key = (event["pci"], event["xid"])
            seen[key] = seen.get(key, 0) + 1
    failures = ["GPU %s XID %d (%s) x%d" % (pci, xid, XID_MEANING.get(xid, "see the NVIDIA XID catalog"), n)
                for (pci, xid), n in sorted(seen.items())]
    observed = {"xids": sorted(set(e["xid"] for e in events)), "critical": ["%s:%d" % k for k in sorted(seen)]}
    return outcome(failures, [], observed, {"critical": critical})


def _count(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@check("gpu.ecc", "a GPU with uncorrectable ECC errors or row remapping pending/failed: silent data corruption, "
       "or memory that needs a GPU reset (pending) or an RMA (remapping failure)",
       "pending: drain and reset the GPU (nvidia-smi -r) or reboot; uncorrectable errors again after reset, or a "
       "remapping failure: RMA the GPU")
def _ecc(ctx):
    if not ctx.want("health", "ecc"):
        raise NotAsked("not in profile (health.ecc: false)")
    failures, unknown, observed, missing = [], [], {}, []
    for bus, tree in sorted(_smi_gpus(ctx).items()):
        volatile = section(tree, "ECC Errors", "Volatile")
        remap = section(tree, "Remapped Rows")
        if volatile is None and remap is None:
            # One GPU without the blocks (a cut output) must not hide another GPU's failure.
            missing.append(bus)
            continue
        # Driver 535: "DRAM Uncorrectable", "SRAM Uncorrectable Parity/SEC-DED"; older drivers:
        # "Double Bit" > "Total". N/A: ECC mode off or not supported.
        counts = [_count(v) for k, v in (volatile or {}).items() if "Uncorrectable" in k and not isinstance(v, dict)]
        double = section(volatile or {}, "Double Bit", "Total")
        if isinstance(double, str):
            counts.append(_count(double))
        uncorrectable = sum(c for c in counts if c is not None)
        info = {"volatile_uncorrectable": uncorrectable if any(c is not None for c in counts) else None}
        if uncorrectable:
            failures.append("GPU %s: %d uncorrectable volatile ECC errors" % (bus, uncorrectable))
        if isinstance(remap, dict):
            info["remap_pending"] = remap.get("Pending")
            info["remap_failure"] = remap.get("Remapping Failure Occurred")
            if remap.get("Pending") == "Yes":
                failures.append("GPU %s: row remapping pending (reset the GPU)" % bus)
            if remap.get("Remapping Failure Occurred") == "Yes":
                failures.append("GPU %s: row remapping failure (RMA)" % bus)
        if info["volatile_uncorrectable"] is None and info.get("remap_pending") in (None, "N/A"):
            unknown.append("GPU %s reports neither ECC counts nor remapped rows (N/A)" % bus)
        observed[bus] = info
    if missing:
        unknown.append("nvidia-smi -q has no ECC Errors / Remapped Rows for GPU %s" % ", ".join(missing))
    return outcome(failures, unknown, observed, {"volatile_uncorrectable": 0, "remap_pending": "No", "remap_failure": "No"})


@check("gpu.throttle", "clocks held down at idle by a hardware or thermal slowdown (power brake asserted, cooling "
       "failure): every job on the node runs slow, no error",
       "check the BMC for power-brake, PSU and thermal events, airflow and fan zones; reseat the GPU baseboard power; "
       "re-run after the cause is gone (nvidia-smi -q -d PERFORMANCE)")
def _throttle(ctx):
    reasons = ctx.want("health", "throttle_reasons")
    blocks = _per_gpu(ctx, [("Clocks Event Reasons", "Clocks Throttle Reasons")], "Clocks Event Reasons")
    failures, observed = [], {}
    for bus, block in blocks.items():
        active = sorted(k for k, v in block.items() if v == "Active" and k in reasons)
        observed[bus] = active
        if active:
            failures.append("GPU %s: %s" % (bus, ", ".join(active)))
    return outcome(failures, [], observed, {"not_active": reasons})


@check("gpu.nvlink", "an NVLink down or trained slow: peer traffic over fewer links or PCIe, all-reduce bandwidth "
       "drops with no error",
       "nvidia-smi nvlink -e for the link's errors; reset the GPU or reboot; a link that stays down: baseboard/NVSwitch RMA")
def _nvlink(ctx):
    want = ctx.want("health", "nvlink")
    if want.get("links") is None and want.get("min_gbps") is None:
        raise NotAsked("not in profile (health.nvlink.links, health.nvlink.min_gbps)")
    status = ctx.parsed("nvidia_smi_nvlink", "nvidia-smi nvlink -s", parse_nvlink_status)
    failures, observed = [], {}
    gpus = ctx.facts.get("gpus")
    if gpus and len(status) < len(gpus):
        failures.append("%d of %d GPUs listed by nvidia-smi nvlink -s" % (len(status), len(gpus)))
    for gpu, info in sorted(status.items(), key=lambda kv: int(kv[0])):
        links = info["links"]
        down = sorted(n for n, s in links.items() if s is None)
        slow = sorted(n for n, s in links.items() if s is not None and want.get("min_gbps") is not None and s < want["min_gbps"])
        observed[gpu] = {"links": len(links), "up": len(links) - len(down), "slowest_gbps": min([s for s in links.values() if s] or [0])}
        if want.get("links") is not None and len(links) - len(down) < want["links"]:
            failures.append("GPU %s: %d of %d links up%s" % (gpu, len(links) - len(down), want["links"],
                                                             " (inactive: %s)" % ",".join(map(str, down)) if down else ""))
        elif down and want.get("links") is None:
            failures.append("GPU %s: links inactive: %s" % (gpu, ",".join(map(str, down))))
        if slow:
            failures.append("GPU %s: links %s below %s GB/s" % (gpu, ",".join(map(str, slow)), want["min_gbps"]))
    return outcome(failures, [], observed, want)
