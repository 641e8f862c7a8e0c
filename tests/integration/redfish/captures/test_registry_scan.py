"""redfish_bios on a service whose Bios names no AttributeRegistry (tests/fixtures/redfish/
bios-without-attributeregistry, written from the DMTF schemas; README there): the registry is found
by scanning /redfish/v1/Registries, values are checked against it before any PATCH, and the result
says which registry was used and how. Served over HTTPS by the capture server (conftest.py)."""
import copy
import json

FOLDER = "bios-without-attributeregistry"
REGISTRY = "/redfish/v1/Registries/BiosAttributeRegistry/BiosAttributeRegistry"
SOURCE = {"id": "BiosAttributeRegistry.1.0.0", "uri": REGISTRY, "found_by": "Registries scan",
          "how": "the only attribute registry the service offers that matches the Bios: BiosAttributeRegistry.1.0.0 at "
                 + REGISTRY + " (describes 9 of the Bios's 9 attributes), found in /redfish/v1/Registries (4 members read)"}


def patches(server):
    return server.capture.patches()


def registry_gets(server):
    return sorted(r[1] for r in server.capture.requests if r[0] == "GET" and r[1].startswith("/redfish/v1/Registries"))


def test_value_not_in_the_registry_refused_naming_attribute_values_and_registry(fixture_bmc, run_module):
    server = fixture_bmc(FOLDER)
    bad = run_module("redfish_bios", dict(server.conn(), attributes={"PowerProfile": "Turbo", "BootTimeoutSeconds": 600}))
    assert bad["_rc"] != 0
    assert "attribute PowerProfile: value 'Turbo' not allowed (allowed: MaxPerformance, Balanced, PowerSaver)" in bad["msg"]
    assert "attribute BootTimeoutSeconds: value 600 above the registry's UpperBound 60" in bad["msg"]
    assert ("[checked against registry BiosAttributeRegistry.1.0.0 (%s, found by Registries scan)]" % REGISTRY) in bad["msg"]
    unknown = run_module("redfish_bios", dict(server.conn(), attributes={"LinkSpeed": "100G"}))   # the NIC registry's
    assert unknown["_rc"] != 0 and "attribute LinkSpeed is not in the BIOS attribute registry" in unknown["msg"]
    assert patches(server) == []                                        # the BMC never saw a PATCH
    # what the scan read: every member, the documents served here, never a PublicationUri
    assert set(registry_gets(server)) == {"/redfish/v1/Registries", "/redfish/v1/Registries/Base",
                                          "/redfish/v1/Registries/Base/Base", "/redfish/v1/Registries/TaskEvent",
                                          "/redfish/v1/Registries/NicAttributeRegistry",
                                          "/redfish/v1/Registries/NicAttributeRegistry/NicAttributeRegistry",
                                          "/redfish/v1/Registries/BiosAttributeRegistry", REGISTRY}


