# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Portable BIOS settings resolved against the BMC's own attribute registry. Pure functions.

A portable setting (snc, hyperthreading, vtx, vtd, sriov, acs, power_profile) becomes one raw
attribute and value of THIS BMC: candidates are the registry's attributes found by known names
(the vendor hints below, corrected on real captures) and by their metadata (DisplayName, name,
HelpText, MenuPath); the value is picked by its meaning (2-way/4-way, quadrant, clusters, one
memory domain per socket, enabled/disabled, an inverted "... Disable" switch). Each result says how
it was chosen. When no candidate can express the value, or two can equally well, the result says
so and names the candidates: nothing is guessed and nothing is written.

Real registries this was built on (../shared/realdata/redfish): Dell R750 ``SubNumaCluster``
offers ``2-Way``/``Disabled`` only; Lenovo SR670 V2 ``Processors_SNC`` is ``Enabled``/``Disabled``
(how many clusters "Enabled" makes depends on the CPU: not guessed); HPE DL385 (AMD) has
``NumaMemoryDomainsPerSocket`` (NPS), ``ProcSMT``, ``ProcAmdIoVt``; the DGX H100 (AMI) has
``ProcessorHyperThreadingDisable`` (DisplayName "Hyper-Threading", values Enabled/Disabled) and
no SNC attribute at all (``UmaBasedClustering`` is UMA clustering, which the BIOS ignores under SNC).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Known names per vendor: {setting: [(attribute, {portable value: raw value})]}. Hints only: the
# attribute must exist in the registry and a hinted value must be one of its values, else the
# value is picked by meaning. Sources: the real captures (verified) and vendor material.
HINTS = {
    "dell": {
        "snc": [("SubNumaCluster", {"off": "Disabled", "snc2": "2-Way", "snc4": "4-Way"})],
        "hyperthreading": [("LogicalProc", {})],
        # One switch for VT-x and VT-d on PowerEdge ("Virtualization Technology", DMAR table).
        "vtx": [("ProcVirtualization", {})],
        "vtd": [("ProcVirtualization", {})],
        "sriov": [("SriovGlobalEnable", {})],
        "power_profile": [("SysProfile", {"performance": "PerfOptimized", "efficiency": "PerfPerWattOptimizedDapc",
                                          "custom": "Custom"})],
    },
    "lenovo": {
        "snc": [("Processors_SNC", {"off": "Disabled"})],
        "hyperthreading": [("Processors_HyperThreading", {})],
        "vtx": [("Processors_IntelVirtualizationTechnology", {})],
        "vtd": [("DevicesandIOPorts_IntelVTforDirectedIOVTd", {})],
        "sriov": [("DevicesandIOPorts_SRIOV", {})],
        "acs": [("Processors_PCIeACSCTL", {})],
        "power_profile": [("OperatingModes_ChooseOperatingMode", {
            "performance": "MaximumPerformance", "efficiency": "Efficiency_FavorPerformance", "custom": "CustomMode"})],
    },
    "hpe": {
        "snc": [("SubNumaClustering", {})],  # Intel ProLiant, unverified
        "nps": [("NumaMemoryDomainsPerSocket", {"nps1": "OneMemoryDomainPerSocket", "nps2": "TwoMemoryDomainsPerSocket",
                                                "nps4": "FourMemoryDomainsPerSocket"})],
        "hyperthreading": [("ProcSMT", {}), ("ProcHyperthreading", {})],
        "vtx": [("ProcVirtualization", {}), ("ProcAmdVirtualization", {})],
        "vtd": [("ProcAmdIoVt", {}), ("IntelProcVtd", {})],
        "sriov": [("Sriov", {})],
        "acs": [("AccessControlService", {})],
        "power_profile": [("WorkloadProfile", {"performance": "HighPerformanceCompute(HPC)",
                                               "efficiency": "GeneralPowerEfficientCompute", "custom": "Custom"})],
    },
    "ami": {
        "snc": [("SncEn", {})],
        "hyperthreading": [("ProcessorHyperThreadingDisable", {}), ("ProcessorHyperThreading", {})],
        "vtx": [("ProcessorVmxEnable", {})],
        "vtd": [("VTdSupport", {})],
        "sriov": [("SRIOVEnable", {})],
        "acs": [("PCIeACSControl", {})],
        "power_profile": [],
    },
    "supermicro": {  # unverified: Supermicro names carry a build-specific suffix
        "snc": [("SNC#0232", {})],
        "hyperthreading": [("Hyper-Threading#01A7", {})],
        "vtx": [("IntelVirtualizationTechnology#01A9", {})],
        "vtd": [("IntelVT_dTechnology#0241", {})],
        "sriov": [("SR_IOVSupport#0197", {})],
        "acs": [("ACSControl#0245", {})],
        "power_profile": [],
    },
}

