"""redfish_bios / redfish_power against the lab BMC: sushy-emulator over TLS with basic auth.

Each test starts its own BMC (about 1 s) with a 1 s reset, so the whole file runs in well under a minute.
"""
import base64
import json
import os
import socket
import ssl
import time
import urllib.request

import pytest

DIRTY = {  # what the lab injects: SNC off (HPE, an AMD box: one NUMA domain per socket), HT off, VT-d off
    "dell": {"SubNumaCluster": "Disabled", "LogicalProc": "Disabled", "ProcVirtualization": "Disabled"},
    "lenovo": {"Processors_SNC": "Disabled", "Processors_HyperThreading": "Disabled",
               "DevicesandIOPorts_IntelVTforDirectedIOVTd": "Disabled"},
    "ami": {"SncEn": "Disable", "ProcessorHyperThreadingDisable": "Disabled", "VTdSupport": "Disable"},
    "hpe": {"NumaMemoryDomainsPerSocket": "OneMemoryDomainPerSocket", "ProcSMT": "Disabled", "ProcAmdIoVt": "Disabled"},
    "supermicro": {"SNC#0232": "Disable", "Hyper-Threading#01A7": "Disable", "IntelVT_dTechnology#0241": "Disable"},
}
WANT = {"snc": "snc4", "hyperthreading": True, "vtd": True}
SNC = {"hpe": ("nps1", "nps4")}   # (dirty, wanted) where it is not ("off", "snc4")
FAST = ["--reset-seconds", "1"]


def want(flavour):
    return dict(WANT, snc=SNC.get(flavour, ("off", "snc4"))[1])


def bios_args(unit, **extra):
    args = dict(unit.conn(), settings=want(unit.flavour))
    args.update(extra)
    return args


@pytest.mark.parametrize("flavour", sorted(DIRTY))
def test_change_pending_reset_verify(bmc, run_module, flavour):
    unit = bmc(flavour, extra=FAST, initial=DIRTY[flavour])
    dirty, wanted = SNC.get(flavour, ("off", "snc4"))
    assert unit.state()["settings"]["snc"] == dirty and unit.state()["settings"]["hyperthreading"] is False

    first = run_module("redfish_bios", bios_args(unit))
    assert first["_rc"] == 0, first
    assert first["changed"] is True and first["reboot_required"] is True and first["vendor"] == flavour
    assert set(DIRTY[flavour]) <= set(first["changed_attributes"])
    state = unit.state()
    assert state["settings"]["snc"] == dirty, "nothing may become current before the reset"
    assert set(DIRTY[flavour]) <= set(state["pending"])

    second = run_module("redfish_bios", bios_args(unit))
    assert second["_rc"] == 0, second
    assert second["changed"] is False and second["reboot_required"] is True
    assert second["changed_attributes"] == {} and set(DIRTY[flavour]) <= set(second["already_pending"])

    early = run_module("redfish_bios", bios_args(unit, state="verify"))
    assert early["_rc"] != 0 and "still pending" in early["msg"]

    power = run_module("redfish_power", dict(unit.conn(), poll_interval=0.2, wait_timeout=60))
    assert power["_rc"] == 0 and power["changed"] and power["power_state"] == "On", power

    after = run_module("redfish_bios", bios_args(unit, state="verify"))
    assert after["_rc"] == 0, after
    assert after["changed"] is False and after["failures"] == []
    settings = unit.state()["settings"]
    assert (settings["snc"], settings["hyperthreading"], settings["vtd"]) == (wanted, True, True)
    assert unit.state()["pending"] == {}

    third = run_module("redfish_bios", bios_args(unit))
    assert third["changed"] is False and third["reboot_required"] is False


def test_check_mode_predicts_and_writes_nothing(bmc, run_module):
    unit = bmc("lenovo", initial=DIRTY["lenovo"])
    before = unit.state()
    result = run_module("redfish_bios", bios_args(unit), check=True, diff=True)
    assert result["_rc"] == 0 and result["changed"] is True
    assert result["diff"]["after"]["Processors_SNC"] == "SNC4"
    assert result["diff"]["before"]["Processors_SNC"] == "Disabled"
    assert unit.state() == before
    real = run_module("redfish_bios", bios_args(unit))
    assert real["changed_attributes"] == result["changed_attributes"]


