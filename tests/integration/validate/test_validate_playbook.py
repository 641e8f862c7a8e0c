"""playbooks/validate.yml with ansible-playbook against several localhost fixture nodes.

Each node is a localhost alias (ansible_connection=local) whose gpufleet_hardware_root is its own
unpacked fixture tree. Two nodes replay recorded inputs (validate_inputs: what package_facts,
service_facts and the commands return on a healthy HGX node); the others collect on this machine
for real, where nvidia-smi, ofed_info and modinfo are absent (their checks have no data, no task fails).
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
GPUS = ["0000:18:00.0", "0000:29:00.0", "0000:3a:00.0", "0000:4b:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:bc:00.0", "0000:cd:00.0"]
GRUB = ('GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX="default_hugepagesz=1G hugepagesz=1G '
        'hugepages=128 intel_iommu=on iommu=pt transparent_hugepage=never numa_balancing=disable pci=realloc=off"\n')


def healthy_inputs():
    smi = "".join("GPU 0000%s\n    Fabric\n        State                             : Completed\n"
                  "        Status                            : Success\n" % g for g in GPUS)
    return {
        "packages": {
            "nvidia-driver-550-server": [{"name": "nvidia-driver-550-server", "version": "550.90.07-0ubuntu1", "source": "apt"}],
            "nvidia-fabricmanager-550": [{"name": "nvidia-fabricmanager-550", "version": "550.90.07-1", "source": "apt"}],
            "linux-image-6.8.0-45-generic": [{"name": "linux-image-6.8.0-45-generic", "version": "6.8.0-45.45", "source": "apt"}],
            "linux-headers-6.8.0-45-generic": [{"name": "linux-headers-6.8.0-45-generic", "version": "6.8.0-45.45", "source": "apt"}],
            "mlnx-ofed-kernel-utils": [{"name": "mlnx-ofed-kernel-utils", "version": "23.10.OFED.23.10.1.1.9.1-1", "source": "apt"}],
            "mlnx-ofed-kernel-dkms": [{"name": "mlnx-ofed-kernel-dkms", "version": "23.10.OFED.23.10.1.1.9.1-1", "source": "apt"}],
        },
        "services": {"nvidia-fabricmanager.service": {"name": "nvidia-fabricmanager.service", "state": "running",
                                                      "status": "enabled", "source": "systemd"}},
        "outputs": {
            "nvidia_smi_q": smi,
            "ofed_info": "MLNX_OFED_LINUX-23.10-1.1.9.0:\n",
            "modinfo_mlx5_core": "6.8.0-45-generic SMP preempt mod_unload modversions\n",
            "apt_mark_showhold": ("linux-headers-6.8.0-45-generic\nlinux-image-6.8.0-45-generic\nmlnx-ofed-kernel-dkms\n"
                                  "mlnx-ofed-kernel-utils\nnvidia-driver-550-server\nnvidia-fabricmanager-550\n"),
        },
    }


@pytest.fixture
def fleet(unpacked_tree, tmp_path):
    if not os.path.exists(PLAYBOOK):
        pytest.skip("ansible-playbook not in this virtualenv: %s" % PLAYBOOK)
    stopped = healthy_inputs()
    stopped["services"]["nvidia-fabricmanager.service"]["state"] = "failed"
    hosts = {
        "gpu001": {"gpufleet_hardware_root": unpacked_tree("hgx-h100-ref"), "validate_inputs": healthy_inputs()},
        "gpu003": {"gpufleet_hardware_root": unpacked_tree("hgx-h100-ref"), "validate_inputs": stopped},
        "gpu002": {"gpufleet_hardware_root": unpacked_tree("hgx-h100-dirty")},
        "vm001": {"gpufleet_hardware_root": unpacked_tree("cloud-guest")},
    }
    for name in ("gpu001", "gpu003"):
        # The captures have no GRUB file; these two stand for installed nodes, which do.
        grub = os.path.join(hosts[name]["gpufleet_hardware_root"], "etc", "default", "grub")
        os.makedirs(os.path.dirname(grub), exist_ok=True)
        with open(grub, "w") as handle:
            handle.write(GRUB)
    for host in hosts.values():
        host.update(ansible_connection="local", ansible_python_interpreter=sys.executable)
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    groups_file = tmp_path / "groups.json"
    wrapper = tmp_path / "site.yml"
    wrapper.write_text(yaml.safe_dump([
        {"ansible.builtin.import_playbook": os.path.join(REPO, "playbooks", "validate.yml")},
        {"name": "Record the groups", "hosts": "localhost", "gather_facts": False, "tasks": [
            {"name": "Write them", "ansible.builtin.copy": {
                "dest": str(groups_file), "mode": "0644",
                "content": "{{ {'ready': groups.gpufleet_ready | default([]) | sort, "
                           "'quarantine': groups.gpufleet_quarantine | default([]) | sort} | to_json }}"}}]},
    ]))
    return {"inventory": str(inventory), "playbook": str(wrapper), "groups": groups_file, "reports": tmp_path / "reports"}


def run(fleet, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_FORKS="4", ANSIBLE_RETRY_FILES_ENABLED="0")
    cmd = [PLAYBOOK, "-i", fleet["inventory"], fleet["playbook"], "-e", "validate_profile=hgx-h100",
           "-e", "validate_report_dir=%s" % fleet["reports"]] + list(extra)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=str(fleet["reports"].parent), check=False)
    return proc


def recap(stdout):
    return dict((m.group(1), dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))))
                for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", stdout, re.M))


def summaries(stdout):
    """The role's summary (validate_show_summary=true): a line per red node, the green ones in one
    "green: <hostlist>" line (single names here)."""
    lines = dict((m.group(1), m.group(0)) for m in re.finditer(r'"((?:gpu|vm)\d+) QUARANTINE \(profile [^"]*"', stdout))
    for m in re.finditer(r'"green: ([^"]+)"', stdout):
        lines.update((name, "%s READY" % name) for name in m.group(1).split(","))
    return lines


def run_summary(stdout):
    """The run summary's READY line and its QUARANTINED nodes (the playbook's own summary)."""
    ready = re.search(r'"READY {8}([^"]*)"', stdout).group(1)
    return {"ready": ready, "quarantined": sorted(re.findall(r'"(?:QUARANTINED {2}| {13})((?:gpu|vm)\d+): ', stdout))}


def test_fleet_run_reports_every_node_then_fail_on_red(fleet):
    proc = run(fleet, "-e", "validate_show_summary=true")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert '"4 node(s) evaluated: 1 green, 3 red"' in proc.stdout
    lines = summaries(proc.stdout)
    assert sorted(lines) == ["gpu001", "gpu002", "gpu003", "vm001"]
    assert lines["gpu001"] == "gpu001 READY"
    assert run_summary(proc.stdout) == {"ready": "gpu001", "quarantined": ["gpu002", "gpu003", "vm001"]}
    # the summary is once per play, not a task per node
    assert proc.stdout.count("TASK [gpufleet.provision.validate : Summary]") == 1
    assert len(re.findall(r"^ok: \[\w+\] => \{$", proc.stdout.split("TASK [gpufleet.provision.validate : Summary]")[1].split("PLAY [")[0], re.M)) == 1
    assert "gpu003 QUARANTINE (profile hgx-h100): nvidia.fabricmanager [" in lines["gpu003"]
    assert re.search(r"gpu002 QUARANTINE \(profile hgx-h100\): .*cpu\.smt.*numa\.layout", lines["gpu002"])
    assert json.loads(fleet["groups"].read_text()) == {"ready": ["gpu001"], "quarantine": ["gpu002", "gpu003", "vm001"]}

    for host in ("gpu001", "gpu002", "gpu003", "vm001"):
        data = json.loads((fleet["reports"] / (host + ".json")).read_text())
        assert data["report"]["node"] == host and data["facts"]["schema"] == 1
        suite = ET.fromstring((fleet["reports"] / (host + ".xml")).read_text()).find("testsuite")
        assert len(suite.findall("testcase")) == len(data["report"]["checks"])
        prom = (fleet["reports"] / (host + ".prom")).read_text()
        assert 'gpufleet_node_ready{node="%s",profile="hgx-h100"} %d' % (host, host == "gpu001") in prom
        assert re.search(r'^gpufleet_validate_report_timestamp_seconds\{node="%s"\} \d{10}$' % host, prom, re.M)
    ready = json.loads((fleet["reports"] / "gpu001.json").read_text())["report"]
    assert ready["status"] == "pass" and ready["failed"] == []
    # Collected for real on this machine: no fabric manager package or service, no ofed_info
    # command (its check has no data and names the cause; no task failed).
    dirty = dict((c["id"], c) for c in json.loads((fleet["reports"] / "gpu002.json").read_text())["report"]["checks"])
    assert dirty["nvidia.fabricmanager"]["status"] == "fail"
    assert "nvidia-fabricmanager not installed" in dirty["nvidia.fabricmanager"]["reason"]
    assert dirty["ofed.version"]["status"] == "fail"   # required by the profile
    assert dirty["ofed.version"]["reason"].startswith(
        "required by profile, but no data: ofed_info -s output not collected (ofed_info -s: command absent or not executable"), dirty["ofed.version"]["reason"]
    stats = recap(proc.stdout)
    assert all(stats[h]["failed"] == 0 for h in ("gpu001", "gpu002", "gpu003", "vm001")), stats
    assert all(stats[h]["changed"] == 1 for h in ("gpu001", "gpu002", "gpu003", "vm001")), stats   # the reports

    # the same verdicts again: no report rewritten, nothing changed (joining the group is not a change)
    proc = run(fleet)
    assert proc.returncode == 0, proc.stdout[-3000:]
    stats = recap(proc.stdout)
    assert all(stats[h]["changed"] == 0 for h in ("gpu001", "gpu002", "gpu003", "vm001")), stats
    assert json.loads(fleet["groups"].read_text()) == {"ready": ["gpu001"], "quarantine": ["gpu002", "gpu003", "vm001"]}

    proc = run(fleet, "-e", "validate_fail_on_red=true")
    assert proc.returncode == 2, proc.stdout[-3000:]
    stats = recap(proc.stdout)
    assert stats["gpu001"]["failed"] == 0
    assert all(stats[h]["failed"] == 1 for h in ("gpu002", "gpu003", "vm001")), stats
    # the failure names the red checks with their reasons; the run summary still has every node
    assert re.search(r'fatal: \[gpu003\]: FAILED! => .*"msg": "gpu003: nvidia.fabricmanager fail: ', proc.stdout), proc.stdout[-3000:]
    assert run_summary(proc.stdout)["ready"] == "gpu001"


def test_check_mode_evaluates_the_same_and_writes_nothing(fleet):
    proc = run(fleet, "--check", "--limit", "gpu001,gpu002", "-e", "validate_show_summary=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    lines = summaries(proc.stdout)
    assert lines["gpu001"] == "gpu001 READY"
    assert re.search(r"gpu002 QUARANTINE \(profile hgx-h100\): .*cpu\.smt.*numa\.layout", lines["gpu002"])
    assert not fleet["reports"].exists()


def test_enabled_probe_on_a_node_without_its_tools_fails_its_check_with_the_cause(fleet, tmp_path):
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        profile = yaml.safe_load(handle)
    profile["probes"]["nccl"]["enabled"] = True
    path = tmp_path / "probe.yml"
    path.write_text(yaml.safe_dump(profile))
    proc = run(fleet, "-e", "validate_profile=%s" % path, "--limit", "gpu001", "-e", "validate_show_summary=true")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "gpu001 QUARANTINE (profile hgx-h100): transport.nccl, nccl.allreduce_bandwidth [" in summaries(proc.stdout)["gpu001"]
    # The shipped probe script ran on this machine, which has no nccl-tests: no data, naming why.
    assert ("transport.nccl FAIL: required by profile, but no data: NCCL_DEBUG=INFO test run output not collected "
            "(gpufleet_probe.py nccl: rc=3, no data: nccl-tests (all_reduce_perf) is not on this node") in proc.stdout


def test_bad_profile_stops_with_the_key_named(fleet, tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: bad\nkernel:\n  cmdlne: {}\n")
    proc = run(fleet, "-e", "validate_profile=%s" % bad, "--limit", "gpu001")
    assert proc.returncode == 2
    assert "profile key kernel.cmdlne: unknown (known: cmdline, grub_sources, packages, release, version)" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_role_variables_checked_against_the_spec_in_the_gate_call_not_a_task_per_node(fleet):
    """validate.yml checks the role's argument spec in validate_node's own call: a variable of the
    wrong type fails every node before its module runs (no report written), naming the variable,
    and no validation task runs per node."""
    proc = run(fleet, "-e", "validate_command_timeout=soon", "-e", '{"validate_show_details": "perhaps"}',
               "--limit", "gpu001,gpu003")
    assert proc.returncode == 2
    assert "Validation of arguments failed" in proc.stdout
    assert "argument 'validate_command_timeout' is of type str and we were unable to convert to int" in proc.stdout
    assert "argument 'validate_show_details' is of type str and we were unable to convert to bool" in proc.stdout
    assert recap(proc.stdout)["gpu001"]["failed"] == 1 and recap(proc.stdout)["gpu003"]["failed"] == 1
    assert not fleet["reports"].exists() or not os.listdir(str(fleet["reports"]))
    good = run(fleet, "--limit", "gpu001")
    assert good.returncode == 0, good.stdout[-3000:]
    assert "Validating arguments against arg spec" not in good.stdout
    assert recap(good.stdout)["gpu001"]["failed"] == 0
