"""nvidia_driver and ofed on the lab's twins (issue 10): twin2 (535 branch held, wrong driver) and twin3
(fabric manager one release off the driver) converge in one run with at most one reboot; the second
run changes nothing; check mode predicts the package changes and changes nothing; bad input fails in
preflight naming the offer; twin4 shows the R580 unversioned fabric manager (DKMS modules) and a node
with no NVIDIA software at all.

Order matters inside this file (one lab per session): check mode first on the fresh dirty twins."""
import json
import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

DRIVER = "550.90.07-0ubuntu0.22.04.1"
PRECOMPILED = "linux-modules-nvidia-550-server-6.8.0-45-generic"
EXTRA = {"gpufleet_profile": "hgx-h100"}

CONVERGE = """
- hosts: %(hosts)s
  gather_facts: false
  tasks:
    - name: Preflight of both roles, before anything changes
      ansible.builtin.include_role:
        name: "{{ test_role }}"
        tasks_from: preflight
      loop: [gpufleet.provision.nvidia_driver, gpufleet.provision.ofed]
      loop_control:
        loop_var: test_role
    - name: Driver, fabric manager
      ansible.builtin.include_role:
        name: gpufleet.provision.nvidia_driver
    - name: OFED
      ansible.builtin.include_role:
        name: gpufleet.provision.ofed
    - name: Keep what the roles decided
      ansible.builtin.copy:
        content: "{{ {'requests': gpufleet_reboot_requests | default([]), 'packages': nvidia_driver_packages,
                      'plan': __nvidia_driver_packages.plan, 'ofed_plan': __ofed_packages.plan,
                      'modules': nvidia_driver_module_source, 'simulation': __nvidia_driver_packages.simulation | default(none)} | to_json }}"
        dest: "%(out)s/{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
      changed_when: false    # the test's own record, not a change of the node
    # Until part 1's reboot role lands: the one reboot, only when a role asked for it.
    - name: The one reboot
      ansible.builtin.reboot:
        boot_time_command: "{{ gpufleet_boot_time_command }}"
        reboot_timeout: 180
      when: gpufleet_reboot_requests | default([]) | length > 0 and not ansible_check_mode
    - name: Verify both areas (the gate's checks)
      ansible.builtin.include_role:
        name: "{{ test_role }}"
        tasks_from: verify
      loop: [gpufleet.provision.nvidia_driver, gpufleet.provision.ofed]
      loop_control:
        loop_var: test_role
      when: not ansible_check_mode
"""


def load_profile(name="hgx-h100"):
    with open(os.path.join(REPO, "inventories", "profiles", name + ".yml")) as handle:
        return yaml.safe_load(handle)


def converge(lab, play, hosts, *args, extra=None):
    """Run CONVERGE; returns (process, {host: what the roles decided})."""
    out = os.path.join(lab.base, "decided-%d" % len(os.listdir(lab.base)))
    os.makedirs(out, exist_ok=True)
    proc = play(CONVERGE % {"hosts": hosts, "out": out}, *args, extra=dict(EXTRA, **(extra or {})))
    decided = {}
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as handle:
            decided[name[:-5]] = json.load(handle)
    return proc, decided


def recap(proc, host):
    match = re.search(r"^%s\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)" % host, proc.stdout, re.M)
    assert match, proc.stdout[-3000:]
    return {"ok": int(match.group(1)), "changed": int(match.group(2)), "failed": int(match.group(4))}


