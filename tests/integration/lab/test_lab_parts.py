"""The lab's pieces without containers: the twin's reading of GRUB, the GRUB stand-in itself (run
under bubblewrap over temporary /etc/default and /boot), BIOS fault mapping onto the BMC flavours,
the inventory merge and the seed script. Fast; no podman needed.
"""
import os
import shutil
import subprocess

import pytest

from lab import lab
from lab.twin import boot

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
UPDATE_GRUB = os.path.join(REPO, "lab", "image", "files", "update-grub")
UUID = "6a1d8c3e-7f0b-4b8e-9d2a-1c5e0f4a2b7d"

GRUB_CFG = """
set default="%s"
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-U' {
    linux    /boot/vmlinuz-6.1.0-26-amd64 root=UUID=U ro  hugepages=64   quiet
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-U' {
    menuentry 'Debian GNU/Linux, with Linux 6.1.0-26-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-26-amd64-advanced-U' {
        linux    /boot/vmlinuz-6.1.0-26-amd64 root=UUID=U ro hugepages=64 quiet
    }
    menuentry 'Debian GNU/Linux, with Linux 6.1.0-25-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-25-amd64-advanced-U' {
        linux    /boot/vmlinuz-6.1.0-25-amd64 root=UUID=U ro hugepages=8 quiet
    }
}
"""


@pytest.mark.parametrize("default, grubenv, image", [
    ("0", None, "/boot/vmlinuz-6.1.0-26-amd64"),
    ("1>1", None, "/boot/vmlinuz-6.1.0-25-amd64"),
    ("gnulinux-advanced-U>gnulinux-6.1.0-25-amd64-advanced-U", None, "/boot/vmlinuz-6.1.0-25-amd64"),
    ("Advanced options for Debian GNU/Linux>Debian GNU/Linux, with Linux 6.1.0-25-amd64", None, "/boot/vmlinuz-6.1.0-25-amd64"),
    ("saved", {"saved_entry": "1>1"}, "/boot/vmlinuz-6.1.0-25-amd64"),
    ("saved", {}, "/boot/vmlinuz-6.1.0-26-amd64"),
    ("7", None, "/boot/vmlinuz-6.1.0-26-amd64"),              # GRUB falls back to the first entry
    ("no such entry", None, "/boot/vmlinuz-6.1.0-26-amd64"),
])
def test_default_entry_is_the_one_grub_boots(default, grubenv, image):
    chosen_default, entries = boot.parse_grub_cfg(GRUB_CFG % default)
    assert chosen_default == default
    entry = boot.resolve_default(chosen_default, entries, grubenv)
    assert entry["linux"].split()[0] == image


def test_cmdline_is_what_grub_passes(tmp_path, monkeypatch):
    (tmp_path / "boot" / "grub").mkdir(parents=True)
    (tmp_path / "boot" / "grub" / "grub.cfg").write_text(GRUB_CFG % "0")
    monkeypatch.setattr(boot, "SYSROOT", str(tmp_path))
    release, cmdline = boot.kernel_from_grub()
    assert release == "6.1.0-26-amd64"
    # BOOT_IMAGE first, blanks collapsed as GRUB splits words
    assert cmdline == "BOOT_IMAGE=/boot/vmlinuz-6.1.0-26-amd64 root=UUID=U ro hugepages=64 quiet"


def test_no_grub_cfg_means_no_kernel_from_grub(tmp_path, monkeypatch):
    monkeypatch.setattr(boot, "SYSROOT", str(tmp_path))
    assert boot.kernel_from_grub() is None


