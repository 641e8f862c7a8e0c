"""The rule that picks the attribute registry of a Bios that names none (bios_registry.select_registry),
on candidates written by hand: which documents count as attribute registries, the coverage
threshold, the best match, ambiguity, nothing to pick."""
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios_registry as reg

BIOS = ["A%02d" % i for i in range(20)]          # a Bios with 20 attributes A00..A19


def cand(ident, names):
    return {"id": ident, "uri": "/redfish/v1/Registries/%s/%s" % (ident, ident), "names": set(names)}


def test_documents_that_are_attribute_registries():
    entries = {"Attributes": [{"AttributeName": "A00", "Type": "Boolean"}]}
    assert reg.is_attribute_registry({"@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry", "RegistryEntries": entries})
    assert reg.is_attribute_registry({"@odata.type": "AttributeRegistry.v1_1_0.AttributeRegistry", "RegistryEntries": entries})
    assert reg.is_attribute_registry({"RegistryEntries": entries})                   # untyped: the entries decide
    # a message registry is never one, even with a RegistryEntries; a typed one without entries neither
    assert not reg.is_attribute_registry({"@odata.type": "#MessageRegistry.v1_6_0.MessageRegistry", "RegistryEntries": entries})
    assert not reg.is_attribute_registry({"@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry"})
    assert not reg.is_attribute_registry({"@odata.type": "#MessageRegistry.v1_6_0.MessageRegistry", "Messages": {}})
    assert not reg.is_attribute_registry({"RegistryEntries": {"Attributes": {}}})
    assert not reg.is_attribute_registry(None)
    assert reg.attribute_names({"RegistryEntries": {"Attributes": [{"AttributeName": "X"}, {"Type": "String"}, "junk"]}}) == {"X"}


def test_the_one_covering_registry_is_picked_over_another_devices():
    nic = cand("Nic", ["A00", "LinkSpeed", "WakeOnLan"])
    bios = cand("Bios", BIOS + ["Hidden1"])           # a registry may describe attributes the Bios does not list
    picked = reg.select_registry([nic, bios], BIOS)
    assert picked["choice"] is bios and picked["problem"] is None and not picked["ambiguous"]
    assert picked["how"] == ("the only attribute registry the service offers that matches the Bios: "
                             "Bios at /redfish/v1/Registries/Bios/Bios (describes 20 of the Bios's 20 attributes)")


def test_nearly_all_is_a_match_and_less_is_not():
    assert reg.select_registry([cand("R", BIOS[:19])], BIOS)["choice"]["id"] == "R"       # 19/20 = 95 %
    picked = reg.select_registry([cand("R", BIOS[:18]), cand("Nic", ["A00"])], BIOS)      # 18/20 = 90 %
    assert picked["choice"] is None and not picked["ambiguous"]
    assert picked["problem"] == ("no attribute registry matches the Bios's attributes (R at /redfish/v1/Registries/R/R "
                                 "(describes 18 of the Bios's 20 attributes); Nic at /redfish/v1/Registries/Nic/Nic "
                                 "(describes 1 of the Bios's 20 attributes))")


def test_the_best_of_two_matches_wins_but_equal_ones_are_ambiguous():
    picked = reg.select_registry([cand("Old", BIOS[:19]), cand("New", BIOS)], BIOS)
    assert picked["choice"]["id"] == "New" and picked["how"].startswith("the attribute registry that matches the Bios best: New")
    same = reg.select_registry([cand("One", BIOS), cand("Two", BIOS + ["Extra"])], BIOS)
    assert same["choice"] is None and same["ambiguous"]
    assert same["problem"] == ("2 attribute registries match the Bios's attributes equally: "
                               "One at /redfish/v1/Registries/One/One (describes 20 of the Bios's 20 attributes); "
                               "Two at /redfish/v1/Registries/Two/Two (describes 20 of the Bios's 20 attributes)")


def test_nothing_to_pick_and_a_bios_without_attributes():
    assert reg.select_registry([], BIOS) == {"choice": None, "problem": "no member locates an attribute registry",
                                             "ambiguous": False, "how": None}
    # a Bios listing no attributes cannot tell registries apart: one is taken, two are ambiguous
    assert reg.select_registry([cand("Only", ["X"])], [])["choice"]["id"] == "Only"
    assert reg.select_registry([cand("One", ["X"]), cand("Two", ["Y"])], [])["ambiguous"]


def test_one_registry_in_several_languages_is_not_ambiguous():
    """Separate members per language (same attributes, Ids apart from the language): English is taken."""
    ja = dict(cand("Bios.ja-JP.1.0.0", BIOS), language="ja-JP")
    en = dict(cand("Bios.en-US.1.0.0", BIOS), language="en-US")
    assert reg.select_registry([ja, en], BIOS)["choice"] is en
    # the same Id with other attributes, or another registry with the same attributes, stays ambiguous
    other = dict(cand("Bios.ja-JP.1.0.0", BIOS + ["Extra"]), language="ja-JP")
    assert reg.select_registry([other, en], BIOS)["ambiguous"]
    assert reg.select_registry([dict(cand("Vendor2.en-US.1.0.0", BIOS), language="en-US"), en], BIOS)["ambiguous"]
