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
    assert state["settings"] == {"snc": "off", "hyperthreading": False, "vtx": True, "vtd": True, "sriov": False, "acs": True}
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
