"""The golden image's manifest (_os/image.py) and the desired state it names (_desired/image.py):
expectations written by hand."""
import copy
import hashlib
import os

import pytest
import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired
from ansible_collections.gpufleet.provision.plugins.module_utils._os import image as _image

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
GRUB_CFG = """\
set default="0"
menuentry 'Debian GNU/Linux' --class debian $menuentry_id_option 'gnulinux-simple' {
\tlinux\t/boot/vmlinuz-6.8.0-45-generic root=UUID=1234 ro intel_iommu=on iommu=pt hugepages=128 quiet
\tinitrd\t/boot/initrd.img-6.8.0-45-generic
}
"""
PACKAGES = {
    "linux-image-6.8.0-45-generic": [{"name": "linux-image-6.8.0-45-generic", "version": "6.8.0-45.45~22.04.1"}],
    "nvidia-driver-550-server": [{"name": "nvidia-driver-550-server", "version": "550.90.07-0ubuntu0.22.04.1"}],
    "bash": [{"name": "bash", "version": "5.2.15-2+b7"}],
}
HOLDS = ["nvidia-driver-550-server", "linux-image-6.8.0-45-generic"]


def profile(**changes):
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        raw = yaml.safe_load(handle)
    for key, value in changes.items():
        section, name = key.split("__")
        raw[section][name] = value
    return _profile.validate(raw)


def desired(**changes):
    return _desired.derive("image", profile(**changes))


def test_desired_image_names_the_profile_and_hashes_what_the_roles_apply():
    got = desired()
    assert got["profile"] == "hgx-h100"
    assert got["desired"]["kernel_release"] == "6.8.0-45-generic"
    assert got["desired"]["kernel_cmdline"] == ["intel_iommu=on", "iommu=pt", "transparent_hugepage=never",
                                                "numa_balancing=disable", "default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128"]
    assert got["desired"]["nvidia_driver"]["version"] == "550.90.07"
    assert got["desired"]["ofed"]["release"] == "23.10-1.1.9.0"
    assert got["hash"].startswith("sha256:") and len(got["hash"]) == 7 + 64
    assert desired()["hash"] == got["hash"]                                  # stable
    assert desired(nvidia__driver_version="550.54.15")["hash"] != got["hash"]  # any change of what it holds
    assert desired(ofed__version="24.04-0.7.0.0")["hash"] != got["hash"]


def test_per_node_state_is_not_in_the_image():
    # BIOS and storage are provision.yml's per node: changing them leaves the image as it is
    base = profile()
    other = copy.deepcopy(base)
    other["bios"]["settings"]["snc"] = "snc2"
    assert _desired.derive("image", other)["hash"] == _desired.derive("image", base)["hash"]


def test_canonical_hash_is_sha256_of_sorted_compact_json():
    assert _desired.AREAS["image"]  # registered
    from ansible_collections.gpufleet.provision.plugins.module_utils._desired.image import canonical_hash
    assert canonical_hash({"b": 1, "a": [1, 2]}) == "sha256:" + hashlib.sha256(b'{"a":[1,2],"b":1}').hexdigest()


def test_build_records_profile_packages_holds_kernel_and_cmdline():
    want = desired()
    got = _image.build(want, PACKAGES, HOLDS, GRUB_CFG, built="2026-12-03T09:00:00Z")
    assert got["schema"] == 1 and got["profile"] == "hgx-h100" and got["desired_hash"] == want["hash"]
    assert got["kernel"] == "6.8.0-45-generic"
    assert got["cmdline"] == ["root=UUID=1234", "ro", "intel_iommu=on", "iommu=pt", "hugepages=128", "quiet"]
    assert got["holds"] == ["linux-image-6.8.0-45-generic", "nvidia-driver-550-server"]
    assert got["pins"] == {"linux-image-6.8.0-45-generic": "6.8.0-45.45~22.04.1",
                           "nvidia-driver-550-server": "550.90.07-0ubuntu0.22.04.1"}
    assert got["packages"]["bash"] == "5.2.15-2+b7"
    assert got["content_hash"] == _image.content_hash(got)
    # the build time is not content: the same image built later has the same hash
    later = _image.build(want, PACKAGES, HOLDS, GRUB_CFG, built="2026-12-04T09:00:00Z")
    assert later["content_hash"] == got["content_hash"] and _image.same_content(got, later)
    bumped = dict(PACKAGES, bash=[{"version": "5.2.15-2+b8"}])
    assert _image.build(want, bumped, HOLDS, GRUB_CFG)["content_hash"] != got["content_hash"]


def test_build_refuses_an_image_without_a_boot_entry_or_with_a_hold_not_installed():
    with pytest.raises(_image.ImageError, match="no default entry"):
        _image.build(desired(), PACKAGES, HOLDS, "")
    with pytest.raises(_image.ImageError, match="held but not installed: nvidia-fabricmanager-550"):
        _image.build(desired(), PACKAGES, HOLDS + ["nvidia-fabricmanager-550"], GRUB_CFG)


def test_a_node_from_a_matching_image_has_no_differences():
    manifest = _image.build(desired(), PACKAGES, HOLDS, GRUB_CFG)
    assert _image.differences(manifest, desired(), PACKAGES, HOLDS) == []


def test_differences_name_what_moved():
    manifest = _image.build(desired(), PACKAGES, HOLDS, GRUB_CFG)
    assert _image.differences(None, desired()) == [
        "no image manifest (/etc/gpufleet/image.json): not booted from a golden image"]
    newer = desired(nvidia__driver_version="550.54.15")
    assert _image.differences(manifest, newer) == [
        "image built from an older state of profile hgx-h100 (%s; changed since: nvidia_driver)"
        % manifest["desired_hash"][:19]]
    other = dict(newer, profile="hgx-h200")
    assert _image.differences(manifest, other) == ["image built from profile hgx-h100, the node's profile is hgx-h200"]
    apt_moved = dict(PACKAGES, **{"nvidia-driver-550-server": [{"version": "550.54.15-0ubuntu0.22.04.1"}]})
    assert _image.differences(manifest, desired(), apt_moved, HOLDS) == [
        "nvidia-driver-550-server: 550.90.07-0ubuntu0.22.04.1 in the image, 550.54.15-0ubuntu0.22.04.1 installed"]
    assert _image.differences(manifest, desired(), PACKAGES, ["linux-image-6.8.0-45-generic"]) == [
        "nvidia-driver-550-server: held in the image, not held now"]
    edited = dict(manifest, kernel="6.8.0-40-generic")
    assert _image.differences(edited, desired()) == [
        "/etc/gpufleet/image.json: content hash %s does not match its content (edited after the build)" % manifest["content_hash"]]
    assert _image.differences(edited, desired(), verify=False) == []
