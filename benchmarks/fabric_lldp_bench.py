#!/usr/bin/env python3
"""The RoCE fabric inventory from LLDP at fleet size: the fabric_inventory module, run as Ansible runs
it, over one ``lldpcli -f json show neighbors`` file per node and one gate report (with node facts) per
node, as the fabric role's ``collect`` entry point and the validate role leave them.

    .venv/bin/python benchmarks/fabric_lldp_bench.py [--sizes 1024,8192] [--rails 8] [--repeat 3]

lab/fabric/lldpgen.py writes the fleet (32 nodes per SU, one leaf per rail per SU, a storage NIC per
node on a storage leaf) with one fault of each kind the LLDP path finds planted: a rail pair swapped
between leaves (two ``miscabled_rail``), a rail without a neighbour (``missing_rail``), a rail port at
200 instead of 400 GbE (``link_degraded``). Then, in a fresh child each time:

- the module (``plugins/modules/fabric_inventory.py ARGS.json``: reads the LLDP and report folders,
  parses, models, writes fabric.json, Slurm, Kubernetes and nccl.json): CPU, wall, peak RSS;
- the model alone in process (the same files loaded, then ``analyze`` and ``render``): CPU and peak RSS
  after the load, so what the LLDP path itself costs is seen apart from JSON reading.

Prints per size the figures (best CPU of ``--repeat`` runs, the largest peak) and whether the anomalies
found are exactly the planted ones.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from fabric_bench import BUILD, measure  # noqa: E402  (the same child measurement: wait4, peak RSS)

MODULE = os.path.join(REPO, "plugins", "modules", "fabric_inventory.py")

GENERATE = r"""
import json, os, sys
sys.path.insert(0, %(lab)r)
import lldpgen
lldp, nodes = lldpgen.roce_fleet(sus=%(sus)d, nodes_per_su=32, rails=%(rails)d)
hosts = sorted(lldp)
swapped, dropped, slow = hosts[3], hosts[len(hosts) // 2], hosts[-5]
lldpgen.swap_rails(lldp, swapped, 2, 3)
lldpgen.drop_link(lldp, dropped, 6)
lldpgen.slow_port(nodes, slow, 1)
for folder, data in ((%(lldp_dir)r, lldp), (%(reports)r, nodes)):
    os.makedirs(folder)
    for host, value in data.items():
        with open(os.path.join(folder, host + ".json"), "w") as handle:
            json.dump(value, handle)
print(json.dumps(sorted(["miscabled_rail:%%s/mlx5_2" %% swapped, "miscabled_rail:%%s/mlx5_3" %% swapped,
                         "missing_rail:%%s/rail6" %% dropped, "link_degraded:%%s/mlx5_1" %% slow])))
"""

IN_PROCESS = r"""
import json, os, resource, sys, time
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import model, outputs
def load(folder):
    out = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as handle:
            out[name[:-5]] = json.load(handle)
    return out
lldp, nodes = load(sys.argv[1]), load(sys.argv[2])
rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
t0 = time.process_time()
doc = model.analyze([], nodes=nodes, lldp=lldp, roce_tc=106)
t1 = time.process_time()
files, notes = outputs.render(doc, ["green", "unknown"])
len(files["nccl.json"])
t2 = time.process_time()
print(json.dumps({"analyze": t1 - t0, "render": t2 - t1, "rss_loaded": rss_loaded,
                  "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                  "ids": sorted(a["id"] for a in doc["anomalies"]), "nodes": len(doc["nodes"]),
                  "rails": sum(len(n["rails"]) for n in doc["nodes"].values())}))
"""


def module_run(args, dest, env):
    """One run of the module into a fresh ``dest`` -> (cpu s, wall s, peak RSS MiB)."""
    subprocess.run(["rm", "-rf", dest], check=True)
    out, cpu, wall, rss = measure([sys.executable, MODULE, args], env)
    if json.loads(out).get("failed"):
        raise SystemExit("module failed: %s" % json.loads(out).get("msg"))
    return cpu, wall, rss


def run_size(tmp, nodes, rails, repeat):
    sus = nodes // 32
    base = os.path.join(tmp, str(nodes))
    lldp_dir, reports = os.path.join(base, "lldp"), os.path.join(base, "reports")
    planted = json.loads(subprocess.run(
        [sys.executable, "-c", GENERATE % {"lab": os.path.join(REPO, "lab", "fabric"), "sus": sus, "rails": rails,
                                           "lldp_dir": lldp_dir, "reports": reports}],
        check=True, stdout=subprocess.PIPE).stdout)
    mib = sum(os.path.getsize(os.path.join(d, f)) for d in (lldp_dir, reports) for f in os.listdir(d)) / 1048576.0
    dest = os.path.join(base, "out")
    args = os.path.join(base, "args.json")
    with open(args, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": {"lldp_dir": lldp_dir, "reports_dir": reports, "dest": dest,
                                           "nccl_ib_tc": 106, "topology_statuses": ["green", "unknown"]}}, handle)
    env = dict(os.environ, PYTHONPATH=BUILD)
    runs = [module_run(args, dest, env) for _ in range(repeat)]
    cpus, walls, rsss = [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs]
    inproc = json.loads(measure([sys.executable, "-c", IN_PROCESS, lldp_dir, reports], env)[0])
    with open(os.path.join(dest, "fabric.json")) as handle:
        found = sorted(a["id"] for a in json.load(handle)["anomalies"])
    return {"nodes": nodes, "rails": rails, "input_mib": mib, "cpu": min(cpus), "wall": min(walls), "rss": max(rsss),
            "analyze": inproc["analyze"], "render": inproc["render"], "rss_loaded": inproc["rss_loaded"],
            "rss_peak": inproc["rss_peak"], "nics": inproc["rails"],
            "false": sorted(set(found) - set(planted)), "missed": sorted(set(planted) - set(found))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,8192")
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print("%6s %5s %9s | %8s %8s %9s | %10s %9s %9s %9s | %s" % (
        "nodes", "rails", "input", "cpu s", "wall s", "peak MiB", "analyze s", "render s", "load MiB", "peak MiB",
        "anomalies (false / missed)"))
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(s) for s in args.sizes.split(",")]:
            row = run_size(tmp, size, args.rails, args.repeat)
            print("%6d %5d %7.1f MiB | %8.2f %8.2f %9.0f | %10.2f %9.2f %9.0f %9.0f | %s" % (
                row["nodes"], row["rails"], row["input_mib"], row["cpu"], row["wall"], row["rss"], row["analyze"],
                row["render"], row["rss_loaded"], row["rss_peak"],
                "exact (%d rail NICs)" % row["nics"] if not row["false"] and not row["missed"]
                else "false %s / missed %s" % (row["false"], row["missed"])))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
