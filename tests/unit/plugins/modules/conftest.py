"""Run a module of this collection through Ansible itself (ad hoc, local), as an operator would."""
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")


@pytest.fixture
def adhoc():
    """adhoc("node_facts", "root=/x" or {...}, check=False) -> (rc, result dict with _stderr)."""
    if not os.path.exists(ANSIBLE):
        pytest.skip("ansible CLI not in this virtualenv: %s" % ANSIBLE)

    def _run(module, args, check=False):
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"),
                   ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
                   ANSIBLE_PYTHON_INTERPRETER=sys.executable)
        text = args if isinstance(args, str) else json.dumps(args)
        cmd = [ANSIBLE, "localhost", "-m", "gpufleet.provision." + module, "-a", text] + (["--check"] if check else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
        # minimal callback: "localhost | SUCCESS => {...}"; warnings go to stderr
        dummy, sep, body = proc.stdout.partition(" => ")
        assert sep, proc.stdout + proc.stderr
        result = json.loads(body)
        result["_stderr"] = proc.stderr
        return proc.returncode, result
    return _run
