"""A private lab for the lab's own tests: the default inventory's 4 twins and 4 BMCs, with ports
shifted by +100, containers named gpufleet-labtest-* (both overridable: GPUFLEET_LABTEST_SHIFT,
GPUFLEET_LABTEST_PREFIX), state in a temporary folder, so a developer's
running lab (and its dirty state) is never touched. Brought up once per session, torn down at the end.
"""
import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
import base64

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LAB_SH = os.path.join(REPO, "lab", "lab.sh")
VENV_BIN = os.path.join(REPO, ".venv", "bin")
# Several checkouts (worktrees) may run their test labs side by side: each sets its own shift and prefix.
PORT_SHIFT = int(os.environ.get("GPUFLEET_LABTEST_SHIFT", "100"))
PREFIX = os.environ.get("GPUFLEET_LABTEST_PREFIX", "gpufleet-labtest-")


def _missing_tools():
    tools = ["podman", "runc", "slirp4netns", "debootstrap", "equivs-build", "dpkg-scanpackages", "ssh", "ssh-keygen"]
    return [t for t in tools if not shutil.which(t)]


class Lab:
    """Handle on the running test lab: inventory path, environment, twins' specs, helpers."""

    def __init__(self, base):
        self.base = base
        self.state = os.path.join(base, "state")
        self.inventory_dir = os.path.join(base, "inventory")
        self.env = dict(os.environ, GPUFLEET_LAB_STATE=self.state, GPUFLEET_LAB_PREFIX=PREFIX,
                        GPUFLEET_LAB_INVENTORY=os.path.join(self.inventory_dir, "hosts.yml"),
                        CONTAINERS_CONF=os.path.join(REPO, "lab", "containers.conf"),
                        ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"),
                        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_HOST_KEY_CHECKING="false",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="false")
        self.env.pop("ANSIBLE_CONFIG", None)
        self.hosts = {}
        self.prefix = PREFIX

    @staticmethod
    def port_open(port):
        return port_open(port)

    def write_inventory(self):
        with open(os.path.join(REPO, "inventories", "lab", "hosts.yml")) as handle:
            inv = yaml.safe_load(handle)
        group = inv["all"]["children"]["lab_twins"]
        for name, hostvars in group["hosts"].items():
            hostvars["ansible_port"] += PORT_SHIFT
            port = hostvars["gpufleet_lab_twin"]["bmc"]["port"] + PORT_SHIFT
            hostvars["gpufleet_lab_twin"]["bmc"]["port"] = port
            hostvars["gpufleet_bmc_address"] = "127.0.0.1:%d" % port   # host:port, as the bios role takes it
            self.hosts[name] = hostvars
        group["vars"]["ansible_ssh_private_key_file"] = os.path.join(self.state, "ssh", "id_ed25519")
        group["vars"]["gpufleet_bmc_ca_path"] = os.path.join(self.state, "bmc-certs", "ca.pem")
        self.group_vars = group["vars"]
        os.makedirs(self.inventory_dir, exist_ok=True)
        # the lab's group_vars (BIOS settings, the lab profile, output folders) come along as they are
        shutil.copytree(os.path.join(REPO, "inventories", "lab", "group_vars"), os.path.join(self.inventory_dir, "group_vars"),
                        dirs_exist_ok=True)
        with open(os.path.join(self.inventory_dir, "hosts.yml"), "w") as handle:
            yaml.safe_dump(inv, handle, sort_keys=False)

    def lab_sh(self, *args, timeout=900):
        return subprocess.run([LAB_SH] + list(args), env=self.env, capture_output=True, text=True, timeout=timeout)

    def playbook(self, text, limit=None, extra=None, timeout=300, check=True):
        path = os.path.join(self.base, "play-%d.yml" % time.monotonic_ns())
        with open(path, "w") as handle:
            handle.write(text)
        cmd = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", self.inventory_dir, path]
        if limit:
            cmd += ["--limit", limit]
        if extra:
            cmd += ["-e", json.dumps(extra)]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.base)
        if check:
            assert proc.returncode == 0, "ansible-playbook failed:\n%s\n%s" % (proc.stdout[-4000:], proc.stderr[-2000:])
        return proc

    def run_playbook(self, name, extra=None, timeout=1800):
        """Run one of the collection's playbooks (playbooks/<name>) against the test lab."""
        cmd = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", self.inventory_dir, os.path.join(REPO, "playbooks", name)]
        if extra:
            cmd += ["-e", json.dumps(extra)]
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.base, check=False)
        assert proc.returncode == 0, "%s failed:\n%s\n%s" % (name, proc.stdout[-6000:], proc.stderr[-2000:])
        return proc

    def provision(self, *args, extra=None, limit=None, timeout=1800):
        """ansible-playbook playbooks/provision.yml [args] against the test lab: the CompletedProcess
        (``seconds``: its wall time); the caller asserts on it."""
        cmd = [os.path.join(VENV_BIN, "ansible-playbook"), "-i", self.inventory_dir,
               os.path.join(REPO, "playbooks", "provision.yml")] + list(args)
        if limit:
            cmd += ["--limit", limit]
        if extra:
            cmd += ["-e", json.dumps(extra)]
        t0 = time.time()
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.base)
        proc.seconds = time.time() - t0
        return proc

    def facts(self, limit="all"):
        """ansible_facts.gpufleet of each twin, collected by node_facts through the twin's hardware root."""
        out = os.path.join(self.base, "facts-%d" % time.monotonic_ns())
        os.makedirs(out)
        self.playbook(FACTS_PLAY, limit=limit, extra={"out": out})
        return {name[:-5]: json.load(open(os.path.join(out, name))) for name in os.listdir(out)}

    def ssh(self, host, command, check=True, timeout=60):
        cmd = ["ssh", "-i", os.path.join(self.state, "ssh", "id_ed25519"), "-p", str(self.hosts[host]["ansible_port"]),
               "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
               "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "root@127.0.0.1", command]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, "ssh %s %r: exit %d: %s" % (host, command, proc.returncode, proc.stderr)
        return proc

    def boot_id(self, host):
        proc = self.ssh(host, "cat /run/twin/proc/sys/kernel/random/boot_id", check=False, timeout=15)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def wait_new_boot(self, host, old, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            current = self.boot_id(host)
            if current and current != old:
                return current
            time.sleep(0.5)
        raise AssertionError("%s: no new boot id within %d s (still %s)" % (host, timeout, old))

    def redfish(self, host, method, path, body=None, headers=None):
        """One request to the twin's BMC (TLS verified against the lab CA, basic auth)."""
        ctx = ssl.create_default_context(cafile=os.path.join(self.state, "bmc-certs", "ca.pem"))
        url = "https://" + self.hosts[host]["gpufleet_bmc_address"] + path
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        auth = "%s:%s" % (self.group_vars["gpufleet_bmc_username"], self.group_vars["gpufleet_bmc_password"])
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        with urllib.request.urlopen(req, context=ctx, timeout=15) as resp:
            text = resp.read().decode() or "{}"
            return resp.status, json.loads(text), dict(resp.headers)


FACTS_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Read the twin's hardware view
      gpufleet.provision.node_facts:
        root: "{{ gpufleet_hardware_root }}"
    - name: Keep the facts on the controller
      ansible.builtin.copy:
        content: "{{ ansible_facts.gpufleet | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
"""


def port_open(port):
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def lab_of(cls, tmp_path_factory):
    """The lab fixture's steps with another Lab class (a test folder's own inventory): a generator
    for that folder's ``lab`` fixture (``yield from``); the module's Lab is restored at the end."""
    global Lab
    original = Lab
    Lab = cls
    try:
        yield from lab.__wrapped__(tmp_path_factory)
    finally:
        Lab = original


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the lab needs root (podman rootful, debootstrap)")
    missing = _missing_tools()
    if missing:
        pytest.skip("the lab needs %s: run `make deps`" % ", ".join(missing))
    if not os.path.exists(os.path.join(VENV_BIN, "ansible-playbook")):
        pytest.skip("the lab tests need the checkout's venv (make venv)")
    handle = Lab(str(tmp_path_factory.mktemp("lab")))
    handle.write_inventory()
    handle.lab_sh("down")  # leftovers of an interrupted run
    t0 = time.time()
    proc = handle.lab_sh("up")
    handle.up_seconds = time.time() - t0
    handle.up_output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        handle.lab_sh("down")
        pytest.fail("lab up failed (exit %d):\n%s" % (proc.returncode, handle.up_output[-4000:]))
    print("\nlab up (test lab, 4 twins + 4 BMCs): %.1f s\n%s" % (handle.up_seconds, handle.up_output))
    yield handle
    handle.lab_sh("down")
