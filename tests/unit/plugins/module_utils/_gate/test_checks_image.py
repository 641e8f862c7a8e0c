"""The gate's image.profile check: a node booted from a golden image built for its profile passes,
one built for another profile or an older state of it fails naming what moved, a node washed live
(no manifest) skips, a broken manifest is an error naming the file. Expectations by hand."""
import copy
import json

from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import registry as _desired
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate
from ansible_collections.gpufleet.provision.plugins.module_utils._node import parsers
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect
from ansible_collections.gpufleet.provision.plugins.module_utils._os import image as _image

from .test_checks import sample_inputs

CFG = "menuentry 'Ubuntu' {\n\tlinux /boot/vmlinuz-6.8.0-45-generic root=UUID=ab ro quiet\n}\n"


def _check(ctx):
    report = gate.evaluate(ctx, node="n1", checks={"image.profile"})
    return next(c for c in report["checks"] if c["id"] == "image.profile")


def _manifest(profile):
    want = _desired.derive("image", _profile.validate(copy.deepcopy(profile), gate.CHECK_IDS))
    pkgs = {"nvidia-driver-550-server": [{"version": "550.90.07-0ubuntu1"}]}
    return parsers.parse_image_manifest(json.dumps(_image.build(want, pkgs, ["nvidia-driver-550-server"], CFG)))


def test_no_manifest_is_a_skip_never_a_pass():
    check = _check(sample_inputs())
    assert check["status"] == "skip"
    assert check["reason"] == "no data: no image manifest (etc/gpufleet/image.json): not booted from a golden image"


def test_an_image_of_the_node_profile_passes():
    ctx = sample_inputs()
    ctx.facts["image"] = _manifest(ctx.profile)
    check = _check(ctx)
    assert check["status"] == "pass", check
    assert check["observed"]["profile"] == ctx.profile["name"]
    assert check["expected"]["desired_hash"] == check["observed"]["desired_hash"]


def test_an_image_of_an_older_driver_fails_naming_what_moved():
    ctx = sample_inputs()
    older = copy.deepcopy(ctx.profile)
    older["nvidia"]["driver_version"] = "550.54.15"
    ctx.facts["image"] = _manifest(older)
    check = _check(ctx)
    assert check["status"] == "fail"
    assert check["reason"] == "image built from an older state of profile %s (%s; changed since: nvidia_driver)" % (
        ctx.profile["name"], ctx.facts["image"]["desired_hash"][:19])
    assert "playbooks/image.yml" in check["remedy"]


def test_an_image_of_another_profile_fails():
    ctx = sample_inputs()
    other = copy.deepcopy(ctx.profile)
    other["name"] = "hgx-h200"
    ctx.facts["image"] = _manifest(other)
    assert _check(ctx)["reason"] == "image built from profile hgx-h200, the node's profile is %s" % ctx.profile["name"]


def test_the_facts_key_leaves_the_package_list_out_and_a_broken_file_is_an_error(tmp_path):
    (tmp_path / "etc" / "gpufleet").mkdir(parents=True)
    manifest = _image.build(_desired.derive("image", _profile.validate({"name": "x", "kernel": {"release": "6.8.0-45-generic"}})),
                            {"bash": [{"version": "5.2"}]}, [], CFG)
    (tmp_path / "etc" / "gpufleet" / "image.json").write_text(json.dumps(manifest))
    facts = collect(str(tmp_path))[0]
    assert "packages" not in facts["image"] and facts["image"]["content_hash"] == manifest["content_hash"]
    (tmp_path / "etc" / "gpufleet" / "image.json").write_text("{not json")
    facts = collect(str(tmp_path))[0]
    assert facts["image"] is None
    assert [p["kind"] for p in facts["problems"] if p["path"] == "etc/gpufleet/image.json"] == ["invalid"]
    ctx = sample_inputs()
    ctx.facts["image"], ctx.problems = None, facts["problems"]
    check = _check(ctx)
    assert check["status"] == "error" and "etc/gpufleet/image.json" in check["reason"]
