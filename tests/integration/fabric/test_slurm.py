"""A real slurmctld loads the generated topology.conf; `scontrol show topology` must match the inventory.

slurmctld runs in the foreground (-D) in a temporary folder with its own slurm.conf: port on
127.0.0.1 (a free one), state and logs in the folder, AuthType=auth/none (Debian ships it, so no
munge daemon is needed). Every wait is bounded and the daemon is always stopped.
Hostlists in scontrol's answer are expanded with `scontrol show hostnames` (Slurm's own parser).

topology/tree runs on the host's Slurm (Debian 12: 22.05). topology/block needs Slurm 23.11 or
later: the session fixture ``trixie_slurm`` debootstraps Debian 13 (trixie, Slurm 24.11) with
slurmctld and scontrol once into a cache folder outside the checkout ($GPUFLEET_TEST_CACHE, else
$XDG_CACHE_HOME/gpufleet-test, else /var/cache/gpufleet-test; about 80 s and 290 MB cold, reused
after), and runs both inside it with bubblewrap (host network, the test folder bound at its path).
"""
import fcntl
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs as _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse, parse_file

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
import ibnetgen  # noqa: E402

SLURMCTLD = shutil.which("slurmctld") or ("/usr/sbin/slurmctld" if os.path.exists("/usr/sbin/slurmctld") else None)
SCONTROL = shutil.which("scontrol")
host_slurm = pytest.mark.skipif(not (SLURMCTLD and SCONTROL),
                                reason="slurmctld/scontrol absent: install Debian's slurm-wlm (make deps)")

TRIXIE_PACKAGES = "slurmctld,slurm-client"
MIRROR = os.environ.get("GPUFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")


def cache_dir():
    if os.environ.get("GPUFLEET_TEST_CACHE"):
        return os.environ["GPUFLEET_TEST_CACHE"]
    if os.environ.get("XDG_CACHE_HOME"):
        return os.path.join(os.environ["XDG_CACHE_HOME"], "gpufleet-test")
    return "/var/cache/gpufleet-test"