def test_unknown_attribute_fails_before_any_write(bmc, run_module):
    unit = bmc("dell")
    before = unit.state()
    result = run_module("redfish_bios", dict(unit.conn(), settings=dict(WANT), attributes={"SubNumaClusterX": "4-Way"}))
    assert result["_rc"] != 0
    assert "SubNumaClusterX" in result["msg"] and "SubNumaCluster" in result["msg"]  # name and closest match
    assert "nothing written" in result["msg"]
    assert unit.state() == before


def test_bad_value_names_allowed_values(bmc, run_module):
    unit = bmc("dell")
    before = unit.state()
    result = run_module("redfish_bios", dict(unit.conn(), attributes={"SubNumaCluster": "8WayClustering"}))
    assert result["_rc"] != 0
    assert "8WayClustering" in result["msg"] and "allowed: 2-Way, Disabled, 4-Way" in result["msg"]
    assert unit.state() == before


def test_dell_sysprofile_set_first(bmc, run_module):
    unit = bmc("dell", extra=FAST)
    # ReadOnly in the R750 registry until SysProfile is Custom (a registry Dependency): set first, one PATCH
    result = run_module("redfish_bios", dict(unit.conn(), attributes={"ProcCStates": "Enabled"}))
    assert result["_rc"] == 0, result
    assert list(result["changed_attributes"]) == ["SysProfile", "ProcCStates"]
    assert unit.state()["pending"] == {"SysProfile": "Custom", "ProcCStates": "Enabled"}
    assert result["job"] and "/Jobs/JID_" in result["job"]


def test_dell_pending_without_job_gets_one(bmc, run_module):
    unit = bmc("dell", extra=FAST)
    # A previous tool PATCHed without creating the job: a reboot alone would apply nothing.
    first = run_module("redfish_bios", dict(unit.conn(), attributes={"LogicalProc": "Disabled"}, apply_time="omit"))
    assert first["job"], first  # apply_time omit: the module creates the job itself
    jobs = json.load(open(os.path.join(unit.dir, "jobs.json")))
    assert len(jobs) == 1


