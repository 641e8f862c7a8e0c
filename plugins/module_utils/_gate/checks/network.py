# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the NICs and the PCIe path to them: rails, IB ports, ACS, ATS, OFED."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.provision.plugins.module_utils._node import pcie as _pcie
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import drivers
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.framework import CheckError, Skip, outcome, registrar
from ansible_collections.gpufleet.provision.plugins.module_utils._gate.parsers.ofed import parse_mlxconfig, parse_ofed_info, parse_vermagic


def _rail_nics(facts):
    return [n for n in facts.get("nics") or [] if n.get("role") == "rail"]


CHECKS = []
check = registrar(CHECKS)


@check("nic.rails", "a GPU without its rail NIC on the same PCIe switch: GPUDirect RDMA off, collectives slower",
       "check the NIC/GPU slot population and cabling against the platform guide; BIOS: all NICs enabled")
def _rails(ctx):
    want = ctx.want("nic")
    if want.get("rails") is None and want.get("affinity") is None:
        raise Skip("not in profile (nic.rails, nic.affinity)")
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    pairs = ctx.facts.get("pairs") or []
    allowed = want.get("affinity") or ["PIX"]
    unplaced = [n for n in nics if n.get("pci") is None and n.get("role") != "vf"]
    if unplaced:
        # A NIC whose PCI location is unknown could be any GPU's rail: counting without it would
        # be a confident verdict on missing data.
        raise ctx.no_data(["sys/class/infiniband/%s/device" % n.get("name") for n in unplaced],
                          "PCI location of %s (no device link)" % ", ".join(n.get("name") for n in unplaced))
    rails = _rail_nics(ctx.facts)
    failures = []
    if want.get("rails") is not None and len(rails) != want["rails"]:
        failures.append("%d rail NICs, expected %d" % (len(rails), want["rails"]))
    for pair in pairs:
        if pair.get("nic") is None:
            failures.append("GPU %s has no NIC" % pair.get("gpu"))
        elif pair.get("affinity") not in allowed:
            failures.append("GPU %s - %s %s" % (pair.get("gpu"), pair.get("nic"), pair.get("affinity")))
    observed = {"rails": len(rails), "nics": len(nics),
                "pairs": ["%s-%s %s" % (p.get("gpu"), p.get("nic"), p.get("affinity")) for p in pairs]}
    return outcome(failures, [], observed, {"rails": want.get("rails"), "affinity": allowed})


def _scoped_nics(ctx):
    """The NICs whose ports the IB checks read: the rail NICs (profile ib.scope: rail, the default)
    or every RDMA NIC but virtual functions (scope: all); Skip when there is none."""
    nics = ctx.need(ctx.facts.get("nics"), ["sys/class/infiniband*"])
    scope = _profile.section(ctx.profile, "ib", "scope") or "rail"
    chosen = _rail_nics(ctx.facts) if scope == "rail" else [n for n in nics if n.get("role") != "vf"]
    if not chosen:
        raise Skip("no data: no %s NIC found" % ("rail" if scope == "rail" else "RDMA"))
    return chosen


def _ports(ctx, nic):
    """The NIC's ports; an error naming the folder when it could not be listed (facts: None)."""
    return ctx.need(nic.get("ports"), ["sys/class/infiniband/%s/ports" % nic.get("name")], "%s ports" % nic.get("name"))


@check("ib.ports", "an IB port down or at the wrong rate/link layer: collectives use fewer rails or fall back to TCP",
       "check cable/transceiver and switch port (ibstat, the leaf's port counters); link layer: mlxconfig LINK_TYPE_P1")
