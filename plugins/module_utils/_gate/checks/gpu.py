# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the GPUs and the NVIDIA stack: count and model, PCIe link, driver, fabric manager."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.provision.plugins.module_utils import _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.nvidia_smi import parse_fabric_state, parse_gpu_link
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.packages import upstream_version


_GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def _speed_gts(text):
    """``32.0 GT/s PCIe`` -> 32.0; ``Unknown`` -> None."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*GT/s", text or "")
    return float(match.group(1)) if match else None


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
    want = ctx.want("nvidia", "driver_version")
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
    required = _profile.section(ctx.profile, "nvidia", "fabricmanager")
    if required is None:
        required = ctx.need(nv.get("nvswitch_present"), ["proc/driver/nvidia-nvswitch*"], "NVSwitch presence")
    if not required:
        if not ctx.facts.get("gpus"):
            raise Skip("no data: no GPU found")
        return "pass", {"nvswitches": nv.get("nvswitch_count")}, {"required": False}, "not required: no NVSwitch"
    driver = _profile.section(ctx.profile, "nvidia", "driver_version") or nv.get("driver_version")
    failures, unknown, observed = [], [], {"nvswitches": nv.get("nvswitch_count")}
    if ctx.packages is None:
        unknown.append("packages not collected")
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
        unknown.append("services not collected")
    else:
        svc = ctx.services.get("nvidia-fabricmanager.service") or ctx.services.get("nvidia-fabricmanager")
        observed["service"] = svc.get("state") if svc else None
        if svc is None:
            failures.append("nvidia-fabricmanager.service not present")
        elif svc.get("state") != "running":
            failures.append("nvidia-fabricmanager.service %s" % svc.get("state"))
    text = ctx.outputs.get("nvidia_smi_q")
    if text is None:
        unknown.append("nvidia-smi -q output not collected%s" % (
            " (%s)" % ctx.output_errors["nvidia_smi_q"] if ctx.output_errors.get("nvidia_smi_q") else ""))
    else:
        states = parse_fabric_state(str(text))
        observed["fabric"] = sorted(set(s.get("State") for s in states.values()))
        if not states:
            # Drivers before the fabric block, or a stand-in nvidia-smi: the state is unknown, not bad.
            unknown.append("nvidia-smi -q shows no Fabric block")
        bad = ["%s %s/%s" % (g, s.get("State"), s.get("Status")) for g, s in sorted(states.items()) if s.get("State") != "Completed"]
        if bad:
            failures.append("fabric state not Completed: %s" % ", ".join(bad))
    return outcome(failures, unknown, observed, {"version": driver, "service": "running", "fabric": "Completed"})
