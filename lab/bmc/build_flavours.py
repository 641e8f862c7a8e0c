"""Rebuild lab/bmc/flavours/{dell,lenovo,hpe,ami}.yml from the real BMC captures.

    python -m lab.bmc.build_flavours [--realdata tests/fixtures/realdata]

Everything a flavour serves comes from its capture (tests/fixtures/realdata/redfish, NVIDIA libredfish
test mockups, MIT licence): resource paths (system, Bios, settings object, registry member and
document), the Bios's AttributeRegistry name, SupportedApplyTimes, whether the settings object holds
every attribute, ETags, Manufacturer/Model/BiosVersion, and for each attribute kept its registry
entry (DisplayName, HelpText, MenuPath, ValueName/ValueDisplayName, ReadOnly), its current value
as default, and its ReadOnly Dependencies as locks. What the capture cannot give is written below,
by hand, per flavour: which attributes to keep, the portable meaning of raw values (what the twin's
host sees after boot), and the few platform deltas the lab's HGX H100 twins need, each with its
reason (`deltas` in the generated file lists them).

The generated files are committed: the lab runs without the captures. A test
(tests/integration/redfish/test_lab_bmc.py) checks that they are what this script makes of them.
"""
import argparse
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_REALDATA = os.path.join(REPO, "tests", "fixtures", "realdata")

SPR_SNC_DELTA = ("the lab's twins are HGX H100 boards (4th-gen Xeon, SNC4 capable); the captured platform "
                 "offers fewer clustering modes")
FLAVOURS = {
    "dell": {
        "capture": "dell-r750-idrac6", "config_job": True,
        "keep": ["LogicalProc", "ProcVirtualization", "SubNumaCluster", "NodeInterleave", "SriovGlobalEnable", "SysProfile",
                 "ProcCStates", "ProcC1E", "ProcTurboMode", "ProcPwrPerf", "WorkloadProfile", "MemFrequency",
                 "SystemServiceTag", "BootMode"],
        "deltas": {"SubNumaCluster": {"add_values": [["4-Way", "4-Way Clustering"]], "why": SPR_SNC_DELTA}},
        "settings": {
            "snc": {"attribute": "SubNumaCluster", "map": {"Disabled": "off", "2-Way": "snc2", "4-Way": "snc4"}},
            "hyperthreading": {"attribute": "LogicalProc", "map": {"Enabled": True, "Disabled": False}},
            # one switch for VT-x and VT-d on PowerEdge; no BIOS switch for ACS
            "vtx": {"attribute": "ProcVirtualization", "map": {"Enabled": True, "Disabled": False}},
            "vtd": {"attribute": "ProcVirtualization", "map": {"Enabled": True, "Disabled": False}},
            "sriov": {"attribute": "SriovGlobalEnable", "map": {"Enabled": True, "Disabled": False}},
            "acs": {"fixed": True}},
    },
    "lenovo": {
        "capture": "lenovo-sr670v2-xcc", "config_job": False,
        "keep": ["Processors_SNC", "Processors_HyperThreading", "Processors_IntelVirtualizationTechnology",
                 "DevicesandIOPorts_IntelVTforDirectedIOVTd", "DevicesandIOPorts_SRIOV", "Processors_PCIeACSCTL",
                 "OperatingModes_ChooseOperatingMode", "Processors_TurboMode", "Processors_UMA_BasedClustering",
                 "Memory_SocketInterleave"],
        # The SR670 V2 (3rd-gen Xeon) offers Disabled/Enabled; ThinkSystem V3 names after Lenovo material.
        "deltas": {"Processors_SNC": {"values": [["Disabled", "Disabled"], ["SNC2", "SNC2"], ["SNC4", "SNC4"]],
                                      "why": SPR_SNC_DELTA + "; SNC2/SNC4 as Lenovo names them on V3 (unverified)"}},
        "settings": {
            "snc": {"attribute": "Processors_SNC", "map": {"Disabled": "off", "SNC2": "snc2", "SNC4": "snc4"}},
            "hyperthreading": {"attribute": "Processors_HyperThreading", "map": {"Enabled": True, "Disabled": False}},
            "vtx": {"attribute": "Processors_IntelVirtualizationTechnology", "map": {"Enabled": True, "Disabled": False}},
            "vtd": {"attribute": "DevicesandIOPorts_IntelVTforDirectedIOVTd", "map": {"Enabled": True, "Disabled": False}},
            "sriov": {"attribute": "DevicesandIOPorts_SRIOV", "map": {"Enabled": True, "Disabled": False}},
            "acs": {"attribute": "Processors_PCIeACSCTL", "map": {"Enabled": True, "Disabled": False}}},
    },
    "hpe": {
        "capture": "hpe-dl385g10plus-ilo5", "config_job": False,
        "keep": ["NumaMemoryDomainsPerSocket", "ProcSMT", "ProcAmdIoVt", "Sriov", "AccessControlService", "WorkloadProfile",
                 "LastLevelCacheAsNUMANode", "PowerRegulator", "AmdDmaRemapping"],
        "deltas": {},
        # AMD EPYC: NPS, SMT, IOMMU; AMD-V has no attribute in this registry
        "settings": {
            "snc": {"attribute": "NumaMemoryDomainsPerSocket", "map": {
                "OneMemoryDomainPerSocket": "nps1", "TwoMemoryDomainsPerSocket": "nps2",
                "FourMemoryDomainsPerSocket": "nps4", "Auto": "nps1"}},
            "hyperthreading": {"attribute": "ProcSMT", "map": {"Enabled": True, "Disabled": False}},
            "vtx": {"fixed": True},
            "vtd": {"attribute": "ProcAmdIoVt", "map": {"Enabled": True, "Disabled": False}},
            "sriov": {"attribute": "Sriov", "map": {"Enabled": True, "Disabled": False}},
            "acs": {"attribute": "AccessControlService", "map": {"Enabled": True, "Disabled": False}}},
    },
    "ami": {
        "capture": "nvidia-dgx-h100-ami", "config_job": False, "if_match": "required",
        "keep": ["ProcessorHyperThreadingDisable", "ProcessorVmxEnable", "VTdSupport", "SRIOVEnable", "SriovSupport",
                 "UmaBasedClustering", "NumaEn", "ApplicationProfile", "ControlIommu"],
        # The DGX capture has no SNC attribute at all (tests on the capture prove the module refuses snc
        # there). The lab's twin3 is an HGX H100 whose SNC the lab switches: an AMI Aptio setup name
        # and values as on other vendors' HGX boards, marked unverified.
        "deltas": {"SncEn": {"entry": {
            "AttributeName": "SncEn", "DisplayName": "SNC", "Type": "Enumeration", "ReadOnly": False,
            "HelpText": "Sub NUMA Clustering (SNC) splits the LLC and memory controllers into clusters.",
            "Value": [{"ValueName": v, "ValueDisplayName": v} for v in (
                "Disable", "Enable SNC2 (2-clusters)", "Enable SNC4 (4-clusters)", "Auto")],
            "DefaultValue": "Auto"}, "default": "Auto",
            "why": "not in the DGX capture; " + SPR_SNC_DELTA + " (AMI Aptio reference name, unverified)"}},
        "settings": {
            "snc": {"attribute": "SncEn", "map": {"Disable": "off", "Auto": "off", "Enable SNC2 (2-clusters)": "snc2",
                                                  "Enable SNC4 (4-clusters)": "snc4"}},
            # shown as "Hyper-Threading": Enabled means on, whatever the name says
            "hyperthreading": {"attribute": "ProcessorHyperThreadingDisable", "map": {"Enabled": True, "Disabled": False}},
            "vtx": {"attribute": "ProcessorVmxEnable", "map": {"Enable": True, "Disable": False}},
            "vtd": {"attribute": "VTdSupport", "map": {"Enable": True, "Disable": False}},
            "sriov": {"attribute": "SRIOVEnable", "map": {"Enable": True, "Disable": False}},
            "acs": {"fixed": True}},
    },
}


