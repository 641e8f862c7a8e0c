"""The pcie and firmware roles on the lab's twins (real systemd, apt, reboots; setpci, mlxconfig,
flint and nvme stand-ins acting on the twin's rendered hardware view, lab/repo/files/twin-devtools).

- twin2's ACS fault (ReqRedir+CmpltRedir on 0000:17:00.0, GPU0's switch port) is fixed by the pcie
  role and stays fixed across its one reboot: the boot renders the fault again, the role's boot
  unit clears it;
- a virtualization-host profile on twin4 gets ACS+DirectTrans on every GPU-NIC bridge and ATS on the
  rail NICs (Next Boot at once, Current after the reboot);
- the firmware role on twin1 refuses an image for another PSID in preflight (nothing burnt) and
  flashes NIC and NVMe firmware that becomes current at the reboot.
Check mode first each time (predicts, changes nothing), a second run after the reboot changes
nothing and asks for no reboot.
"""
import hashlib
import json
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BRIDGES_GPU0 = ["0000:16:00.0", "0000:17:00.0", "0000:17:01.0"]   # on GPU0 - mlx5_0's path (lab/hw/models/hgx-h100.yml)

ROLE_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: Role under test
      ansible.builtin.include_role:
        name: gpufleet.provision.{role}
        tasks_from: "{tasks}"
    - name: Keep the reboot requests on the controller
      ansible.builtin.copy:
        content: "{{{{ gpufleet_reboot_requests | default([]) | to_json }}}}"
        dest: "{out}/{{{{ inventory_hostname }}}}.requests.json"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
      diff: false
      changed_when: false   # the test's own bookkeeping: not counted in the role's changes
"""

REBOOT_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: The one reboot (until part 1's reboot role lands)
      ansible.builtin.reboot:
        boot_time_command: "{{ gpufleet_boot_time_command }}"
        reboot_timeout: 300
"""


def profile(lab, name, **changes):
    with open(os.path.join(REPO, "inventories", "profiles", name + ".yml")) as handle:
        data = yaml.safe_load(handle)
    data["os"] = {"id": "debian", "version_id": "12"}   # the twins are Debian 12
    for key, value in changes.items():
        data[key] = value
    path = os.path.join(lab.base, "profile-%s-%d.yml" % (name, len(os.listdir(lab.base))))
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle)
    return path


def run_role(lab, host, role, extra, tasks="main", check=False, diff=False, expect_ok=True, verbose=False):
    out = os.path.join(lab.base, "out-%s-%s" % (host, role))
    os.makedirs(out, exist_ok=True)
    # -v: the results themselves (verify's validate_node result holds each check's status)
    flags = (["--check"] if check else []) + (["--diff"] if diff else []) + (["-v"] if verbose else [])
    text = ROLE_PLAY.format(role=role, tasks=tasks, out=out)
    path = os.path.join(lab.base, "play-%s-%s.yml" % (role, tasks))
    with open(path, "w") as handle:
        handle.write(text)
    import subprocess
    cmd = [os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", lab.inventory_dir, path, "--limit", host,
           "-e", json.dumps(extra)] + flags
    proc = subprocess.run(cmd, env=lab.env, capture_output=True, text=True, timeout=900, cwd=lab.base)
    if expect_ok:
        assert proc.returncode == 0, "%s %s on %s failed:\n%s\n%s" % (role, tasks, host, proc.stdout[-6000:], proc.stderr[-2000:])
    requests = None
    if os.path.exists(os.path.join(out, host + ".requests.json")):
        with open(os.path.join(out, host + ".requests.json")) as handle:
            requests = json.load(handle)
        os.unlink(os.path.join(out, host + ".requests.json"))
    return proc, requests


def changed(proc, host):
    """changed= of the recap, and the tasks that changed (for the failure message)."""
    line = [l for l in proc.stdout.splitlines() if l.startswith(host) and "changed=" in l][-1]
    tasks, current = [], None
    for out in proc.stdout.splitlines():
        if out.startswith("TASK ["):
            current = out
        elif out.startswith("changed:") and current:
            tasks.append(current)
    return int(line.split("changed=")[1].split()[0]), tasks


def reboot(lab, host):
    old = lab.boot_id(host)
    lab.playbook(REBOOT_PLAY, limit=host, timeout=400)
    assert lab.boot_id(host) != old


def acs_words(lab, host, bdfs):
    return dict((bdf, lab.ssh(host, "setpci -s %s ECAP_ACS+0x6.w" % bdf).stdout.strip()) for bdf in bdfs)


