"""Reboot requests and next-boot problems of the driver area, from state (expectations by hand)."""
import os

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._os import driver_state as S

# modinfo -k 6.8.0-45-generic mlx5_core, as kmod prints it (fields of the lab's DKMS stand-in; a real
# module has more: alias, depends, parm lines with their own colons)
MODINFO = """filename:       /lib/modules/6.8.0-45-generic/updates/dkms/mlx5_core.ko
version:        23.10
license:        Dual BSD/GPL
srcversion:     00000000000000000000001
depends:
retpoline:      Y
name:           mlx5_core
vermagic:       6.8.0-45-generic SMP preempt mod_unload modversions
parm:           debug_mask:debug mask: 1 = dump cmd data, 2 = dump cmd exec time, 3 = both. Default=0 (uint)
"""


def test_parse_modinfo():
    got = S.parse_modinfo(MODINFO)
    assert got["filename"].endswith("updates/dkms/mlx5_core.ko")
    assert got["version"] == "23.10" and got["kernel"] == "6.8.0-45-generic"
    assert got["parm"].startswith("debug_mask:debug mask")
    assert S.parse_modinfo("") == {}


def test_parse_ofed_release():
    assert S.parse_ofed_release("MLNX_OFED_LINUX-23.10-1.1.9.0:\n") == "23.10-1.1.9.0"
    assert S.parse_ofed_release("OFED-internal-24.10-1.1.4:\n") == "24.10-1.1.4"
    assert S.parse_ofed_release("") is None


def nvidia_module(version, kernel="6.8.0-45-generic"):
    return {"version": version, "kernel": kernel}


def test_nvidia_wrong_branch_loaded_asks_for_reboot():
    problems, reasons = S.nvidia_state("550.90.07", "535.183.01", nvidia_module("550.90.07"), {"version": "550.90.07"},
                                       "6.8.0-45-generic")
    assert problems == []
    assert reasons == ["NVIDIA driver 550.90.07 installed, 535.183.01 loaded"]


def test_nvidia_converged_no_reboot():
    assert S.nvidia_state("550.90.07", "550.90.07", nvidia_module("550.90.07"), {}, "6.8.0-45-generic") == ([], [])


def test_nvidia_no_driver_loaded():
    _problems, reasons = S.nvidia_state("550.90.07", None, nvidia_module("550.90.07"), {}, "6.8.0-45-generic")
    assert reasons == ["NVIDIA driver 550.90.07 installed, none loaded"]


def test_nvidia_module_missing_or_wrong_for_the_next_kernel():
    problems, _reasons = S.nvidia_state("550.90.07", "550.90.07", None, None, "6.8.0-50-generic")
    assert problems == ["no nvidia kernel module for kernel 6.8.0-50-generic (the precompiled package or the DKMS build "
                        "for that kernel is missing: are its headers installed?)"]
    problems, _reasons = S.nvidia_state("550.90.07", "550.90.07", nvidia_module("550.54.15"), {}, "6.8.0-45-generic")
    assert problems == ["the nvidia module for kernel 6.8.0-45-generic is 550.54.15, the driver pinned is 550.90.07"]
    problems, _reasons = S.nvidia_state("550.90.07", "550.90.07", nvidia_module("550.90.07"), None, "6.8.0-45-generic")
    assert problems == ["no nvidia-peermem module for kernel 6.8.0-45-generic (GPUDirect RDMA would be off)"]
    assert S.nvidia_state("550.90.07", "550.90.07", nvidia_module("550.90.07"), None, "6.8.0-45-generic",
                          peermem_wanted=False) == ([], [])


def test_ofed_built_for_the_kernel_that_will_boot():
    module = S.parse_modinfo(MODINFO)
    assert S.ofed_state("23.10-1.1.9.0", "23.10-1.1.9.0", module, "6.8.0-45-generic") == ([], [])
    problems, _reasons = S.ofed_state("23.10-1.1.9.0", "23.10-1.1.9.0", None, "6.8.0-50-generic")
    assert problems == ["no mlx5_core module for kernel 6.8.0-50-generic: OFED 23.10-1.1.9.0 could not be built for it"]
    problems, _reasons = S.ofed_state("23.10-1.1.9.0", "23.10-1.1.9.0", dict(module, kernel="6.8.0-40-generic"), "6.8.0-45-generic")
    assert problems == ["mlx5_core for kernel 6.8.0-45-generic is built for 6.8.0-40-generic (OFED 23.10-1.1.9.0)"]
    problems, _reasons = S.ofed_state("24.04-0.7.0.0", "23.10-1.1.9.0", module, "6.8.0-45-generic")
    assert problems == ["OFED 23.10-1.1.9.0 installed (ofed_info -s), the profile pins 24.04-0.7.0.0"]


