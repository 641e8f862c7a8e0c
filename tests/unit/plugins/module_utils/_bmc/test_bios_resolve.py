"""Portable settings resolved on registries written by hand for each rule (not from the code):
values by meaning, inverted switches, SNC vs NPS, binary SNC, ambiguity, hints, no registry."""
import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_registry as reg
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_resolve as res


def attr(name, display, values=None, kind="Enumeration", help_text="", shown=None):
    entry = {"AttributeName": name, "DisplayName": display, "Type": kind, "HelpText": help_text, "ReadOnly": False}
    if values is not None:
        entry["Value"] = [{"ValueName": v, "ValueDisplayName": (shown or {}).get(v, v)} for v in values]
    return entry


def registry(*entries):
    return reg.parse_registry({"RegistryEntries": {"Attributes": list(entries)}})


AMI_SNC = attr("SncEn", "SNC", ["Disable", "Enable SNC2 (2-clusters)", "Enable SNC4 (4-clusters)", "Auto"])


@pytest.mark.parametrize("values,wanted,expect", [
    (["Disable", "Enable SNC2 (2-clusters)", "Enable SNC4 (4-clusters)", "Auto"], "snc4", "Enable SNC4 (4-clusters)"),
    (["Disable", "Enable SNC2 (2-clusters)", "Enable SNC4 (4-clusters)", "Auto"], "off", "Disable"),
    (["Disabled", "SNC2", "SNC4"], "snc2", "SNC2"),
    (["Disabled", "2-Way", "4-Way"], "snc4", "4-Way"),
    (["Disabled", "Hemisphere", "Quadrant"], "snc4", "Quadrant"),
])
def test_snc_value_by_meaning(values, wanted, expect):
    got = res.resolve("snc", wanted, registry(attr("SubNumaX", "Sub-NUMA Clustering", values)), None)
    assert (got["attribute"], got["value"], got["problem"]) == ("SubNumaX", expect, None)


def test_binary_snc_is_not_guessed_and_names_the_attribute():
    got = res.resolve("snc", "snc4", registry(attr("Processors_SNC", "SNC", ["Disabled", "Enabled"])), "lenovo")
    assert got["attribute"] is None and "offers only Disabled/Enabled" in got["problem"] and got["candidates"] == ["Processors_SNC"]
    assert res.resolve("snc", "off", registry(attr("Processors_SNC", "SNC", ["Disabled", "Enabled"])), None)["value"] == "Disabled"


def test_nps_on_amd_and_snc_named_not_guessed():
    amd = registry(attr("NpsX", "NUMA nodes per socket", ["NPS1", "NPS2", "NPS4", "Auto"]))
    assert res.resolve("snc", "nps2", amd, None)["value"] == "NPS2"
    wrong = res.resolve("snc", "snc4", amd, None)
    assert wrong["attribute"] is None and "AMD NUMA nodes per socket (NpsX): use nps1/nps2/nps4" in wrong["problem"]
    intel = res.resolve("snc", "nps4", registry(AMI_SNC), None)
    assert "Intel sub-NUMA clustering (SncEn): use off/snc2/snc4" in intel["problem"]


@pytest.mark.parametrize("display,values,wanted,expect", [
    ("Hyper-Threading", ["Enabled", "Disabled"], True, "Enabled"),
    ("Disable Hyper-Threading", ["Enabled", "Disabled"], True, "Disabled"),      # inverted switch
    ("Disable Hyper-Threading", ["Yes", "No"], False, "Yes"),
    ("Hyper-Threading [ALL]", ["Enable", "Disable"], False, "Disable"),
])
def test_switch_polarity_from_the_display_name(display, values, wanted, expect):
    got = res.resolve("hyperthreading", wanted, registry(attr("HtKnob", display, values)), None)
    assert got["value"] == expect, got


def test_disable_in_the_name_only_follows_the_display_name():
    # AMI ProcessorHyperThreadingDisable is shown as "Hyper-Threading": Enabled means on
    got = res.resolve("hyperthreading", True, registry(attr("ProcessorHyperThreadingDisable", "Hyper-Threading",
                                                            ["Enabled", "Disabled"])), None)
    assert got["value"] == "Enabled" and "ends in Disable" in got["how"]
    nameless = res.resolve("hyperthreading", True, registry(attr("HyperThreadingDisable", "", ["Enabled", "Disabled"])), None)
    assert nameless["value"] == "Disabled"


def test_boolean_type_attribute():
    got = res.resolve("sriov", True, registry(attr("SriovOn", "SR-IOV Support", kind="Boolean")), None)
    assert got["value"] is True


