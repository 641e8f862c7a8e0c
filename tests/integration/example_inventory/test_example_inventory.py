"""The documented path is the tested path (issue 31 section 1): a new site copies
``inventories/example/`` as docs/operator-guide.md section 2 says, fills in its FILL-IN values (here:
the lab's twins and their BMCs), encrypts its vault, adapts the shipped profile as section 3 says
(a copy under the site's ``profiles/``, its ``name`` and, for the twins' Debian, its ``os``), names it
once with ``gpufleet_profile`` and runs ``playbooks/provision.yml``: the dirty twins are washed and green.

What only the lab needs (the twins' rendered hardware view, SSH to a container's port, its boot id)
goes in one file of its own, ``group_vars/all/lab.yml``: nothing of the example is bent for the lab.
"""
import json
import os
import re
import shutil
import subprocess

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BIN = os.path.join(REPO, ".venv", "bin")


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def _dump(path, data):
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)


def _fill_in(path, replacements):
    """Replace the value of each ``key:`` line that the example marks FILL IN, as an operator edits it."""
    with open(path) as handle:
        text = handle.read()
    for key, value in replacements.items():
        text, count = re.subn(r"(?m)^%s: .*$" % re.escape(key), "%s: %s" % (key, json.dumps(value)), text)
        assert count == 1, "%s: no line `%s:` to fill in" % (path, key)
    with open(path, "w") as handle:
        handle.write(text)


def _make_site(lab, site, run_folder):
    # operator guide section 2: cp -r inventories/example inventories/<site>
    shutil.copytree(os.path.join(REPO, "inventories", "example"), site)
    assert "FILL IN" in open(os.path.join(site, "hosts.yml")).read()
    # hosts.yml: the class's rack holds the twins; their management and BMC addresses filled in
    inv = _load(os.path.join(site, "hosts.yml"))
    h100 = inv["all"]["children"]["hgx_h100"]["children"]
    h100["rack01"]["hosts"] = dict(
        (name, {"ansible_host": "127.0.0.1", "ansible_port": spec["ansible_port"],
                "gpufleet_bmc_address": spec["gpufleet_bmc_address"]})
        for name, spec in sorted(lab.hosts.items()))
    del h100["rack02"]
    del inv["all"]["children"]["hgx_h200"]      # this site has no H200 nodes
    inv["all"]["children"]["fabric_capture"]["hosts"] = {"twin1": {"fabric_segment": "lab"}}
    _dump(os.path.join(site, "hosts.yml"), inv)
    # group_vars/all/main.yml: the CA that signed the BMCs' certificates, the run folder
    _fill_in(os.path.join(site, "group_vars", "all", "main.yml"), {
        "gpufleet_bmc_ca_path": os.path.join(lab.state, "bmc-certs", "ca.pem"),
        "gpufleet_run_folder": run_folder})
    # group_vars/all/vault.yml: the BMC account, then encrypted (ansible-vault create/encrypt)
    vault = os.path.join(site, "group_vars", "all", "vault.yml")
    _fill_in(vault, {"vault_gpufleet_bmc_username": lab.group_vars["gpufleet_bmc_username"],
                     "vault_gpufleet_bmc_password": lab.group_vars["gpufleet_bmc_password"]})
    password_file = os.path.join(os.path.dirname(site), "vault-pass")
    with open(password_file, "w") as handle:
        handle.write("example-site-vault\n")
    proc = subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt", "--vault-password-file", password_file, vault],
                          env=lab.env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert open(vault).read().startswith("$ANSIBLE_VAULT;")
    # operator guide section 3: the shipped profile copied into the site, adapted, named once
    os.makedirs(os.path.join(site, "profiles"))
    profile = _load(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml"))
    profile.update(name="hgx-h100-site", os={"id": "debian", "version_id": "12"})
    _dump(os.path.join(site, "profiles", "hgx-h100-site.yml"), profile)
    _fill_in(os.path.join(site, "group_vars", "hgx_h100", "main.yml"), {
        "gpufleet_profile": "{{ inventory_dir }}/profiles/hgx-h100-site.yml"})
    # what only the lab's twins need: SSH into a container's port, their rendered hardware view
    twin_vars = lab.group_vars
    _dump(os.path.join(site, "group_vars", "all", "lab.yml"), {
        "ansible_ssh_private_key_file": twin_vars["ansible_ssh_private_key_file"],
        "ansible_ssh_common_args": twin_vars["ansible_ssh_common_args"],
        "ansible_ssh_pipelining": True,
        "gpufleet_hardware_root": twin_vars["gpufleet_hardware_root"],
        "gpufleet_boot_time_command": twin_vars["gpufleet_boot_time_command"],
        "pcie_unit_after": ["twin-boot.service"]})
    return password_file


def _provision(lab, site, password_file, records, *args):
    env = dict(lab.env)
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)   # as a user runs it: the checkout's ansible.cfg finds the collection
    env.update(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), GPUFLEET_RECORD_CHANGES=records,
               ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"),
               ANSIBLE_CALLBACKS_ENABLED="gpufleet.provision.failures,record_changes")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", site, "playbooks/provision.yml",
                           "--vault-password-file", password_file] + list(args),
                          env=env, capture_output=True, text=True, timeout=2400, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    with open(records) as handle:
        lines = [json.loads(line) for line in handle]
    return proc, lines


