"""Discovery of the Bios resource, its SettingsObject, the attribute registry and Dell's Jobs,
on real vendor-shaped Redfish answers shipped in the sushy wheel (tests/fixtures/redfish/sushy)."""
import json
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._bmc import bios as _bios
from ansible_collections.gpufleet.provision.plugins.module_utils._bmc.redfish import RedfishError, link, select_system

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "redfish", "sushy")


def sample(name):
    with open(os.path.join(FIX, name)) as handle:
        return json.load(handle)


class SampleBmc:
    """Answers GETs from a path -> sample map; any other path is a 404 like a BMC's."""

    name = "https://bmc.sample"

    def __init__(self, paths, systems):
        self.paths = paths
        self.systems = systems

    def get(self, path):
        if path not in self.paths:
            raise RedfishError("BMC %s: GET %s answered HTTP 404" % (self.name, path), 404)
        value = self.paths[path]
        return sample(value) if isinstance(value, str) else value

    def get_with_etag(self, path):
        body = self.get(path)
        return body, body.get("@odata.etag")

    def find_system(self, system_id=None, usable=None, purpose=None):
        return select_system(self.name, self.systems, system_id, self.get, usable, purpose)


def test_dmtf_sample_follows_links_not_paths():
    bmc = SampleBmc({
        "/redfish/v1/Systems/437XR1138R2": "system.json",
        "/redfish/v1/Systems/437XR1138R2/Bios": "bios.json",
        "/redfish/v1/Systems/437XR1138R2/BIOS/Settings": "bios_settings.json",
    }, ["/redfish/v1/Systems/437XR1138R2"])
    bios = _bios.Bios(bmc, vendor="hpe")
    assert bios.bios_path == "/redfish/v1/Systems/437XR1138R2/Bios"
    # The settings object is where the Bios resource says, not <bios>/Settings: note BIOS vs Bios.
    assert bios.settings_path == "/redfish/v1/Systems/437XR1138R2/BIOS/Settings"
    assert bios.apply_times == ["OnReset", "InMaintenanceWindowOnReset"]
    assert bios.current["ProcTurboMode"] == "Enabled" and bios.pending["ProcTurboMode"] == "Disabled"
    p = _bios.plan({"ProcTurboMode": "Disabled", "EmbeddedSata": "Raid"}, bios.current, bios.pending)
    # ProcTurboMode already pending; EmbeddedSata is current but a pending Ahci would undo it.
    assert p["status"] == {"ProcTurboMode": "pending", "EmbeddedSata": "write"}


def test_unknown_manufacturer_is_a_standard_bmc():
    """Contoso is no known vendor: no vendor rules, the registry alone drives it (raw attributes work)."""
    bmc = SampleBmc({
        "/redfish/v1/Systems/437XR1138R2": "system.json",
        "/redfish/v1/Systems/437XR1138R2/Bios": "bios.json",
        "/redfish/v1/Systems/437XR1138R2/BIOS/Settings": "bios_settings.json",
    }, ["/redfish/v1/Systems/437XR1138R2"])
    bios = _bios.Bios(bmc)
    assert bios.manufacturer == "Contoso" and bios.vendor is None and bios.vendor_name == "generic"
    assert bios.needs_job() is False


def test_only_system_with_a_bios_is_chosen():
    """A DGX lists its HGX baseboard as a second system without a Bios: no system_id needed."""
    dgx = {"@odata.id": "/redfish/v1/Systems/DGX", "Bios": {"@odata.id": "/redfish/v1/Systems/DGX/Bios"}}
    bmc = SampleBmc({"/redfish/v1/Systems/DGX": dgx, "/redfish/v1/Systems/HGX_Baseboard_0": {"Id": "HGX_Baseboard_0"}},
                    ["/redfish/v1/Systems/DGX", "/redfish/v1/Systems/HGX_Baseboard_0"])
    path, _doc = bmc.find_system(None, usable=lambda s: bool(link(s, "Bios")), purpose="a Bios link")
    assert path == "/redfish/v1/Systems/DGX"
    with pytest.raises(RedfishError, match="none of the 2 systems.*has a Bios link"):
        select_system("b", ["/redfish/v1/Systems/HGX_Baseboard_0", "/x"], None, lambda p: {}, lambda s: False, "a Bios link")