# How a setting shows in registry metadata (normalized text: lower case, (R)/(TM) dropped).
_META = {
    "hyperthreading": {
        "display": r"^(intel )?hyper-?threading( tech(nology)?)?( \[all\])?$|^logical processors?$"
                   r"|^(amd )?smt( option| mode| control| enable)?$|^simultaneous multi-?threading",
        "name": r"hyperthread|^logicalproc$|^procsmt$|smt(en|enable|mode|control)?$",
        "related": r"thread|logical proc|\bsmt\b"},
    "vtx": {
        "display": r"^(intel )?virtuali[sz]ation( technology)?$|^vmx$|^(intel )?vt-?x$|^svm( mode)?$|^amd-?v$"
                   r"|^(cpu|processor) virtuali[sz]ation",
        "name": r"vmx|virtualizationtechnology$|^procvirtualization$|^svm|amdv$|^procamdvirtualization$",
        "related": r"virtuali[sz]ation|vmx|svm"},
    "vtd": {
        "display": r"vt for directed i/?o|\bvt-?d\b|directed i/?o|^(amd )?i/?o virtuali[sz]ation|^iommu( support)?$|amd-?vi",
        "name": r"vtd|iommu|iovt|directedio",
        "exclude": r"error|dma protection|pre-?boot|interrupt",
        "help": r"\bdmar\b|directed i/?o|\biommu\b",
        "related": r"vt-?d|iommu|dma"},
    "sriov": {
        "display": r"\bsr-?iov\b", "name": r"sr_?-?iov", "help": r"single root", "related": r"sr-?iov|virtual function"},
    "acs": {
        "display": r"\bacs\b|access control service|acsctl", "name": r"acs(ctl|control|en|enable|support)?$|accesscontrolservice",
        "related": r"\bacs\b|access control"},
    "power_profile": {
        "display": r"^system profile$|^(choose )?operating mode$|^workload profile$|^power (performance )?profile|^application profile"
                   r"|^power/performance profile",
        "name": r"^sysprofile$|chooseoperatingmode$|^workloadprofile$|^powerprofile$",
        "related": r"profile|operating mode"},
    "snc": {
        "display": r"sub[- ]?numa|\bsnc\b", "name": r"subnuma|(^|_)snc(en)?$|^snc",
        "exclude": r"changed|status|current",
        "related": r"numa|cluster"},
    "nps": {
        "display": r"numa (memory )?(domains?|nodes?) per socket|\bnps\b|nodes per socket",
        "name": r"^nps|numa.*persocket|memorydomainspersocket",
        "related": r"numa|cluster"},
}
_ON = ("enabled", "enable", "on", "yes", "true")
_OFF = ("disabled", "disable", "off", "no", "false")
_WORDS = {"one": 1, "two": 2, "four": 4, "hemisphere": 2, "quadrant": 4}
_PROFILE_VALUES = {
    "performance": r"^(max(imum)? ?performance( mode)?|performance|perf ?optimized|high ?performance ?compute\b.*|hpc( profile)?"
                   r"|static ?high ?perf.*)$",
    "efficiency": r"efficien|power ?sav|per ?watt|minimal ?power",
    "custom": r"^custom( mode)?$",
}


def norm(text):
    text = re.sub(r"\((r|tm)\)|[\u00ae\u2122]", "", str(text or ""), flags=re.I)
    return re.sub(r"\s+", " ", text).strip().lower()


def _family(setting, wanted):
    if setting == "snc":
        return "nps" if str(wanted).startswith("nps") else "snc"
    return setting


def _hint_names(vendor, setting):
    """(this vendor's hint names, every other vendor's hint names) for a setting (or "nps")."""
    own = [name for name, _values in HINTS.get(vendor, {}).get(setting, [])]
    other = []
    for other_vendor in sorted(HINTS):
        if other_vendor != vendor:
            other.extend(name for name, _v in HINTS[other_vendor].get(setting, []) if name not in own + other)
    return own, other


def _hint_value(vendor, setting, attribute, wanted):
    for vendor_name in [vendor] + sorted(HINTS):
        for name, values in HINTS.get(vendor_name, {}).get(setting, []):
            if name == attribute and wanted in values:
                return values[wanted]
    return None


