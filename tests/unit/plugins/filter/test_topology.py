"""The topology filters, directly and through a real Jinja2 template run by ansible-playbook."""
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.provision.plugins.filter import topology

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def test_cpulist_and_cpus_round_trip():
    assert topology.cpulist([104, 0, 1, 2, 105, 7]) == "0-2,7,104-105"
    assert topology.cpus("0-2,104") == [0, 1, 2, 104]
    with pytest.raises(AnsibleFilterError, match="not a CPU list"):
        topology.cpus("0-x")
    with pytest.raises(AnsibleFilterError, match="expected a list of CPU numbers"):
        topology.cpulist(["a"])


def test_sibling_order_cores_first_and_pairs():
    cores_first = [[1, 105], [0, 104], [2, 106]]
    assert topology.sibling_order(cores_first) == [0, 104, 1, 105, 2, 106]
    assert topology.sibling_order(cores_first, only=[0, 1, 104, 105]) == [0, 104, 1, 105]
    assert topology.sibling_order([[0, 1], [2, 3]]) == [0, 1, 2, 3]          # a guest numbering pairs
    assert topology.sibling_order([[0], [1]]) == [0, 1]                       # HT off
    with pytest.raises(AnsibleFilterError):
        topology.sibling_order("0,104")


def test_hostlist():
    assert topology.hostlist(["gpu001", "gpu002", "gpu004", "login"]) == "gpu[001-002,004],login"
    with pytest.raises(AnsibleFilterError):
        topology.hostlist("gpu001")


def test_filters_in_a_playbook_on_reference_facts(unpacked_tree, tmp_path):
    root = unpacked_tree("hgx-h100-ref")
    book = tmp_path / "play.yml"
    book.write_text("""
- hosts: localhost
  gather_facts: false
  tasks:
    - gpufleet.provision.node_facts:
        root: "%s"
    - ansible.builtin.assert:
        that:
          - (ansible_facts.gpufleet.numa.nodes | first).cpus | gpufleet.provision.cpulist == '0-12,104-116'
          - (ansible_facts.gpufleet.cpu.siblings | gpufleet.provision.sibling_order((ansible_facts.gpufleet.numa.nodes | first).cpus))[:4] == [0, 104, 1, 105]
          - "['gpu001', 'gpu002'] | gpufleet.provision.hostlist == 'gpu[001-002]'"
""" % root)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-c", "local", "-i", "localhost,", str(book)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