def test_ami_zt_without_settings_object_refuses_to_write():
    system = {"@odata.id": "/redfish/v1/Systems/Self", "Manufacturer": "AMI",
              "Bios": {"@odata.id": "/redfish/v1/Systems/Self/Bios"}}
    bmc = SampleBmc({"/redfish/v1/Systems/Self": system, "/redfish/v1/Systems/Self/Bios": "bios_zt.json"},
                    ["/redfish/v1/Systems/Self"])
    with pytest.raises(_bios.BiosError, match="no @Redfish.Settings.SettingsObject"):
        _bios.Bios(bmc)


def test_ami_zt_registry_found_by_name_with_en_us_location():
    bios_doc = sample("bios_zt.json")
    bmc = SampleBmc({
        "/redfish/v1": {"Registries": {"@odata.id": "/redfish/v1/Registries"}},
        "/redfish/v1/Registries": {"Members": [{"@odata.id": "/redfish/v1/Registries/Messages"},
                                               {"@odata.id": "/redfish/v1/Registries/BiosAttributeRegistryProt0.208.208.0"}]},
        "/redfish/v1/Registries/Messages": {"Id": "Messages", "Registry": "Base.1.0", "Location": []},
        "/redfish/v1/Registries/BiosAttributeRegistryProt0.208.208.0": "bios_attribute_registry_file_zthardware.json",
        "/redfish/v1/Registries/BiosAttributeRegistryProt0.208.208.0.json": "bios_attribute_registry_zthardware.json",
    }, [])
    bios = _bios.Bios.__new__(_bios.Bios)
    bios.client, bios.bios, bios.registry, bios.registry_uri = bmc, bios_doc, {}, None
    bios.bios_path, bios.vendor, bios.vendor_option = "/redfish/v1/Systems/Self/Bios", "ami", "auto"
    bios.raw_current, bios.settings_object = bios_doc.get("Attributes") or {}, {}
    registry = bios.load_registry()
    assert bios.registry_uri == "/redfish/v1/Registries/BiosAttributeRegistryProt0.208.208.0.json"
    assert registry, "registry entries parsed"
    name, spec = sorted(registry.items())[0]
    assert spec["type"] and name in [e["AttributeName"] for e in
                                     sample("bios_attribute_registry_zthardware.json")["RegistryEntries"]["Attributes"]]


def test_lenovo_settings_object_is_named_pending():
    assert link(sample("settings-lenovo-se450.json")["@Redfish.Settings"], "SettingsObject") == "/redfish/v1/Systems/1/Pending"


def test_dell_bios_and_jobs_links():
    system = sample("dell_system.json")
    assert _bios.detect_vendor(system["Manufacturer"]) == "dell"
    assert link(system, "Bios") == "/redfish/v1/Systems/System.Embedded.1/Bios"
    manager_path = link(system, "Links", "ManagedBy")
    bmc = SampleBmc({manager_path: "dell_manager.json"}, [])
    bios = _bios.Bios.__new__(_bios.Bios)
    bios.client, bios.system = bmc, system
    assert bios.jobs_path() == "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"


def test_dell_completed_job_is_not_a_problem_but_stuck_is():
    job = sample("dell_job.json")
    assert _bios.job_problem(job) is None
    stuck = dict(job, JobState="Scheduled", Message="Job processing initialization failure.")
    assert "initialization failure" in _bios.job_problem(stuck)


def test_dmtf_registry_parses_enumerations():
    registry = _bios.parse_registry(sample("bios_attribute_registry.json"))
    enums = {n: s for n, s in registry.items() if s["type"] == "Enumeration"}
    assert enums and all(isinstance(s["values"], list) and s["values"] for s in enums.values())


def test_several_systems_need_system_id():
    members = ["/redfish/v1/Systems/a", "/redfish/v1/Systems/b"]
    with pytest.raises(RedfishError, match="2 systems.*system_id"):
        select_system("https://bmc", members, None, lambda p: {})
    assert select_system("https://bmc", members, "b", lambda p: {"Id": p})[0] == "/redfish/v1/Systems/b"
    with pytest.raises(RedfishError, match="no system 'c'"):
        select_system("https://bmc", members, "c", lambda p: {})


