"""A real slurmctld loads the generated topology.conf; `scontrol show topology` must match the inventory.

slurmctld runs in the foreground (-D) in a temporary folder with its own slurm.conf: port on
127.0.0.1 (a free one), state and logs in the folder, AuthType=auth/none (Debian's 22.05 ships it,
so no munge daemon is needed). Every wait is bounded and the daemon is always stopped.
Hostlists in scontrol's answer are expanded with `scontrol show hostnames` (Slurm's own parser).
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils import _fabric, _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._ibnetdiscover import parse, parse_file

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
import ibnetgen  # noqa: E402

SLURMCTLD = shutil.which("slurmctld") or ("/usr/sbin/slurmctld" if os.path.exists("/usr/sbin/slurmctld") else None)
SCONTROL = shutil.which("scontrol")
pytestmark = pytest.mark.skipif(not (SLURMCTLD and SCONTROL),
                                reason="slurmctld/scontrol absent: install Debian's slurm-wlm (make deps)")


def slurm_version():
    out = subprocess.run([SLURMCTLD, "-V"], stdout=subprocess.PIPE, universal_newlines=True, timeout=10).stdout
    m = re.search(r"(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurmctld(object):
    def __init__(self, folder, nodes, plugin, topology_text):
        self.folder = folder
        self.conf = os.path.join(folder, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        os.makedirs(os.path.join(folder, "state"))
        port = free_port()
        lines = [
            "ClusterName=fabtest",
            "SlurmctldHost=%s(127.0.0.1)" % socket.gethostname().split(".")[0],
            "SlurmctldPort=%d" % port,
            "SlurmdPort=%d" % free_port(),
            "AuthType=auth/none",
            "CredType=cred/none",
            "SlurmUser=%s" % ("root" if os.geteuid() == 0 else os.environ.get("USER", "root")),
            "StateSaveLocation=%s/state" % folder,
            "SlurmdSpoolDir=%s/spool" % folder,
            "SlurmctldPidFile=%s/slurmctld.pid" % folder,
            "SlurmctldLogFile=%s/slurmctld.log" % folder,
            "SelectType=select/cons_tres",
            "TopologyPlugin=%s" % plugin,
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "ReturnToService=2",
        ]
        lines += ["NodeName=%s NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN" % n for n in nodes]
        lines.append("PartitionName=all Nodes=ALL Default=YES State=UP")
        with open(self.conf, "w") as handle:
            handle.write("\n".join(lines) + "\n")
        with open(os.path.join(folder, "topology.conf"), "w") as handle:
            handle.write(topology_text)
        self.proc = None

    def scontrol(self, *args):
        return subprocess.run([SCONTROL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, env=self.env, timeout=20)

    def __enter__(self):
        self.log = open(os.path.join(self.folder, "stdout.log"), "w")
        self.proc = subprocess.Popen([SLURMCTLD, "-D", "-f", self.conf], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env, start_new_session=True)
        deadline = time.time() + 40
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            if "is UP" in self.scontrol("ping").stdout:
                return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        with open(os.path.join(self.folder, "slurmctld.log")) as handle:
            log = handle.read()[-3000:]
        pytest.fail("slurmctld did not come up within 40 s (exit %s); log tail:\n%s" % (self.proc.returncode, log))

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        return False

    def hostnames(self, expr):
        out = self.scontrol("show", "hostnames", expr)
        assert out.returncode == 0, out.stdout
        return out.stdout.split()

    def topology(self):
        out = self.scontrol("show", "topology")
        assert out.returncode == 0, out.stdout
        switches = {}
        for line in out.stdout.splitlines():
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            if "SwitchName" in fields:
                switches[fields["SwitchName"]] = fields
        return switches


def expected_tree(doc, statuses):
    keep = _fabric_outputs.selected_nodes(doc, statuses)
    blocks = dict((b["name"], sorted(h for h in b["nodes"] if h in keep)) for b in doc["blocks"])
    blocks = dict((k, v) for k, v in blocks.items() if v)
    sus = {}
    for b in doc["blocks"]:
        if b["name"] in blocks:
            sus.setdefault(b["su"], []).append(b["name"])
    return blocks, sus


def check_tree(ctl, doc, statuses):
    blocks, sus = expected_tree(doc, statuses)
    topo = ctl.topology()
    assert set(topo) == set(blocks) | set(sus) | {"fabric"}
    for name, nodes in blocks.items():
        assert topo[name]["Level"] == "0"
        assert sorted(ctl.hostnames(topo[name]["Nodes"])) == nodes
    for su, children in sus.items():
        assert topo[su]["Level"] == "1"
        assert sorted(ctl.hostnames(topo[su]["Switches"])) == sorted(children)
        assert sorted(ctl.hostnames(topo[su]["Nodes"])) == sorted(h for c in children for h in blocks[c])
    assert sorted(ctl.hostnames(topo["fabric"]["Switches"])) == sorted(sus)
    assert sorted(ctl.hostnames(topo["fabric"]["Nodes"])) == sorted(h for v in blocks.values() for h in v)
    return topo


def test_tree_from_the_real_capture(tmp_path, realdata):
    doc = _fabric.analyze([parse_file(os.path.join(realdata, "ibnetdiscover", "superpod-h100-example.out"))])
    statuses = ("green", "unknown")    # no gate reports for the capture: every node is unknown
    text = _fabric_outputs.topology_tree(doc, statuses)
    with Slurmctld(str(tmp_path), sorted(doc["nodes"]), "topology/tree", text) as ctl:
        topo = check_tree(ctl, doc, statuses)
    assert len(topo) == 10 + 8 + 1
    assert ctl.hostnames(topo["su8-b2"]["Nodes"]) == ["b08-p1-dgx-08-c01"]   # the swapped-cable host, alone


def test_tree_only_green_nodes(tmp_path):
    fab, info = ibnetgen.rail_fabric(sus=3, nodes_per_su=4, rails=4)
    fab.move(info["nic"][("gpu00006", 2)], info["leaf"][(2, 3)], 30)
    fab.move(info["nic"][("gpu00006", 3)], info["leaf"][(2, 2)], 30)
    nodes = dict(("gpu%05d" % i, {"report": {"status": "pass" if i not in (3, 10) else "fail"}}) for i in range(1, 13))
    doc = _fabric.analyze([parse(fab.text(), "seg.out")], nodes=nodes)
    text = _fabric_outputs.topology_tree(doc)
    with Slurmctld(str(tmp_path), sorted(doc["nodes"]), "topology/tree", text) as ctl:
        topo = check_tree(ctl, doc, ("green",))
    listed = ctl.hostnames(topo["fabric"]["Nodes"])
    assert "gpu00003" not in listed and "gpu00010" not in listed and len(listed) == 10


def test_block_plugin(tmp_path):
    if slurm_version() < (23, 11):
        pytest.skip("slurm %d.%02d has no topology/block (added in Slurm 23.11); topology-block.conf is tested "
                    "as text in the unit tests" % slurm_version())
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=4, rails=2)
    doc = _fabric.analyze([parse(fab.text(), "seg.out")], nodes=dict(
        ("gpu%05d" % i, {"report": {"status": "pass"}}) for i in range(1, 9)))
    text = _fabric_outputs.topology_block(doc, ("green",))
    with Slurmctld(str(tmp_path), sorted(doc["nodes"]), "topology/block", text) as ctl:
        out = ctl.scontrol("show", "topology").stdout
    for block in doc["blocks"]:
        line = [l for l in out.splitlines() if "BlockName=%s " % block["name"] in l][0]
        assert sorted(ctl.hostnames(re.search(r"Nodes=(\S+)", line).group(1))) == block["nodes"]
