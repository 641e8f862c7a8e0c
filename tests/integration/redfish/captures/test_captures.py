"""redfish_bios and redfish_power against real BMC captures (tests/fixtures/realdata/redfish), served over
HTTPS on 127.0.0.1 by the tests' own server (conftest.py): check mode, apply, re-run while pending,
reset, verify, unknown name, value not in the registry, and an unknown Manufacturer.

What each capture wants changed is chosen from its current attributes (read by hand from the capture):
Dell R750 has SubNumaCluster Disabled, Lenovo SR670 V2 Processors_PCIeACSCTL Enabled and operating mode
Efficiency_FavorPerformance, HPE DL385 NumaMemoryDomainsPerSocket Auto, the DGX ApplicationProfile Auto.
"""
import pytest

CASES = {
    "dell-r750-idrac6": ({"snc": "snc2", "hyperthreading": True, "vtd": True}, {"SubNumaCluster": "2-Way"}),
    "lenovo-sr670v2-xcc": ({"acs": False, "power_profile": "performance", "hyperthreading": True},
                           {"Processors_PCIeACSCTL": "Disabled", "OperatingModes_ChooseOperatingMode": "MaximumPerformance"}),
    "hpe-dl385g10plus-ilo5": ({"snc": "nps4", "hyperthreading": True, "vtd": True},
                              {"NumaMemoryDomainsPerSocket": "FourMemoryDomainsPerSocket"}),
    "nvidia-dgx-h100-ami": ({"hyperthreading": True, "vtd": True, "power_profile": "efficiency"},
                            {"ApplicationProfile": "Energy Efficiency"}),
}
VENDOR = {"dell-r750-idrac6": "dell", "lenovo-sr670v2-xcc": "lenovo", "hpe-dl385g10plus-ilo5": "hpe",
          "nvidia-dgx-h100-ami": "ami"}


def patches(server):
    return server.capture.patches()


@pytest.mark.parametrize("folder", sorted(CASES))
def test_check_apply_pending_reset_verify(capture_bmc, run_module, folder):
    server = capture_bmc(folder)
    settings, writes = CASES[folder]
    args = dict(server.conn(), settings=settings)

    predicted = run_module("redfish_bios", args, check=True, diff=True)
    assert predicted["_rc"] == 0, predicted.get("msg")
    assert predicted["changed"] is True and predicted["changed_attributes"] == writes
    assert predicted["vendor"] == VENDOR[folder] and predicted["registry"]
    assert predicted["registry_source"]["found_by"] == "Bios.AttributeRegistry"      # named by the Bios: no scan
    assert predicted["registry_source"]["uri"] == predicted["registry"] and predicted["unvalidated"] == []
    assert patches(server) == []                                        # check mode writes nothing

    first = run_module("redfish_bios", args)
    assert first["_rc"] == 0, first.get("msg")
    assert first["changed"] is True and first["changed_attributes"] == writes and first["reboot_required"] is True
    assert set(writes) <= set(first["pending"])
    (method, path, headers), = patches(server)
    bios = server.capture.get(server.capture.bios_path)
    if server.capture.etag(server.capture.get(server.capture.settings_path)):
        assert headers.get("If-Match"), "PATCH without If-Match"
    advertised = "OnReset" in (bios["@Redfish.Settings"].get("SupportedApplyTimes") or [])
    # the PATCH body itself is checked by the server: ApplyTime where not advertised is a 400
    assert first["diff"]["after"] == writes and advertised == (folder in ("dell-r750-idrac6", "lenovo-sr670v2-xcc"))
    if folder == "dell-r750-idrac6":
        assert first["job"] and "/Jobs/" in first["job"]

    again = run_module("redfish_bios", args)
    assert again["_rc"] == 0 and again["changed"] is False and again["reboot_required"] is True
    assert sorted(again["already_pending"]) == sorted(writes)
    assert len(patches(server)) == 1                                    # nothing written while pending

    early = run_module("redfish_bios", dict(args, state="verify"))
    assert early["_rc"] != 0 and "still pending" in early["msg"]

    power = run_module("redfish_power", dict(server.conn(), poll_interval=0.1, force_after=30, wait_timeout=60))
    assert power["_rc"] == 0 and power["changed"] is True, power.get("msg")

    done = run_module("redfish_bios", dict(args, state="verify"))
    assert done["_rc"] == 0 and done["failures"] == [] and done["pending"] == {}, done.get("msg")
    last = run_module("redfish_bios", args)
    assert last["changed"] is False and last["reboot_required"] is False