def _bare_bios(bmc, bios_doc, bios_path):
    bios = _bios.Bios.__new__(_bios.Bios)
    bios.client, bios.bios, bios.registry, bios.registry_uri = bmc, bios_doc, {}, None
    bios.bios_path, bios.vendor, bios.vendor_option = bios_path, None, "auto"
    bios.raw_current, bios.settings_object = bios_doc.get("Attributes") or {}, {}
    return bios


REGISTRY_DOC = {"Id": "BiosAttributeRegistry.v1_0_3", "OwningEntity": "Dell", "RegistryEntries": {"Attributes": [
    {"AttributeName": "LogicalProc", "Type": "Enumeration", "Value": [{"ValueName": "Enabled"}, {"ValueName": "Disabled"}]}]}}


def test_registry_at_dell_bios_registry_when_no_member_matches():
    bios_doc = {"AttributeRegistry": "BiosAttributeRegistry.v1_0_3", "Attributes": {"LogicalProc": "Enabled"}}
    bmc = SampleBmc({"/redfish/v1": {"Registries": {"@odata.id": "/redfish/v1/Registries"}},
                     "/redfish/v1/Registries": {"Members": [{"@odata.id": "/redfish/v1/Registries/Messages"}]},
                     "/redfish/v1/Registries/Messages": {"Id": "Messages", "Registry": "Base.1.0"},
                     "/redfish/v1/Systems/System.Embedded.1/Bios/BiosRegistry": REGISTRY_DOC}, [])
    bios = _bare_bios(bmc, bios_doc, "/redfish/v1/Systems/System.Embedded.1/Bios")
    assert bios.load_registry() and bios.registry_uri == "/redfish/v1/Systems/System.Embedded.1/Bios/BiosRegistry"
    assert bios.vendor == "dell"                                   # from the registry's OwningEntity
    assert bios.registry_source == {"id": "BiosAttributeRegistry.v1_0_3", "uri": bios.registry_uri,
                                    "found_by": "Bios.AttributeRegistry", "how": "the Bios names BiosAttributeRegistry.v1_0_3"}


def test_publication_uri_is_fetched_without_credentials():
    calls = []

    class PublicBmc(SampleBmc):
        def get_public(self, url):
            calls.append(url)
            return REGISTRY_DOC

    bios_doc = {"AttributeRegistry": "BiosAttributeRegistry.v1_0_3", "Attributes": {}}
    bmc = PublicBmc({"/redfish/v1": {"Registries": {"@odata.id": "/redfish/v1/Registries"}},
                     "/redfish/v1/Registries": {"Members": [{"@odata.id": "/redfish/v1/Registries/BiosAttributeRegistry.v1_0_3"}]},
                     "/redfish/v1/Registries/BiosAttributeRegistry.v1_0_3": {
                         "Id": "BiosAttributeRegistry.v1_0_3",
                         "Location": [{"Language": "en", "PublicationUri": "https://vendor.example/bios.json"}]}}, [])
    bios = _bare_bios(bmc, bios_doc, "/redfish/v1/Systems/1/Bios")
    assert bios.load_registry() and calls == ["https://vendor.example/bios.json"]
    assert bios.registry_uri == "https://vendor.example/bios.json"


def test_no_registry_anywhere_says_where_it_looked():
    bios_doc = {"AttributeRegistry": "BiosAttributeRegistryX.1.0", "Attributes": {}}
    bmc = SampleBmc({"/redfish/v1": {}}, [])
    bios = _bare_bios(bmc, bios_doc, "/redfish/v1/Systems/1/Bios")
    assert bios.load_registry() == {}
    assert "BiosAttributeRegistryX.1.0 not found (tried /redfish/v1/Systems/1/Bios/BiosRegistry, " \
           "/redfish/v1/registrystore/registries/en/biosattributeregistryx.1.0)" == bios.registry_note.replace("registry ", "", 1)