def test_ofed_loaded_module_differs_from_the_built_one():
    module = S.parse_modinfo(MODINFO)
    _problems, reasons = S.ofed_state("23.10-1.1.9.0", "23.10-1.1.9.0", module, "6.8.0-45-generic",
                                      loaded_version="5.0-0", running_kernel="6.8.0-45-generic")
    assert reasons == ["OFED mlx5_core 5.0-0 loaded, 23.10 built for kernel 6.8.0-45-generic"]
    # another kernel running: the kernel role asks for that reboot; nothing to compare here
    assert S.ofed_state("23.10-1.1.9.0", None, module, "6.8.0-45-generic", "5.0-0", "6.8.0-40-generic") == ([], [])


RUNNING = "6.8.0-45-generic"
AT_BOOT = ": loaded at boot from /etc/modules-load.d/nvidia-peermem.conf"


def test_nvidia_state_leaves_peermem_to_its_plan():
    # nvidia-peermem not running is no reboot reason of nvidia_state (peermem_plan decides)
    assert S.nvidia_state("550.90.07", "550.90.07", nvidia_module("550.90.07"), {"version": "550.90.07"}, RUNNING) == ([], [])


def test_peermem_installed_for_the_running_kernel_is_loaded_live():
    action, reason = S.peermem_plan("550.90.07", "550.90.07", None, nvidia_module("550.90.07"), RUNNING)
    assert action == "load"
    # what stands when it is not loaded (a read-only call): no boot is named as needed
    assert reason == ("nvidia-peermem not loaded (modprobe nvidia-peermem loads it now; "
                      "/etc/modules-load.d/nvidia-peermem.conf at boot)")
    # a module without vermagic (modinfo shows none): still loadable
    assert S.peermem_plan("550.90.07", "550.90.07", None, {"version": "550.90.07"}, RUNNING)[0] == "load"


def test_peermem_already_running():
    assert S.peermem_plan("550.90.07", "550.90.07", "550.90.07", nvidia_module("550.90.07"), RUNNING) == ("loaded", None)
    # loaded, the kernel shows no version: loaded
    assert S.peermem_plan("550.90.07", "550.90.07", "", None, RUNNING) == ("loaded", None)


def test_peermem_follows_the_driver_reboot():
    # another driver (or none) runs: the driver's own reason asks for the boot that loads both
    assert S.peermem_plan("550.90.07", "535.183.01", None, nvidia_module("550.90.07"), RUNNING) == ("with_driver", None)
    assert S.peermem_plan("550.90.07", None, None, nvidia_module("550.90.07"), RUNNING) == ("with_driver", None)
    assert S.peermem_plan("550.90.07", "535.183.01", "535.183.01", None, RUNNING) == ("with_driver", None)


def test_peermem_that_cannot_be_loaded_live_names_why():
    # an older nvidia-peermem in use beside the pinned driver
    assert S.peermem_plan("550.90.07", "550.90.07", "550.54.15", nvidia_module("550.90.07"), RUNNING) == (
        "reboot", "nvidia-peermem 550.54.15 is loaded (in use) beside driver 550.90.07" + AT_BOOT)
    # not installed for the running kernel (its package is for the kernel that will boot)
    assert S.peermem_plan("550.90.07", "550.90.07", None, None, "6.8.0-40-generic") == (
        "reboot", "nvidia-peermem is not installed for the running kernel 6.8.0-40-generic" + AT_BOOT)
    # installed for the running kernel at another version than the running driver
    assert S.peermem_plan("550.90.07", "550.90.07", None, nvidia_module("550.54.15"), RUNNING) == (
        "reboot", "nvidia-peermem for the running kernel 6.8.0-45-generic is 550.54.15, the loaded driver is 550.90.07" + AT_BOOT)
    # found for the running kernel but built for another one (vermagic)
    assert S.peermem_plan("550.90.07", "550.90.07", None, nvidia_module("550.90.07", "6.8.0-50-generic"), RUNNING) == (
        "reboot", "nvidia-peermem found for the running kernel 6.8.0-45-generic is built for kernel 6.8.0-50-generic" + AT_BOOT)


def test_live_load_outcome_is_read_back():
    assert S.load_outcome(0, "", True) is None
    # modprobe complained but the module runs (read back): it runs
    assert S.load_outcome(1, "modprobe: WARNING: something", True) is None
    assert S.load_outcome(1, "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n", False) == (
        "modprobe nvidia-peermem failed (exit 1: modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument)" + AT_BOOT)
    assert S.load_outcome(1, "", False) == "modprobe nvidia-peermem failed (exit 1: no message)" + AT_BOOT
    assert S.load_outcome(0, "", False) == ("modprobe nvidia-peermem exited 0 but the module is not loaded "
                                            "(no sys/module/nvidia_peermem)" + AT_BOOT)


