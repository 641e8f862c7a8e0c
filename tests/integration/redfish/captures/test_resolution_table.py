"""What every portable setting resolves to on each real capture, found through the module's own
discovery (service root -> Systems -> Bios -> AttributeRegistry -> Registries -> Location) against
the capture server, checked against a table written by hand from the captures' registries.

GPUFLEET_RESOLUTION_TABLE=<file> also writes the table as Markdown (docs/redfish.md carries it).
"""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios as _bios
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import RedfishClient

ASKED = [("snc", "off"), ("snc", "snc2"), ("snc", "snc4"), ("snc", "nps1"), ("snc", "nps4"),
         ("hyperthreading", True), ("hyperthreading", False), ("vtx", True), ("vtd", True), ("sriov", True),
         ("acs", False), ("power_profile", "performance"), ("power_profile", "efficiency"), ("power_profile", "custom")]
FOLDERS = ("dell-r750-idrac6", "lenovo-sr670v2-xcc", "hpe-dl385g10plus-ilo5", "nvidia-dgx-h100-ami")
NA = None  # not available on this BMC (the reason is checked separately)

# Read by hand from each capture's registry (DisplayName, values), not from the code.
EXPECTED = {
    "dell-r750-idrac6": {
        ("snc", "off"): ("SubNumaCluster", "Disabled"), ("snc", "snc2"): ("SubNumaCluster", "2-Way"),
        ("snc", "snc4"): NA, ("snc", "nps1"): NA, ("snc", "nps4"): NA,
        ("hyperthreading", True): ("LogicalProc", "Enabled"), ("hyperthreading", False): ("LogicalProc", "Disabled"),
        ("vtx", True): ("ProcVirtualization", "Enabled"), ("vtd", True): ("ProcVirtualization", "Enabled"),
        ("sriov", True): ("SriovGlobalEnable", "Enabled"), ("acs", False): NA,
        ("power_profile", "performance"): ("SysProfile", "PerfOptimized"),
        ("power_profile", "efficiency"): ("SysProfile", "PerfPerWattOptimizedDapc"),
        ("power_profile", "custom"): ("SysProfile", "Custom")},
    "lenovo-sr670v2-xcc": {
        ("snc", "off"): ("Processors_SNC", "Disabled"), ("snc", "snc2"): NA, ("snc", "snc4"): NA,
        ("snc", "nps1"): NA, ("snc", "nps4"): NA,
        ("hyperthreading", True): ("Processors_HyperThreading", "Enabled"),
        ("hyperthreading", False): ("Processors_HyperThreading", "Disabled"),
        ("vtx", True): ("Processors_IntelVirtualizationTechnology", "Enabled"),
        ("vtd", True): ("DevicesandIOPorts_IntelVTforDirectedIOVTd", "Enabled"),
        ("sriov", True): ("DevicesandIOPorts_SRIOV", "Enabled"), ("acs", False): ("Processors_PCIeACSCTL", "Disabled"),
        ("power_profile", "performance"): ("OperatingModes_ChooseOperatingMode", "MaximumPerformance"),
        ("power_profile", "efficiency"): ("OperatingModes_ChooseOperatingMode", "Efficiency_FavorPerformance"),
        ("power_profile", "custom"): ("OperatingModes_ChooseOperatingMode", "CustomMode")},
    "hpe-dl385g10plus-ilo5": {
        ("snc", "off"): NA, ("snc", "snc2"): NA, ("snc", "snc4"): NA,
        ("snc", "nps1"): ("NumaMemoryDomainsPerSocket", "OneMemoryDomainPerSocket"),
        ("snc", "nps4"): ("NumaMemoryDomainsPerSocket", "FourMemoryDomainsPerSocket"),
        ("hyperthreading", True): ("ProcSMT", "Enabled"), ("hyperthreading", False): ("ProcSMT", "Disabled"),
        ("vtx", True): NA, ("vtd", True): ("ProcAmdIoVt", "Enabled"), ("sriov", True): ("Sriov", "Enabled"),
        ("acs", False): ("AccessControlService", "Disabled"),
        ("power_profile", "performance"): ("WorkloadProfile", "HighPerformanceCompute(HPC)"),
        ("power_profile", "efficiency"): ("WorkloadProfile", "GeneralPowerEfficientCompute"),
        ("power_profile", "custom"): ("WorkloadProfile", "Custom")},
    "nvidia-dgx-h100-ami": {
        ("snc", "off"): NA, ("snc", "snc2"): NA, ("snc", "snc4"): NA, ("snc", "nps1"): NA, ("snc", "nps4"): NA,
        ("hyperthreading", True): ("ProcessorHyperThreadingDisable", "Enabled"),
        ("hyperthreading", False): ("ProcessorHyperThreadingDisable", "Disabled"),
        ("vtx", True): ("ProcessorVmxEnable", "Enable"), ("vtd", True): ("VTdSupport", "Enable"),
        ("sriov", True): ("SRIOVEnable", "Enable"), ("acs", False): NA,
        ("power_profile", "performance"): NA, ("power_profile", "efficiency"): ("ApplicationProfile", "Energy Efficiency"),
        ("power_profile", "custom"): NA},
}


