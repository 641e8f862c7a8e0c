"""The lab BMC's contract (lab/bmc): state file, bios-initial.json, restart survival, bad input."""
import json
import os
import subprocess
import sys

from lab.bmc import model


def test_state_file_contract_and_restart_survival(bmc, run_module):
    unit = bmc("dell", initial={"LogicalProc": "Disabled"})
    state = unit.state()
    assert set(state) == {"vendor", "current", "pending", "settings", "power"}
    assert state["vendor"] == "dell" and state["power"] == "On" and state["pending"] == {}
    # defaults are the R750 capture's current values (SR-IOV on)
    assert state["settings"] == {"snc": "off", "hyperthreading": False, "vtx": True, "vtd": True, "sriov": True, "acs": True}
    assert run_module("redfish_bios", dict(unit.conn(), settings={"hyperthreading": True}))["changed"]
    unit.stop()
    # bios-initial.json would say HT off again: a restarted BMC keeps its bios.json instead.
    unit.start()
    assert unit.state()["pending"] == {"LogicalProc": "Enabled"}
    second = run_module("redfish_bios", dict(unit.conn(), settings={"hyperthreading": True}))
    assert second["changed"] is False and second["reboot_required"] is True and second["job"], second


def test_bad_initial_attributes_stop_the_bmc_with_the_name(tmp_path, bmc_certs):
    state = tmp_path / "state" / "t"
    state.mkdir(parents=True)
    (state / "bios-initial.json").write_text(json.dumps({"LogicalProcessor": "Disabled"}))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    proc = subprocess.run([sys.executable, "-m", "lab.bmc.serve", "--name", "t", "--flavour", "dell", "--port", "1",
                           "--state-dir", str(tmp_path / "state"), "--cert", os.path.join(bmc_certs, "server.pem"),
                           "--key", os.path.join(bmc_certs, "server.key"), "--htpasswd", os.path.join(bmc_certs, "htpasswd")],
                          cwd=repo, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "LogicalProcessor" in proc.stderr and "bios-initial.json" in proc.stderr


def test_every_flavour_loads_and_derives_all_settings():
    for vendor in model.FLAVOURS:
        flavour = model.load_flavour(vendor)
        settings = model.derive_settings(flavour, model.defaults(flavour))
        assert set(settings) == set(model.PORTABLE) and None not in settings.values(), vendor
        registry = model.registry_document(flavour)
        assert {e["AttributeName"] for e in registry["RegistryEntries"]["Attributes"]} == set(flavour["attributes"])


def test_power_in_state_file_follows_a_reset_without_polling(bmc, bmc_login):
    import base64
    import ssl
    import time
    import urllib.request
    unit = bmc("lenovo", extra=["--reset-seconds", "1"])
    request = urllib.request.Request(
        unit.baseurl + "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", method="POST",
        data=json.dumps({"ResetType": "ForceRestart"}).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Basic " + base64.b64encode(("%s:%s" % bmc_login).encode()).decode()})
    urllib.request.urlopen(request, context=ssl.create_default_context(cafile=unit.ca), timeout=10).read()
    assert unit.state()["power"] == "Off"
    for _ in range(40):  # nobody asks the BMC anything meanwhile
        time.sleep(0.1)
        if unit.state()["power"] == "On":
            break
    assert unit.state()["power"] == "On"


def test_flavours_are_rebuilt_from_their_captures(realdata):
    """The committed flavours are exactly what lab/bmc/build_flavours.py makes of the real captures."""
    import yaml
    from lab.bmc import build_flavours
    for vendor in sorted(build_flavours.FLAVOURS):
        with open(os.path.join(model.FLAVOURS_DIR, vendor + ".yml")) as handle:
            committed = yaml.safe_load(handle)
        assert committed == build_flavours.build(vendor, realdata), "%s.yml is stale: python -m lab.bmc.build_flavours" % vendor
        # and what the capture does not give is listed as a delta, with its reason
        assert set(committed["deltas"]) <= set(committed["attributes"]) and all(committed["deltas"].values())


def _request(unit, method, path, login, body=None, headers=None):
    import base64
    import ssl
    import urllib.error
    import urllib.request
    request = urllib.request.Request(unit.baseurl + path, method=method, data=json.dumps(body).encode() if body else None,
                                     headers=dict({"Content-Type": "application/json", "Authorization": "Basic " +
                                                   base64.b64encode(("%s:%s" % login).encode()).decode()}, **(headers or {})))
    try:
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=unit.ca), timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}"), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}"), dict(exc.headers)


def test_ami_flavour_answers_428_without_if_match_and_shows_every_attribute(bmc, bmc_login):
    unit = bmc("ami")
    status, settings, headers = _request(unit, "GET", "/redfish/v1/Systems/DGX/Bios/SD", bmc_login)
    assert status == 200 and headers["ETag"] == settings["@odata.etag"]
    assert settings["Attributes"]["VTdSupport"] == "Enable"                  # every attribute, as the DGX's Bios/SD
    body = {"Attributes": {"VTdSupport": "Disable"}}
    assert _request(unit, "PATCH", "/redfish/v1/Systems/DGX/Bios/SD", bmc_login, body)[0] == 428
    assert _request(unit, "PATCH", "/redfish/v1/Systems/DGX/Bios/SD", bmc_login, body, {"If-Match": '"stale"'})[0] == 412
    assert _request(unit, "PATCH", "/redfish/v1/Systems/DGX/Bios/SD", bmc_login, body, {"If-Match": headers["ETag"]})[0] == 204
    assert unit.state()["pending"] == {"VTdSupport": "Disable"}
    # ApplyTime is not advertised on this BMC: refused
    status, _doc, _h = _request(unit, "PATCH", "/redfish/v1/Systems/DGX/Bios/SD", bmc_login,
                                dict(body, **{"@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}}), {"If-Match": "*"})
    assert status == 400


def test_hpe_flavour_serves_lower_case_paths_and_its_registry_store(bmc, bmc_login):
    unit = bmc("hpe")
    status, system, _h = _request(unit, "GET", "/redfish/v1/Systems/1", bmc_login)
    assert status == 200 and system["Bios"]["@odata.id"] == "/redfish/v1/systems/1/bios"
    status, bios, _h = _request(unit, "GET", "/redfish/v1/systems/1/bios/", bmc_login)
    assert bios["AttributeRegistry"] == "BiosAttributeRegistryA42.v1_2_60" and "SupportedApplyTimes" not in bios["@Redfish.Settings"]
    status, registry, _h = _request(unit, "GET", "/redfish/v1/registrystore/registries/en/biosattributeregistrya42.v1_2_60", bmc_login)
    assert status == 200 and any(e["AttributeName"] == "NumaMemoryDomainsPerSocket" for e in registry["RegistryEntries"]["Attributes"])