def test_dell_pending_left_by_another_tool_gets_its_job(bmc, run_module, bmc_login):
    """The trap: values PATCHed without a job stay pending across reboots on iDRAC."""
    unit = bmc("dell", extra=FAST)
    request = urllib.request.Request(
        unit.baseurl + "/redfish/v1/Systems/System.Embedded.1/Bios/Settings", method="PATCH",
        data=json.dumps({"Attributes": {"SubNumaCluster": "4-Way"}}).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Basic " + base64.b64encode(("%s:%s" % bmc_login).encode()).decode()})
    urllib.request.urlopen(request, context=ssl.create_default_context(cafile=unit.ca), timeout=10).read()
    run_module("redfish_power", dict(unit.conn(), poll_interval=0.2, wait_timeout=60))
    assert unit.state()["pending"] == {"SubNumaCluster": "4-Way"}, "no job: the reboot applied nothing"
    predicted = run_module("redfish_bios", dict(unit.conn(), settings={"snc": "snc4"}), check=True)
    assert predicted["changed"] is True and predicted["changed_attributes"] == {}
    with open(os.path.join(unit.dir, "jobs.json")) as handle:
        assert json.load(handle) == {}, "check mode created a job"
    result = run_module("redfish_bios", dict(unit.conn(), settings={"snc": "snc4"}))
    assert result["changed"] is True and result["changed_attributes"] == {} and result["already_pending"] == ["SubNumaCluster"]
    assert result["job"] and "/Jobs/JID_" in result["job"]
    run_module("redfish_power", dict(unit.conn(), poll_interval=0.2, wait_timeout=60))
    assert unit.state()["settings"]["snc"] == "snc4"


def test_dell_stuck_job_is_a_failure(bmc, run_module):
    unit = bmc("dell", extra=FAST)
    assert run_module("redfish_bios", bios_args(unit))["changed"]
    unit.set_faults(stuck_job=True)
    run_module("redfish_power", dict(unit.conn(), poll_interval=0.2, wait_timeout=60))
    verify = run_module("redfish_bios", bios_args(unit, state="verify"))
    assert verify["_rc"] != 0
    assert "initialization failure" in verify["msg"] and "SubNumaCluster" in verify["msg"]
    assert {f["attribute"] for f in verify["failures"]} >= {"SubNumaCluster"}
    again = run_module("redfish_bios", bios_args(unit))
    assert again["_rc"] != 0 and "initialization failure" in again["msg"]


def test_wrong_password_is_a_clear_401(bmc, run_module):
    unit = bmc("ami")
    result = run_module("redfish_bios", dict(unit.conn(password="not-the-password"), settings=want("ami")))
    assert result["_rc"] != 0
    assert "401" in result["msg"] and unit.baseurl in result["msg"] and "fleetadmin" in result["msg"]
    assert "not-the-password" not in json.dumps(result)


def test_session_auth(bmc, run_module):
    unit = bmc("ami", initial=DIRTY["ami"])
    result = run_module("redfish_bios", bios_args(unit, auth="session"))
    assert result["_rc"] == 0 and result["changed"], result
    bad = run_module("redfish_bios", dict(unit.conn(password="nope", auth="session"), settings=want("ami")))
    assert bad["_rc"] != 0 and "401" in bad["msg"]


def test_untrusted_certificate_names_the_fix(bmc, run_module):
    unit = bmc("hpe")
    result = run_module("redfish_bios", dict(unit.conn(ca_path=None), settings=want("hpe")))
    assert result["_rc"] != 0 and "TLS" in result["msg"] and "ca_path" in result["msg"], result
    optout = run_module("redfish_bios", dict(unit.conn(ca_path=None, validate_certs=False), settings=want("hpe")))
    assert optout["_rc"] == 0, optout


def test_unreachable_bmc_times_out_with_address(run_module):
    # A socket that listens but never accepts: the TLS handshake gets no answer, like a hung BMC.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = sock.getsockname()[1]
        started = time.monotonic()
        result = run_module("redfish_bios", dict(baseurl="https://127.0.0.1:%d" % port, username="admin", password="unused-secret",
                                                 timeout=1, retries=1, settings=dict(WANT)))
        elapsed = time.monotonic() - started
    assert result["_rc"] != 0
    assert "127.0.0.1:%d" % port in result["msg"] and "2 attempt" in result["msg"], result["msg"]
    assert "no answer within 1s" in result["msg"]
    assert elapsed < 30


def test_503_twice_then_success(bmc, run_module):
    unit = bmc("supermicro", initial=DIRTY["supermicro"])
    unit.set_faults(http_503=2)
    result = run_module("redfish_bios", bios_args(unit, retries=3))
    assert result["_rc"] == 0 and result["changed"], result
    assert json.load(open(os.path.join(unit.dir, "faults.json")))["http_503"] == 0
    with open(unit.log) as log:
        assert log.read().count(" 503 ") == 2


def test_503_beyond_retries_fails_clearly(bmc, run_module):
    unit = bmc("supermicro")
    unit.set_faults(http_503=10)
    result = run_module("redfish_bios", bios_args(unit, retries=1))
    assert result["_rc"] != 0 and "503" in result["msg"] and "2 attempt" in result["msg"]


def test_acs_without_bios_switch_is_refused(bmc, run_module):
    unit = bmc("dell")
    result = run_module("redfish_bios", dict(unit.conn(), settings={"acs": False}))
    assert result["_rc"] != 0 and "acs=False not available on this BMC: no attribute for acs" in result["msg"]
    assert unit.state()["pending"] == {}
    warned = run_module("redfish_bios", dict(unit.conn(), settings={"acs": False, "hyperthreading": False}, unavailable="warn"))
    assert warned["_rc"] == 0 and warned["unresolved"] == ["acs"] and warned["changed_attributes"] == {"LogicalProc": "Disabled"}