def resolve_all(server):
    client = RedfishClient(server.baseurl, server.conn()["username"], server.conn()["password"], ca_path=server.ca, retries=0)
    bios = _bios.Bios(client)
    registry = bios.load_registry()
    assert registry, bios.registry_note
    out = {}
    for setting, value in ASKED:
        res = _bios.resolve_lib.resolve(setting, value, registry, bios.vendor)
        out[(setting, value)] = res
    return bios, out


def cell(res):
    if res["problem"]:
        return "not available: " + res["problem"].replace("not available on this BMC: ", "").replace("|", "/")
    return "`%s: %s`" % (res["attribute"], res["value"])


def test_every_setting_resolves_or_says_why(capture_bmc):
    table = {}
    for folder in FOLDERS:
        server = capture_bmc(folder)
        bios, results = resolve_all(server)
        table[folder] = (bios, results)
        for key, want in EXPECTED[folder].items():
            res = results[key]
            if want is NA:
                assert res["problem"] and res["attribute"] is None, (folder, key, res)
            else:
                assert (res["attribute"], res["value"]) == want, (folder, key, res)
                assert res["problem"] is None and res["how"].startswith(want[0])
        assert patches_none(server)
    target = os.environ.get("GPUFLEET_RESOLUTION_TABLE")
    if target:
        lines = ["| setting | " + " | ".join(FOLDERS) + " |", "| --- |" + " --- |" * len(FOLDERS)]
        for key in ASKED:
            lines.append("| %s: %s | " % (key[0], str(key[1]).lower()) + " | ".join(cell(table[f][1][key]) for f in FOLDERS) + " |")
        lines.append("| registry found at | " + " | ".join("`%s`" % table[f][0].registry_uri for f in FOLDERS) + " |")
        with open(target, "w") as handle:
            handle.write("\n".join(lines) + "\n")


def patches_none(server):
    return server.capture.patches() == []


@pytest.mark.parametrize("folder,where", [
    ("dell-r750-idrac6", "/redfish/v1/Systems/System.Embedded.1/Bios/BiosRegistry"),
    ("lenovo-sr670v2-xcc", "/redfish/v1/schemas/registries/BiosAttributeRegistry.1.0.0.json"),
    ("hpe-dl385g10plus-ilo5", "/redfish/v1/registrystore/registries/en/biosattributeregistrya42.v1_2_60"),
    ("nvidia-dgx-h100-ami", "/redfish/v1/Registries/BiosAttributeRegistry113.en-US.1.1.3.json")])
def test_registry_found_the_standard_way(capture_bmc, folder, where):
    server = capture_bmc(folder)
    bios, _results = resolve_all(server)
    assert bios.registry_uri == where
    gets = [r[1] for r in server.capture.requests if r[0] == "GET"]
    # through the Registries member whose Id matches (Dell: the Bios names ...v1_0_3, the member is
    # ...v1_0_0) and its Location, reading only the members whose path matches, no vendor fallback
    member = [g for g in gets if g.startswith("/redfish/v1/Registries/") and g != where]
    assert len(member) == 1 and gets.index(member[0]) < gets.index(where), " ".join(gets)
    assert "registrystore" not in " ".join(g for g in gets if g != where) and len(gets) <= 10, " ".join(gets)
