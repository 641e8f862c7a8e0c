"""The bios role through ansible-playbook against the lab BMC, with vaulted credentials and -vvv:
applies, the role asks for the reboot in gpufleet_reboot_requests (the play resets through the BMC),
verify passes, a second run changes nothing, and the password appears in no byte of output and
no file the runs wrote."""
import os
import shutil
import subprocess
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.path.join(REPO, ".build")

ANSIBLE_PLAYBOOK = shutil.which("ansible-playbook", path=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""))
ANSIBLE_VAULT = shutil.which("ansible-vault", path=os.path.join(REPO, ".venv", "bin") + os.pathsep + os.environ.get("PATH", ""))

PLAYBOOK = textwrap.dedent("""\
    - name: BIOS through Redfish, then the single reboot, then verify
      hosts: nodes
      gather_facts: false
      roles:
        - role: gpufleet.provision.bios
      post_tasks:
        # Stand-in for the reboot role of provision.yml: the role only records its request.
        - name: Reboot through the BMC
          when: gpufleet_reboot_requests | default([]) | selectattr('role', 'eq', 'bios') | list | length > 0
          gpufleet.provision.redfish_power:
            baseurl: "https://{{ gpufleet_bmc_address }}"
            username: "{{ gpufleet_bmc_username }}"
            password: "{{ gpufleet_bmc_password }}"
            ca_path: "{{ gpufleet_bmc_ca_path }}"
            poll_interval: 0.2
            wait_timeout: 60
          delegate_to: localhost
        - name: Verify after the reboot
          ansible.builtin.include_role:
            name: gpufleet.provision.bios
            tasks_from: verify
        - name: Show the role's facts
          ansible.builtin.debug:
            msg: "reboot_required={{ bios_reboot_required }} vendor={{ bios_vendor_profile }} shared={{ gpufleet_reboot_requests | default([]) | length > 0 }}"
    """)


@pytest.fixture
def role_run(tmp_path, bmc, bmc_login):
    if not (ANSIBLE_PLAYBOOK and ANSIBLE_VAULT):
        pytest.skip("ansible-playbook/ansible-vault not found (pip install -r requirements-test.txt)")
    unit = bmc("dell", extra=["--reset-seconds", "1"],
               initial={"SubNumaCluster": "Disabled", "LogicalProc": "Disabled", "ProcVirtualization": "Disabled"})
    work = tmp_path / "run"
    (work / "group_vars" / "nodes").mkdir(parents=True)
    (work / "tmp").mkdir()
    (work / "vault-pass").write_text("vault-key-for-the-test\n")
    secrets = work / "group_vars" / "nodes" / "vault.yml"
    secrets.write_text("gpufleet_bmc_username: %s\ngpufleet_bmc_password: %s\n" % bmc_login)
    subprocess.run([ANSIBLE_VAULT, "encrypt", "--vault-password-file", str(work / "vault-pass"), str(secrets)],
                   check=True, capture_output=True, timeout=60)
    (work / "group_vars" / "nodes" / "main.yml").write_text(textwrap.dedent("""\
        gpufleet_bmc_address: 127.0.0.1:%d
        gpufleet_bmc_ca_path: %s
        bios_settings: {snc: snc4, hyperthreading: true, vtd: true}
        """ % (unit.port, unit.ca)))
    (work / "hosts.yml").write_text("nodes:\n  hosts:\n    twin1:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n"
                                    % os.path.join(REPO, ".venv", "bin", "python"))
    (work / "site.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=BUILD, ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_LOCAL_TEMP=str(work / "tmp"), ANSIBLE_REMOTE_TEMP=str(work / "tmp"),
               ANSIBLE_LOG_PATH=str(work / "ansible.log"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_HOST_KEY_CHECKING="false", ANSIBLE_RETRY_FILES_ENABLED="false")

    def _run(*extra):
        proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(work / "hosts.yml"), "--vault-password-file",
                               str(work / "vault-pass"), str(work / "site.yml")] + list(extra),
                              cwd=str(work), env=env, capture_output=True, timeout=300)
        return proc
    return unit, work, _run


def _recap(stdout):
    line = [ln for ln in stdout.splitlines() if ln.startswith("twin1") and "ok=" in ln][-1]
    return dict(part.split("=") for part in line.split(":", 1)[1].split())


def test_role_applies_reboots_verifies_idempotent_and_never_leaks(role_run, tmp_path, bmc_login):
    unit, work, run = role_run
    first = run("-vvv", "--diff")
    out1 = first.stdout.decode(errors="replace")
    assert first.returncode == 0, out1[-4000:] + first.stderr.decode(errors="replace")[-2000:]
    assert "changed: [twin1 -> localhost]" in out1.split("TASK [Reboot through the BMC]")[1].split("TASK [")[0]
    assert "--- before" in out1 and "+++ after" in out1 and '+    "SubNumaCluster": "4-Way"' in out1
    assert int(_recap(out1)["changed"]) >= 2  # the BIOS write and the reboot
    assert "reboot_required=True vendor=dell shared=True" in out1
    settings = unit.state()["settings"]
    assert (settings["snc"], settings["hyperthreading"], settings["vtd"]) == ("snc4", True, True)

    second = run("-vvv")
    out2 = second.stdout.decode(errors="replace")
    assert second.returncode == 0, out2[-4000:]
    assert _recap(out2)["changed"] == "0"
    assert "skipping: [twin1]" in out2.split("TASK [Reboot through the BMC]")[1].split("TASK [")[0]
    assert "reboot_required=False" in out2

    # Every byte of output, and every file under the test's folder (inventory, vault, logs, Ansible
    # temp files, the BMC's state and log), must be free of the password.
    needle = bmc_login[1].encode()
    for proc in (first, second):
        assert needle not in proc.stdout and needle not in proc.stderr
    checked = 0
    for root, _dirs, files in os.walk(str(tmp_path)):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                assert needle not in handle.read(), os.path.join(root, name)
            checked += 1
    assert checked >= 6 and os.path.getsize(str(work / "ansible.log")) > 1000


def test_role_check_mode_changes_nothing(role_run):
    unit, _work, run = role_run
    before = unit.state()
    proc = run("--check")
    out = proc.stdout.decode(errors="replace")
    # verify in check mode reads the BMC: BIOS still dirty, so it must fail and say why.
    assert proc.returncode != 0 and "expected 'Enabled', actual 'Disabled'" in out, out[-3000:]
    assert unit.state() == before