def test_twin2_acs_fault_fixed_in_its_one_reboot(lab):
    extra = {"gpufleet_profile": profile(lab, "hgx-h100"), "pcie_unit_after": ["twin-boot.service"]}
    # the fault as rendered: ReqRedir+CmpltRedir (0x000c) on GPU0's switch port, before the role's packages
    facts = lab.facts("twin2")["twin2"]
    assert facts["pcie"]["bridges"]["0000:17:00.0"]["acs"]["ctl"]["ReqRedir"] is True
    proc, requests = run_role(lab, "twin2", "pcie", extra, check=True, diff=True)
    assert "-0000:17:00.0 ACSCtl: SrcValid- TransBlk- ReqRedir+ CmpltRedir+" in proc.stdout
    assert "+0000:17:00.0 ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir-" in proc.stdout
    facts = lab.facts("twin2")["twin2"]   # check mode changed nothing
    assert facts["pcie"]["bridges"]["0000:17:00.0"]["acs"]["ctl"]["CmpltRedir"] is True
    assert lab.ssh("twin2", "test -e /etc/systemd/system/gpufleet-pcie-acs.service", check=False).returncode == 1
    proc, requests = run_role(lab, "twin2", "pcie", extra)
    assert requests == []   # ACS needs no reboot; bare metal does not manage ATS
    assert acs_words(lab, "twin2", BRIDGES_GPU0) == dict((b, "0000") for b in BRIDGES_GPU0)
    reboot(lab, "twin2")
    # the boot rendered the fault again; the unit cleared it
    log = lab.ssh("twin2", "journalctl -b -u gpufleet-pcie-acs -o cat --no-pager").stdout
    assert "0000:17:00.0 set SrcValid- TransBlk- ReqRedir- CmpltRedir-" in log, log
    facts = lab.facts("twin2")["twin2"]
    for pair in facts["pairs"]:
        assert pair["nic"]
    on = dict((bdf, b["acs"]["ctl"]) for bdf, b in facts["pcie"]["bridges"].items() if b["acs"] and any(b["acs"]["ctl"].values()))
    assert on == {}
    proc, _ = run_role(lab, "twin2", "pcie", extra, tasks="verify", verbose=True)
    assert '"pcie.acs": "pass"' in proc.stdout
    proc, requests = run_role(lab, "twin2", "pcie", extra)
    assert changed(proc, "twin2")[0] == 0 and requests == [], changed(proc, "twin2")[1]


def test_virtualization_host_gets_acs_directtrans_and_ats(lab):
    extra = {"gpufleet_profile": profile(lab, "hgx-h100-virt"), "pcie_unit_after": ["twin-boot.service"]}
    rails = [n["pci"] for n in lab.facts("twin4")["twin4"]["nics"] if n["role"] == "rail"]
    assert len(rails) == 8
    proc, requests = run_role(lab, "twin4", "pcie", extra, check=True, diff=True)
    assert "+0000:17:00.0 ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+" in proc.stdout
    # mlxconfig is not installed before the role's first real run: the sets and the reboot are predicted
    assert len(requests) == 8 and all(r["role"] == "pcie" and "ATS_ENABLED: would be set to 1" in r["reason"] for r in requests)
    assert lab.ssh("twin4", "command -v mlxconfig", check=False).returncode == 1
    proc, requests = run_role(lab, "twin4", "pcie", extra)
    assert [r["reason"] for r in requests] == ["NIC %s ATS_ENABLED: Next Boot 1, Current 0" % pci for pci in rails]
    assert acs_words(lab, "twin4", BRIDGES_GPU0) == dict((b, "005d") for b in BRIDGES_GPU0)
    # an interrupted run asks again: the setting is pending until the boot
    proc, requests = run_role(lab, "twin4", "pcie", extra)
    assert changed(proc, "twin4")[0] == 0 and len(requests) == 8, changed(proc, "twin4")[1]
    reboot(lab, "twin4")
    query = lab.ssh("twin4", "mlxconfig -e -d %s q ATS_ENABLED" % rails[0]).stdout
    assert "True(1)         True(1)" in query, query
    assert acs_words(lab, "twin4", BRIDGES_GPU0) == dict((b, "005d") for b in BRIDGES_GPU0)
    proc, _ = run_role(lab, "twin4", "pcie", extra, tasks="verify", verbose=True)
    assert '"pcie.acs": "pass"' in proc.stdout and '"nic.ats": "pass"' in proc.stdout
    proc, requests = run_role(lab, "twin4", "pcie", extra)
    assert changed(proc, "twin4")[0] == 0 and requests == [], changed(proc, "twin4")[1]


def lab_image(lab, name, text):
    path = os.path.join(lab.base, name)
    with open(path, "w") as handle:
        handle.write(text + "\n")
    return path