@pytest.mark.parametrize("folder", sorted(CASES))
def test_documented_three_lines_fail_clearly_without_writing(capture_bmc, run_module, folder):
    """snc4 + hyperthreading + vtd: no captured BMC can do SNC4; each says why and writes nothing."""
    server = capture_bmc(folder)
    result = run_module("redfish_bios", dict(server.conn(), settings={"snc": "snc4", "hyperthreading": True, "vtd": True}))
    assert result["_rc"] != 0 and "nothing written: snc=snc4" in result["msg"]
    expect = {"dell-r750-idrac6": "SubNumaCluster offers 2-Way/Disabled, none is snc4",
              "lenovo-sr670v2-xcc": "Processors_SNC offers only Disabled/Enabled",
              "hpe-dl385g10plus-ilo5": "this BMC has AMD NUMA nodes per socket (NumaMemoryDomainsPerSocket): use nps1/nps2/nps4",
              "nvidia-dgx-h100-ami": "no attribute for snc in the registry (related, not the same thing: NumaEn, UmaBasedClustering"}
    assert expect[folder] in result["msg"]
    assert patches(server) == []


@pytest.mark.parametrize("folder", sorted(CASES))
def test_unknown_name_and_bad_value_refused_before_any_patch(capture_bmc, run_module, folder):
    server = capture_bmc(folder)
    name = sorted(CASES[folder][1])[0]
    unknown = run_module("redfish_bios", dict(server.conn(), attributes={name + "X": "Enabled"}))
    assert unknown["_rc"] != 0 and "%sX is not in the BIOS attribute registry (closest: %s" % (name, name) in unknown["msg"]
    bad = run_module("redfish_bios", dict(server.conn(), attributes={name: "Sometimes"}))
    assert bad["_rc"] != 0 and "%s: value 'Sometimes' not allowed (allowed: " % name in bad["msg"]
    assert patches(server) == []                                        # the BMC never saw a PATCH


@pytest.mark.parametrize("folder", sorted(CASES))
def test_unknown_manufacturer_raw_attributes_work(capture_bmc, run_module, folder):
    """The same BMC with Manufacturer "Quanta Cloud Technology": no vendor rules, the registry decides."""
    server = capture_bmc(folder, manufacturer="Quanta Cloud Technology")
    writes = CASES[folder][1]
    args = dict(server.conn(), attributes=writes, vendor="generic")
    first = run_module("redfish_bios", args)
    assert first["_rc"] == 0 and first["changed"] is True and first["vendor"] == "generic", first.get("msg")
    assert first["changed_attributes"] == writes
    # no vendor rules: the module POSTs no Dell job (an iDRAC still makes one for an OnReset PATCH itself)
    assert [r for r in server.capture.requests if r[0] == "POST"] == []
    auto = run_module("redfish_bios", dict(args, vendor="auto"))
    assert auto["_rc"] == 0 and auto["changed"] is False and sorted(auto["already_pending"]) == sorted(writes)


def test_dell_processor_power_setting_unlocked_by_registry_dependency(capture_bmc, run_module):
    """ProcCStates is ReadOnly in the R750 registry until SysProfile is Custom: the module adds it first."""
    server = capture_bmc("dell-r750-idrac6")
    result = run_module("redfish_bios", dict(server.conn(), attributes={"ProcCStates": "Enabled"}))
    assert result["_rc"] == 0, result.get("msg")
    assert list(result["desired"]) == ["SysProfile", "ProcCStates"] and result["desired"]["SysProfile"] == "Custom"
    assert "read-only while SysProfile is not Custom" in result["dependencies"]["SysProfile"]
    assert server.capture.pending() == {"SysProfile": "Custom", "ProcCStates": "Enabled"}


def test_value_display_name_accepted(capture_bmc, run_module):
    server = capture_bmc("dell-r750-idrac6")
    result = run_module("redfish_bios", dict(server.conn(), attributes={"SubNumaCluster": "2-Way Clustering"}), check=True)
    assert result["_rc"] == 0 and result["changed_attributes"] == {"SubNumaCluster": "2-Way"}, result.get("msg")


def test_ami_428_without_etag_then_retry(capture_bmc, run_module):
    """An AMI BMC refuses a PATCH without If-Match (428): the module reads the ETag again and retries once."""
    server = capture_bmc("nvidia-dgx-h100-ami")
    server.capture.hide_etag = 1
    result = run_module("redfish_bios", dict(server.conn(), attributes={"ApplicationProfile": "Energy Efficiency"}))
    assert result["_rc"] == 0, result.get("msg")
    sent = patches(server)
    assert len(sent) == 2 and "If-Match" not in sent[0][2] and sent[1][2].get("If-Match")
    assert server.capture.pending() == {"ApplicationProfile": "Energy Efficiency"}


def test_stale_etag_412_retried_once_then_clear_error(capture_bmc, run_module):
    server = capture_bmc("lenovo-sr670v2-xcc")
    server.capture.stale = 1
    ok = run_module("redfish_bios", dict(server.conn(), attributes={"Processors_PCIeACSCTL": "Disabled"}))
    assert ok["_rc"] == 0 and len(patches(server)) == 2, ok.get("msg")
    server.capture.stale = 2
    bad = run_module("redfish_bios", dict(server.conn(), attributes={"Processors_SNC": "Enabled"}))
    assert bad["_rc"] != 0 and "answered HTTP 412" in bad["msg"] and len(patches(server)) == 4