def candidates(setting, family, registry, vendor):
    """[(score, name, [reasons])] of the registry attributes that may be this setting, best first."""
    meta = _META[family]
    own, other = _hint_names(vendor, family)
    out = []
    for name, spec in registry.items():
        display, lname = norm(spec["display"]), name.lower()
        if meta.get("exclude") and re.search(meta["exclude"], display):
            continue
        # "Disable Hyper-Threading", "SR-IOV Support": the topic without the verb around it
        core = re.sub(r"^(disable|enable)\s+|\s+(disable|enable|support)$", "", display)
        score, why = 0, []
        if name in own:
            score, why = score + 100, why + ["known %s name" % vendor]
        elif name in other:
            score, why = score + 50, why + ["known name on other BMCs"]
        if display and (re.search(meta["display"], display) or re.search(meta["display"], core)):
            score, why = score + 20, why + ["DisplayName %r" % spec["display"]]
        if re.search(meta["name"], lname):
            score, why = score + 10, why + ["name"]
        if score and meta.get("help") and re.search(meta["help"], norm(spec["help"])):
            score, why = score + 5, why + ["HelpText"]
        if score >= 10:
            out.append((score, name, why))
    out.sort(key=lambda item: (-item[0], item[1]))
    return out


def related(family, registry, exclude=()):
    """Attributes whose name or DisplayName only mentions the topic: named when nothing resolves."""
    pattern = _META[family]["related"]
    return sorted(name for name, spec in registry.items()
                  if name not in exclude and (re.search(pattern, norm(spec["display"])) or re.search(pattern, name.lower())))


def _labels(spec, value):
    labels = [norm(value)]
    labels.extend(norm(shown) for shown, raw in spec["display_values"].items() if raw == value)
    return labels


def inverted(name, spec):
    """True when the switch's meaning is negative ("Disable Hyper-Threading"). The DisplayName is
    what BIOS setup shows beside the values, so it decides; the name only when there is none
    (AMI's ProcessorHyperThreadingDisable is shown as "Hyper-Threading": Enabled means on)."""
    display = norm(spec["display"])
    if display:
        return bool(re.search(r"\bdisabl", display))
    return bool(re.search(r"disable$|^disable", name.lower())) and not norm(spec["help"]).startswith("enable")


def bool_value(name, spec, wanted):
    """(raw value, how) for a yes/no setting, or (None, why not)."""
    if spec["type"] == "Boolean":
        value = (not wanted) if inverted(name, spec) else bool(wanted)
        return value, "Boolean %s" % value
    if spec["values"] is None:
        return None, "%s is a %s attribute, not a switch" % (name, spec["type"])
    flip = inverted(name, spec)
    look = _ON if bool(wanted) != flip else _OFF
    found = [v for v in spec["values"] if any(label in look for label in _labels(spec, v))]
    if len(found) == 1:
        how = "%r means %s" % (found[0], "on" if wanted else "off")
        if flip:
            how += " (inverted switch %r)" % (spec["display"] or name)
        elif name.lower().endswith("disable"):
            how += " (the name ends in Disable, but the registry shows it as %r)" % spec["display"]
        return found[0], how
    return None, "%s values %s have no single %s" % (name, list(spec["values"]), "on" if wanted else "off")


def cluster_count(spec, value):
    """How many clusters/domains a value stands for: "2-Way" 2, "SNC4" 4, "Quadrant" 4,
    "One memory domain per socket" 1; 0 for a plain off; None when it does not say."""
    for label in _labels(spec, value):
        if label in _OFF:
            return 0
        match = re.search(r"(?:snc|nps)[ -]?(\d)\b|(\d+)[- ]?(?:way|clusters?|domains?|nodes?)\b", label)
        if match:
            return int(match.group(1) or match.group(2))
        for word, count in _WORDS.items():
            if re.search(r"\b%s\b" % word, label):
                return count
    return None


def numa_value(name, spec, family, wanted):
    if spec["values"] is None:
        return None, "%s is a %s attribute" % (name, spec["type"])
    want = {"off": 0, "snc2": 2, "snc4": 4, "nps1": 1, "nps2": 2, "nps4": 4}[wanted]
    counts = dict((v, cluster_count(spec, v)) for v in spec["values"])
    found = [v for v, c in counts.items() if c == want]
    if len(found) == 1:
        return found[0], "%r is %s" % (found[0], "off" if want == 0 else "%d %s" % (
            want, "clusters per socket" if family == "snc" else "NUMA domains per socket"))
    if want and not any(c for c in counts.values()) and any(
            any(label in _ON for label in _labels(spec, v)) for v in spec["values"]):
        return None, ("%s offers only %s: how many clusters 'Enabled' makes depends on the CPU, so %s is not guessed; "
                      "set it with attributes if you know" % (name, "/".join(spec["values"]), wanted))
    return None, "%s offers %s, none is %s" % (name, "/".join(map(str, spec["values"])), wanted)


