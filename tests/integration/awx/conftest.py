"""An AWX job without AWX: ansible-runner over a private data dir laid out as AWX lays it out.

AWX (through receptor and ansible-runner in the execution environment) gives a job:
  project/                  the project checkout (git), as the project update left it
  requirements_collections/ what the project update installed from collections/requirements.yml
  inventory/hosts           the inventory
  env/extravars             extra variables (survey answers, vaulted values stay vaulted)
  env/cmdline, env/passwords  --ask-vault-pass and the vault credential's answer to the prompt
  env/envvars               ANSIBLE_COLLECTIONS_PATHS and friends
  artifacts/<job id>/       what the job leaves: status, rc, stdout, job_events/, fact_cache/
and runs `ansible-runner run <dir> -p <playbook>` with the project as the working folder, so the
project's ansible.cfg applies. This test lab is its own (shifted ports and container names), so it
never meets the lab tests' lab.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VENV_BIN = os.path.dirname(sys.executable)
BMC_PASSWORD = "gpufleet-lab"           # what the lab's BMCs accept: only ever given vaulted here
VAULT_PASSWORD = "awx-vault-credential-7f3a"


def _lab_module():
    """The lab tests' Lab class, loaded as a separate module so that its shift and prefix can be our own
    (importing their conftest would register their session lab a second time)."""
    spec = importlib.util.spec_from_file_location(
        "gpufleet_awx_lab", os.path.join(REPO, "tests", "integration", "lab", "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.PORT_SHIFT += 10
    module.PREFIX += "awx-"
    return module


def project_files(src):
    """The files a git checkout of `src` holds (tracked and new, not ignored), symlinks kept."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=src, check=True,
                         capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f and (os.path.lexists(os.path.join(src, f)))]


def copy_project(src, dest):
    for rel in project_files(src):
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        path = os.path.join(src, rel)
        if os.path.islink(path):
            os.symlink(os.readlink(path), target)
        else:
            shutil.copy2(path, target)


def vault_encrypt(text, password):
    out = subprocess.run([os.path.join(VENV_BIN, "ansible-vault"), "encrypt_string", "--vault-password-file", "/dev/stdin",
                          "--name", "x", text], input=password, capture_output=True, text=True, check=True).stdout
    return out.split("!vault |", 1)[1]


class Sink(BaseHTTPRequestHandler):
    """A report sink URL: stores what is PUT, by path, and answers 201."""
    store = {}

    def do_PUT(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", "0"))
        self.store[self.path] = (self.headers.get("Content-Type"), self.rfile.read(length))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def report_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Sink.store = {}
    yield "http://127.0.0.1:%d/gate/" % server.server_address[1], Sink.store
    server.shutdown()


@pytest.fixture(scope="module")
def awx_lab(tmp_path_factory):
    module = _lab_module()
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (podman rootful, debootstrap)")
    missing = module._missing_tools()
    if missing:
        pytest.skip("the lab needs %s: run `make deps`" % ", ".join(missing))
    for tool in ("ansible-runner", "ansible-playbook", "ansible-galaxy"):
        if not os.path.exists(os.path.join(VENV_BIN, tool)):
            pytest.skip("%s is not in this virtualenv (make venv installs requirements-test.txt)" % tool)
    lab = module.Lab(str(tmp_path_factory.mktemp("awx-lab")))
    lab.write_inventory()
    lab.lab_sh("down")
    proc = lab.lab_sh("up")
    if proc.returncode != 0:
        lab.lab_sh("down")
        pytest.fail("lab up failed (exit %d):\n%s" % (proc.returncode, (proc.stdout + proc.stderr)[-4000:]))
    yield lab
    lab.lab_sh("down")


class Job:
    """One AWX-style job: private data dir, project update, then the run."""

    def __init__(self, base, lab, project_src=REPO):
        self.pdd = os.path.join(base, "pdd")
        self.project = os.path.join(self.pdd, "project")
        self.lab = lab
        copy_project(project_src, self.project)
        self.collections = os.path.join(self.pdd, "requirements_collections")
        self._project_update()
        self._inventory()

    def _project_update(self):
        # what AWX's project update runs in the project folder
        req = os.path.join(self.project, "collections", "requirements.yml")
        proc = subprocess.run([os.path.join(VENV_BIN, "ansible-galaxy"), "collection", "install", "-r", req,
                               "-p", self.collections], cwd=self.project, capture_output=True, text=True,
                              env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=self.collections))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        self.project_update_output = proc.stdout

    def _inventory(self):
        with open(os.path.join(self.lab.inventory_dir, "hosts.yml")) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]["vars"]
        del group["gpufleet_bmc_password"]      # the vault credential brings it, nothing else
        # the lab's group variables (BIOS settings, the lab profile) come along, as an inventory source's would
        shutil.copytree(os.path.join(self.lab.inventory_dir, "group_vars"), os.path.join(self.pdd, "inventory", "group_vars"))
        with open(os.path.join(self.pdd, "inventory", "hosts"), "w") as handle:
            yaml.safe_dump(inv, handle, sort_keys=False)
        self.inventory = inv

    def run(self, playbook, ident, extravars, limit=None, timeout=1800):
        env_dir = os.path.join(self.pdd, "env")
        os.makedirs(env_dir, exist_ok=True)
        vaulted = dict(extravars)
        text = yaml.safe_dump(vaulted, sort_keys=False) if vaulted else ""
        text += "gpufleet_bmc_password: !vault |%s" % vault_encrypt(BMC_PASSWORD, VAULT_PASSWORD)
        with open(os.path.join(env_dir, "extravars"), "w") as handle:
            handle.write(text)
        cmdline = "--ask-vault-pass" + (" --limit %s" % limit if limit else "")
        with open(os.path.join(env_dir, "cmdline"), "w") as handle:
            handle.write(cmdline)
        with open(os.path.join(env_dir, "passwords"), "w") as handle:
            json.dump({r"^Vault password:\s*?$": VAULT_PASSWORD}, handle)
        with open(os.path.join(env_dir, "envvars"), "w") as handle:
            json.dump({"ANSIBLE_COLLECTIONS_PATH": self.collections, "ANSIBLE_NOCOLOR": "1",
                       "ANSIBLE_DEPRECATION_WARNINGS": "false"}, handle)
        env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
        for name in ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
            env.pop(name, None)
        t0 = time.time()
        proc = subprocess.run([os.path.join(VENV_BIN, "ansible-runner"), "run", self.pdd, "-p", playbook,
                               "--ident", ident], env=env, capture_output=True, text=True, timeout=timeout)
        self.seconds = time.time() - t0
        return Result(os.path.join(self.pdd, "artifacts", ident), proc)


class Result:
    secrets = (BMC_PASSWORD, VAULT_PASSWORD)

    def __init__(self, artifacts, proc):
        self.artifacts = artifacts
        self.proc = proc

    def read(self, name):
        with open(os.path.join(self.artifacts, name)) as handle:
            return handle.read()

    @property
    def status(self):
        return self.read("status").strip()

    @property
    def stdout(self):
        return self.read("stdout")

    def events(self):
        folder = os.path.join(self.artifacts, "job_events")
        out = []
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            with open(path) as handle:
                event = json.load(handle)
            event["_bytes"] = os.path.getsize(path)
            out.append(event)
        return sorted(out, key=lambda e: e.get("counter", 0))

    def files(self):
        for root, _dirs, names in os.walk(self.artifacts):
            for name in names:
                yield os.path.join(root, name)


@pytest.fixture
def awx_job(awx_lab, tmp_path):
    return Job(str(tmp_path), awx_lab)
