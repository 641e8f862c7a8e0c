#!/usr/bin/env python3
"""Parse + analysis cost of the fabric model on synthetic rail-optimized fabrics.

    .venv/bin/python benchmarks/fabric_bench.py [--sizes 1024,2048,4096,8192] [--rails 8]

For each size, writes an ibnetdiscover capture (32 nodes per SU, one leaf per rail per SU, every leaf
cabled to every spine) with a few injected faults, then measures in a fresh child process the wall
time of parse + analyze (+ rendering the output files, shown apart) and the peak RSS of that process.
Prints a table and the time ratio between consecutive sizes (linear growth: about 2.0 per doubling).
The target of issue 6 is 8,192 nodes x 8 rails in under 10 s and 1 GiB on a 2-core machine.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "lab", "fabric"))
sys.path.insert(0, os.path.join(REPO, ".build"))

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, %(build)r)
from ansible_collections.gpufleet.provision.plugins.module_utils._ibnetdiscover import parse_file
from ansible_collections.gpufleet.provision.plugins.module_utils import _fabric, _fabric_outputs
t0 = time.perf_counter()
c0 = time.process_time()
cap = parse_file(%(path)r)
t1 = time.perf_counter()
doc = _fabric.analyze([cap])
t2 = time.perf_counter()
c2 = time.process_time()
files, notes = _fabric_outputs.render(doc, ("green", "unknown"))
t3 = time.perf_counter()
print(json.dumps({"parse": t1 - t0, "analyze": t2 - t1, "render": t3 - t2, "cpu": c2 - c0,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                  "lines": cap["lines"]["total"], "nodes": len(doc["nodes"]),
                  "anomalies": doc["summary"]["anomalies"], "blocks": len(doc["blocks"])}))
"""


def make_capture(nodes, rails, path):
    import ibnetgen
    per_su = 32
    sus = nodes // per_su
    spines = 32
    fab, info = ibnetgen.rail_fabric(sus=sus, nodes_per_su=per_su, rails=rails, spines=spines)
    # Injected faults: one swapped rail pair, one default host name, one unset description,
    # one degraded link, one missing uplink.
    h = info["hosts"][1][0]
    fab.move(info["nic"][(h, 0)], info["leaf"][(1, 1)], per_su + 40)
    fab.move(info["nic"][(h, 1)], info["leaf"][(1, 0)], per_su + 40)
    fab.set_desc(info["nic"][(info["hosts"][2][0], 0)], "localhost mlx5_0")
    fab.set_desc(info["nic"][(info["hosts"][2][1], 0)], "MT4129 ConnectX7   Mellanox Technologies")
    fab.set_rate(info["leaf"][(3, 2)], 3, 2, "NDR")
    fab.unlink(info["leaf"][(4, 0)], per_su + 1)
    with open(path, "w") as handle:
        handle.write(fab.text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,2048,4096,8192")
    parser.add_argument("--rails", type=int, default=8)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("%6s %5s %9s %8s %8s %8s %8s %8s %9s  %s" % ("nodes", "rails", "lines", "parse_s", "model_s", "total_s",
                                                        "cpu_s", "render_s", "peak_MiB", "anomalies"))
    print("(wall seconds except cpu_s = CPU seconds of parse+model; other jobs on the machine inflate wall time)")
    prev = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = os.path.join(tmp, "fabric-%d.out" % n)
            make_capture(n, args.rails, path)
            out = subprocess.run([sys.executable, "-c", CHILD % {"build": os.path.join(REPO, ".build"), "path": path}],
                                 check=True, stdout=subprocess.PIPE, universal_newlines=True, timeout=600).stdout
            r = json.loads(out)
            total = r["parse"] + r["analyze"]
            ratio = (" cpu x%.2f vs previous" % (r["cpu"] / prev)) if prev else ""
            prev = r["cpu"]
            print("%6d %5d %9d %8.2f %8.2f %8.2f %8.2f %8.2f %9.0f  %s%s" % (
                n, args.rails, r["lines"], r["parse"], r["analyze"], total, r["cpu"], r["render"], r["rss_mib"],
                ",".join("%s=%d" % kv for kv in r["anomalies"].items()), ratio))
            os.remove(path)


if __name__ == "__main__":
    main()