class Runtime(object):
    """How to start Slurm's binaries: directly (the host's Slurm) or inside a root file system with bwrap."""

    def __init__(self, root=None):
        self.root = root

    def argv(self, binary, folder):
        if self.root is None:
            return [SLURMCTLD if binary == "slurmctld" else SCONTROL]
        path = "/usr/sbin/slurmctld" if binary == "slurmctld" else "/usr/bin/scontrol"
        return ["bwrap", "--bind", self.root, "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                "--ro-bind", "/etc/hosts", "/etc/hosts", "--bind", folder, folder, "--die-with-parent", path]

    def version(self):
        out = subprocess.run(self.argv("slurmctld", "/tmp") + ["-V"], stdout=subprocess.PIPE, universal_newlines=True,
                             timeout=30).stdout
        m = re.search(r"(\d+)\.(\d+)", out)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@pytest.fixture(scope="session")
def trixie_slurm():
    """A Debian trixie root with slurmctld and scontrol (Slurm 24.11), built once, cached, reused."""
    root = os.path.join(cache_dir(), "slurm-trixie")
    marker = os.path.join(root, ".gpufleet-complete")
    key = "trixie %s %s\n" % (TRIXIE_PACKAGES, MIRROR)
    if not (os.path.exists(marker) and open(marker).read() == key):
        missing = [t for t in ("debootstrap", "bwrap") if not shutil.which(t)]
        if missing or os.geteuid() != 0:
            pytest.skip("topology/block needs Slurm >= 23.11: building a trixie root needs root and %s"
                        % (", ".join(missing) or "debootstrap, bwrap"))
        os.makedirs(cache_dir(), exist_ok=True)
        with open(os.path.join(cache_dir(), "slurm-trixie.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)     # another session may be building it right now
            if not (os.path.exists(marker) and open(marker).read() == key):
                partial = root + ".partial"
                shutil.rmtree(partial, ignore_errors=True)
                shutil.rmtree(root, ignore_errors=True)
                proc = subprocess.run(["debootstrap", "--variant=minbase", "--include=" + TRIXIE_PACKAGES, "trixie",
                                       partial, MIRROR], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True, timeout=1800)
                if proc.returncode != 0:
                    pytest.fail("debootstrap trixie failed (exit %d): %s" % (proc.returncode, proc.stdout[-3000:]))
                os.rename(partial, root)
                with open(marker, "w") as handle:
                    handle.write(key)
    runtime = Runtime(root)
    assert runtime.version() >= (23, 11), runtime.version()
    return runtime


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Slurmctld(object):
    def __init__(self, folder, nodes, plugin, topology_text, runtime=None):
        self.runtime = runtime or Runtime()
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
        return subprocess.run(self.runtime.argv("scontrol", self.folder) + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, env=self.env, timeout=20)

    def __enter__(self):
        self.log = open(os.path.join(self.folder, "stdout.log"), "w")
        self.proc = subprocess.Popen(self.runtime.argv("slurmctld", self.folder) + ["-D", "-f", self.conf],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
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


@host_slurm
def test_tree_from_the_real_capture(tmp_path, realdata):
    doc = _fabric.analyze([parse_file(os.path.join(realdata, "ibnetdiscover", "superpod-h100-example.out"))])
    statuses = ("green", "unknown")    # no gate reports for the capture: every node is unknown
    text = _fabric_outputs.topology_tree(doc, statuses)
    with Slurmctld(str(tmp_path), sorted(doc["nodes"]), "topology/tree", text) as ctl:
        topo = check_tree(ctl, doc, statuses)
    # 9 blocks; su1's 10 hosts (no rail 2) and b08-...-c01 (swapped pair) are quarantined by the fabric,
    # so su1 and su8-b2 have no node to schedule.
    assert len(topo) == (9 - 2) + 7 + 1
    assert "su1" not in topo and "su8-b2" not in topo
    listed = ctl.hostnames(topo["fabric"]["Nodes"])
    assert len(listed) == 119 - 11 and not {"localhost", "ubuntu"} & set(listed)
    everything = _fabric_outputs.topology_tree(doc, ("green", "unknown", "quarantined"))
    with Slurmctld(str(tmp_path / "all"), sorted(doc["nodes"]), "topology/tree", everything) as ctl:
        topo = check_tree(ctl, doc, ("green", "unknown", "quarantined"))
    assert ctl.hostnames(topo["su8-b2"]["Nodes"]) == ["b08-p1-dgx-08-c01"]   # the swapped-cable host, alone


@host_slurm
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
    # gpu00003 and gpu00010 fail the gate; gpu00006 passes it, but its swapped pair quarantines it by the fabric
    assert not {"gpu00003", "gpu00010", "gpu00006"} & set(listed) and len(listed) == 9


def test_block_plugin_on_slurm_24(tmp_path, trixie_slurm, realdata):
    """topology-block.conf of the real capture, loaded by slurmctld 24.11 (topology/block)."""
    doc = _fabric.analyze([parse_file(os.path.join(realdata, "ibnetdiscover", "superpod-h100-example.out"))])
    statuses = ("green", "unknown")
    text = _fabric_outputs.topology_block(doc, statuses)
    assert "# quarantined by the fabric: b08-p1-dgx-08-c01" in text
    keep = _fabric_outputs.selected_nodes(doc, statuses)
    with Slurmctld(str(tmp_path), sorted(doc["nodes"]), "topology/block", text, trixie_slurm) as ctl:
        out = ctl.scontrol("show", "topology").stdout
        shown = {}
        for line in out.splitlines():
            m = re.search(r"BlockName=(\S+)", line)
            if m:
                shown[m.group(1)] = sorted(ctl.hostnames(re.search(r"Nodes=(\S+)", line).group(1)))
    expected = dict((b["name"], sorted(h for h in b["nodes"] if h in keep)) for b in doc["blocks"])
    expected = dict((k, v) for k, v in expected.items() if v)
    assert shown == expected, out
    assert len(shown) == 7 and sum(len(v) for v in shown.values()) == 119 - 11


def test_block_plugin_small_fabric_with_block_sizes(tmp_path, trixie_slurm):
    fab, info = ibnetgen.rail_fabric(sus=2, nodes_per_su=4, rails=2)
    doc = _fabric.analyze([parse(fab.text(), "seg.out")], nodes=dict(
        ("gpu%05d" % i, {"report": {"status": "pass"}}) for i in range(1, 9)))
    text = _fabric_outputs.topology_block(doc, ("green",), [4, 8])
    with Slurmctld(str(tmp_path), sorted(doc["nodes"]), "topology/block", text, trixie_slurm) as ctl:
        out = ctl.scontrol("show", "topology").stdout
    for block in doc["blocks"]:
        line = [l for l in out.splitlines() if "BlockName=%s " % block["name"] in l][0]
        assert sorted(ctl.hostnames(re.search(r"Nodes=(\S+)", line).group(1))) == block["nodes"]
    # BlockSizes=4,8: Slurm aggregates the two base blocks of 4 into one of 8
    assert re.search(r"^AggregatedBlock=su1-b1,su2-b1 .*Nodes=gpu\[00001-00008\] BlockSize=8$", out, re.M), out
