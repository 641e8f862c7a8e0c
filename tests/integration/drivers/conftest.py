"""The drivers tests run on the lab tests' private lab (tests/integration/lab/conftest.py: ports
shifted by GPUFLEET_LABTEST_SHIFT, containers prefixed GPUFLEET_LABTEST_PREFIX). The fixture is the
same one, imported; run this folder alone (pytest tests/integration/drivers) to get one lab."""
import importlib.util
import json
import os
import subprocess
import time

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "gpufleet_lab_conftest", os.path.join(os.path.dirname(__file__), "..", "lab", "conftest.py"))
_LAB = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_LAB)
# Its own lab beside the other folders' (one pytest run brings several up): own ports and names.
_LAB.PORT_SHIFT += 20
_LAB.PREFIX += "drv-"
lab = _LAB.lab  # noqa: F401  (the session fixture)


@pytest.fixture
def module(lab):
    """module(host, name, args, check=False, diff=False) -> the module's result (a failed one too)."""
    def _run(host, name, args, check=False, diff=False):
        out = os.path.join(lab.base, "result-%d.json" % time.monotonic_ns())
        play = """
- hosts: %s
  gather_facts: false
  tasks:
    - name: Run the module
      %s: %s
      register: result
      ignore_errors: true
    - name: Keep the result
      ansible.builtin.copy:
        content: "{{ result | to_json }}"
        dest: %s
        mode: "0644"
      delegate_to: localhost
      check_mode: false
""" % (host, name, json.dumps(args), out)
        proc = _playbook(lab, play, (["--check"] if check else []) + (["--diff"] if diff else []))
        assert os.path.exists(out), "no result:\n%s\n%s" % (proc.stdout[-3000:], proc.stderr[-2000:])
        with open(out) as handle:
            return json.load(handle)
    return _run


@pytest.fixture
def play(lab):
    """play(text, *args, extra=None) -> the finished ansible-playbook process (args: --check, --diff...)."""
    return lambda text, *args, extra=None: _playbook(lab, text, list(args) + (["-e", json.dumps(extra)] if extra else []))


def _playbook(lab, text, args, timeout=900):
    path = os.path.join(lab.base, "play-%d.yml" % time.monotonic_ns())
    with open(path, "w") as handle:
        handle.write(text)
    cmd = [os.path.join(_LAB.VENV_BIN, "ansible-playbook"), "-i", lab.inventory_dir, path] + args
    return subprocess.run(cmd, env=lab.env, capture_output=True, text=True, timeout=timeout, cwd=lab.base)


@pytest.fixture
def node_state(lab):
    """node_state(host): what a check-mode run must leave alone: installed packages, holds, apt preferences."""
    return lambda host: _node_state(lab, host)


def _node_state(lab, host):
    return {
        "dpkg": lab.ssh(host, "dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' | sort").stdout,
        "holds": lab.ssh(host, "apt-mark showhold | sort").stdout,
        "prefs": lab.ssh(host, "cat /etc/apt/preferences.d/*.pref 2>/dev/null; true").stdout,
    }
