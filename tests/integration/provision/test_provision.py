"""provision.yml on the lab (issue 9): check mode changes nothing, bad input fails in preflight,
twin1's OS layer converges in the same single reboot as its BIOS (also after a run that failed
half-way), a second run changes nothing and reboots nothing, a run without fabric data succeeds.

One lab for the whole module, tests in file order: the first ones need fresh dirty twins.
"""
import json
import os
import re

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

PROVISION_PLAY = "PLAY [Validation gate]"
TWIN1_CHECKS = ("kernel.version", "kernel.cmdline", "kernel.grub_sources", "memory.hugepages", "memory.thp",
                "memory.numa_balancing", "numa.layout", "cpu.smt")


def _provisioning(proc):
    return proc.stdout.split(PROVISION_PLAY)[0]


def _recap(proc):
    """{host: {ok, changed, failed, ...}} of the last PLAY RECAP."""
    out = {}
    for line in proc.stdout.split("PLAY RECAP")[-1].splitlines():
        match = re.match(r"^(\S+)\s*:\s*(.*)$", line.strip())
        if match:
            out[match.group(1)] = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2)))
    return out


def _converged(text):
    """The hosts of the play's "converged: <hostlist> (n): ..." line, expanded (twin[1-2,4])."""
    match = re.search(r"converged: (\S+) \(\d+\)", text)
    if not match:
        return []
    hosts = []
    for part in re.findall(r"[^,\[\]]+\[[^\]]*\]|[^,]+", match.group(1)):
        m = re.match(r"^(.*)\[(.*)\]$", part)
        if not m:
            hosts.append(part)
            continue
        for item in m.group(2).split(","):
            lo, _sep, hi = item.partition("-")
            hosts.extend("%s%s" % (m.group(1), n) for n in range(int(lo), int(hi or lo) + 1))
    return sorted(hosts)


def _report(out, host):
    with open(os.path.join(out, "gate", host + ".json")) as handle:
        return dict((c["id"], c) for c in json.load(handle)["report"]["checks"])


def _profile(**kernel):
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        data = yaml.safe_load(handle)
    data.update(name="hgx-h100-lab", os={"id": "debian", "version_id": "12"})
    data["kernel"].update(kernel)
    return data


def test_check_mode_on_fresh_dirty_twins_predicts_and_changes_nothing(lab):
    before = dict((host, lab.snapshot(host)) for host in lab.hosts)
    out = os.path.join(lab.base, "check-out")
    proc = lab.provision("--check", "--diff", extra={"gpufleet_lab_output": out})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    after = dict((host, lab.snapshot(host)) for host in lab.hosts)
    for host in lab.hosts:
        for key in before[host]:
            assert after[host][key] == before[host][key], (host, key)
    text = _provisioning(proc)
    # every change it would make, with the reasons of the one reboot
    assert re.search(r"reboot: twin1 would reboot \((bmc|inband)\): bios: BIOS settings pending", text), text[-4000:]
    assert "kernel: GRUB will boot kernel 6.8.0-45-generic, running 6.8.0-40-generic" in text
    assert "kernel_cmdline: GRUB will boot intel_iommu=on iommu=pt transparent_hugepage=never" in text
    assert "+GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX\"" in text            # the drop-in's duplicate goes
    assert "kernel.numa_balancing: 1 -> 0" in text
    # twin4 (no fault at boot time): nvidia-peermem, not loaded, would be loaded live (issue 26): no reboot
    assert "reboot: twin4 needs no reboot" in text, [line for line in text.splitlines() if "reboot: twin4 " in line]
    # readable: no report JSON in the diff of the provisioning play
    assert '"prevents"' not in text and len(text.splitlines()) < 3000, len(text.splitlines())


def test_kernel_the_repositories_lack_fails_in_preflight_before_anything_changes(lab):
    before = lab.snapshot("twin4")
    proc = lab.provision(limit="twin4", extra={"gpufleet_profile": _profile(version="6.8.0-45.99~22.04.1")})
    assert proc.returncode != 0
    text = _provisioning(proc)
    assert "Resolve the kernel packages" in text and "linux-image-6.8.0-45-generic" in text and "6.8.0-45.99~22.04.1" in text
    assert "6.8.0-45.45~22.04.1" in text                                  # what the repository offers
    assert "TASK [gpufleet.provision.bios" not in text                     # nothing after the preflight ran
    assert lab.snapshot("twin4") == before


