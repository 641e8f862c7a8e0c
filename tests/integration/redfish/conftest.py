"""Fixtures for tests against a real Redfish server: the lab BMC (sushy-emulator, TLS, basic auth).

`bmc(flavour, ...)` starts `python -m lab.bmc.serve` on a free 127.0.0.1 port with its own state
folder and stops it (by pid) at teardown; `run_module(name, args)` runs a collection module the way
Ansible does (ANSIBLE_MODULE_ARGS), so its JSON result and exit code are real.
"""
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.path.join(REPO, ".build")
USER = "fleetadmin"
PASSWORD = "Pw-4-lab-BMC-never-logged"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Bmc:
    def __init__(self, tmp, flavour, name, extra):
        self.flavour = flavour
        self.name = name
        self.port = free_port()
        self.baseurl = "https://127.0.0.1:%d" % self.port
        self.state_dir = os.path.join(tmp, "state")
        self.dir = os.path.join(self.state_dir, name)
        self.certs = os.path.join(tmp, "certs")
        self.ca = os.path.join(self.certs, "ca.pem")
        self.log = os.path.join(tmp, "bmc-%s.log" % name)
        self.extra = extra
        self.proc = None

    def start(self, timeout=20):
        cmd = [sys.executable, "-m", "lab.bmc.serve", "--name", self.name, "--flavour", self.flavour,
               "--port", str(self.port), "--state-dir", self.state_dir,
               "--cert", os.path.join(self.certs, "server.pem"), "--key", os.path.join(self.certs, "server.key"),
               "--htpasswd", os.path.join(self.certs, "htpasswd")] + list(self.extra)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        ctx = ssl.create_default_context(cafile=self.ca)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("lab BMC exited %s: %s" % (self.proc.returncode, open(self.log).read()[-2000:]))
            try:
                urllib.request.urlopen(self.baseurl + "/redfish/v1/", context=ctx, timeout=2).read()
                return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("lab BMC not answering on %s within %ss" % (self.baseurl, timeout))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def state(self):
        with open(os.path.join(self.dir, "bios.json")) as handle:
            return json.load(handle)

    def set_faults(self, **faults):
        with open(os.path.join(self.dir, "faults.json"), "w") as handle:
            json.dump(faults, handle)

    def conn(self, **overrides):
        args = dict(baseurl=self.baseurl, username=USER, password=PASSWORD, ca_path=self.ca, timeout=5, retries=2)
        args.update(overrides)
        return args


@pytest.fixture(scope="session")
def bmc_login():
    """(username, password) every lab BMC of these tests accepts."""
    return USER, PASSWORD


@pytest.fixture(scope="session")
def bmc_certs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bmc-certs")
    subprocess.run([sys.executable, "-m", "lab.bmc.certs", "--dir", str(tmp), "--user", USER, "--password", PASSWORD],
                   cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return str(tmp)


@pytest.fixture
def bmc(tmp_path, bmc_certs):
    started = []

    def _start(flavour, name="twin1", extra=(), initial=None):
        unit = Bmc(str(tmp_path), flavour, name, extra)
        os.makedirs(unit.dir, exist_ok=True)
        if not os.path.exists(unit.certs):
            os.symlink(bmc_certs, unit.certs)
        if initial is not None:
            with open(os.path.join(unit.dir, "bios-initial.json"), "w") as handle:
                json.dump(initial, handle)
        started.append(unit)
        return unit.start()

    yield _start
    for unit in started:
        unit.stop()


@pytest.fixture
def run_module():
    def _run(name, args, check=False, diff=False):
        payload = dict(args)
        payload["_ansible_check_mode"] = check
        payload["_ansible_diff"] = diff
        env = dict(os.environ, PYTHONPATH=BUILD)
        proc = subprocess.run([sys.executable, "-m", "ansible_collections.gpufleet.provision.plugins.modules." + name],
                              input=json.dumps({"ANSIBLE_MODULE_ARGS": payload}), capture_output=True, text=True,
                              env=env, cwd=BUILD, timeout=300)
        try:
            result = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError("module %s printed no JSON (rc %s): %s %s" % (name, proc.returncode, proc.stdout, proc.stderr))
        result["_rc"] = proc.returncode
        result["_stderr"] = proc.stderr
        return result
    return _run