def load(root, path):
    """A capture resource by its Redfish path, case-insensitively (HPE links lower-case paths)."""
    parts = [p for p in path.strip("/").split("/") if p]
    here = root
    for part in parts:
        names = {n.lower(): n for n in os.listdir(here)}
        if part.lower() not in names:
            raise KeyError("%s: no %s under %s" % (path, part, here))
        here = os.path.join(here, names[part.lower()])
    with open(os.path.join(here, "index.json")) as handle:
        return json.load(handle)


def registry_of(root, bios):
    """(member path, member, document) of the Bios's AttributeRegistry, as the capture links it."""
    wanted = bios["AttributeRegistry"]
    base = wanted.split(".")[0].lower()
    for member in load(root, "/redfish/v1/Registries")["Members"]:
        path = member["@odata.id"]
        if base in path.lower():
            entry = load(root, path)
            uri = [loc["Uri"] for loc in entry["Location"] if str(loc.get("Language", "en")).lower().startswith("en")][0]
            return path, entry, load(root, uri), uri
    raise KeyError("registry %s not in the capture" % wanted)


def attribute(entry, current):
    out = {"default": current, "display": (entry.get("DisplayName") or "").strip(), "help": entry.get("HelpText") or "",
           "menu": entry.get("MenuPath") or ""}
    kind = entry.get("Type", "Enumeration")
    if kind != "Enumeration":
        out["type"] = kind
    else:
        out["values"] = [v["ValueName"] for v in entry.get("Value") or []]
        shown = dict((v["ValueName"], v.get("ValueDisplayName")) for v in entry.get("Value") or []
                     if v.get("ValueDisplayName") not in (None, v["ValueName"]))
        if shown:
            out["shown"] = shown
    if entry.get("ReadOnly"):
        out["read_only"] = True
    return out


