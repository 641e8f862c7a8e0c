"""The project as a new user, Galaxy and AWX meet it (issue 14, items 1, 2, 9): a checkout that runs
as it is, a tarball without the lab, and the lab's GRUB tests passing from a clone under /tmp."""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

import pytest
import yaml

from ansible_collections.gpufleet.provision.tests.integration.awx import conftest as awx  # noqa: F401  (same folder)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.path.dirname(sys.executable)


@pytest.fixture
def clone():
    """The checkout as git would clone it (tracked and new files, symlinks kept), under /tmp."""
    folder = tempfile.mkdtemp(prefix="gpufleet-clone-", dir="/tmp")
    awx.copy_project(REPO, os.path.join(folder, "provision"))
    yield os.path.join(folder, "provision")
    subprocess.run(["rm", "-rf", folder], check=False)


def _env():
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1")
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "PYTHONPATH"):
        env.pop(name, None)
    return env


def test_a_fresh_clone_runs_the_playbooks_without_setup(clone, tmp_path):
    # from the checkout (its ansible.cfg) and from anywhere else (playbook-adjacent collections/)
    for cwd in (clone, str(tmp_path)):
        proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "--syntax-check",
                               os.path.join(clone, "playbooks", "provision.yml")], cwd=cwd, env=_env(),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, (cwd, proc.stdout[-2000:], proc.stderr[-2000:])
    proc = subprocess.run([os.path.join(BIN, "ansible-doc"), "-t", "callback", "gpufleet.provision.failures"],
                          cwd=clone, env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "gpufleet_failure" in proc.stdout, proc.stderr[-2000:]
    proc = subprocess.run([os.path.join(BIN, "ansible-config"), "dump", "--only-changed"], cwd=clone, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert "gpufleet.provision.failures" in proc.stdout and os.path.join(clone, "collections") in proc.stdout


def test_the_tarball_has_no_lab_and_no_lab_password(tmp_path):
    proc = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path), REPO],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tarball = [f for f in os.listdir(tmp_path) if f.endswith(".tar.gz")][0]
    with tarfile.open(os.path.join(tmp_path, tarball)) as tar:
        names = tar.getnames()
        password = yaml.safe_load(open(os.path.join(REPO, "inventories", "lab", "hosts.yml")))["all"]["children"][
            "lab_twins"]["vars"]["gpufleet_bmc_password"]
        for member in tar.getmembers():
            if member.isfile():
                assert password.encode() not in tar.extractfile(member).read(), member.name
    assert not [n for n in names if n.startswith(("lab/", "inventories/lab", "tests/", "extensions/", "collections/", ".ci/"))]
    assert "docs/lab.md" not in names and not [n for n in names if n.startswith("changelogs/fragments/lab-")]
    for needed in ("LICENSE", "README.md", "roles/bios/README.md", "roles/validate/README.md", "roles/fabric/README.md",
                   "roles/reboot/README.md", "playbooks/summary.yml", "plugins/callback/failures.py",
                   "inventories/example/hosts.yml", "docs/operator-guide.md", "meta/runtime.yml"):
        assert needed in names, needed


def test_lab_grub_tests_pass_from_a_clone_under_tmp(clone):
    """The GRUB stand-in runs in bubblewrap with a tmpfs over /tmp; from a clone under /tmp it must
    still find itself (before issue 14: 'No such file or directory' for the stand-in)."""
    if not os.path.exists("/usr/bin/bwrap"):
        pytest.skip("bubblewrap (bwrap) is absent: make deps installs it")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/integration/lab/test_lab_parts.py", "-k", "update_grub"],
                          cwd=clone, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-3000:]


def test_the_example_inventory_parses_and_gives_each_class_its_profile(tmp_path):
    proc = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", os.path.join(REPO, "inventories", "example"),
                           "--list", "--export"], env=_env(), capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["rack01"]["hosts"] == ["gpu001", "gpu002"] and "rack03" in inv["hgx_h200"]["children"]
    assert inv["fabric_capture"]["hosts"] == ["gpu001"]
    # the variables the roles read resolve for a node of each class (the vault's placeholders included)
    for host, profile in (("gpu001", "hgx-h100"), ("gpu033", "hgx-h200")):
        proc = subprocess.run([os.path.join(BIN, "ansible"), "-i", os.path.join(REPO, "inventories", "example"), host,
                               "-m", "ansible.builtin.debug", "-a",
                               "msg={{ [gpufleet_profile, (lookup('gpufleet.provision.profile', gpufleet_profile)).bios.settings.snc, gpufleet_bmc_address, validate_report_dir] }}"],
                              env=_env(), capture_output=True, text=True, timeout=120, cwd=REPO)
        assert proc.returncode == 0 and profile in proc.stdout and "snc4" in proc.stdout, proc.stdout + proc.stderr
        assert "/srv/gpufleet/gate" in proc.stdout
