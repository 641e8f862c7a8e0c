"""The golden image path, proved on the lab: image.yml builds the image with the same roles and
writes its manifest; a twin started from it needs BIOS + one reboot + the gate, and provision.yml
does no package work on it. Expectations written by hand."""
import json
import re


def _task_results(stdout, task):
    """The result lines ("ok", "changed", "skipping") of every task whose name contains ``task``."""
    out = []
    for block in stdout.split("\nTASK [")[1:]:
        name, _sep, body = block.partition("]")
        if task in name:
            out += re.findall(r"^(ok|changed|skipping|fatal): \[", body, re.M)
    return out


def test_image_build_records_the_profile_the_packages_and_the_boot(built):
    manifest, out = built["manifest"], built["build"].stdout
    assert manifest["profile"] == "hgx-h100-lab"
    assert manifest["kernel"] == "6.8.0-45-generic"
    for param in ("intel_iommu=on", "iommu=pt", "transparent_hugepage=never", "numa_balancing=disable",
                  "default_hugepagesz=1G", "hugepagesz=1G", "hugepages=128"):
        assert param in manifest["cmdline"]
    assert manifest["pins"]["nvidia-driver-550-server"] == "550.90.07-0ubuntu0.22.04.1"
    assert manifest["pins"]["nvidia-fabricmanager-550"] == "550.90.07-0ubuntu0.22.04.1"
    assert manifest["pins"]["linux-image-6.8.0-45-generic"] == "6.8.0-45.45~22.04.1"
    assert set(manifest["holds"]) >= {"mlnx-ofed-kernel-utils", "mlnx-ofed-kernel-dkms", "linux-headers-6.8.0-45-generic"}
    assert manifest["content_hash"].startswith("sha256:") and manifest["desired_hash"].startswith("sha256:")
    # an image build sets nothing at run time and reboots nothing
    assert "image build: no reboot" in out and "Reboot in band" not in out
    print("\nimage build + export + import + twin up: %.1f s (image.yml %.1f s)" % (built["seconds"], built["build"].seconds))


def test_a_twin_from_the_image_is_green_after_bios_one_reboot_and_the_gate_with_no_package_work(lab, built):
    gate = lab.base + "/gate"
    proc = lab.ansible_playbook("provision.yml", "--limit", "imaged", "-e", json.dumps({"validate_report_dir": gate}))
    assert proc.returncode == 0, proc.stdout[-5000:]
    out = proc.stdout
    assert "image: booted from a golden image of hgx-h100-lab" in out and "no package work" in out
    for task in ("Install the kernel packages exactly", "Install and hold the driver", "Install and hold the OFED packages",
                 "Resolve the kernel packages against", "Resolve every pinned package", "Resolve the OFED packages against"):
        assert _task_results(out, task) == ["skipping"], (task, _task_results(out, task))
    assert "gpufleet summary: 1 node(s): READY 1, QUARANTINED 0, FAILED 0; rebooted 1" in out
    # the image holds the ACS boot unit: one pcie_acs call finds it right; the devices at the fleet
    # minimum by their facts get no firmware tool; the driver's units, enabled in the image, no task
    assert "boot unit current" in out, out[-5000:]
    for task in ("firmware : Install flint and nvme-cli", "firmware : NIC firmware", "firmware : NVMe firmware",
                 "nvidia_driver : Enable fabric manager and the persistence daemon", "pcie : Install setpci"):
        assert set(_task_results(out, task)) <= {"skipping"}, (task, _task_results(out, task))
    with open(gate + "/imaged.json") as handle:
        checks = dict((c["id"], c["status"]) for c in json.load(handle)["report"]["checks"])
    assert checks["image.profile"] == "pass" and checks["packages.held"] == "pass" and checks["cpu.smt"] == "pass"
    print("\nprovision.yml on a twin from the image: %.1f s, 1 reboot" % proc.seconds)
