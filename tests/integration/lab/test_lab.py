"""The lab behaves like the fleet where it matters (issue 4): reachable twins, the dirty model seen
by node_facts, BIOS pending until the BMC's reset, GRUB -> /proc/cmdline on an in-band reboot,
the loaded driver following the installed package, fabric manager failing on a version mismatch.

One private lab per session (conftest.py). Tests that change a twin use one twin each, so the
order of the first two tests (which read the fresh state) is the only order that matters.
"""
import os
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _params(facts, key):
    return [p["value"] for p in facts["kernel"]["cmdline"]["params"] if p["key"] == key]


def test_inventory_reaches_every_twin(lab):
    proc = lab.playbook("""
- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.ping:
    - ansible.builtin.command: systemctl is-system-running
      register: running
      changed_when: false
      failed_when: running.stdout not in ['running', 'degraded']
""")
    assert "ok=2" in proc.stdout
    for name in ("twin1", "twin2", "twin3", "twin4"):
        assert "%s " % name in proc.stdout and "unreachable=0" in proc.stdout
    # the twins are separate hosts: own hostname, same rendered model
    assert lab.ssh("twin3", "hostname").stdout.strip() == "twin3"


def test_second_up_reuses_everything(lab):
    proc = lab.lab_sh("up", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "building" not in proc.stdout and "apt repository built" not in proc.stdout
    for name in ("twin1", "twin2", "twin3", "twin4"):
        assert "lab: %s: running" % name in proc.stdout
    status = lab.lab_sh("status").stdout
    assert status.count(" running ") == 4 and status.count(" up ") == 4, status


def test_fresh_twins_report_the_dirty_model(lab):
    facts = lab.facts()
    assert sorted(facts) == ["twin1", "twin2", "twin3", "twin4"]

    clean = facts["twin4"]
    assert [n["id"] for n in clean["numa"]["nodes"]] == list(range(8))       # SNC4 on 2 sockets
    assert clean["cpu"]["online_count"] == 208 and clean["cpu"]["smt_active"] is True
    assert clean["nvidia"]["driver_version"] == "550.90.07"
    assert clean["kernel"]["release"] == "6.8.0-45-generic"
    assert clean["kernel"]["thp"]["enabled"] == "never" and clean["kernel"]["numa_balancing"] == 0
    assert clean["kernel"]["hugepages"]["1048576"] == 128
    assert clean["kernel"]["iommu"]["active"] is True and clean["kernel"]["kvm"] is True
    assert clean["kernel"]["governor"]["not_performance"] == []
    assert all(n["ports"][0]["state"] == "ACTIVE" for n in clean["nics"])
    assert len(clean["gpus"]) == 8 and clean["nvidia"]["nvswitch_present"] is True
    assert clean["os"]["ID"] == "debian"

    t1 = facts["twin1"]  # SNC off, HT off, hugepages in grub and grub.d, THP always, balancing on
    assert len(t1["numa"]["nodes"]) == 2
    assert t1["cpu"]["online_count"] == 104 and t1["cpu"]["smt_active"] is False
    assert _params(t1, "hugepages") == ["64", "32"]                           # twice on the cmdline
    assert t1["kernel"]["hugepages"]["1048576"] == 64                         # the kernel ignores the second
    assert t1["kernel"]["thp"]["enabled"] == "always" and t1["kernel"]["numa_balancing"] == 1

    t2 = facts["twin2"]  # VT-d off, wrong driver, governor powersave, ACS on a GPU-NIC bridge
    assert t2["kernel"]["iommu"]["active"] is False
    assert t2["nvidia"]["driver_version"] == "535.183.01"
    assert t2["kernel"]["governor"]["not_performance"] == [3, 4]
    ctl = t2["pcie"]["bridges"]["0000:17:00.0"]["acs"]["ctl"]
    assert ctl["ReqRedir"] is True and ctl["CmpltRedir"] is True

    t3 = facts["twin3"]  # IB port down, one at HDR
    ports = {n["name"]: n["ports"][0] for n in t3["nics"]}
    assert ports["mlx5_0"]["state"] == "DOWN"
    assert ports["mlx5_1"]["rate_gbps"] == 200.0 and ports["mlx5_2"]["rate_gbps"] == 400.0

    # OS-side faults are real files and real dpkg state
    assert lab.ssh("twin1", "apt-mark showhold").stdout.split() == []
    assert sorted(lab.ssh("twin4", "apt-mark showhold").stdout.split()) == [
        "linux-headers-6.8.0-45-generic", "linux-image-6.8.0-45-generic", "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils",
        "nvidia-driver-550-server", "nvidia-fabricmanager-550"]
    assert "hugepages=32" in lab.ssh("twin1", "cat /etc/default/grub.d/50-cloudimg-settings.cfg").stdout
    assert lab.ssh("twin4", "ofed_info -s").stdout.strip() == "MLNX_OFED_LINUX-23.10-1.1.9.0:"
    # DKMS stand-in built OFED for the kernel with headers; modinfo looks under the twin's running kernel
    assert lab.ssh("twin4", "modinfo -F vermagic mlx5_core").stdout.split()[0] == "6.8.0-45-generic"
    assert lab.ssh("twin4", "uname -r").stdout.strip() == "6.8.0-45-generic"
    # nvidia-smi -q: fabric state follows the fabric manager daemon
    assert "State                             : Completed" in lab.ssh("twin4", "nvidia-smi -q").stdout
    assert "State                             : In Progress" in lab.ssh("twin3", "nvidia-smi -q").stdout


def test_twins_discover_the_lab_fabric(lab):
    """ibnetdiscover in a twin shows the lab's fabric, twin3's rail NIC mlx5_3 on rail 2's leaf."""
    out = lab.ssh("twin4", "ibnetdiscover").stdout
    # blocks are separated by blank lines; a switch block starts with vendid=..., then its Switch line
    leaf_r2 = [block for block in out.split("\n\n")
               if any(line.startswith("Switch") and "MF0;su1-leaf-r2:" in line for line in block.splitlines())]
    assert len(leaf_r2) == 1, out[:500]
    assert '"twin3 mlx5_3"' in leaf_r2[0] and '"twin4 mlx5_2"' in leaf_r2[0]
    assert '"twin3 mlx5_0"' not in out                                        # its port is down
    assert '"twin4 mlx5_0"' in out


def test_fabric_manager_fails_on_mismatch_and_runs_on_match(lab):
    state = lab.ssh("twin3", "systemctl is-active nvidia-fabricmanager", check=False).stdout.strip()
    assert state == "failed"
    journal = lab.ssh("twin3", "journalctl -b -u nvidia-fabricmanager -o cat --no-pager").stdout
    assert ("fabric manager NVIDIA GPU driver interface version 550.54.15 don't match with driver version "
            "550.90.07") in journal
    assert lab.ssh("twin4", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"

    lab.playbook("""
- hosts: twin3
  gather_facts: false
  tasks:
    - name: Install the fabric manager that matches the loaded driver
      ansible.builtin.apt:
        name: nvidia-fabricmanager-550=550.90.07-0ubuntu0.22.04.1
        update_cache: true
        allow_change_held_packages: true   # the mismatched one is held, as the baseline holds FM
    - name: Start it
      ansible.builtin.systemd_service:
        name: nvidia-fabricmanager
        state: restarted
""")
    assert lab.ssh("twin3", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"
    assert lab.ssh("twin3", "nv-fabricmanager --version").stdout.strip() == "Fabric Manager version is : 550.90.07"


def test_bios_pending_at_the_bmc_applies_on_reset(lab):
    """twin3 (AMI flavour, the DGX capture's Bios/SD): SNC and HT off at the BMC, then a Redfish reset."""
    _, systems, _ = lab.redfish("twin3", "GET", "/redfish/v1/Systems")
    _, sysdoc, _ = lab.redfish("twin3", "GET", systems["Members"][0]["@odata.id"])
    _, bios, _ = lab.redfish("twin3", "GET", sysdoc["Bios"]["@odata.id"])   # follow the links
    assert bios["Attributes"]["SncEn"] == "Enable SNC4 (4-clusters)"
    settings = bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
    _, _, headers = lab.redfish("twin3", "GET", settings)                    # AMI wants If-Match (428 without)
    status, _, _ = lab.redfish("twin3", "PATCH", settings,
                               {"Attributes": {"SncEn": "Disable", "ProcessorHyperThreadingDisable": "Disabled"}},
                               headers={"If-Match": headers["ETag"]})
    assert status in (200, 202, 204)

    before = lab.boot_id("twin3")
    assert len(lab.facts("twin3")["twin3"]["numa"]["nodes"]) == 8            # pending: nothing changed yet

    status, _, _ = lab.redfish("twin3", "POST", sysdoc["Actions"]["#ComputerSystem.Reset"]["target"],
                               {"ResetType": "ForceRestart"})
    assert status in (200, 202, 204)
    lab.wait_new_boot("twin3", before)
    after = lab.facts("twin3")["twin3"]
    assert len(after["numa"]["nodes"]) == 2                                    # SNC off: 8 NUMA nodes became 2
    assert after["cpu"]["online_count"] == 104 and after["cpu"]["smt_active"] is False   # HT off halves the CPUs
    _, bios, _ = lab.redfish("twin3", "GET", sysdoc["Bios"]["@odata.id"])
    assert bios["Attributes"]["SncEn"] == "Disable"


def test_bios_role_and_one_inband_reboot_fix_twin1(lab):
    """The collection's own flow on the Dell twin: bios role (pending + config job), the single
    reboot (in-band, the twin's POST applies the job), then the role's verify; again: no change."""
    play = """
- hosts: twin1
  gather_facts: false
  roles:
    - role: gpufleet.provision.bios
      vars:
        bios_settings: {snc: snc4, hyperthreading: true}
    - role: gpufleet.provision.reboot
      vars:
        reboot_allowed: true
  post_tasks:
    - name: Every desired attribute must now be current
      ansible.builtin.include_role:
        name: gpufleet.provision.bios
        tasks_from: verify
      vars:
        bios_settings: {snc: snc4, hyperthreading: true}
"""
    before = lab.boot_id("twin1")
    first = lab.playbook(play)
    assert lab.boot_id("twin1") != before
    facts = lab.facts("twin1")["twin1"]
    assert len(facts["numa"]["nodes"]) == 8 and facts["cpu"]["online_count"] == 208
    second = lab.playbook(play)
    assert "changed=0" in second.stdout.split("PLAY RECAP")[-1], second.stdout[-2000:]
    assert "changed=0" not in first.stdout.split("PLAY RECAP")[-1]


def test_grub_change_and_inband_reboot(lab):
    """twin2: install the fleet's driver (replacing the held 535 branch), change GRUB, set VT-d pending at
    the BMC, reboot in-band: cmdline, loaded driver and BIOS all follow."""
    before = lab.boot_id("twin2")
    lab.playbook("""
- hosts: twin2
  gather_facts: false
  tasks:
    - name: Release the held 535 branch (apt never removes a held package to resolve a conflict)
      ansible.builtin.dpkg_selections:
        name: "{{ item }}"
        selection: install
      loop: [nvidia-driver-535-server, nvidia-fabricmanager-535]
    - name: Install the fleet driver (conflicts with and replaces the 535 branch)
      ansible.builtin.apt:
        name: [nvidia-driver-550-server=550.90.07-0ubuntu0.22.04.1, nvidia-fabricmanager-550=550.90.07-0ubuntu0.22.04.1]
    - name: New kernel command line
      ansible.builtin.lineinfile:
        path: /etc/default/grub
        regexp: '^GRUB_CMDLINE_LINUX='
        line: 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt default_hugepagesz=1G hugepagesz=1G hugepages=96 transparent_hugepage=never numa_balancing=disable"'
    - name: Regenerate grub.cfg
      ansible.builtin.command: update-grub
      changed_when: true
""")
    # VT-d on at the BMC (Lenovo: Bios/Pending): pending until the host POSTs, an OS reboot included
    _, systems, _ = lab.redfish("twin2", "GET", "/redfish/v1/Systems")
    _, sysdoc, _ = lab.redfish("twin2", "GET", systems["Members"][0]["@odata.id"])
    _, bios, _ = lab.redfish("twin2", "GET", sysdoc["Bios"]["@odata.id"])
    lab.redfish("twin2", "PATCH", bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"],
                {"Attributes": {"DevicesandIOPorts_IntelVTforDirectedIOVTd": "Enabled"}})
    assert lab.facts("twin2")["twin2"]["kernel"]["iommu"]["active"] is False
    # installed but not booted: the old module is loaded, the new library refuses it (as on a real node)
    smi = lab.ssh("twin2", "nvidia-smi", check=False)
    assert smi.returncode != 0 and "Driver/library version mismatch" in smi.stdout
    assert "hugepages=128" in lab.ssh("twin2", "cat /run/twin/proc/cmdline").stdout

    lab.playbook("""
- hosts: twin2
  gather_facts: false
  tasks:
    - name: Reboot as the collection's handler does
      ansible.builtin.reboot:
        boot_time_command: "{{ gpufleet_boot_time_command }}"
        reboot_timeout: 120
""")
    after_id = lab.boot_id("twin2")
    assert after_id and after_id != before
    facts = lab.facts("twin2")["twin2"]
    assert "hugepages=96" in facts["kernel"]["cmdline"]["raw"].split()
    assert facts["kernel"]["hugepages"]["1048576"] == 96
    assert facts["nvidia"]["driver_version"] == "550.90.07"
    assert lab.ssh("twin2", "nvidia-smi --query-gpu=driver_version --format=csv,noheader").stdout.split() == ["550.90.07"] * 8
    assert lab.ssh("twin2", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"
    assert facts["kernel"]["iommu"]["active"] is True                       # VT-d applied at the POST
    _, bios, _ = lab.redfish("twin2", "GET", sysdoc["Bios"]["@odata.id"])
    assert bios["Attributes"]["DevicesandIOPorts_IntelVTforDirectedIOVTd"] == "Enabled"


def test_bmc_power_off_and_on_drive_the_twin(lab):
    """ForceOff at twin4's BMC powers the twin off (SSH refused); On boots it again."""
    _, systems, _ = lab.redfish("twin4", "GET", "/redfish/v1/Systems")
    _, sysdoc, _ = lab.redfish("twin4", "GET", systems["Members"][0]["@odata.id"])
    target = sysdoc["Actions"]["#ComputerSystem.Reset"]["target"]
    before = lab.boot_id("twin4")
    lab.redfish("twin4", "POST", target, {"ResetType": "ForceOff"})
    deadline = time.time() + 60
    while time.time() < deadline and lab.port_open(lab.hosts["twin4"]["ansible_port"]):
        time.sleep(0.5)
    assert not lab.port_open(lab.hosts["twin4"]["ansible_port"]), "twin4 still answers after ForceOff"
    time.sleep(5)  # past the BMC's power settling: it stays off
    assert lab.boot_id("twin4") is None
    lab.redfish("twin4", "POST", target, {"ResetType": "On"})
    lab.wait_new_boot("twin4", before)
    assert lab.ssh("twin4", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"


def test_provision_playbook_end_to_end_then_idempotent(lab):
    """The main job (make run): provision.yml brings every twin's BIOS to the profile through its own
    BMC flavour with one reboot, the gate reports each twin, the fabric step publishes from the
    reports. Earlier tests left twin3 with SNC and HT off at its (AMI) BMC: this run must fix it.
    A second run changes nothing in the provisioning play and reboots nothing."""
    import json
    out = os.path.join(lab.base, "provision-out")
    extra = {"gpufleet_lab_output": out}
    first = lab.run_playbook("provision.yml", extra=extra)
    provisioning = first.stdout.split("PLAY [Validation gate]")[0]
    assert "reboot: twin3 reboots (" in provisioning                     # twin3 needed the reboot
    reports = {}
    for host in lab.hosts:
        with open(os.path.join(out, "gate", host + ".json")) as handle:
            reports[host] = dict((c["id"], c["status"]) for c in json.load(handle)["report"]["checks"])
    for host, checks in reports.items():
        for check_id in ("numa.layout", "cpu.smt", "cpu.vtx", "iommu.enabled"):
            assert checks[check_id] == "pass", (host, check_id, checks[check_id])   # the BIOS is right everywhere
    assert reports["twin3"]["ib.ports"] == "fail"                           # a port down is not a BIOS matter
    with open(os.path.join(out, "gate", "twin4.json")) as handle:
        assert json.load(handle)["report"]["status"] == "pass"
    with open(os.path.join(out, "fabric", "fabric.json")) as handle:
        fabric = json.load(handle)
    assert any(a["kind"] == "miscabled_rail" and a["host"] == "twin3" for a in fabric["anomalies"])
    with open(os.path.join(out, "fabric", "topology.conf")) as handle:
        topology = handle.read()
    nodes = _topology_nodes(topology)
    assert "twin4" in nodes and "twin3" not in nodes                        # only green nodes go to Slurm

    boots = dict((host, lab.boot_id(host)) for host in lab.hosts)
    second = lab.run_playbook("provision.yml", extra=extra)
    provisioning = second.stdout.split("PLAY [Validation gate]")[0]
    assert "changed: [" not in provisioning, provisioning[-3000:]
    assert dict((host, lab.boot_id(host)) for host in lab.hosts) == boots


def _topology_nodes(text):
    """Node names of topology.conf's Nodes= lists, Slurm host lists expanded (twin[1-2,4])."""
    import re
    names = set()
    for value in re.findall(r"Nodes=(\S+)", text):
        for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", value):
            if plain:
                names.add(plain)
                continue
            for part in ranges.split(","):
                low, _, high = part.partition("-")
                for number in range(int(low), int(high or low) + 1):
                    names.add("%s%0*d" % (prefix, len(low), number))
    return names


def test_zz_down_leaves_nothing_running_or_bound(lab):
    proc = lab.lab_sh("down", timeout=300)
    assert proc.returncode == 0, proc.stderr
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                           env=lab.env, check=True).stdout.split()
    # exactly this lab's twins: the other test labs' prefixes start with this one's and may be up
    assert [n for n in names if n in [lab.prefix + host for host in lab.hosts]] == []
    for hostvars in lab.hosts.values():
        assert not lab.port_open(hostvars["ansible_port"]), hostvars["ansible_port"]
        assert not lab.port_open(hostvars["gpufleet_lab_twin"]["bmc"]["port"])
    assert not [n for n in os.listdir(os.path.join(lab.state, "bmc")) if n.endswith(".pid")]
    # a second down is a no-op, not an error
    assert lab.lab_sh("down").returncode == 0
