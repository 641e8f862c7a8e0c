"""redfish_power against the lab BMC: graceful restart, forced fallback when the OS ignores it,
on/off idempotence, check mode."""


def conn(unit, **extra):
    args = dict(unit.conn(), poll_interval=0.2, wait_timeout=60)
    args.update(extra)
    return args


def test_graceful_restart_applies_pending_and_runs_hook(bmc, run_module, tmp_path):
    marker = tmp_path / "hook.out"
    unit = bmc("lenovo", extra=["--reset-seconds", "1", "--reset-hook", "sh -c 'echo reset \"$0\" >> %s'" % marker])
    assert run_module("redfish_bios", dict(unit.conn(), settings={"snc": "snc4"}))["changed"]
    result = run_module("redfish_power", conn(unit))
    assert result["_rc"] == 0 and result["actions"] == ["GracefulRestart"] and result["power_state"] == "On", result
    assert unit.state()["settings"]["snc"] == "snc4" and unit.state()["pending"] == {}
    for _ in range(50):
        if marker.exists():
            break
        __import__("time").sleep(0.1)
    assert marker.read_text() == "reset twin1\n"


def test_forced_restart_after_graceful_is_ignored(bmc, run_module):
    unit = bmc("ami", extra=["--reset-seconds", "1"])
    unit.set_faults(ignore_graceful=True)
    result = run_module("redfish_power", conn(unit, force_after=2))
    assert result["_rc"] == 0, result
    assert result["actions"] == ["GracefulRestart", "ForceRestart"] and result["power_state"] == "On"


def test_restart_that_never_completes_fails_with_address(bmc, run_module):
    unit = bmc("ami", extra=["--reset-seconds", "1"])
    unit.set_faults(ignore_graceful=True)
    result = run_module("redfish_power", conn(unit, graceful=True, force_after=60, wait_timeout=2))
    assert result["_rc"] != 0 and unit.baseurl in result["msg"] and "not back On within 2s" in result["msg"]


def test_off_on_idempotent_and_check_mode(bmc, run_module):
    unit = bmc("hpe", extra=["--reset-seconds", "1"])
    predicted = run_module("redfish_power", conn(unit, state="off"), check=True)
    assert predicted["changed"] is True and unit.state()["power"] == "On"
    off = run_module("redfish_power", conn(unit, state="off", graceful=False))
    assert off["_rc"] == 0 and off["actions"] == ["ForceOff"] and unit.state()["power"] == "Off", off
    again = run_module("redfish_power", conn(unit, state="off"))
    assert again["changed"] is False
    on = run_module("redfish_power", conn(unit, state="on"))
    assert on["changed"] is True and on["power_state"] == "On" and unit.state()["power"] == "On"
    assert run_module("redfish_power", conn(unit, state="on"), check=True)["changed"] is False
