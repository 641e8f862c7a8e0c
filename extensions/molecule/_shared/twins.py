"""Helpers for the scenarios' testinfra tests: the twin's BMC over Redfish (TLS verified against the
lab CA, basic auth), the boot ids prepare.yml kept, and the lab's own portable -> raw BIOS mapping
(lab/bmc/flavours: the lab's side, written apart from the collection's vendor profiles)."""
import base64
import json
import os
import ssl
import sys
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from lab import lab as _lab  # noqa: E402  (the harness, after REPO is importable)


def ephemeral(name):
    return os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], name)


def boot_id(host):
    return host.check_output(host.ansible.get_variables()["gpufleet_boot_time_command"]).strip()


def kept_boot_id(host):
    with open(ephemeral("boot-" + host.backend.get_hostname())) as handle:
        return handle.read().strip()


def redfish(host, path):
    v = host.ansible.get_variables()
    ctx = ssl.create_default_context(cafile=v["gpufleet_bmc_ca_path"])
    req = urllib.request.Request("https://%s%s" % (v["gpufleet_bmc_address"], path))
    auth = "%s:%s" % (v["gpufleet_bmc_username"], v["gpufleet_bmc_password"])
    req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    with urllib.request.urlopen(req, context=ctx, timeout=15) as resp:
        return json.loads(resp.read().decode() or "{}")


def bios(host):
    """(current, pending) BIOS attributes of the twin's system, following the BMC's links."""
    systems = redfish(host, "/redfish/v1/Systems")
    system = redfish(host, systems["Members"][0]["@odata.id"])
    current = redfish(host, system["Bios"]["@odata.id"])
    settings = current.get("@Redfish.Settings", {}).get("SettingsObject", {}).get("@odata.id")
    pending = redfish(host, settings).get("Attributes", {}) if settings else {}
    return current.get("Attributes", {}), pending


def desired(host, area):
    """The role's default for an area, rendered by Ansible on the host: the host's profile
    (gpufleet_profile, a template in the lab's group_vars) through the collection's profile lookup
    and desired filter (testinfra sees host variables unrendered, and never the role defaults)."""
    expr = "{{ lookup('gpufleet.provision.profile', gpufleet_profile | default({})) | gpufleet.provision.desired('%s') }}" % area
    result = host.ansible("ansible.builtin.debug", "msg=\"%s\"" % expr, check=False)
    assert "msg" in result and not result.get("failed"), result
    return result["msg"]


def raw_bios(host, settings):
    flavour = host.ansible.get_variables()["gpufleet_lab_twin"]["bmc"]["flavour"]
    return _lab.raw_bios(flavour, settings)
