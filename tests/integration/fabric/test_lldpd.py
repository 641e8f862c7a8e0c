"""The RoCE inventory's LLDP path on real software: Debian's lldpd in network namespaces.

A node namespace with two rail netdevs (ens0np0, ens1np0) is joined by veth pairs to two leaf
namespaces (leaf-r0-su1 and leaf-r1-su1, their port swp7 each); lldpd runs in all three (the leaves
with their own host names through a UTS namespace, ports sent as interface names, a 1 s interval).
The node's ``lldpcli -f json show neighbors`` - lldpd's own output, not a fixture - goes to the fabric
inventory with the node's facts. Needs root, ip netns, unshare and lldpd (.ci/deps.sh); skips without.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model as _fabric
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.adapters import parse_lldp

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
import lldpgen  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "unshare", "lldpd", "lldpcli")),
    reason="needs root, ip, unshare and lldpd/lldpcli (apt-get install lldpd)")


def _sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)


class Namespaces:
    """Network namespaces and lldpd daemons of one test; everything removed at close."""

    def __init__(self, tag):
        self.tag, self.names, self.daemons = tag, [], []
        self.tmp = tempfile.mkdtemp(prefix="gf-lldp-")
        os.chmod(self.tmp, 0o755)   # lldpd and lldpcli drop to the _lldpd user: the sockets must be reachable

    def add(self, name):
        full = "gf%s-%s" % (self.tag, name)
        _sh("ip", "netns", "add", full)
        self.names.append(full)
        _sh("ip", "-n", full, "link", "set", "lo", "up")
        return full

    def cable(self, ns_a, if_a, ns_b, if_b):
        tmp_a, tmp_b = "gft%sa%d" % (self.tag, len(self.names)), "gft%sb%d" % (self.tag, len(self.names))
        _sh("ip", "link", "add", tmp_a, "type", "veth", "peer", "name", tmp_b)
        for ns, tmp, name in ((ns_a, tmp_a, if_a), (ns_b, tmp_b, if_b)):
            _sh("ip", "link", "set", tmp, "netns", ns)
            _sh("ip", "-n", ns, "link", "set", tmp, "name", name)
            _sh("ip", "-n", ns, "link", "set", name, "up")

    def lldpd(self, ns, hostname, *options, **kw):
        """Start lldpd in ``ns``; ``config``: lldpcli commands it applies before its first frame (lldpd
        stays paused until lldpcli has read the -O file)."""
        sock = os.path.join(self.tmp, ns + ".sock")
        conf = os.path.join(self.tmp, ns + ".conf")
        with open(conf, "w") as handle:
            handle.write("".join(line + "\n" for line in kw.get("config", ())))
        proc = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
                                 'hostname "$0" && exec lldpd -d -u "$1" -O "$2" ' + " ".join(options), hostname, sock, conf],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.daemons.append(proc)
        return sock

    def lldpcli(self, ns, sock, *argv, **kw):
        """lldpcli's output; retried while the daemon is starting (its control socket not there yet)."""
        deadline = time.time() + kw.get("wait", 15)
        while True:
            done = subprocess.run(["ip", "netns", "exec", ns, "lldpcli", "-u", sock] + list(argv),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            if done.returncode == 0 or time.time() > deadline:
                break
            time.sleep(0.3)
        if done.returncode != 0:
            raise AssertionError("lldpcli %s in %s: rc=%d %s" % (" ".join(argv), ns, done.returncode, done.stderr.decode()[-500:]))
        return done.stdout.decode()

    def close(self):
        for proc in self.daemons:
            proc.terminate()
        for proc in self.daemons:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for name in self.names:
            subprocess.run(["ip", "netns", "del", name], check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _until(ns, node, sock, count, seconds=30):
    deadline = time.time() + seconds
    while True:
        table = json.loads(ns.lldpcli(node, sock, "-f", "json", "show", "neighbors"))
        found = (table.get("lldp") or {}).get("interface") or {}
        if len(found) >= count or time.time() > deadline:
            return table
        time.sleep(0.5)


@pytest.fixture
def two_rail_node():
    ns = Namespaces("%d" % (os.getpid() % 100000))
    try:
        node = ns.add("node")
        leaves = []
        for rail in (0, 1):
            leaf = ns.add("leaf%d" % rail)
            ns.cable(node, "ens%dnp0" % rail, leaf, "swp7")
            leaves.append(leaf)
        # The receiver first, and each leaf configured before its first frame: a loaded machine could
        # otherwise let the first frames (sent at start, port id by MAC) be the only ones in the wait.
        sock = ns.lldpd(node, "gpu001", "-r", "-I", "ens0np0,ens1np0")
        for rail, leaf in enumerate(leaves):
            ns.lldpd(leaf, "leaf-r%d-su1" % rail, "-I", "swp7",
                     config=("configure lldp tx-interval 1", "configure lldp portidsubtype ifname"))
        yield _until(ns, node, sock, 2, seconds=90)
    finally:
        ns.close()


def test_real_lldpd_table_feeds_the_inventory(two_rail_node):
    table = two_rail_node
    assert sorted(parse_lldp(table, "gpu001"), key=lambda n: n["netdev"]) == [
        {"netdev": "ens0np0", "switch": "leaf-r0-su1", "port": "swp7"},
        {"netdev": "ens1np0", "switch": "leaf-r1-su1", "port": "swp7"}]
    nodes = {"gpu001": {"facts": lldpgen.host_facts(2, storage=False), "report": {"status": "pass"}}}
    doc = _fabric.analyze([], nodes=nodes, lldp={"gpu001": table}, roce_tc=106)
    assert [a["id"] for a in doc["anomalies"]] == []
    node = doc["nodes"]["gpu001"]
    assert [(r["rail"], r["device"], r["leaf"], r["port"]) for r in node["rails"]] == [
        (0, "mlx5_0", "leaf-r0-su1", "swp7"), (1, "mlx5_1", "leaf-r1-su1", "swp7")]
    nccl = json.loads(outputs.render(doc, ["green"])[0]["nccl.json"])
    assert nccl == {"gpu001": {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "106"}}