def profile_value(name, spec, wanted):
    if spec["values"] is None:
        return None, "%s is a %s attribute" % (name, spec["type"])
    found = [v for v in spec["values"] if any(re.search(_PROFILE_VALUES[wanted], label) for label in _labels(spec, v))]
    if len(found) == 1:
        return found[0], "%r means %s" % (found[0], wanted)
    if found:
        return None, "%s: several values mean %s (%s)" % (name, wanted, ", ".join(found))
    return None, "%s offers %s, none means %s" % (name, "/".join(map(str, spec["values"])), wanted)


def pick_value(setting, family, name, spec, wanted, vendor):
    """(raw value, how) or (None, why not), the vendor hint first when the registry has it."""
    hint = _hint_value(vendor, family, name, wanted)
    if hint is not None and (spec["values"] is None or hint in spec["values"]):
        return hint, "%r is the known value for %s" % (hint, wanted)
    if setting == "snc":
        return numa_value(name, spec, family, wanted)
    if setting == "power_profile":
        return profile_value(name, spec, wanted)
    return bool_value(name, spec, wanted)


def resolve(setting, wanted, registry, vendor=None):
    """One portable setting against one registry: {"setting", "wanted", "attribute", "value",
    "how", "candidates", "problem"}; problem is None when attribute and value are resolved."""
    family = _family(setting, wanted)
    out = {"setting": setting, "wanted": wanted, "attribute": None, "value": None, "how": None,
           "candidates": [], "problem": None}
    found = candidates(setting, family, registry, vendor)
    tried = []
    for score, name, why in found:
        value, how = pick_value(setting, family, name, registry[name], wanted, vendor)
        tried.append((score, name, why, value, how))
    out["candidates"] = [name for _s, name, _w, _v, _h in tried]
    viable = [t for t in tried if t[3] is not None]
    if viable:
        best = [t for t in viable if t[0] == viable[0][0]]
        if len(best) > 1 and len(set((t[1], t[3]) for t in best)) > 1:
            out["problem"] = "ambiguous on this BMC: %s could each be %s=%s; set the one you mean with attributes" % (
                " and ".join("%s=%r" % (t[1], t[3]) for t in best), setting, wanted)
            return out
        score, name, why, value, how = viable[0]
        out.update(attribute=name, value=value, how="%s (%s); %s" % (name, ", ".join(why), how))
        others = [t[1] for t in tried if t[1] != name]
        if others:
            out["how"] += "; other candidates: %s" % ", ".join(others)
        return out
    if setting == "snc" and not tried:
        other = "nps" if family == "snc" else "snc"
        if candidates(setting, other, registry, vendor):
            names = [n for _s, n, _w in candidates(setting, other, registry, vendor)]
            out["candidates"] = names
            out["problem"] = ("%s=%s is %s, but this BMC has %s (%s): use %s" % (
                setting, wanted, "Intel sub-NUMA clustering" if family == "snc" else "AMD NUMA nodes per socket",
                "AMD NUMA nodes per socket" if family == "snc" else "Intel sub-NUMA clustering", ", ".join(names),
                "nps1/nps2/nps4" if family == "snc" else "off/snc2/snc4"))
            return out
    if tried:
        out["problem"] = "not available on this BMC: " + "; ".join(t[4] for t in tried)
    else:
        near = related(family, registry)
        out["problem"] = "not available on this BMC: no attribute for %s in the registry%s" % (
            setting, (" (related, not the same thing: %s)" % ", ".join(near[:8])) if near else "")
        out["candidates"] = near[:8]
    return out


def resolve_without_registry(setting, wanted, current, vendor):
    """No registry: only a vendor hint whose attribute exists in the current attributes, value unchecked."""
    out = {"setting": setting, "wanted": wanted, "attribute": None, "value": None, "how": None,
           "candidates": [], "problem": None}
    for name, values in HINTS.get(vendor, {}).get(_family(setting, wanted), []):
        if name in current and wanted in values:
            out.update(attribute=name, value=values[wanted],
                       how="%s (known %s name; no registry: value %r unchecked)" % (name, vendor, values[wanted]))
            return out
        if name in current and setting != "snc" and setting != "power_profile":
            raw = current[name]
            pair = {"enabled": ("Enabled", "Disabled"), "disabled": ("Enabled", "Disabled"),
                    "enable": ("Enable", "Disable"), "disable": ("Enable", "Disable")}.get(norm(raw))
            if pair:
                value = pair[0] if wanted else pair[1]
                out.update(attribute=name, value=value,
                           how="%s (known %s name; no registry: value %r follows the current %r)" % (name, vendor, value, raw))
                return out
    out["problem"] = "not available without the BMC's attribute registry (no known %s name among the current attributes)" % (
        vendor or "vendor")
    return out
