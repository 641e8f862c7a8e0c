"""What the reboot role promises (roles/reboot/README.md): one reboot where asked, none elsewhere,
the node back before the play goes on, the change that needed it in effect."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location("twins", os.path.join(os.path.dirname(__file__), "..", "..", "_shared", "twins.py"))
twins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(twins)


testinfra_hosts = ["ansible://molecule"]   # the platforms of molecule.yml


def test_rebooted_only_where_a_role_asked(host):
    asked = host.backend.get_hostname() == "twin1"
    assert (twins.boot_id(host) != twins.kept_boot_id(host)) is asked


def test_the_change_is_in_effect_after_the_reboot(host):
    if host.backend.get_hostname() != "twin1":
        assert not host.file("/etc/sysctl.d/90-gpufleet-molecule.conf").exists
        return
    assert host.file("/run/twin/proc/sys/kernel/numa_balancing").content_string.strip() == "0"


def test_the_node_is_up_and_running(host):
    assert host.run("systemctl is-system-running").stdout.strip() in ("running", "degraded")
