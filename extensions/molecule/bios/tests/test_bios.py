"""What the bios role promises (roles/bios/README.md), checked on the BMC and the node."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location("twins", os.path.join(os.path.dirname(__file__), "..", "..", "_shared", "twins.py"))
twins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(twins)


testinfra_hosts = ["ansible://molecule"]   # the platforms of molecule.yml


def test_every_desired_setting_is_pending_or_current_at_the_bmc(host):
    wanted = twins.raw_bios(host, twins.desired(host, "bios_settings"))
    current, pending = twins.bios(host)
    assert wanted, "the lab maps the profile's settings to at least one attribute"
    effective = dict(current, **pending)
    assert {k: effective.get(k) for k in wanted} == wanted
    # the twin started with a fault the role had to write: something is pending now
    assert any(current.get(k) != v for k, v in wanted.items())
    differing = {k: v for k, v in wanted.items() if current.get(k) != v}
    assert {k: pending.get(k) for k in differing} == differing


def test_the_role_did_not_reboot_the_node(host):
    assert twins.boot_id(host) == twins.kept_boot_id(host)


def test_the_node_still_runs_its_old_bios_until_the_reboot(host):
    # twin1 starts with SNC and hyper-threading off: 2 NUMA nodes until the one reboot of the run
    name = host.backend.get_hostname()
    nodes = host.check_output("ls -d /run/twin/sys/devices/system/node/node[0-9]* | wc -l")
    assert int(nodes) == {"twin1": 2, "twin2": 8}[name]