def node_name(src, checksum=""):
    """An image's file name on the node (roles/firmware/tasks/images.yml): a short digest of its source
    and declared checksum before its own name."""
    return hashlib.sha256(("%s %s" % (src, checksum)).encode()).hexdigest()[:12] + "-" + os.path.basename(src)


def test_firmware_refuses_a_wrong_psid_then_flashes_to_the_minimum(lab):
    path = profile(lab, "hgx-h100", firmware={"nic": {"MT4129": "28.40.1000"}, "nvme": {"SAMSUNG MZWLR3T8HBLS": "MPK7526Q"}})
    wrong = lab_image(lab, "fw-cx6dx.bin", "GPUFLEET-LAB-FW kind=nic psid=MT_0000000359 version=28.40.1000")
    good = lab_image(lab, "fw-cx7.bin", "GPUFLEET-LAB-FW kind=nic psid=MT_0000000838 version=28.40.1000")
    drive = lab_image(lab, "nvme.bin", "GPUFLEET-LAB-FW kind=nvme model=SAMSUNG MZWLR3T8HBLS version=MPK7526Q")
    nvme_image = {"type": "nvme", "src": drive, "model": "SAMSUNG MZWLR3T8HBLS", "version": "MPK7526Q"}
    # a missing image fails in preflight, on the controller
    proc, _ = run_role(lab, "twin1", "firmware", {"gpufleet_profile": path, "firmware_images": [
        {"type": "nic", "src": os.path.join(lab.base, "nowhere.bin")}]}, expect_ok=False)
    assert proc.returncode != 0 and "nowhere.bin (firmware_images, nic): not found on the controller" in proc.stdout
    # an image declared for the ConnectX-7's PSID that is really a ConnectX-6 Dx image: refused, nothing burnt
    extra = {"gpufleet_profile": path, "firmware_images": [{"type": "nic", "src": wrong, "psid": "MT_0000000838"}, nvme_image]}
    proc, _ = run_role(lab, "twin1", "firmware", extra, expect_ok=False)
    assert proc.returncode != 0
    assert "image /var/lib/gpufleet/firmware/%s is for PSID MT_0000000359, the device is PSID MT_0000000838: refused" \
        % node_name(wrong) in proc.stdout
    # refused by the preflight's check pass: the flashing pass of main never started
    assert "NIC firmware]" in proc.stdout.split("is for PSID")[0].rsplit("TASK [", 1)[-1]
    assert "Check every device against the images" in proc.stdout and "Flash what is below the minimum" not in proc.stdout
    assert "FW Version(Running)" not in lab.ssh("twin1", "flint -d 0000:19:00.0 q").stdout
    assert "frs2" not in lab.ssh("twin1", "nvme fw-log /dev/nvme0").stdout
    extra["firmware_images"] = [{"type": "nic", "src": good}, nvme_image]
    # check mode: the wrong image of the last run is staged on the node already, the good one is not:
    # predicted from the controller's list (read in the real run), nothing burnt
    proc, requests = run_role(lab, "twin1", "firmware", extra, check=True, diff=True)
    assert "mlx5_0 28.39.1002 below the minimum 28.40.1000: would flash /var/lib/gpufleet/firmware/%s" % node_name(good) in proc.stdout
    assert "-nvme0 next boot: MPK7525Q" in proc.stdout and "+nvme0 next boot: MPK7526Q" in proc.stdout
    assert len(requests) == 12
    assert "FW Version(Running)" not in lab.ssh("twin1", "flint -d 0000:19:00.0 q").stdout
    proc, requests = run_role(lab, "twin1", "firmware", extra)
    facts = lab.facts("twin1")["twin1"]
    nics = [n["name"] for n in facts["nics"] if not n["virtual_function"]]
    reasons = sorted(r["reason"] for r in requests)
    assert reasons == sorted(["%s firmware 28.40.1000 burnt, 28.39.1002 running: active at the next boot" % n for n in nics]
                             + ["nvme%d firmware MPK7526Q burnt, MPK7525Q running: active at the next boot" % i for i in (0, 1)])
    assert set(n["fw_ver"] for n in facts["nics"]) == {"28.39.1002"}   # running: still the old one
    reboot(lab, "twin1")
    facts = lab.facts("twin1")["twin1"]
    assert set(n["fw_ver"] for n in facts["nics"]) == {"28.40.1000"}
    assert set(d["firmware"] for d in facts["nvme"]) == {"MPK7526Q"}
    proc, _ = run_role(lab, "twin1", "firmware", extra, tasks="verify", verbose=True)
    assert '"firmware.nic": "pass"' in proc.stdout and '"firmware.nvme": "pass"' in proc.stdout
    proc, requests = run_role(lab, "twin1", "firmware", extra)
    assert changed(proc, "twin1")[0] == 0 and requests == [], changed(proc, "twin1")[1]