def _update_grub(tmp_path, grub, dropins=None, kernels=("6.1.0-25-amd64", "6.1.0-26-amd64")):
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap (bwrap) is absent: make deps installs it")
    etc_default = tmp_path / "etc-default"
    (etc_default / "grub.d").mkdir(parents=True)
    (etc_default / "grub").write_text(grub)
    for name, text in (dropins or {}).items():
        (etc_default / "grub.d" / name).write_text(text)
    bootdir = tmp_path / "root" / "boot"
    bootdir.mkdir(parents=True)
    for version in kernels:
        (bootdir / ("vmlinuz-" + version)).write_text("k")
        (bootdir / ("initrd.img-" + version)).write_text("i")
    # a fresh /tmp for the stand-in, then the checkout bound back over it: a clone under /tmp would
    # otherwise vanish under the tmpfs, stand-in included (issue 14, item 9)
    proc = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--bind", str(etc_default), "/etc/default",
                           "--bind", str(bootdir), "/boot", "--dev", "/dev", "--proc", "/proc",
                           "--tmpfs", "/tmp", "--ro-bind", REPO, REPO, UPDATE_GRUB], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return (bootdir / "grub" / "grub.cfg").read_text(), proc.stderr


def test_update_grub_standin_sources_grub_d_like_grub_mkconfig(tmp_path, monkeypatch):
    with open(os.path.join(REPO, "lab", "image", "files", "grub-default")) as handle:
        grub = handle.read().replace('GRUB_CMDLINE_LINUX=""', 'GRUB_CMDLINE_LINUX="hugepagesz=1G hugepages=64"')
    cfg, log = _update_grub(tmp_path, grub, {"50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=32"\n',
                                             "README": 'GRUB_CMDLINE_LINUX="not sourced: not *.cfg"\n'})
    assert "Found linux image: /boot/vmlinuz-6.1.0-26-amd64" in log
    monkeypatch.setattr(boot, "SYSROOT", str(tmp_path / "root"))
    release, cmdline = boot.kernel_from_grub()
    assert release == "6.1.0-26-amd64"                                      # newest first, like 10_linux
    assert cmdline == ("BOOT_IMAGE=/boot/vmlinuz-6.1.0-26-amd64 root=UUID=%s ro hugepagesz=1G hugepages=64 "
                       "hugepages=32 quiet" % UUID)
    assert "ro single hugepagesz=1G hugepages=64 hugepages=32" in cfg        # recovery: no _DEFAULT part
    assert "not sourced" not in cfg


def test_update_grub_standin_honours_grub_default(tmp_path, monkeypatch):
    grub = ('GRUB_DEFAULT="gnulinux-advanced-%s>gnulinux-6.1.0-25-amd64-advanced-%s"\n'
            'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="iommu=pt"\n' % (UUID, UUID))
    _update_grub(tmp_path, grub)
    monkeypatch.setattr(boot, "SYSROOT", str(tmp_path / "root"))
    assert boot.kernel_from_grub() == (
        "6.1.0-25-amd64", "BOOT_IMAGE=/boot/vmlinuz-6.1.0-25-amd64 root=UUID=%s ro iommu=pt quiet" % UUID)


@pytest.mark.parametrize("flavour, settings, raw", [
    ("dell", {"snc": "off", "hyperthreading": False}, {"SubNumaCluster": "Disabled", "LogicalProc": "Disabled"}),
    ("dell", {"snc": "snc4", "acs": False}, {"SubNumaCluster": "4-Way"}),   # Dell has no ACS attribute
    ("lenovo", {"vtd": False, "snc": "snc4"}, {"DevicesandIOPorts_IntelVTforDirectedIOVTd": "Disabled", "Processors_SNC": "SNC4"}),
    ("ami", {"snc": "off", "acs": True}, {"SncEn": "Disable"}),   # the DGX registry has no ACS attribute
])
def test_bios_faults_map_onto_the_bmc_flavour(flavour, settings, raw):
    assert lab.raw_bios(flavour, settings) == raw


def test_bios_fault_the_flavour_cannot_express_fails_clearly():
    with pytest.raises(lab.LabError, match=r"dell.*snc='nps4'"):
        lab.raw_bios("dell", {"snc": "nps4"})
    with pytest.raises(lab.LabError, match="no such flavour|cannot read settings"):
        lab.raw_bios("no-such-vendor", {"snc": "off"})


