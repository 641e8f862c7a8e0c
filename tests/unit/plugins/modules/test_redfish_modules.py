"""redfish_bios / redfish_power argument handling, run as Ansible runs a module (no BMC needed:
these fail before the first request). Behaviour against a BMC: tests/integration/redfish."""
import json
import os
import subprocess
import sys

import pytest

BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", ".build")


def run(module, args):
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.gpufleet.provision.plugins.modules." + module], check=False,
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.abspath(BUILD)), timeout=60)
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize("module", ["redfish_bios", "redfish_power"])
def test_baseurl_without_scheme_fails_clearly(module):
    args = dict(baseurl="10.0.0.5", username="root", password="calvin-secret")
    if module == "redfish_bios":
        args["settings"] = {"snc": "snc4"}
    rc, result = run(module, args)
    assert rc == 1 and "must look like https://" in result["msg"]
    assert "calvin-secret" not in json.dumps(result)


def test_credentials_in_url_are_refused_without_echoing_them():
    rc, result = run("redfish_bios", dict(baseurl="https://root:calvin-secret@10.0.0.5", username="root",
                                          password="calvin-secret", attributes={"LogicalProc": "Enabled"}))
    assert rc == 1 and "not in baseurl" in result["msg"] and "calvin-secret" not in json.dumps(result)


def test_bios_needs_attributes_or_settings_and_valid_choices():
    rc, result = run("redfish_bios", dict(baseurl="https://b", username="u", password="pw-123456"))
    assert rc == 1 and "attributes, settings" in result["msg"]
    rc, result = run("redfish_bios", dict(baseurl="https://b", username="u", password="pw-123456", settings={"snc": "snc8"}))
    assert rc == 1 and "snc" in result["msg"] and "snc4" in result["msg"]


def test_bios_new_options_have_choices():
    base = dict(baseurl="https://b", username="u", password="pw-123456", attributes={"A": "B"})
    rc, result = run("redfish_bios", dict(base, unavailable="ignore"))
    assert rc == 1 and "unavailable" in result["msg"] and "fail, warn" in result["msg"]
    rc, result = run("redfish_bios", dict(base, vendor="contoso"))
    assert rc == 1 and "generic" in result["msg"] and "dell" in result["msg"]


@pytest.mark.parametrize("module", ["redfish_bios", "redfish_power"])
def test_password_option_is_no_log(module):
    """The module option itself is no_log (not only the roles' argument specs): Ansible masks it in
    the invocation it reports."""
    args = dict(baseurl="10.0.0.5", username="root", password="calvin-secret", attributes={"A": "B"})
    if module == "redfish_power":
        del args["attributes"]
    _rc, result = run(module, args)
    assert result["invocation"]["module_args"]["password"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