def test_clean_twin_with_only_run_time_drift_is_never_rebooted(lab):
    """Issue 26: twin4's boot-time state (BIOS, kernel, command line, NIC firmware configuration) is
    right; nvidia-peermem was never configured, so it is not loaded, and its holds, pins and
    modules-load.d entry are provisioning's own. provision.yml makes it all true at run time (peermem
    with modprobe, read back) and reboots nothing; the second run changes nothing and reboots nothing."""
    assert lab.ssh("twin4", "test -d /run/twin/sys/module/nvidia_peermem && echo loaded || echo absent").stdout.strip() == "absent"
    boot = lab.boot_id("twin4")
    out = os.path.join(lab.base, "twin4-live-out")
    first = lab.provision(limit="twin4", extra={"gpufleet_lab_output": out})
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    text = _provisioning(first)
    assert "reboot: twin4 needs no reboot" in text, [line for line in text.splitlines() if "reboot: twin4" in line]
    assert lab.boot_id("twin4") == boot
    block = text.split("TASK [gpufleet.provision.nvidia_driver : Compare the loaded driver", 1)[1].split("\nTASK [", 1)[0]
    assert "changed: [twin4]" in block, block[:2000]                      # loaded live, by this run
    assert lab.ssh("twin4", "cat /run/twin/sys/module/nvidia_peermem/version").stdout.strip() == "550.90.07"
    checks = _report(out, "twin4")
    assert checks["nvidia.peermem"]["status"] == "pass"
    assert not [c for c in checks.values() if c["status"] == "fail"], [(c["id"], c["reason"]) for c in checks.values()
                                                                     if c["status"] == "fail"]
    second = lab.provision(limit="twin4", extra={"gpufleet_lab_output": out})
    assert second.returncode == 0, second.stdout[-4000:]
    again = _provisioning(second)
    assert "changed: [" not in again, again[-4000:]
    # green and stamped by the first run: the second is its gate alone (issue 26 part 3)
    assert _converged(again) == ["twin4"], [line for line in again.splitlines() if "converged" in line or "wash:" in line]
    assert "TASK [gpufleet.provision.kernel :" not in again                  # nothing washed
    gate_play = second.stdout.split(PROVISION_PLAY, 1)[1].split("PLAY [", 1)[0]
    assert "skipping: no hosts matched" in gate_play, gate_play[:2000]     # its gate was the first call
    assert lab.boot_id("twin4") == boot
    print("\nprovision.yml on twin4 (run-time drift only): first %.1f s, second (converged) %.1f s, no reboot"
          % (first.seconds, second.seconds))


def test_drift_on_a_converged_twin_is_washed_not_skipped(lab):
    """The converged stamp never hides drift: an edited file provisioning manages, run-time drift the
    gate sees, packages that lost their holds: each sends twin4 through the washing machine, which
    puts it right without a reboot and stamps it; then the next run is converged again."""
    out = os.path.join(lab.base, "twin4-drift-out")
    lab.ssh("twin4", "echo 'vm.nr_hugepages = 0' >>/etc/sysctl.d/90-gpufleet-tuning.conf")
    edited = lab.provision(limit="twin4", extra={"gpufleet_lab_output": out})
    assert edited.returncode == 0, edited.stdout[-4000:]
    text = _provisioning(edited)
    assert "wash: twin4: files provisioning manages changed since the last green run" in text, text[:3000]
    assert "vm.nr_hugepages = 0" not in lab.ssh("twin4", "cat /etc/sysctl.d/90-gpufleet-tuning.conf").stdout
    lab.ssh("twin4", "echo '[always] madvise never' >/run/twin/sys/kernel/mm/transparent_hugepage/enabled")
    drifted = lab.provision(limit="twin4", extra={"gpufleet_lab_output": out})
    assert drifted.returncode == 0, drifted.stdout[-4000:]
    text = _provisioning(drifted)
    assert "wash: twin4: the gate is red: memory.thp" in text, text[:3000]
    assert lab.facts("twin4")["twin4"]["kernel"]["thp"]["enabled"] == "never"
    assert _report(out, "twin4")["memory.thp"]["status"] == "pass"
    # a node whose driver is loaded and right but whose packages lost their holds (issue 26 part 2):
    # the package database moved, so it is washed; the holds come back, and nothing reboots
    boot = lab.boot_id("twin4")
    lab.ssh("twin4", "apt-mark unhold nvidia-driver-550-server nvidia-fabricmanager-550 >/dev/null")
    unheld = lab.provision(limit="twin4", extra={"gpufleet_lab_output": out})
    assert unheld.returncode == 0, unheld.stdout[-4000:]
    text = _provisioning(unheld)
    assert "wash: twin4: files provisioning manages changed since the last green run" in text, text[:3000]
    assert "reboot: twin4 needs no reboot" in text and lab.boot_id("twin4") == boot
    holds = lab.ssh("twin4", "apt-mark showhold").stdout.split()
    assert "nvidia-driver-550-server" in holds and "nvidia-fabricmanager-550" in holds, holds
    calm = lab.provision(limit="twin4", extra={"gpufleet_lab_output": out})
    assert calm.returncode == 0 and _converged(_provisioning(calm)) == ["twin4"], calm.stdout[-3000:]