def test_check_mode_predicts_and_changes_nothing(lab, play, node_state):
    before = {h: node_state(h) for h in ("twin2", "twin3")}
    proc, decided = converge(lab, play, "twin2,twin3", "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-5000:]
    # twin2: the held 535 branch is replaced by 550 (not stacked), with the precompiled modules
    plan = decided["twin2"]["plan"]
    assert [i[:2] for i in plan["install"]] == [["nvidia-driver-550-server", DRIVER], [PRECOMPILED, "6.8.0-45.45~22.04.1+1"],
                                               ["nvidia-fabricmanager-550", DRIVER]]
    assert plan["remove"] == ["nvidia-driver-535-server", "nvidia-fabricmanager-535"]
    assert sorted(n for n, _, _ in decided["twin2"]["simulation"]["install"]) == sorted(i[0] for i in plan["install"])
    assert decided["twin2"]["requests"] == [
        {"role": "nvidia_driver", "reason": "NVIDIA driver 550.90.07 installed, 535.183.01 loaded"}]
    # twin3: only the fabric manager moves, up to the driver's version; no reboot needed for it
    plan3 = decided["twin3"]["plan"]
    assert ["nvidia-fabricmanager-550", DRIVER, "550.54.15-0ubuntu0.22.04.1"] in plan3["install"]
    assert "nvidia-driver-550-server" not in [i[0] for i in plan3["install"]]
    # ... nor for nvidia-peermem (never configured, not loaded): the pinned driver runs, so it would be
    # loaded live (issue 26)
    assert decided["twin3"]["requests"] == []
    # the OFED packages are right, only their holds are missing
    assert decided["twin2"]["ofed_plan"]["install"] == [] and decided["twin2"]["ofed_plan"]["hold"] == [
        "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils"]
    assert "nvidia-driver-535-server 535.183.01-0ubuntu0.22.04.1 held" in proc.stdout   # --diff before
    for host in ("twin2", "twin3"):
        assert node_state(host) == before[host], host


def test_bad_versions_fail_in_preflight_naming_the_offer(lab, play, node_state):
    before = node_state("twin4")
    proc, _ = converge(lab, play, "twin4", extra={"nvidia_driver_version": "550.90.12"})
    assert proc.returncode != 0
    assert "nvidia-driver-550-server: version 550.90.12 not in the repositories (offered: %s, " \
           "550.54.15-0ubuntu0.22.04.1)" % DRIVER in proc.stdout
    proc, _ = converge(lab, play, "twin4", extra={"ofed_release": "24.10-1.1.4.0"})
    assert proc.returncode != 0
    assert re.search(r"mlnx-ofed-kernel-utils: version 24\.10\.OFED\.24\.10\.1\.1\.4\.\* not in the repositories "
                     r"\(offered: 24\.04\.OFED\.24\.04\.0\.7\.0\.1-1, 23\.10\.OFED\.23\.10\.1\.1\.9\.1-1\)", proc.stdout), proc.stdout[-3000:]
    assert node_state("twin4") == before


def test_ofed_not_buildable_for_the_next_kernel_fails_before_the_reboot(lab, play):
    """The profile's kernel is one whose headers the node lacks: no mlx5_core for it, the run fails
    naming the OFED release and the kernel (and reboots nothing)."""
    before = lab.boot_id("twin4")
    proc, _ = converge(lab, play, "twin4", extra={"ofed_kernel_release": "6.8.0-40-generic",
                                                  "nvidia_driver_kernel_release": "6.8.0-45-generic"})
    assert proc.returncode != 0
    assert "no mlx5_core module for kernel 6.8.0-40-generic: OFED 23.10-1.1.9.0 could not be built for it" in proc.stdout
    assert lab.boot_id("twin4") == before


def test_twin2_and_twin3_converge_then_nothing_changes(lab, play):
    b2, b3 = lab.boot_id("twin2"), lab.boot_id("twin3")
    proc, decided = converge(lab, play, "twin2,twin3")
    assert proc.returncode == 0, proc.stdout[-6000:]
    b2_after, b3_after = lab.boot_id("twin2"), lab.boot_id("twin3")
    assert b2_after != b2                                  # twin2 rebooted once (the driver)
    assert b3_after == b3                                  # twin3: FM fixed in place, peermem loaded live: no reboot
    assert decided["twin2"]["modules"] == "precompiled"
    for host in ("twin2", "twin3"):
        dpkg = lab.ssh(host, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' 'nvidia-*' 'linux-modules-nvidia-*'").stdout
        assert "nvidia-driver-550-server %s hi" % DRIVER in dpkg and "nvidia-fabricmanager-550 %s hi" % DRIVER in dpkg, dpkg
        assert "%s 6.8.0-45.45~22.04.1+1 hi" % PRECOMPILED in dpkg
        installed = [line for line in dpkg.splitlines() if line.split()[-1] not in ("rc", "un")]
        assert not [line for line in installed if "535" in line], installed     # replaced, not stacked
        assert lab.ssh(host, "systemctl is-active nvidia-fabricmanager nvidia-persistenced").stdout.split() == ["active"] * 2
        assert lab.ssh(host, "nv-fabricmanager --version").stdout.strip() == "Fabric Manager version is : 550.90.07"
        assert set(lab.ssh(host, "apt-mark showhold").stdout.split()) >= {
            "nvidia-driver-550-server", "nvidia-fabricmanager-550", PRECOMPILED, "mlnx-ofed-kernel-dkms", "mlnx-ofed-kernel-utils"}
        # the gate's own checks of both areas ran green in verify (validate_node with checks, require
        # and fail_on_red: a red check or a skip for lack of data fails the task)
        for role in ("nvidia_driver", "ofed"):
            header = "TASK [gpufleet.provision.%s : The gate's checks of this area are green" % role
            assert header in proc.stdout, (host, role)
            block = proc.stdout.split(header, 1)[1].split("\nTASK [", 1)[0]
            assert "ok: [%s]" % host in block, (host, role, block[:2000])
    for host in ("twin2", "twin3"):
        assert lab.ssh(host, "test -d /run/twin/sys/module/nvidia_peermem && echo loaded").stdout.strip() == "loaded"

    again, decided = converge(lab, play, "twin2,twin3")
    assert again.returncode == 0, again.stdout[-4000:]
    for host in ("twin2", "twin3"):
        assert recap(again, host)["changed"] == 0, again.stdout[-4000:]
        assert decided[host]["requests"] == []
    assert (lab.boot_id("twin2"), lab.boot_id("twin3")) == (b2_after, b3_after)   # no second reboot


def test_r580_unversioned_fabric_manager_with_dkms_then_back(lab, play):
    """twin4 moves to R580 (CUDA's unversioned nvidia-fabricmanager provides nvidia-fabricmanager-580;
    no precompiled modules for it: DKMS builds them for the kernel with headers), then back to 550."""
    # as an operator moves the fleet: the profile changes (driver version and the held names)
    profile = load_profile()
    profile["nvidia"]["driver_version"] = "580.65.06"
    profile["packages"]["held"] = ["nvidia-driver-580-server", "nvidia-fabricmanager*", "linux-image-6.8.0-45-generic"]
    proc, decided = converge(lab, play, "twin4", extra={"gpufleet_profile": profile})
    assert proc.returncode == 0, proc.stdout[-6000:]
    fm = [p for p in decided["twin4"]["packages"] if p["requested"] == "nvidia-fabricmanager-580"][0]
    assert (fm["name"], fm["version"], fm["via"]) == ("nvidia-fabricmanager", "580.65.06-1", "provides")
    assert decided["twin4"]["modules"] == "dkms"
    assert lab.ssh("twin4", "modinfo -k 6.8.0-45-generic -F version nvidia").stdout.strip() == "580.65.06"
    assert lab.ssh("twin4", "nv-fabricmanager --version").stdout.strip() == "Fabric Manager version is : 580.65.06"
    held = lab.ssh("twin4", "apt-mark showhold").stdout.split()
    assert "nvidia-fabricmanager" in held and "nvidia-fabricmanager-550" not in held and "nvidia-dkms-580-server" in held
    assert lab.ssh("twin4", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"

    back, decided = converge(lab, play, "twin4")
    assert back.returncode == 0, back.stdout[-6000:]
    assert decided["twin4"]["modules"] == "precompiled"
    dpkg = lab.ssh("twin4", "dpkg-query -W -f='${Package} ${db:Status-Abbrev}\\n' 'nvidia-*'").stdout
    assert "nvidia-dkms-580-server ii" not in dpkg and "nvidia-fabricmanager ii" not in dpkg
    assert lab.ssh("twin4", "modinfo -k 6.8.0-45-generic -F version nvidia").stdout.strip() == "550.90.07"


def test_node_without_any_nvidia_software(lab, play):
    """twin4 with every NVIDIA package purged and rebooted (no driver loaded): one run installs the
    driver, modules, fabric manager, asks for the reboot, and verifies green after it."""
    lab.ssh("twin4", "apt-mark unhold $(apt-mark showhold | grep -E '^(nvidia|linux-modules-nvidia)') >/dev/null; "
                     "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $(dpkg-query -W -f='${Package}\\n' "
                     "'nvidia-*' 'linux-modules-nvidia-*') >/dev/null; rm -f /etc/modules-load.d/nvidia-peermem.conf "
                     "/etc/apt/preferences.d/gpufleet-nvidia_driver.pref", timeout=300)
    before = lab.boot_id("twin4")
    lab.lab_sh("reboot", "twin4", timeout=300)
    lab.wait_new_boot("twin4", before, timeout=180)
    assert lab.facts("twin4")["twin4"]["nvidia"]["driver_version"] is None
    booted = lab.boot_id("twin4")
    proc, decided = converge(lab, play, "twin4")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert decided["twin4"]["requests"] == [{"role": "nvidia_driver", "reason": "NVIDIA driver 550.90.07 installed, none loaded"}]
    assert lab.boot_id("twin4") != booted
    assert lab.facts("twin4")["twin4"]["nvidia"]["driver_version"] == "550.90.07"
    assert lab.ssh("twin4", "systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"


def test_fabric_manager_that_will_not_start_is_reported_with_its_own_log(lab, play):
    """A fabric manager that fails at start: verify fails with the unit's own last log lines and does
    not retry it."""
    dropin = "/etc/systemd/system/nvidia-fabricmanager.service.d/gpufleet-test.conf"
    lab.ssh("twin4", "mkdir -p %s && printf '[Service]\\nExecStart=\\nExecStart=/bin/sh -c \"echo "
                     "fabric manager failed to initialize NVSwitch 0000:05:00.0 >&2; exit 1\"\\n' > %s && "
                     "systemctl daemon-reload && systemctl restart nvidia-fabricmanager; true" % (os.path.dirname(dropin), dropin))
    try:
        proc = play("""
- hosts: twin4
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: gpufleet.provision.nvidia_driver
        tasks_from: verify
""", extra=EXTRA)
        assert proc.returncode != 0
        assert "twin4: nvidia-fabricmanager did not start" in proc.stdout
        assert "fabric manager failed to initialize NVSwitch 0000:05:00.0" in proc.stdout
        assert lab.ssh("twin4", "systemctl is-active nvidia-fabricmanager", check=False).stdout.strip() != "active"
    finally:
        lab.ssh("twin4", "rm -f %s && systemctl daemon-reload && systemctl restart nvidia-fabricmanager" % dropin)