def locks(document, kept):
    """Single-term ReadOnly dependencies among kept attributes: {attr: {attribute, value, condition}}."""
    out = {}
    for dep in (document.get("RegistryEntries") or {}).get("Dependencies") or []:
        body = dep.get("Dependency") or {}
        terms = body.get("MapFrom") or []
        if body.get("MapToProperty") != "ReadOnly" or body.get("MapToValue") not in (True, "true") or len(terms) != 1:
            continue
        name, term = body["MapToAttribute"], terms[0]
        if name in kept and term["MapFromAttribute"] in kept and term.get("MapFromCondition") in ("EQU", "NEQ"):
            out[name] = {"attribute": term["MapFromAttribute"], "value": term["MapFromValue"],
                         "condition": term["MapFromCondition"]}
    return out


def build(vendor, realdata):
    spec = FLAVOURS[vendor]
    root = os.path.join(realdata, "redfish", spec["capture"], "redfish", "v1")
    root = os.path.dirname(os.path.dirname(root))
    systems = load(root, "/redfish/v1/Systems")["Members"]
    system_path, system = next((m["@odata.id"], load(root, m["@odata.id"])) for m in systems
                               if load(root, m["@odata.id"]).get("Bios"))
    bios_path = system["Bios"]["@odata.id"]
    bios = load(root, bios_path)
    settings_path = bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
    settings_obj = load(root, settings_path)
    member_path, member, document, doc_uri = registry_of(root, bios)
    entries = dict((e["AttributeName"], e) for e in document["RegistryEntries"]["Attributes"])
    attrs, deltas = {}, {}
    for name in spec["keep"]:
        attrs[name] = attribute(entries[name], bios["Attributes"][name])
    for name, delta in spec["deltas"].items():
        if "entry" in delta:
            attrs[name] = attribute(delta["entry"], delta["default"])
        elif "values" in delta:
            attrs[name]["values"] = [v for v, _shown in delta["values"]]
            attrs[name]["shown"] = dict((v, s) for v, s in delta["values"] if s != v)
            attrs[name].setdefault("shown", {})
            if not attrs[name]["shown"]:
                del attrs[name]["shown"]
        else:
            attrs[name]["values"] += [v for v, _shown in delta["add_values"]]
            attrs[name].setdefault("shown", {}).update(dict(delta["add_values"]))
        deltas[name] = delta["why"]
    manager = (system.get("Links", {}).get("ManagedBy") or [{}])[0].get("@odata.id", "")
    out = {
        "vendor": vendor, "capture": spec["capture"],
        "manufacturer": system.get("Manufacturer"), "model": system.get("Model"),
        "bios_version": system.get("BiosVersion") or "unknown",
        "system_id": system_path.rstrip("/").rsplit("/", 1)[1], "manager_id": manager.rstrip("/").rsplit("/", 1)[1],
        "bios_path": bios_path, "settings_path": settings_path,
        "supported_apply_times": bios["@Redfish.Settings"].get("SupportedApplyTimes") or [],
        # Lenovo Bios/Pending, HPE bios/settings, AMI Bios/SD hold every attribute; Dell's only the pending ones
        "settings_full": bool(settings_obj.get("Attributes")),
        "if_match": spec.get("if_match", "optional"),
        "config_job": spec["config_job"],
        "registry": {"id": bios["AttributeRegistry"], "file_path": member_path, "file_id": member.get("Id"),
                     "file_registry": member.get("Registry"), "uri": doc_uri, "document_id": document.get("Id"),
                     "language": document.get("Language", "en"), "owning_entity": document.get("OwningEntity")},
        "attributes": attrs,
        "locks": locks(document, set(attrs)),
        "deltas": deltas,
        "settings": spec["settings"],
    }
    if spec["config_job"]:
        jobs = ((load(root, manager).get("Links") or {}).get("Oem") or {}).get("Dell", {}).get("Jobs", {}).get("@odata.id")
        out["jobs_link"] = jobs
    return out


HEADER = """# Generated by `python -m lab.bmc.build_flavours` from the real capture tests/fixtures/realdata/redfish/%s
# (NVIDIA libredfish test mockups, MIT licence). Do not edit by hand: change lab/bmc/build_flavours.py.
# Paths, registry names and locations, apply times, ETags, attribute entries and defaults are the
# capture's; `deltas` lists what the lab adds for its HGX H100 twins, and why.
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--realdata", default=DEFAULT_REALDATA)
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.realdata, "redfish")):
        sys.exit("build_flavours: %s/redfish: no such folder (the real captures live in tests/fixtures/realdata)" % args.realdata)
    for vendor in sorted(FLAVOURS):
        data = build(vendor, args.realdata)
        path = os.path.join(HERE, "flavours", vendor + ".yml")
        with open(path, "w") as handle:
            handle.write(HEADER % FLAVOURS[vendor]["capture"])
            yaml.safe_dump(data, handle, sort_keys=False, width=120, allow_unicode=True)
        print("wrote %s (%d attributes, %d deltas)" % (path, len(data["attributes"]), len(data["deltas"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