def test_check_apply_rerun_reset_verify(fixture_bmc, run_module):
    server = fixture_bmc(FOLDER)
    writes = {"PowerProfile": "MaxPerformance", "IommuMode": "Enabled", "SriovSupport": "Enabled"}
    args = dict(server.conn(), attributes={"PowerProfile": "Maximum Performance", "IommuMode": "Enabled"},
                settings={"sriov": True, "hyperthreading": True})

    predicted = run_module("redfish_bios", args, check=True, diff=True)
    assert predicted["_rc"] == 0, predicted.get("msg")
    assert predicted["changed"] is True and predicted["changed_attributes"] == writes
    assert predicted["diff"] == {"before": {"PowerProfile": "Balanced", "IommuMode": "Disabled", "SriovSupport": "Disabled"},
                                 "after": writes}
    assert predicted["registry"] == REGISTRY and predicted["registry_source"] == SOURCE
    assert predicted["unvalidated"] == [] and not predicted.get("warnings")
    assert [(r["setting"], r["attribute"], r["value"]) for r in predicted["resolution"]] == [
        ("hyperthreading", "SmtMode", "Enabled"), ("sriov", "SriovSupport", "Enabled")]
    assert patches(server) == []                                        # check mode writes nothing

    first = run_module("redfish_bios", args)
    assert first["_rc"] == 0, first.get("msg")
    assert first["changed"] is True and first["changed_attributes"] == writes and first["reboot_required"] is True
    assert first["pending"] == writes and server.capture.pending() == writes
    (_method, _path, headers), = patches(server)
    assert headers.get("If-Match")

    again = run_module("redfish_bios", args)
    assert again["_rc"] == 0 and again["changed"] is False and again["reboot_required"] is True
    assert sorted(again["already_pending"]) == sorted(writes) and len(patches(server)) == 1

    power = run_module("redfish_power", dict(server.conn(), poll_interval=0.1, force_after=30, wait_timeout=60))
    assert power["_rc"] == 0 and power["changed"] is True, power.get("msg")
    done = run_module("redfish_bios", dict(args, state="verify"))
    assert done["_rc"] == 0 and done["failures"] == [] and done["pending"] == {}, done.get("msg")
    last = run_module("redfish_bios", args)
    assert last["changed"] is False and last["reboot_required"] is False and len(patches(server)) == 1


def _add_member(capture, ident, document):
    """Another Registries member locating ``document`` on the service."""
    uri = "/redfish/v1/Registries/%s/%s" % (ident, ident)
    capture.docs[uri.lower()] = dict(document, **{"@odata.id": uri, "Id": ident + ".1.0.0"})
    capture.docs[("/redfish/v1/Registries/%s" % ident).lower()] = {
        "@odata.id": "/redfish/v1/Registries/%s" % ident, "@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
        "Id": ident, "Name": ident, "Registry": ident + ".1.0", "Languages": ["en"], "Location": [{"Language": "en", "Uri": uri}]}
    capture.get("/redfish/v1/Registries")["Members"].append({"@odata.id": "/redfish/v1/Registries/%s" % ident})
    return uri


def test_two_registries_matching_equally_fail_naming_both(fixture_bmc, run_module):
    server = fixture_bmc(FOLDER)
    copy_uri = _add_member(server.capture, "BiosAttributeRegistryCopy", copy.deepcopy(server.capture.get(REGISTRY)))
    result = run_module("redfish_bios", dict(server.conn(), attributes={"PowerProfile": "MaxPerformance"}), check=True)
    assert result["_rc"] != 0
    assert "the Bios resource names no AttributeRegistry and 2 attribute registries match the Bios's attributes equally" in result["msg"]
    assert REGISTRY in result["msg"] and copy_uri in result["msg"] and "nothing written" in result["msg"]
    assert patches(server) == []


def test_no_matching_registry_warns_and_the_result_says_values_are_unchecked(fixture_bmc, run_module):
    server = fixture_bmc(FOLDER)
    members = server.capture.get("/redfish/v1/Registries")["Members"]
    members[:] = [m for m in members if not m["@odata.id"].endswith("/BiosAttributeRegistry")]
    result = run_module("redfish_bios", dict(server.conn(), attributes={"PowerProfile": "MaxPerformance"}), check=True)
    assert result["_rc"] == 0 and result["changed_attributes"] == {"PowerProfile": "MaxPerformance"}, result.get("msg")
    assert result["registry"] is None and result["registry_source"]["found_by"] is None
    assert result["unvalidated"] == ["PowerProfile"]
    why = ("the Bios resource names no AttributeRegistry and no attribute registry matches the Bios's attributes "
           "(NicAttributeRegistry.1.0.0 at /redfish/v1/Registries/NicAttributeRegistry/NicAttributeRegistry (describes 1 of "
           "the Bios's 9 attributes)) in /redfish/v1/Registries (3 members read)")
    assert result["registry_source"]["how"] == why
    warned = json.dumps(result["warnings"])                             # strings, or event objects (ansible-core 2.19+)
    assert why in warned and "values unchecked" in warned, warned
