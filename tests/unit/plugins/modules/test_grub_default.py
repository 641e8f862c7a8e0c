"""grub_default through Ansible on a temporary root: what it predicts and what it refuses.
(The regeneration with update-grub runs on the lab's twins: tests/integration/provision.)"""

CFG = """set default="0"
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple-u1' {
    linux /boot/vmlinuz-6.8.0-40-generic root=UUID=u1 ro quiet
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-u1' {
    menuentry 'Debian GNU/Linux, with Linux 6.8.0-40-generic' $menuentry_id_option 'gnulinux-6.8.0-40-generic-advanced-u1' {
        linux /boot/vmlinuz-6.8.0-40-generic root=UUID=u1 ro quiet
    }
}
"""


def _root(tmp_path, kernels=("6.8.0-40-generic",), running="6.8.0-40-generic"):
    root = tmp_path / "root"
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=""\n')
    (root / "boot/grub").mkdir(parents=True)
    (root / "boot/grub/grub.cfg").write_text(CFG)
    for release in kernels:
        (root / ("boot/vmlinuz-" + release)).write_text("image\n")
    hw = tmp_path / "hw"
    (hw / "proc/sys/kernel").mkdir(parents=True)
    (hw / "proc/sys/kernel/osrelease").write_text(running + "\n")
    return root, hw


def test_new_kernel_is_predicted_as_the_next_boot_and_asks_for_the_reboot(adhoc, tmp_path):
    root, hw = _root(tmp_path, kernels=("6.8.0-40-generic", "6.8.0-45-generic"))
    rc, result = adhoc("grub_default", {"release": "6.8.0-45-generic", "root": str(root), "hardware_root": str(hw),
                                        "regenerate": ["false"]}, check=True)
    assert rc == 0 and result["changed"] is True and result["regenerated"] is True
    assert result["previous_release"] == "6.8.0-40-generic" and result["next_release"] == "6.8.0-45-generic"
    assert result["reboot_reasons"] == ["GRUB will boot kernel 6.8.0-45-generic, running 6.8.0-40-generic"]
    assert result["grub_default"] is None          # newest kernel + GRUB_DEFAULT=0: no GRUB_DEFAULT edit
    assert (root / "boot/grub/grub.cfg").read_text() == CFG


def test_current_default_is_unchanged_and_a_missing_kernel_is_refused(adhoc, tmp_path):
    root, hw = _root(tmp_path)
    args = {"release": "6.8.0-40-generic", "root": str(root), "hardware_root": str(hw), "regenerate": ["false"]}
    rc, result = adhoc("grub_default", args)
    assert rc == 0 and result["changed"] is False and result["reboot_required"] is False
    rc, result = adhoc("grub_default", dict(args, release="6.8.0-45-generic"))
    assert rc != 0 and "kernel 6.8.0-45-generic: boot/vmlinuz-6.8.0-45-generic not installed (installed: 6.8.0-40-generic)" in result["msg"]