def test_inventory_baseline_and_overrides_merge():
    twins = lab.load_twins(os.path.join(REPO, "inventories", "lab", "hosts.yml"))
    assert sorted(twins) == ["twin1", "twin2", "twin3", "twin4"]
    assert len({t["ssh_port"] for t in twins.values()}) == 4
    assert len({t["bmc"]["port"] for t in twins.values()}) == 4
    assert twins["twin1"]["holds"] == []                                      # list replaces the baseline's
    assert twins["twin1"]["bios"]["snc"] == "off" and twins["twin1"]["bios"]["vtd"] is True   # dict merges
    assert "nvidia-driver-535-server=535.183.01-0ubuntu0.22.04.1" in twins["twin2"]["packages"]
    assert twins["twin4"]["packages"] == twins["twin1"]["packages"]         # baseline


def test_inventory_without_a_port_fails_naming_the_twin(tmp_path):
    path = tmp_path / "hosts.yml"
    path.write_text("all:\n  children:\n    lab_twins:\n      hosts:\n        twinX: {}\n"
                    "      vars:\n        gpufleet_lab_baseline: {bios: {}}\n")
    with pytest.raises(lab.LabError, match="twinX has no ansible_port"):
        lab.load_twins(str(path))


def test_seed_script_writes_grub_sources_and_rejects_odd_dropin_names():
    spec = {"name": "t", "packages": ["nvidia-driver-550-server=550.90.07-0ubuntu0.22.04.1"], "holds": ["a"],
            "services": ["nvidia-fabricmanager"],
            "grub": {"cmdline_linux": "a=1 b", "dropins": {"50-x.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX c"'}}}
    script = lab.seed_script(spec)
    assert "apt-get install" in script and "nvidia-driver-550-server=550.90.07-0ubuntu0.22.04.1" in script
    assert "apt-mark hold a" in script and "update-grub" in script
    assert "cat >/etc/default/grub.d/50-x.cfg <<'GPUFLEET_EOF'\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX c\"\n" in script
    spec["grub"]["dropins"] = {"../../etc/passwd": "x"}
    with pytest.raises(lab.LabError, match="plain \\*.cfg name"):
        lab.seed_script(spec)


def test_boot_applies_sysctl_files_like_systemd_sysctl(tmp_path, monkeypatch):
    for folder, name, text in (("usr/lib/sysctl.d", "50-default.conf", "kernel.numa_balancing = 1\n"),
                               ("etc/sysctl.d", "90-gpufleet.conf", "# tuned\nkernel/numa_balancing=0\nvm.swappiness = 1\n"),
                               ("usr/lib/sysctl.d", "90-gpufleet.conf", "kernel.numa_balancing = 1\n")):  # shadowed by /etc
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / name).write_text(text)
    monkeypatch.setattr(boot, "SYSROOT", str(tmp_path))
    assert boot.boot_sysctl() == {"kernel.numa_balancing": "0"}
    (tmp_path / "etc" / "sysctl.conf").write_text("kernel.numa_balancing=1\n")                   # read last
    assert boot.boot_sysctl() == {"kernel.numa_balancing": "1"}


def test_up_names_an_unknown_twin_before_doing_anything(tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "STATE", str(tmp_path / "state"))
    with pytest.raises(lab.LabError, match=r"no twin named twin9 in .*hosts.yml \(known: twin1, twin2, twin3, twin4\)"):
        lab.up(["twin9"])
    assert not (tmp_path / "state" / "bmc").exists()                             # no BMC, no twin started


def test_oci_prestart_ignores_containers_that_are_not_twins_and_twins_without_pending(tmp_path, monkeypatch):
    monkeypatch.setattr(lab, "STATE", str(tmp_path))
    assert lab.oci_prestart('{"ociVersion": "1.0.2", "id": "x", "annotations": {}}') is None
    (tmp_path / "bmc" / "t1").mkdir(parents=True)
    (tmp_path / "bmc" / "t1" / "bios.json").write_text('{"vendor": "ami", "current": {}, "pending": {}, "power": "On"}')
    # nothing pending: the BMC is left alone (no command file is even needed)
    assert lab.oci_prestart('{"annotations": {"gpufleet.lab.twin": "t1"}}') is None
