"""The check ids the profile lookup reads without importing the checks (_gate/ids.py), and the
controller-side imports of the gate: each runs in a forked worker per node and task."""
import json
import os
import subprocess
import sys

from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate, ids

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpufleet.provision.plugins.lookup import profile
from ansible_collections.gpufleet.provision.plugins.action import validate_node
profile.load("hgx-h100", [])
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("ansible_collections.gpufleet", "ansible.module_utils.urls")))))
"""


def test_ids_are_the_registered_checks_in_report_order():
    assert ids.CHECK_IDS == tuple(c.id for c in gate.CHECKS)
    assert len(ids.CHECK_IDS) == len(set(ids.CHECK_IDS)) == 50


def test_lookup_and_action_load_neither_checks_nor_the_module():
    out = subprocess.run([sys.executable, "-c", PROBE, os.path.join(REPO, ".build")], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    loaded = json.loads(out)
    assert "ansible_collections.gpufleet.provision.plugins.module_utils._gate.ids" in loaded
    heavy = [m for m in loaded if m.endswith(("._gate.gate", "._gate.checks", ".modules.validate_node", "._bios", "._bios_resolve", "._redfish"))]
    assert heavy == [], heavy
    assert "ansible.module_utils.urls" not in loaded   # imported only to upload to a report URL
