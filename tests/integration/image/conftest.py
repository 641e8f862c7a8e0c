"""The golden image path on the lab (issue 26 part 1): a private lab of two twins, ``builder`` (a
bare twin: the image build container) and ``imaged`` (started from the image ``builder`` made, with
the BIOS faults of a node fresh from the rack: SNC off, hyper-threading off). Ports +60, containers
gpufleet-labtest-img-*. The session fixture builds the image once (playbooks/image.yml, root
tarball, lab.sh import-image) and starts ``imaged`` from it; the podman image is removed at the end."""
import importlib.util
import json
import os
import subprocess
import time

import pytest
import yaml

_SPEC = importlib.util.spec_from_file_location(
    "gpufleet_lab_conftest_image", os.path.join(os.path.dirname(__file__), "..", "lab", "conftest.py"))
_LAB = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_LAB)
_LAB.PORT_SHIFT += 60
_LAB.PREFIX += "img-"
REPO = _LAB.REPO
TARBALL = "/var/tmp/gpufleet-golden.tar.gz"


class ImageLab(_LAB.Lab):
    image_ref = "localhost/gpufleet-golden:labtest-%d" % os.getpid()

    def write_inventory(self):
        super().write_inventory()
        path = os.path.join(self.inventory_dir, "hosts.yml")
        with open(path) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]
        twin1, twin4 = group["hosts"]["twin1"], group["hosts"]["twin4"]
        builder = dict(twin4, gpufleet_lab_twin=dict(twin4["gpufleet_lab_twin"], faults=["a bare OS: the image build container"],
                                                     packages=[], holds=[], services=[],
                                                     grub={"cmdline_linux": "", "cmdline_linux_default": "quiet", "dropins": {}}))
        imaged = dict(twin1, gpufleet_lab_twin={"bmc": twin1["gpufleet_lab_twin"]["bmc"], "image": self.image_ref,
                                                "faults": ["started from the golden image", "snc off, hyper-threading off"],
                                                "bios": {"snc": "off", "hyperthreading": False}})
        # imaged joins once its image exists (add_imaged): `lab up` starts every twin of the inventory
        self._imaged = imaged
        group["hosts"] = {"builder": builder}
        self.hosts = dict(group["hosts"])
        inv["all"]["children"] = {"lab_twins": group}
        self._inv = inv
        with open(path, "w") as handle:
            yaml.safe_dump(inv, handle, sort_keys=False)

    def add_imaged(self):
        self._inv["all"]["children"]["lab_twins"]["hosts"]["imaged"] = self._imaged
        self.hosts["imaged"] = self._imaged
        with open(os.path.join(self.inventory_dir, "hosts.yml"), "w") as handle:
            yaml.safe_dump(self._inv, handle, sort_keys=False)

    def ansible_playbook(self, name, *args, timeout=900):
        cmd = [os.path.join(_LAB.VENV_BIN, "ansible-playbook"), "-i", self.inventory_dir,
               os.path.join(REPO, "playbooks", name)] + list(args)
        t0 = time.time()
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.base)
        proc.seconds = time.time() - t0
        return proc


def _must(proc, what):
    if proc.returncode != 0:
        pytest.fail("%s failed (exit %d):\n%s\n%s" % (what, proc.returncode, proc.stdout[-5000:], proc.stderr[-2000:]))
    return proc


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    original = _LAB.Lab
    _LAB.Lab = ImageLab
    try:
        gen = _LAB.lab.__wrapped__(tmp_path_factory) if hasattr(_LAB.lab, "__wrapped__") else None
        if gen is None:
            raise RuntimeError("lab fixture is not a plain generator function")
        handle = next(gen)
    finally:
        _LAB.Lab = original
    try:
        yield handle
    finally:
        subprocess.run(["podman", "rmi", "-f", ImageLab.image_ref], capture_output=True, env=handle.env)
        next(gen, None)


@pytest.fixture(scope="session")
def built(lab):
    """playbooks/image.yml on ``builder`` (with the root tarball), imported, ``imaged`` started from it."""
    t0 = time.time()
    build = _must(lab.ansible_playbook("image.yml", "-e", json.dumps({"image_hosts": "builder", "image_export_path": TARBALL})),
                  "image.yml")
    local = os.path.join(lab.base, "golden.tar.gz")
    _must(subprocess.run(["podman", "cp", "%sbuilder:%s" % (_LAB.PREFIX, TARBALL), local], capture_output=True, text=True,
                         env=lab.env), "podman cp")
    _must(lab.lab_sh("import-image", local, ImageLab.image_ref), "lab.sh import-image")
    lab.add_imaged()
    _must(lab.lab_sh("up", "imaged"), "lab.sh up imaged")
    manifest = json.loads(lab.ssh("builder", "cat /etc/gpufleet/image.json").stdout)
    return {"build": build, "manifest": manifest, "seconds": time.time() - t0}
