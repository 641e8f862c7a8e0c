"""validate_node's converged stamp through Ansible itself (module and action plugin) on the reference
tree: no stamp means no checks, no report and no group; a green node's stamp written (not in check
mode); the same node then converged, its gate done in that call; a new desired digest, and a red
gate with a matching stamp, are not converged. Expectations by hand."""
import json
import os

import yaml

from ansible_collections.gpufleet.provision.plugins.module_utils._os import stamp as _stamp

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
NOTHING = {"packages": {}, "services": {}, "commands": {}}
DIGEST = "sha256:" + "1" * 64


def green_profile():
    """hgx-h100 without what the bare tree cannot prove (packages, OFED, the fabric manager)."""
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        data = yaml.safe_load(handle)
    for key in ("ofed", "packages"):
        data.pop(key, None)
    data["nvidia"] = {"fabricmanager": False}
    data["require"] = [c for c in data["require"] if not c.startswith(("ofed.", "packages.", "nvidia."))]
    return data


def _args(root, tmp_path, **more):
    args = dict(NOTHING, root=root, node="gpu001", report_dir=str(tmp_path / "gate"),
                converged_stamp=str(tmp_path / "stamp" / "converged.json"), desired_digest=DIGEST,
                ready_group="gpufleet_ready", converged_group="gpufleet_converged")
    args.update(more)
    return args


def test_no_stamp_then_written_then_converged_then_a_new_digest(adhoc, unpacked_tree, tmp_path):
    root = unpacked_tree("hgx-h100-ref")
    stamp = tmp_path / "stamp" / "converged.json"
    rc, first = adhoc("validate_node", _args(root, tmp_path, profile=green_profile()))
    assert rc == 0, first
    assert first["converged"] is False and first["changed"] is False
    assert first["converged_reasons"] == ["no stamp of a green run (or one of another schema)"]
    assert "checks" not in first and "add_group" not in first and not (tmp_path / "gate").exists()

    rc, checked = adhoc("validate_node", _args(root, tmp_path, profile=green_profile(), write_stamp=True), check=True)
    assert rc == 0 and checked["stamp"] == "would write" and not stamp.exists(), checked

    rc, written = adhoc("validate_node", _args(root, tmp_path, profile=green_profile(), write_stamp=True))
    assert rc == 0 and written["status"] == "pass" and written["stamp"] == "written", written
    assert written["add_group"] == "gpufleet_ready"
    saved = json.loads(stamp.read_text())
    assert saved["desired"] == DIGEST and saved["boot"]["kernel"] == "6.8.0-45-generic"
    assert "pcie.acs" in saved["passing"] and "ofed.version" not in saved["passing"]   # skipped: not in profile

    rc, converged = adhoc("validate_node", _args(root, tmp_path, profile=green_profile()))
    assert rc == 0 and converged["converged"] is True and converged["converged_reasons"] == [], converged
    assert converged["status"] == "pass" and converged["checks"]["pcie.acs"] == "pass"
    assert converged["add_group"] == "gpufleet_converged" and converged["parent_groups"] == ["gpufleet_ready"]
    assert sorted(converged["report_files"].values()) == ["refreshed", "unchanged", "unchanged"]   # .prom: last run

    rc, moved = adhoc("validate_node", _args(root, tmp_path, profile=green_profile(), desired_digest="sha256:" + "2" * 64))
    assert rc == 0 and moved["converged"] is False, moved
    assert moved["converged_reasons"] == ["the desired state changed (profile, role variables or collection)"]


def test_a_red_node_with_a_matching_stamp_is_not_converged_and_reports_nothing(adhoc, unpacked_tree, tmp_path):
    root = unpacked_tree("hgx-h100-ref")
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        red_profile = yaml.safe_load(handle)          # the bare tree has no fabric manager, OFED, holds
    now = _stamp.state(DIGEST, root, "/")
    _stamp.write(str(tmp_path / "stamp" / "converged.json"), dict(now, passing=["pcie.acs", "cpu.smt"]))
    rc, result = adhoc("validate_node", _args(root, tmp_path, profile=red_profile))
    assert rc == 0 and result["converged"] is False, result
    assert result["converged_reasons"][0].startswith("the gate is red: nvidia.fabricmanager, ")
    assert "add_group" not in result and not (tmp_path / "gate").exists()


def test_converged_stamp_without_a_digest_fails_naming_both(adhoc, unpacked_tree, tmp_path):
    args = _args(unpacked_tree("hgx-h100-ref"), tmp_path, profile=green_profile())
    del args["desired_digest"]
    rc, result = adhoc("validate_node", args)
    assert rc != 0 and result["msg"].startswith("desired_digest: required with converged_stamp (")


def test_converged_paths_watch_a_moved_file_and_refuse_what_is_not_a_path(adhoc, unpacked_tree, tmp_path):
    """provision.yml gives the paths role variables moved (pcie_lib_dir=/opt/...): a hand edit there
    sends the node through the washing machine; "/" (the whole disk) fails naming the option."""
    root = unpacked_tree("hgx-h100-ref")
    lib = tmp_path / "opt" / "gpufleet-pcie"
    lib.mkdir(parents=True)
    (lib / "gpufleet-pcie-acs").write_text("as installed\n")
    moved = dict(profile=green_profile(), converged_paths=[str(lib)])
    rc, written = adhoc("validate_node", _args(root, tmp_path, write_stamp=True, **moved))
    assert rc == 0 and written["stamp"] == "written", written
    rc, converged = adhoc("validate_node", _args(root, tmp_path, **moved))
    assert rc == 0 and converged["converged"] is True, converged
    (lib / "gpufleet-pcie-acs").write_text("edited by hand\n")
    rc, again = adhoc("validate_node", _args(root, tmp_path, **moved))
    assert rc == 0 and again["converged"] is False, again
    assert again["converged_reasons"] == ["files provisioning manages changed since the last green run"]
    rc, bad = adhoc("validate_node", _args(root, tmp_path, profile=green_profile(), converged_paths=["/"]))
    assert rc != 0 and "converged_paths: '/' is not a path under the OS root" in bad["msg"], bad