def test_ambiguous_without_a_hint_names_both_and_a_hint_decides():
    two = registry(attr("SriovA", "SR-IOV Support", ["Enabled", "Disabled"]), attr("SriovB", "SR-IOV Support", ["Enable", "Disable"]))
    got = res.resolve("sriov", True, two, None)
    assert got["attribute"] is None and got["problem"].startswith("ambiguous") and "SriovA" in got["problem"] and "SriovB" in got["problem"]
    hinted = registry(attr("SRIOVEnable", "SR-IOV Support", ["Enable", "Disable"]), attr("SriovSupport", "SR-IOV Support", ["Enabled", "Disabled"]))
    chosen = res.resolve("sriov", True, hinted, "ami")
    assert chosen["attribute"] == "SRIOVEnable" and "other candidates: SriovSupport" in chosen["how"]


def test_power_profile_values_by_meaning_and_ambiguity():
    values = ["PerfOptimized", "PerfPerWattOptimizedDapc", "PerfPerWattOptimizedOs", "Custom"]
    profile = registry(attr("PlatformProfile", "System Profile", values, shown={"PerfOptimized": "Performance"}))
    assert res.resolve("power_profile", "performance", profile, None)["value"] == "PerfOptimized"    # by its display name
    assert "several values mean efficiency" in res.resolve("power_profile", "efficiency", profile, None)["problem"]
    assert res.resolve("power_profile", "custom", profile, None)["value"] == "Custom"
    # Dell's own name: the known value decides between the two per-watt profiles
    dell = registry(attr("SysProfile", "System Profile", ["PerfOptimized", "PerfPerWattOptimizedDapc", "PerfPerWattOptimizedOs"]))
    assert res.resolve("power_profile", "efficiency", dell, "dell")["value"] == "PerfPerWattOptimizedDapc"


def test_excluded_and_related_attributes():
    regs = registry(attr("ControlIommu", "Pre-boot DMA Protection", ["Disable", "Enable"]),
                    attr("UmaBasedClustering", "UMA-Based Clustering", ["Hemisphere (2-clusters)", "Quadrant (4-clusters)"]))
    vtd = res.resolve("vtd", True, regs, None)
    assert vtd["attribute"] is None and "ControlIommu" in vtd["problem"]          # related, never chosen
    snc = res.resolve("snc", "snc4", regs, None)
    assert snc["attribute"] is None and "related, not the same thing: UmaBasedClustering" in snc["problem"]


def test_without_registry_only_known_names_with_current_values():
    got = res.resolve_without_registry("hyperthreading", False, {"LogicalProc": "Enabled"}, "dell")
    assert (got["attribute"], got["value"]) == ("LogicalProc", "Disabled") and "unchecked" not in got["how"]
    snc = res.resolve_without_registry("snc", "snc2", {"SubNumaCluster": "Disabled"}, "dell")
    assert snc["value"] == "2-Way" and "unchecked" in snc["how"]
    assert res.resolve_without_registry("vtd", True, {"Other": 1}, None)["problem"]


@pytest.mark.parametrize("wanted,names,score", [
    ("BiosAttributeRegistry.v1_0_3", ["BiosAttributeRegistry.v1_0_0"], 1),
    ("BiosAttributeRegistry.v1_0_3", ["/redfish/v1/Registries/BiosAttributeRegistry.v1_0_3"], 2),
    ("BiosAttributeRegistry113.1.1.3", ["BiosAttributeRegistry113.en-US.1.1.3"], 1),
    ("BiosAttributeRegistryA42.v1_2_60", ["BiosAttributeRegistryA43.v1_2_60"], 0),
    ("BiosAttributeRegistry.1.0.0", ["Base.1.12.1", "BiosAttributeRegistry.1.0"], 1),
])
def test_registry_names_match_version_tolerant(wanted, names, score):
    assert reg.registry_match(wanted, *names) == score


def test_locations_english_first_then_publication():
    entry = {"Location": [{"Language": "ja", "Uri": "/ja"}, {"Language": "en", "Uri": "/en"},
                          {"Language": "en", "PublicationUri": "https://example.invalid/r.json"}]}
    assert reg.locations(entry) == [("Uri", "/en"), ("Uri", "/ja"), ("PublicationUri", "https://example.invalid/r.json")]


def test_dependency_terms_and_or():
    terms = [{"attribute": "A", "condition": "EQU", "value": "x", "join": "OR"},
             {"attribute": "B", "condition": "EQU", "value": "y", "join": "AND"}]
    assert reg.holds(terms, {"A": "x", "B": "y"}) and not reg.holds(terms, {"A": "x", "B": "z"})
    assert reg.holds([{"attribute": "N", "condition": "GEQ", "value": 3, "join": "OR"}], {"N": 4})
