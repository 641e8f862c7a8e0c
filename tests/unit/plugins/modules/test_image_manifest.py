"""image_manifest through Ansible on a temporary root (the package database is this machine's own):
written once, unchanged on a second run, predicted in check mode, compared, a re-wash recorded."""
import json

CFG = "menuentry 'Debian' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic root=UUID=u1 ro hugepages=128\n}\n"
PROFILE = {"name": "mini", "kernel": {"release": "6.8.0-45-generic"}}


def _root(tmp_path):
    (tmp_path / "boot/grub").mkdir(parents=True)
    (tmp_path / "boot/grub/grub.cfg").write_text(CFG)
    return tmp_path


def test_present_writes_once_then_compare_matches(adhoc, tmp_path):
    root = _root(tmp_path)
    rc, result = adhoc("image_manifest", {"profile": PROFILE, "state": "present", "root": str(root)}, check=True)
    assert rc == 0 and result["changed"] is True and not (root / "etc/gpufleet/image.json").exists()
    rc, result = adhoc("image_manifest", {"profile": PROFILE, "state": "present", "root": str(root)})
    assert rc == 0 and result["changed"] is True
    written = json.loads((root / "etc/gpufleet/image.json").read_text())
    assert written["profile"] == "mini" and written["kernel"] == "6.8.0-45-generic"
    assert written["cmdline"] == ["root=UUID=u1", "ro", "hugepages=128"]
    assert "bash" in written["packages"] and "packages" not in result["manifest"]
    rc, result = adhoc("image_manifest", {"profile": PROFILE, "state": "present", "root": str(root)})
    assert rc == 0 and result["changed"] is False                      # the build time is not content
    rc, result = adhoc("image_manifest", {"profile": PROFILE, "root": str(root)})
    assert rc == 0 and result["changed"] is False and result["match"] is True and result["reasons"] == []


def test_compare_names_an_image_of_another_profile_and_a_rewash_is_recorded(adhoc, tmp_path):
    root = _root(tmp_path)
    adhoc("image_manifest", {"profile": PROFILE, "state": "present", "root": str(root)})
    old = json.loads((root / "etc/gpufleet/image.json").read_text())["content_hash"]
    other = dict(PROFILE, name="mini-2")
    rc, result = adhoc("image_manifest", {"profile": other, "root": str(root)})
    assert rc == 0 and result["match"] is False
    assert result["reasons"] == ["image built from profile mini, the node's profile is mini-2"]
    rc, result = adhoc("image_manifest", {"profile": other, "state": "present", "rewashed": True, "root": str(root)})
    assert rc == 0 and result["changed"] is True and result["manifest"]["rewashed"] == old
    rc, result = adhoc("image_manifest", {"profile": other, "root": str(root)})
    assert result["match"] is True


def test_a_node_washed_live_has_no_manifest_and_no_package_read(adhoc, tmp_path):
    rc, result = adhoc("image_manifest", {"profile": PROFILE, "root": str(tmp_path)})
    assert rc == 0 and result["match"] is False and result["manifest"] is None
    assert result["reasons"] == ["no image manifest (/etc/gpufleet/image.json): not booted from a golden image"]


def test_an_image_without_a_boot_entry_fails_naming_it(adhoc, tmp_path):
    rc, result = adhoc("image_manifest", {"profile": PROFILE, "state": "present", "root": str(tmp_path)})
    assert rc != 0 and "image_manifest: boot/grub/grub.cfg has no default entry" in result["msg"]
