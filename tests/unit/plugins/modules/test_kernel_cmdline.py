"""kernel_cmdline through Ansible on a temporary root: edits, check mode, diff, reboot from state.
(update-grub itself runs on the lab's twins: tests/integration/provision.)"""
import os

H100 = ["intel_iommu=on", "iommu=pt", "transparent_hugepage=never", "numa_balancing=disable",
        "default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128"]
MAIN = 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt hugepagesz=1G hugepages=64"\n'
DROPIN = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX hugepages=32"\n'


def _tree(tmp_path, cmdline):
    root = tmp_path / "root"
    (root / "etc/default/grub.d").mkdir(parents=True)
    (root / "etc/default/grub").write_text(MAIN)
    (root / "etc/default/grub.d/50-cloudimg-settings.cfg").write_text(DROPIN)
    hw = tmp_path / "hw"
    (hw / "proc").mkdir(parents=True)
    (hw / "proc/cmdline").write_text(cmdline + "\n")
    return root, hw


def _args(root, hw, **kw):
    args = {"required": H100, "forbidden": ["pci=noats"], "allow_repeated": ["console"], "root": str(root),
            "hardware_root": str(hw), "grub_cfg": "", "regenerate": []}
    args.update(kw)
    return args


def test_check_mode_predicts_and_changes_nothing_then_the_run_does_it(adhoc, tmp_path):
    running = "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic ro intel_iommu=on iommu=pt hugepagesz=1G hugepages=64 hugepages=32 quiet"
    root, hw = _tree(tmp_path, running)
    rc, checked = adhoc("kernel_cmdline", _args(root, hw), check=True)
    assert rc == 0 and checked["changed"] is True, checked
    assert checked["files"] == ["etc/default/grub", "etc/default/grub.d/50-cloudimg-settings.cfg"]
    assert (root / "etc/default/grub").read_text() == MAIN and (root / "etc/default/grub.d/50-cloudimg-settings.cfg").read_text() == DROPIN
    assert checked["reboot_required"] is True
    assert checked["reboot_reasons"] == [
        "GRUB will boot intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable default_hugepagesz=1G "
        "hugepagesz=1G hugepages=128, running has intel_iommu=on iommu=pt hugepagesz=1G hugepages=64 hugepages=32"]

    rc, done = adhoc("kernel_cmdline", _args(root, hw))
    assert rc == 0 and done["changed"] is True
    assert {k: done[k] for k in ("files", "cmdline_after", "reboot_reasons")} == \
        {k: checked[k] for k in ("files", "cmdline_after", "reboot_reasons")}
    assert (root / "etc/default/grub.d/50-cloudimg-settings.cfg").read_text() == 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX"\n'
    assert done["cmdline_after"] == ("intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable "
                                     "default_hugepagesz=1G hugepagesz=1G hugepages=128 quiet")

    # second run: nothing to edit, still a reboot pending (the running kernel has the old line)
    rc, again = adhoc("kernel_cmdline", _args(root, hw))
    assert rc == 0 and again["changed"] is False and again["files"] == [] and again["reboot_required"] is True

    # after the "reboot": the running line has the new parameters (in another order is fine)
    (hw / "proc/cmdline").write_text("BOOT_IMAGE=/x ro " + done["cmdline_after"] + "\n")
    rc, booted = adhoc("kernel_cmdline", _args(root, hw))
    assert rc == 0 and booted["changed"] is False and booted["reboot_required"] is False and booted["reboot_reasons"] == []


def test_stale_grub_cfg_is_regenerated_and_a_failing_regeneration_names_the_command(adhoc, tmp_path):
    good = "intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable default_hugepagesz=1G hugepagesz=1G hugepages=128"
    root, hw = _tree(tmp_path, "ro " + good)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX="%s"\n' % good)
    os.remove(root / "etc/default/grub.d/50-cloudimg-settings.cfg")
    (root / "boot/grub").mkdir(parents=True)
    (root / "boot/grub/grub.cfg").write_text("set default=\"0\"\nmenuentry 'Debian' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic ro hugepages=64\n}\n")
    rc, result = adhoc("kernel_cmdline", _args(root, hw, grub_cfg="boot/grub/grub.cfg", regenerate=["false"]), check=True)
    assert rc == 0 and result["changed"] is True and result["files"] == [] and result["regenerated"] is True
    rc, result = adhoc("kernel_cmdline", _args(root, hw, grub_cfg="boot/grub/grub.cfg", regenerate=["false"]))
    assert rc != 0 and result["msg"].startswith("kernel_cmdline: false failed (exit 1)")


def test_uneditable_source_fails_naming_file_and_line(adhoc, tmp_path):
    root, hw = _tree(tmp_path, "ro")
    (root / "etc/default/grub.d/60-x.cfg").write_text('GRUB_CMDLINE_LINUX="$(cat /etc/x)"\n')
    rc, result = adhoc("kernel_cmdline", _args(root, hw))
    assert rc != 0 and "etc/default/grub.d/60-x.cfg line 1: cannot edit GRUB_CMDLINE_LINUX" in result["msg"]
    assert (root / "etc/default/grub").read_text() == MAIN