def test_peermem_on_disk_in_check_mode_with_the_transaction_predicted():
    found = nvidia_module("550.54.15")
    # nothing pending: what modinfo found
    assert S.peermem_on_disk(found, "550.90.07", RUNNING, RUNNING) == found
    assert S.peermem_on_disk(None, "550.90.07", RUNNING, RUNNING) is None
    # the pinned packages are still to be installed for the running kernel: the pinned module
    assert S.peermem_on_disk(None, "550.90.07", RUNNING, RUNNING, packages_pending=True) == nvidia_module("550.90.07")
    assert S.peermem_plan("550.90.07", "550.90.07", None, S.peermem_on_disk(found, "550.90.07", RUNNING, RUNNING, True),
                          RUNNING)[0] == "load"
    # ... for another kernel than the running one: they bring nothing for the running kernel
    assert S.peermem_on_disk(None, "550.90.07", "6.8.0-50-generic", RUNNING, packages_pending=True) is None


def test_parse_systemctl_show_one_block_per_unit():
    text = ("Id=nvidia-fabricmanager.service\nActiveState=active\nSubState=running\nUnitFileState=enabled\n\n"
            "Id=nvidia-persistenced.service\nActiveState=inactive\nSubState=dead\nUnitFileState=\n")
    assert S.parse_systemctl_show(text) == {
        "nvidia-fabricmanager": {"file_state": "enabled", "enabled": True, "active": True, "sub": "running"},
        "nvidia-persistenced": {"file_state": None, "enabled": False, "active": False, "sub": "dead"}}
    assert S.parse_systemctl_show("") == {}


def test_peermem_at_boot_plan():
    assert S.peermem_at_boot_plan(None, True) == "write"
    assert S.peermem_at_boot_plan("nvidia-peermem\n", True) == "write"          # not ours: made ours
    assert S.peermem_at_boot_plan(S.PEERMEM_AT_BOOT_TEXT, True) is None
    assert S.peermem_at_boot_plan(S.PEERMEM_AT_BOOT_TEXT, False) == "remove"
    assert S.peermem_at_boot_plan(None, False) is None


# ---- arguments and the modules-load.d file (issue 32) ----------------------------------------


def _p(**kw):
    p = {"area": "nvidia", "driver_version": "550.90.07", "kernel_release": "", "ofed_release": None,
         "services": ["nvidia-fabricmanager"], "peermem_at_boot": "/etc/modules-load.d/nvidia-peermem.conf"}
    p.update(kw)
    return p


def test_check_arguments_accepts_the_roles_calls():
    S.check_arguments(_p())
    S.check_arguments(_p(area="ofed", driver_version=None, ofed_release="23.10-1.1.9.0", kernel_release="6.8.0-45-generic",
                         services=[], peermem_at_boot=""))


@pytest.mark.parametrize("change, message", [
    ({"driver_version": "latest"}, "driver_version 'latest': not an NVIDIA driver version (550.90.07)"),
    ({"driver_version": "550.90.07\n"}, "driver_version '550.90.07\\n': not an NVIDIA driver version"),
    ({"driver_version": None}, "driver_version None: not an NVIDIA driver version"),
    ({"kernel_release": "-v"}, "kernel_release '-v': not a kernel release"),
    ({"ofed_release": "x"}, "ofed_release 'x': not an OFED release"),
    ({"services": ["-H"]}, "services: '-H' is not a systemd unit name"),
    ({"peermem_at_boot": "x.conf"}, "peermem_at_boot 'x.conf': not an absolute file path"),
])
def test_check_arguments_names_option_and_value(change, message):
    with pytest.raises(S.DriverStateError) as err:
        S.check_arguments(_p(**change))
    assert str(err.value) == message or str(err.value).startswith(message)


def test_read_text_file(tmp_path):
    path = tmp_path / "nvidia-peermem.conf"
    assert S.read_text_file(str(path)) is None
    path.write_text("nvidia-peermem\n")
    assert S.read_text_file(str(path)) == "nvidia-peermem\n"
    path.write_bytes(b"\x00")
    with pytest.raises(S.DriverStateError) as err:
        S.read_text_file(str(path))
    assert str(err.value) == "%s: binary content (a NUL byte), not a modules-load.d file: left alone" % path
    path.unlink()
    os.mkfifo(str(path))
    with pytest.raises(S.DriverStateError) as err:
        S.read_text_file(str(path))
    assert str(err.value) == "%s: not a regular file (a FIFO)" % path