def test_twin1_failed_half_way_then_converges_in_one_reboot_with_its_bios(lab):
    out = os.path.join(lab.base, "twin1-out")
    boot0 = lab.boot_id("twin1")
    # A step fails after every role changed things: the drain check says "busy", nothing reboots.
    failed = lab.provision(limit="twin1", extra={"gpufleet_lab_output": out, "reboot_drain_command": "sh -c 'echo 3 jobs running; exit 1'"})
    assert failed.returncode != 0
    assert "the drain check `sh -c 'echo 3 jobs running; exit 1'` exited 1 (not idle): 3 jobs running" in failed.stdout
    assert lab.boot_id("twin1") == boot0
    # Fixed, run again: the pending changes are still pending (from state), so one reboot does it all.
    done = lab.provision(limit="twin1", extra={"gpufleet_lab_output": out})
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    text = _provisioning(done)
    assert text.count("reboot: twin1 reboots (") == 1, text[-3000:]
    for role in ("bios", "kernel", "kernel_cmdline"):
        assert re.search(r"reboot: twin1 reboots \(\w+\): .*%s: " % role, text), (role, text[-3000:])
    boot1 = lab.boot_id("twin1")
    assert boot1 not in (boot0, None)
    report = _report(out, "twin1")
    for check_id in TWIN1_CHECKS:
        assert report[check_id]["status"] == "pass", (check_id, report[check_id])
    facts = lab.facts("twin1")["twin1"]
    assert facts["kernel"]["release"] == "6.8.0-45-generic" and facts["kernel"]["hugepages"]["1048576"] == 128
    assert facts["kernel"]["thp"]["enabled"] == "never" and facts["kernel"]["numa_balancing"] == 0
    holds = lab.ssh("twin1", "apt-mark showhold").stdout.split()
    assert "linux-image-6.8.0-45-generic" in holds and "linux-headers-6.8.0-45-generic" in holds
    assert "linux-image-6.8.0-40-generic" in lab.ssh("twin1", "dpkg-query -W -f='${Package}\\n' 'linux-image-*'").stdout  # old kernel stays
    grub = lab.ssh("twin1", "cat /etc/default/grub /etc/default/grub.d/*.cfg").stdout
    assert grub.count("hugepages=128") == 1 and "hugepages=32" not in grub and "hugepages=64" not in grub


def test_every_twin_then_a_second_run_changes_nothing_and_reboots_nothing(lab):
    out = os.path.join(lab.base, "all-out")
    first = lab.provision(extra={"gpufleet_lab_output": out})
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    reports = dict((host, _report(out, host)) for host in lab.hosts)
    for host, checks in reports.items():
        for check_id in ("kernel.cmdline", "kernel.grub_sources", "memory.hugepages", "memory.thp", "memory.numa_balancing",
                         "cpu.governor", "kernel.version", "numa.layout", "cpu.smt", "iommu.enabled"):
            assert checks[check_id]["status"] == "pass", (host, check_id, checks[check_id]["reason"])
    boots = dict((host, lab.boot_id(host)) for host in lab.hosts)
    second = lab.provision(extra={"gpufleet_lab_output": out})
    assert second.returncode == 0, second.stdout[-4000:]
    text = _provisioning(second)
    assert "changed: [" not in text, text[-4000:]
    # the green twins are converged (their gate only); a red one (twin3: an IB port down, which no
    # role can fix) has no stamp and goes through the washing machine again, changing nothing
    converged = _converged(text)
    assert "twin4" in converged, text[:3000]
    for host in set(lab.hosts) - set(converged):
        assert "wash: %s: no stamp of a green run" % host in text, (host, text[:3000])
        assert "reboot: %s needs no reboot" % host in text
    assert dict((host, lab.boot_id(host)) for host in lab.hosts) == boots
    print("\nprovision.yml on 4 twins: first %.1f s, second (converged) %.1f s" % (first.seconds, second.seconds))


def test_inventory_without_fabric_data_says_so_and_succeeds(lab):
    out = os.path.join(lab.base, "nofabric-out")
    proc = lab.provision(extra={"gpufleet_lab_output": out, "fabric_capture_hosts": "no_such_group",
                                "provision_hosts": "twin4", "validate_hosts": "twin4"})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "fabric: no fabric data" in proc.stdout