def _ib_ports(ctx):
    want = ctx.want("ib")
    chosen = _scoped_nics(ctx)
    failures, observed = [], {}
    for nic in chosen:
        for port in _ports(ctx, nic):
            name = "%s/%s" % (nic.get("name"), port.get("port"))
            base = "sys/class/infiniband/%s/ports/%s/" % (nic.get("name"), port.get("port"))
            observed[name] = "%s %s %s" % (port.get("state"), port.get("rate"), port.get("link_layer"))
            for key, field, expected in (("state", "state", want.get("state")), ("phys_state", "phys_state", want.get("phys_state")),
                                         ("link_layer", "link_layer", want.get("link_layer"))):
                if expected is None:
                    continue
                value = ctx.need(port.get(key), [base + field])
                if value != expected:
                    failures.append("%s %s %s" % (name, key, value))
            if want.get("min_rate_gbps") is not None:
                rate = ctx.need(port.get("rate_gbps"), [base + "rate"])
                if rate < want["min_rate_gbps"]:
                    failures.append("%s rate %s" % (name, port.get("rate")))
        if not nic.get("ports"):
            failures.append("%s has no port" % nic.get("name"))
    return outcome(failures, [], observed, want)


@check("ib.counters", "a flapping or noisy IB link (symbol errors, link downed, link error recovery): it passes a "
       "state check, yet collectives stall and retransmit on it",
       "reseat or replace the cable/transceiver on that port and the leaf side (ibdiagnet, the switch port counters); "
       "clear the counters after the fix (perfquery -x -R)")
def _ib_counters(ctx):
    limits = dict((k, v) for k, v in (ctx.want("health", "ib_counters") or {}).items() if v is not None)
    if not limits:
        raise Skip("not in profile (health.ib_counters)")
    chosen = _scoped_nics(ctx)
    failures, observed = [], {}
    for nic in chosen:
        for port in _ports(ctx, nic):
            name = "%s/%s" % (nic.get("name"), port.get("port"))
            base = "sys/class/infiniband/%s/ports/%s/counters" % (nic.get("name"), port.get("port"))
            counters = ctx.need(port.get("counters"), [base, base + "/*"], "%s counters folder" % base)
            observed[name] = {}
            for counter, limit in sorted(limits.items()):
                value = counters.get(counter)
                if value is None:
                    raise ctx.no_data([base + "/" + counter], "%s/%s" % (base, counter))
                observed[name][counter] = value
                if value > limit:
                    failures.append("%s %s %d > %d" % (name, counter, value, limit))
    return outcome(failures, [], observed, {"max": limits, "scope": _profile.section(ctx.profile, "ib", "scope") or "rail"})


_ACS_VIRT = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd", "DirectTrans")


@check("pcie.acs", "ACS redirecting GPU-NIC peer traffic through the root complex: GPUDirect RDMA bandwidth collapses, no error",
       "BIOS: PCIe ACS control per host mode (bare metal: disabled; role gpufleet.provision.bios), or "
       "setpci on the switch ports at boot; virtualization: ACS with DirectTrans+ and ATS on the NIC")
def _acs(ctx):
    mode = ctx.want("host_mode")
    gpus = dict((g.get("pci"), g) for g in ctx.facts.get("gpus") or [])
    nics = dict((n.get("name"), n) for n in ctx.facts.get("nics") or [])
    bridges = (ctx.facts.get("pcie") or {}).get("bridges")
    bridges = ctx.need(bridges, ["sys/bus/pci/devices/*/config"])
    pairs = [p for p in ctx.facts.get("pairs") or [] if p.get("nic") and p.get("gpu") in gpus and p.get("nic") in nics]
    if not pairs:
        raise Skip("no data: no GPU-NIC pair")
    failures, observed, checked = [], {}, []
    for pair in pairs:
        for bdf in _pcie.path_between(gpus[pair["gpu"]], nics[pair["nic"]]):
            if bdf in checked:
                continue
            checked.append(bdf)
            acs = (bridges.get(bdf) or {}).get("acs")
            if acs is None:
                raise ctx.no_data(["sys/bus/pci/devices/%s/config" % bdf], "%s ACS capability" % bdf)
            if not acs.get("present"):
                observed[bdf] = "no ACS"
                continue
            ctl = acs.get("ctl") or {}
            observed[bdf] = " ".join("%s%s" % (k, "+" if v else "-") for k, v in sorted(ctl.items()))
            on = sorted(k for k, v in ctl.items() if v)
            if mode == "bare_metal" and on:
                failures.append("%s (GPU %s - %s) ACS on: %s" % (bdf, pair["gpu"], pair["nic"], ",".join(on)))
            elif mode == "virtualization":
                off = [k for k in _ACS_VIRT if not ctl.get(k)]
                if off:
                    failures.append("%s (GPU %s - %s) ACS off: %s" % (bdf, pair["gpu"], pair["nic"], ",".join(off)))
    return outcome(failures, [], observed, {"host_mode": mode, "bridges": len(checked)})


