"""Firmware images of the same file name from different places never overwrite each other, in the
controller cache or on the node (roles/firmware/tasks/images.yml, run by ansible-playbook itself).

Each image's file name is ``<first 12 hex of sha256("<src> <declared checksum>")>-<its own name>``;
the expected names below are that formula applied by hand with hashlib."""
import hashlib
import json
import os
import subprocess
import sys

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
PLAY = """
- name: The firmware role's image names
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Where each image is
      ansible.builtin.include_role:
        name: gpufleet.provision.firmware
        tasks_from: images
    - name: Keep them
      ansible.builtin.copy:
        content: "{{ __firmware_node_images | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def _name(src, checksum="", own=None):
    return hashlib.sha256(("%s %s" % (src, checksum)).encode()).hexdigest()[:12] + "-" + (own or src.rsplit("/", 1)[-1])


def _images(tmp_path, images):
    (tmp_path / "play.yml").write_text(PLAY)
    extra = {"firmware_images": images, "firmware_controller_cache": "/cache", "firmware_node_dir": "/var/lib/gpufleet/firmware",
             "out": str(tmp_path / "out.json"), "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    proc = subprocess.run([PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml"),
                           "-e", json.dumps(extra)], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [(i["src"], i["local"], i["path"]) for i in json.loads((tmp_path / "out.json").read_text())]


def test_same_file_name_from_other_places_gets_other_names(tmp_path):
    a, b = "https://fw-a.example/cx7/fw.bin", "https://fw-b.example/mirror/fw.bin?token=1"
    images = [{"type": "nic", "src": a}, {"type": "nic", "src": b},
              {"type": "nic", "src": "/srv/fw/site1/fw.bin"}, {"type": "nic", "src": "/srv/fw/site2/fw.bin"},
              {"type": "nvme", "src": a, "checksum": "sha256:" + "ab" * 32, "model": "M", "version": "V"}]
    got = _images(tmp_path, images)
    node = "/var/lib/gpufleet/firmware/"
    assert got == [
        (a, "/cache/" + _name(a), node + _name(a)),
        (b, "/cache/" + _name(b, own="fw.bin"), node + _name(b, own="fw.bin")),
        ("/srv/fw/site1/fw.bin", "/srv/fw/site1/fw.bin", node + _name("/srv/fw/site1/fw.bin")),
        ("/srv/fw/site2/fw.bin", "/srv/fw/site2/fw.bin", node + _name("/srv/fw/site2/fw.bin")),
        (a, "/cache/" + _name(a, "sha256:" + "ab" * 32), node + _name(a, "sha256:" + "ab" * 32)),
    ]
    # five sources, five names in the cache and on the node (the URL query is not part of the name)
    assert len({g[2] for g in got}) == 5 and len({g[1] for g in got if g[0].startswith("https")}) == 3
    assert all(g[2].endswith("-fw.bin") for g in got)


def test_the_download_and_the_copy_use_those_names():
    with open(os.path.join(REPO, "roles", "firmware", "tasks", "preflight.yml")) as handle:
        block = yaml.safe_load(handle)[0]["block"]
    tasks = dict((t["name"], t) for t in block)
    download = tasks["Download the URL images on the controller"]["ansible.builtin.get_url"]
    assert download["dest"] == "{{ item.local }}"
    assert tasks["Download the URL images on the controller"]["loop"].startswith("{{ __firmware_node_images ")
    staging = [t for t in block if "block" in t][0]["block"]
    copy = [t for t in staging if "ansible.builtin.copy" in t][0]
    assert copy["ansible.builtin.copy"] == {"src": "{{ item.local }}", "dest": "{{ item.path }}", "mode": "0600"}
    assert copy["loop"] == "{{ __firmware_node_images }}"
