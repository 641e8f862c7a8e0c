#!/usr/bin/env python3
"""Lab costs on this machine: image build, lab up (fresh and when already up), reboots, node_facts, down.

    .venv/bin/python benchmarks/lab_up.py [--cold] [--reboots N]

Runs a private lab beside any running one (containers gpufleet-labbench-*, ports +200, state in a
temporary folder) and prints figures and their ratio to the issue's targets (image < 180 s cold,
lab up of 4 twins < 30 s warm). --cold builds the image from scratch into a separate cache and tag.
Prints numbers only; asserts nothing.
"""
import argparse
import json
import os
import ssl
import base64
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIFT = 200


def private_lab(base):
    """(env, twins group, inventory folder) of a lab beside any running one: ports +SHIFT, own state."""
    state = os.path.join(base, "state")
    inv_dir = os.path.join(base, "inventory")
    os.makedirs(inv_dir)
    with open(os.path.join(REPO, "inventories", "lab", "hosts.yml")) as handle:
        inv = yaml.safe_load(handle)
    group = inv["all"]["children"]["lab_twins"]
    for hostvars in group["hosts"].values():
        hostvars["ansible_port"] += SHIFT
        hostvars["gpufleet_lab_twin"]["bmc"]["port"] += SHIFT
        hostvars["gpufleet_bmc_address"] = "127.0.0.1:%d" % hostvars["gpufleet_lab_twin"]["bmc"]["port"]
    group["vars"]["ansible_ssh_private_key_file"] = os.path.join(state, "ssh", "id_ed25519")
    with open(os.path.join(inv_dir, "hosts.yml"), "w") as handle:
        yaml.safe_dump(inv, handle, sort_keys=False)
    env = dict(os.environ, GPUFLEET_LAB_STATE=state, GPUFLEET_LAB_PREFIX="gpufleet-labbench-",
               GPUFLEET_LAB_INVENTORY=os.path.join(inv_dir, "hosts.yml"),
               CONTAINERS_CONF=os.path.join(REPO, "lab", "containers.conf"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_HOST_KEY_CHECKING="false")
    return env, group, inv_dir


class Twin4:
    """twin4 of the private lab, seen in band (ssh: its boot id) and out of band (its BMC)."""

    def __init__(self, group, state):
        self.state = state
        self.group = group
        self.ssh = ["ssh", "-i", os.path.join(state, "ssh", "id_ed25519"), "-p", str(group["hosts"]["twin4"]["ansible_port"]),
                    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                    "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=3", "root@127.0.0.1"]

    def boot_id(self):
        proc = subprocess.run(self.ssh + ["cat /run/twin/proc/sys/kernel/random/boot_id"], capture_output=True,
                              text=True, timeout=20)
        return proc.stdout.strip() if proc.returncode == 0 else None

    def wait_new(self, old, deadline=120):
        end = time.time() + deadline
        while time.time() < end:
            new = self.boot_id()
            if new and new != old:
                return
            time.sleep(0.2)
        raise SystemExit("no new boot id within %d s" % deadline)

    def reboot_in_band(self):
        old = self.boot_id()
        t0 = time.time()
        subprocess.run(self.ssh + ["systemctl reboot"], capture_output=True, timeout=30)
        self.wait_new(old)
        return time.time() - t0

    def reset_out_of_band(self):
        """ComputerSystem.Reset at twin4's BMC, found by following its links; seconds to a new boot id."""
        bmc = "https://" + self.group["hosts"]["twin4"]["gpufleet_bmc_address"]
        ctx = ssl.create_default_context(cafile=os.path.join(self.state, "bmc-certs", "ca.pem"))
        creds = "%s:%s" % (self.group["vars"]["gpufleet_bmc_username"], self.group["vars"]["gpufleet_bmc_password"])
        auth = base64.b64encode(creds.encode()).decode()

        def redfish(method, path, body=None):
            req = urllib.request.Request(bmc + path, method=method, data=json.dumps(body).encode() if body else None,
                                         headers={"Authorization": "Basic " + auth, "Content-Type": "application/json"})
            with urllib.request.urlopen(req, context=ctx, timeout=15) as resp:
                return json.loads(resp.read() or b"{}")
        system = redfish("GET", "/redfish/v1/Systems")["Members"][0]["@odata.id"]
        target = redfish("GET", system)["Actions"]["#ComputerSystem.Reset"]["target"]
        old = self.boot_id()
        t0 = time.time()
        redfish("POST", target, {"ResetType": "ForceRestart"})
        self.wait_new(old)
        return time.time() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", action="store_true", help="time a cold image build (debootstrap) too")
    parser.add_argument("--reboots", type=int, default=3)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="gpufleet-labbench-")
    env, group, inv_dir = private_lab(base)
    figures = {}

    def timed(label, cmd, **kwargs):
        t0 = time.time()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200, **kwargs)
        figures[label] = time.time() - t0
        if proc.returncode != 0:
            print("%s failed:\n%s%s" % (label, proc.stdout[-3000:], proc.stderr[-3000:]))
            cleanup(env, base)
            sys.exit(1)
        return proc

    if args.cold:
        sys.path.insert(0, REPO)
        from lab import lab as labmod
        cold_ref = labmod.image_ref() + "-cold"
        env["GPUFLEET_LAB_CACHE"] = os.path.join(base, "cache")
        timed("image build, cold (s)", ["bash", os.path.join(REPO, "lab", "image", "build.sh"), cold_ref])
        subprocess.run(["podman", "rmi", cold_ref], env=env, capture_output=True)

    lab_sh = os.path.join(REPO, "lab", "lab.sh")
    print(timed("lab up, 4 twins, image present (s)", [lab_sh, "up"]).stdout.strip())
    timed("lab up, already up (s)", [lab_sh, "up"])
    twin = Twin4(group, env["GPUFLEET_LAB_STATE"])
    samples = sorted(twin.reboot_in_band() for _ in range(args.reboots))
    figures["in-band reboot to new boot id, median of %d (s)" % len(samples)] = samples[len(samples) // 2]
    figures["BMC reset to new boot id (s)"] = twin.reset_out_of_band()

    play = os.path.join(base, "facts.yml")
    with open(play, "w") as handle:
        handle.write("- hosts: all\n  gather_facts: false\n  tasks:\n    - gpufleet.provision.node_facts:\n"
                     "        root: \"{{ gpufleet_hardware_root }}\"\n")
    timed("node_facts on 4 twins via ansible-playbook (s)",
          [os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", inv_dir, play])
    timed("lab down (s)", [lab_sh, "down"])
    cleanup(env, base)

    targets = {"image build, cold (s)": 180.0, "lab up, 4 twins, image present (s)": 30.0}
    print("\n%-52s %8s %s" % ("figure", "value", "ratio to target"))
    for label, value in figures.items():
        ratio = " %.2f of %.0f s" % (value / targets[label], targets[label]) if label in targets else ""
        print("%-52s %8.1f%s" % (label, value, ratio))


def cleanup(env, base):
    subprocess.run([os.path.join(REPO, "lab", "lab.sh"), "down"], env=env, capture_output=True, timeout=300)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
