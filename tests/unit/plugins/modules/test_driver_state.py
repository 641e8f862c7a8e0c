"""driver_state load_now through Ansible (issue 26): nvidia-peermem is loaded live where it can be,
read back, predicted in check mode; a modprobe that fails is the reboot reason, in its own words.
The node is a root folder plus modinfo/modprobe stand-ins on PATH (the decision itself:
tests/unit/plugins/module_utils/_os/test_driver_state.py)."""
import os

import pytest

KERNEL = "6.8.0-45-generic"
MODINFO = """#!/bin/sh
# modinfo -k KERNEL NAME: the pinned driver's modules for KERNEL
[ "$2" = "%s" ] || exit 1
echo "filename:       /lib/modules/$2/updates/dkms/$3.ko"
echo "version:        550.90.07"
echo "vermagic:       $2 SMP preempt mod_unload modversions"
""" % KERNEL


def _write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """(root, bin): a node running the pinned driver without nvidia-peermem; modprobe loads it into root."""
    root, tools = tmp_path / "root", tmp_path / "bin"
    _write(str(root / "proc/sys/kernel/osrelease"), KERNEL + "\n")
    _write(str(root / "sys/module/nvidia/version"), "550.90.07\n")
    _write(str(tools / "modinfo"), MODINFO, 0o755)
    _write(str(tools / "modprobe"), "#!/bin/sh\nmkdir -p %s/sys/module/nvidia_peermem\n" % root, 0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tools, os.environ["PATH"]))
    return root, tools


def _args(root):
    return {"root": str(root), "area": "nvidia", "driver_version": "550.90.07", "load_now": True}


def test_peermem_is_loaded_live_predicted_in_check_mode_then_nothing_left(adhoc, node):
    root, _tools = node
    rc, result = adhoc("driver_state", _args(root), check=True)
    assert rc == 0, result
    assert (result["changed"], result["loaded_now"], result["reboot_reasons"]) == (True, ["nvidia-peermem"], [])
    assert not (root / "sys/module/nvidia_peermem").exists()                   # predicted, not done
    rc, result = adhoc("driver_state", _args(root))
    assert rc == 0, result
    assert (result["changed"], result["loaded_now"], result["reboot_required"]) == (True, ["nvidia-peermem"], False)
    assert result["peermem_loaded"] is True and (root / "sys/module/nvidia_peermem").is_dir()
    rc, result = adhoc("driver_state", _args(root))
    assert (rc, result["changed"], result["loaded_now"], result["reboot_reasons"]) == (0, False, [], [])


def test_read_only_call_loads_nothing(adhoc, node):
    root, _tools = node
    rc, result = adhoc("driver_state", dict(_args(root), load_now=False))
    assert rc == 0 and result["changed"] is False and not (root / "sys/module/nvidia_peermem").exists()
    assert result["reboot_reasons"] == ["nvidia-peermem not loaded (modprobe nvidia-peermem loads it now; "
                                        "/etc/modules-load.d/nvidia-peermem.conf at boot)"]


def test_modprobe_that_fails_is_the_reboot_reason_in_its_own_words(adhoc, node):
    root, tools = node
    _write(str(tools / "modprobe"), "#!/bin/sh\necho \"modprobe: ERROR: could not insert 'nvidia_peermem': "
                                    "Unknown symbol in module, or unknown parameter (see dmesg)\" >&2\nexit 1\n", 0o755)
    rc, result = adhoc("driver_state", _args(root))
    assert rc == 0 and result["changed"] is False and result["loaded_now"] == []
    assert result["reboot_reasons"] == [
        "modprobe nvidia-peermem failed (exit 1: modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol "
        "in module, or unknown parameter (see dmesg)): loaded at boot from /etc/modules-load.d/nvidia-peermem.conf"]


def test_check_mode_with_the_packages_still_to_install_predicts_the_live_load(adhoc, node):
    root, tools = node
    _write(str(tools / "modinfo"), MODINFO.replace("%s" % KERNEL, "no-kernel-has-modules-yet", 1), 0o755)
    rc, result = adhoc("driver_state", dict(_args(root), fail_on_problems=False), check=True)
    assert rc == 0 and result["reboot_reasons"] == [
        "nvidia-peermem is not installed for the running kernel 6.8.0-45-generic: loaded at boot from "
        "/etc/modules-load.d/nvidia-peermem.conf"]
    rc, result = adhoc("driver_state", dict(_args(root), fail_on_problems=False, packages_pending=True), check=True)
    assert (rc, result["loaded_now"], result["reboot_reasons"]) == (0, ["nvidia-peermem"], [])


def test_services_are_read_in_the_same_call(adhoc, node):
    root, tools = node
    _write(str(tools / "systemctl"), "#!/bin/sh\n[ \"$1\" = show ] || exit 3\n"
           "printf 'Id=nvidia-fabricmanager.service\\nActiveState=active\\nSubState=running\\nUnitFileState=enabled\\n\\n'\n"
           "printf 'Id=nvidia-persistenced.service\\nActiveState=inactive\\nSubState=dead\\nUnitFileState=disabled\\n'\n", 0o755)
    rc, result = adhoc("driver_state", dict(_args(root), load_now=False, services=["nvidia-fabricmanager", "nvidia-persistenced"]))
    assert rc == 0, result
    assert result["services"]["nvidia-fabricmanager"] == {"enabled": True, "active": True, "sub": "running", "file_state": "enabled"}
    assert (result["services"]["nvidia-persistenced"]["enabled"], result["services"]["nvidia-persistenced"]["active"]) == (False, False)
    rc, result = adhoc("driver_state", dict(_args(root), load_now=False))
    assert rc == 0 and result["services"] == {}


def test_peermem_at_boot_file_in_the_same_call(adhoc, node, tmp_path):
    root, _tools = node
    conf = tmp_path / "etc" / "modules-load.d" / "nvidia-peermem.conf"
    args = dict(_args(root), load_now=False, peermem_at_boot=str(conf))
    rc, result = adhoc("driver_state", args, check=True)
    assert rc == 0 and result["changed"] and result["peermem_at_boot"] == "write" and not conf.exists(), result
    rc, result = adhoc("driver_state", args)
    assert rc == 0 and result["changed"] and conf.read_text().endswith("\nnvidia-peermem\n")
    rc, result = adhoc("driver_state", args)
    assert rc == 0 and not result["changed"] and result["peermem_at_boot"] is None
    rc, result = adhoc("driver_state", dict(args, peermem=False))
    assert rc == 0 and result["peermem_at_boot"] == "remove" and not conf.exists()