# What check mode says instead of doing (a unit that is not installed or written yet cannot be asked):
# a check-mode task that says it, as a change, predicts the real run's task.
SAID_FOR = {
    "tuning : Say that the boot-time unit would be enabled": "tuning : Enable the boot-time unit (THP and governor at every boot)",
    "nvidia_driver : Say which services would be enabled": "nvidia_driver : Enable fabric manager and the persistence daemon",
    "nvidia_driver : Say which services would be (re)started": "nvidia_driver : Start (restart when their package changed)",
    "roce : Say that the QoS boot unit would be enabled": "roce : Enable the QoS boot unit (trust, PFC, ECN, RoCE TOS at every boot)",
}


def _changes(lines):
    """{(role, task, host)} that reported a change in the washing machine up to its one reboot (the
    reboot role's first task): what --check predicts. After it, the real run verifies a rebooted
    node, the check run one that was never rebooted."""
    out = set()
    for line in lines:
        if (line["role"] or "").split(".")[-1] == "reboot":
            break
        if line["changed"]:
            task = line["task"]
            for said, done in SAID_FOR.items():
                if task.endswith("." + said):
                    task = task[:-len(said)] + done
            out.add((line["role"] or line["play"], task, line["host"]))
    return out


def test_a_site_made_from_the_example_washes_the_dirty_twins_green(lab, tmp_path):
    site = str(tmp_path / "inventories" / "site")
    run_folder = str(tmp_path / "run")
    password_file = _make_site(lab, site, run_folder)
    graph = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", site, "--graph"], env=lab.env,
                           capture_output=True, text=True, timeout=120, cwd=REPO)
    assert graph.returncode == 0 and "twin1" in graph.stdout and "twin2" in graph.stdout, graph.stdout + graph.stderr
    # check mode predicts: every task's change in --check --diff is the real run's, per node
    check, check_lines = _provision(lab, site, password_file, str(tmp_path / "check.jsonl"), "--check", "--diff")
    real, real_lines = _provision(lab, site, password_file, str(tmp_path / "real.jsonl"))
    predicted = _changes(check_lines)
    happened = _changes(real_lines)
    for key in sorted(predicted ^ happened):
        print("check-mode mismatch:", key, [(l["status"], l["changed"], l["msg"]) for l in check_lines
                                             if (l["role"] or l["play"], l["task"], l["host"]) == key][:3])
    assert predicted - happened == set(), "predicted, did not happen: %s" % sorted(predicted - happened)
    assert happened - predicted == set(), "happened, not predicted: %s" % sorted(happened - predicted)
    assert len(happened) > 20, sorted(happened)   # the twins are dirty: the washing machine had work to do
    # every role saw the profile: the washing machine ran (BIOS, the OS layer, the one reboot)
    assert "gpufleet summary: 2 node(s): READY 2, QUARANTINED 0, FAILED 0" in real.stdout, real.stdout[-4000:]
    assert re.search(r"reboot: twin1 reboots \(bmc\): bios: .*kernel_cmdline", real.stdout), real.stdout[-6000:]
    assert "reboot: twin2 reboots" in real.stdout
    for host in ("twin1", "twin2"):
        with open(os.path.join(run_folder, "gate", host + ".json")) as handle:
            report = json.load(handle)["report"]
        assert report["profile"] == "hgx-h100-site", report.get("profile")
        failing = [(c["id"], c["status"], c["reason"]) for c in report["checks"] if c["status"] in ("fail", "error")]
        assert failing == [], (host, failing)
        passing = set(c["id"] for c in report["checks"] if c["status"] == "pass")
        assert {"numa.layout", "cpu.smt", "kernel.cmdline", "kernel.grub_sources", "memory.hugepages", "memory.thp",
                "nvidia.driver", "nvidia.fabricmanager", "packages.held", "pcie.acs", "cpu.governor"} <= passing, \
            (host, sorted(passing))
    # the fabric step read the site's run folder
    assert os.path.exists(os.path.join(run_folder, "fabric", "fabric.json"))