@check("nic.ats", "ATS off on the NIC under IOMMU/ACS: peer-to-peer traffic translated by the root complex, slower",
       "mlxconfig -d <pci> set ATS_ENABLED=1, then mlxfwreset or a reboot")
def _ats(ctx):
    want = _profile.section(ctx.profile, "nic", "ats")
    if want is None:
        if _profile.section(ctx.profile, "host_mode") != "virtualization":
            raise Skip("not in profile (nic.ats; required by host_mode virtualization only)")
        want = True
    rails = _rail_nics(ctx.facts)
    if not rails:
        raise Skip("no data: no rail NIC found")
    failures, unknown, observed = [], [], {}
    for nic in rails:
        name = "mlxconfig_%s" % nic.get("pci")
        text = ctx.outputs.get(name)
        if text is None:
            unknown.append(ctx.not_collected(name))
            continue
        try:
            value = parse_mlxconfig(str(text), "ATS_ENABLED")
        except ValueError as exc:
            raise CheckError("outputs.%s: %s" % (name, exc))
        observed[nic.get("name")] = value
        where = "%s (%s) ATS_ENABLED" % (nic.get("name"), nic.get("pci"))
        # What runs is the Current column (mlxconfig -e); Next Boot alone passes a change that is
        # not live until mlxfwreset or a reboot.
        if value["current"] is None:
            unknown.append("%s: only the Next Boot value (%s) was printed: query with mlxconfig -e" % (where, value["next_boot"]))
        elif value["current"] != want:
            failures.append("%s %s" % (where, value["current"]) + (
                " (Next Boot %s: pending until mlxfwreset or a reboot)" % value["next_boot"] if value["next_boot"] == want else ""))
        elif value["next_boot"] != want:
            failures.append("%s %s now, %s after the next reboot" % (where, value["current"], value["next_boot"]))
    return outcome(failures, unknown, observed, want)


@check("ofed.version", "an OFED release other than the fleet's (known bugs, mismatched firmware expectations)",
       "install the profile's DOCA-OFED/MLNX_OFED version")
def _ofed_version(ctx):
    want = drivers.ofed_expected(ctx.profile) or ctx.want("ofed", "version")
    text = ctx.output("ofed_info", "ofed_info -s")
    try:
        version = parse_ofed_info(text)
    except ValueError as exc:
        raise CheckError("outputs.ofed_info: %s" % exc)
    return outcome([] if version == want else ["installed %s" % version], [], version, want)


@check("ofed.kernel_match", "OFED modules built for another kernel: mlx5_core fails to load or the in-box driver is used",
       "rebuild the OFED kernel modules for the running kernel (dkms autoinstall, or reinstall mlnx-ofed-kernel-dkms)")
def _ofed_kernel(ctx):
    ofed = ctx.want("ofed")
    if ofed.get("kernel_match") is False:
        raise Skip("not in profile (ofed.kernel_match: false)")
    text = ctx.output("modinfo_mlx5_core", "modinfo -F vermagic mlx5_core")
    try:
        vermagic = parse_vermagic(text)
    except ValueError as exc:
        raise CheckError("outputs.modinfo_mlx5_core: %s" % exc)
    release = ctx.need((ctx.facts.get("kernel") or {}).get("release"), ["proc/sys/kernel/osrelease"])
    return outcome([] if vermagic == release else ["mlx5_core built for %s" % vermagic], [], vermagic, release)
