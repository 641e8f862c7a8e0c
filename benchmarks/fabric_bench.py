#!/usr/bin/env python3
"""The whole fabric_inventory module, run as Ansible runs it, on synthetic rail-optimized fabrics.

    .venv/bin/python benchmarks/fabric_bench.py [--sizes 1024,4096,8192,16384] [--shapes shared,plane] [--rails 8]

For each shape and size, lab/fabric/ibnetgen.py writes an ibnetdiscover capture (32 nodes per SU, one
leaf per rail per SU; "shared": every leaf cabled to each of 32 spines, "plane": rail k of every SU
cabled to the 16 spines of plane k) with one fault of each kind planted (``plant_anomalies``: the ids
the model must report, no more, no fewer). Then, each in a fresh child process:

- the module itself (``plugins/modules/fabric_inventory.py ARGS.json``: parse, model, render, writes,
  result on stdout), measured with wait4(): CPU (user + system), wall time, peak RSS;
- the floor: one regular-expression pass over the same file (each line matched against the port-line
  pattern, the one thing no parser can skip), measured the same way;
- the fused floor (``fabric_fused_floor.py``): an Ansible module that parses the common forms and
  writes the nodes' rail entries, the switches and labels.json in one pass, checking nothing else;
  a floor in practice for any implementation in CPython (``xfused``: the module's CPU over it).

Each is run ``--repeat`` times (3), module and floors alternately: a row gives the best CPU of each
(and the module's median), since this machine's CPU time varies by 10-30% from run to run.

Prints per row the CPU, wall and peak memory of the module, its ratio to the floor, the output sizes,
the anomalies found against those planted (false = found, not planted; missed = planted, not found),
and per shape the CPU growth per doubling (linear: about 2).

``--instructions`` adds the instructions each of the three executes (callgrind, which the machine's
CPU noise does not touch; about 10 minutes per shape at 8,192 nodes).

``--stages`` adds, per run, where the CPU goes: a third child runs the same steps one by one (imports,
parse, each model stage, render, fabric.json) and prints the CPU of each; ``startup`` is the CPU of
a process that imports the module and runs an empty AnsibleModule (what every run pays).
Goal (issue 15): 8,192 x 8 on either shape in at most 4 s CPU and 400 MiB, within 5x of the floor; the
8,192-node rows are followed by a ``goal:`` line that says of each figure whether it is met.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.join(REPO, ".build")
MODULE = os.path.join(REPO, "plugins", "modules", "fabric_inventory.py")
FUSED = os.path.join(HERE, "fabric_fused_floor.py")

FLOOR = r"""
import re, sys
port = re.compile(r'^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d+)\]')
n = 0
with open(sys.argv[1], encoding="utf-8", errors="replace") as handle:
    for line in handle:
        if port.match(line):
            n += 1
print(n)
"""


GENERATE = r"""
import json, sys
sys.path.insert(0, %(lab)r)
import ibnetgen
fab, info = ibnetgen.rail_fabric(sus=%(sus)d, nodes_per_su=%(per_su)d, rails=%(rails)d, spines=%(spines)d, shape=%(shape)r)
planted = ibnetgen.plant_anomalies(fab, info)
with open(%(path)r, "w") as handle:
    handle.write(fab.text())
print(json.dumps(planted))
"""


# Read in a child: Linux carries a parent's peak RSS over fork and exec into the child's figure, so
# this process stays small (no fabric generated or loaded here).
IDS = r"""
import json, sys
with open(sys.argv[1]) as handle:
    doc = json.load(handle)
print(json.dumps({"ids": sorted(a["id"] for a in doc["anomalies"]),
                  "nics": sum(len(n["rails"]) for n in doc["nodes"].values())}))
"""


# Where the CPU goes, step by step, in a child of its own (same code as the module, called directly).
STAGES = r"""
import json, os, sys, tempfile, time
t0 = time.process_time()
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import outputs as _fabric_outputs
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric import adapters, hosts, links, model, structure, verdicts
from ansible_collections.gpufleet.provision.plugins.module_utils._fabric.ibnetdiscover import parse_file
cpu = [("imports", time.process_time() - t0)]
def step(name, func, *args):
    t = time.process_time()
    out = func(*args)
    cpu.append((name, time.process_time() - t))
    return out
cap = step("parse", parse_file, sys.argv[1])
m = model.Model()
step("read_captures", adapters.read_captures, m, [cap])
cap = None
for func in (adapters.classify_adapters, adapters.add_lldp, structure.tiers, structure.nic_rails, structure.scalable_units,
             structure.leaf_rails, structure.apply_plan, structure.index_sus, hosts.host_rails, hosts.su_checks):
    step(func.__name__, func, m)
groups = step("spine_groups", links.spine_groups, m)
step("link_anomalies", links.link_anomalies, m, groups)
for func in (hosts.not_in_fabric, hosts.node_facts):
    step(func.__name__, func, m)
step("ids+quarantine", lambda: (verdicts.sort_anomalies(m.anomalies), verdicts.assign_ids(m.anomalies), verdicts.quarantine(m)))
step("blocks", verdicts.blocks, m)
doc = step("document", verdicts.document, m)
files, notes = step("render", _fabric_outputs.render, doc, ["green", "unknown"], [])
with tempfile.NamedTemporaryFile() as tmp:
    step("fabric.json", _fabric_outputs._stream_out, files["fabric.json"], True)
print(json.dumps(cpu))
"""

STARTUP = r"""
from ansible.module_utils.basic import AnsibleModule
import ansible_collections.gpufleet.provision.plugins.modules.fabric_inventory
AnsibleModule(argument_spec=dict(dest=dict(type="path"), ibnetdiscover=dict(type="list", elements="path"),
                                 topology_statuses=dict(type="list", elements="str"))).exit_json(changed=False)
"""


def stages(path, args, env):
    """CPU per step (the GC is paused during parse and model, as in the module), and the startup."""
    out = measure([sys.executable, "-c", "import gc; gc.disable()\n" + STAGES, path], env)[0]
    rows = json.loads(out)
    rows.append(("startup", measure([sys.executable, "-c", STARTUP, args], env)[1]))
    return rows


def make_capture(nodes, rails, shape, path):
    """Write the capture in a child process (a fork of a big parent would inflate the peak RSS the
    module's process reports); -> the planted anomaly ids."""
    per_su = 32
    code = GENERATE % {"lab": os.path.join(REPO, "lab", "fabric"), "sus": nodes // per_su, "per_su": per_su,
                       "rails": rails, "spines": 32 if shape == "shared" else 16, "shape": shape, "path": path}
    out = subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.PIPE, timeout=1800).stdout
    return json.loads(out)


def measure(argv, env=None):
    """Run argv; -> (stdout, cpu s, wall s, peak RSS MiB) of that child alone."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out_chunks = []
    while True:
        chunk = proc.stdout.read(1 << 20)
        if not chunk:
            break
        out_chunks.append(chunk)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (argv[1], proc.returncode, err.decode()[-2000:]))
    return b"".join(out_chunks), usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024.0


def instructions(argv, env=None):
    """The instructions argv executes, counted by callgrind (valgrind must be installed)."""
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + argv, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    found = re.search(r"I\s+refs:\s+([0-9,]+)", proc.stderr.decode(errors="replace"))
    if proc.returncode != 0 or not found:
        raise SystemExit("callgrind of %s failed (%d): %s" % (argv[1], proc.returncode, proc.stderr.decode()[-2000:]))
    return int(found.group(1).replace(",", ""))


def run_one(tmp, nodes, rails, shape, with_stages=False, repeat=3, with_instructions=False):
    path = os.path.join(tmp, "%s-%d.out" % (shape, nodes))
    planted = make_capture(nodes, rails, shape, path)
    lines = sum(1 for _ in open(path))
    dest = os.path.join(tmp, "out-%s-%d" % (shape, nodes))
    args = os.path.join(tmp, "args.json")
    fused_args = os.path.join(tmp, "args-fused.json")
    for name, where in ((args, dest), (fused_args, dest + "-fused")):
        with open(name, "w") as handle:
            json.dump({"ANSIBLE_MODULE_ARGS": {"ibnetdiscover": [path], "dest": where,
                                               "topology_statuses": ["green", "unknown"]}}, handle)
    env = dict(os.environ, PYTHONPATH=BUILD)
    cpus, walls, rsss, floors, fused = [], [], [], [], []
    for _ in range(repeat):
        # module and floors alternate, so that a noisy spell of the machine weighs on both
        subprocess.run(["rm", "-rf", dest], check=True)
        out, cpu, wall, rss = measure([sys.executable, MODULE, args], env)
        result = json.loads(out)
        if result.get("failed"):
            raise SystemExit("module failed: %s" % result.get("msg"))
        cpus.append(cpu)
        walls.append(wall)
        rsss.append(rss)
        floors.append(measure([sys.executable, "-c", FLOOR, path])[1])
        subprocess.run(["rm", "-rf", dest + "-fused"], check=True)
        fused_out, fused_cpu = measure([sys.executable, FUSED, fused_args], env)[:2]
        fused.append(fused_cpu)
    cpu, wall, rss, floor_cpu, fused_cpu = min(cpus), min(walls), max(rsss), min(floors), min(fused)
    seen = json.loads(measure([sys.executable, "-c", IDS, os.path.join(dest, "fabric.json")])[0])
    found = seen["ids"]
    per_stage = stages(path, args, env) if with_stages else None
    counts = None
    if with_instructions:
        subprocess.run(["rm", "-rf", dest, dest + "-fused"], check=True)
        counts = {"module": instructions([sys.executable, MODULE, args], env),
                  "floor": instructions([sys.executable, "-c", FLOOR, path]),
                  "fused": instructions([sys.executable, FUSED, fused_args], env)}
    false = sorted(set(found) - set(planted))
    missed = sorted(set(planted) - set(found))
    files = sum(len(f) for _, _, f in os.walk(dest))
    row = {"shape": shape, "nodes": nodes, "rails": rails, "lines": lines, "cpu": cpu, "wall": wall, "rss": rss,
           "cpu_runs": cpus, "cpu_median": sorted(cpus)[len(cpus) // 2],
           "floor_cpu": floor_cpu, "ratio": cpu / floor_cpu, "result_kib": len(out) / 1024.0,
           "fused_cpu": fused_cpu, "fused_runs": fused, "fused_nics": json.loads(fused_out)["nics"], "nics": seen["nics"],
           "json_mib": os.path.getsize(os.path.join(dest, "fabric.json")) / 1048576.0, "files": files,
           "planted": len(planted), "found": len(found), "false": false, "missed": missed,
           "summary_lines": len(result["summary_text"].splitlines()), "stages": per_stage, "instructions": counts}
    os.remove(path)
    subprocess.run(["rm", "-rf", dest, dest + "-fused"], check=True)
    return row


GOAL = {"nodes": 8192, "cpu": 4.0, "rss": 400.0, "ratio": 5.0}


def goal_line(r):
    """The goal of issue 15 against one 8,192 x 8 row: each figure, met or MISSED."""
    def verdict(ok):
        return "met" if ok else "MISSED"
    return ("goal: cpu %.2f s <= %.0f s %s (median %.2f s %s); peak %.0f MiB <= %.0f MiB %s; %.1fx the floor <= %.0fx %s"
            " (the fused floor alone: %.1fx)") % (
        r["cpu"], GOAL["cpu"], verdict(r["cpu"] <= GOAL["cpu"]), r["cpu_median"], verdict(r["cpu_median"] <= GOAL["cpu"]),
        r["rss"], GOAL["rss"], verdict(r["rss"] <= GOAL["rss"]), r["ratio"], GOAL["ratio"], verdict(r["ratio"] <= GOAL["ratio"]),
        r["fused_cpu"] / r["floor_cpu"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,4096,8192,16384")
    parser.add_argument("--shapes", default="shared,plane")
    parser.add_argument("--rails", type=int, default=8)
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of the module and of both floors (callgrind; slow)")
    parser.add_argument("--stages", action="store_true", help="also print the CPU of each step (parse, model stages, render)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of the module and of the floor per row (the best CPU of each is printed, and the median)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    head = "%-6s %6s %8s %7s %7s %8s %8s %6s %8s %6s %8s %7s %5s %7s %s" % (
        "shape", "nodes", "lines", "cpu_s", "wall_s", "peak_MiB", "floor_s", "xfloor", "fused_s", "xfused", "json_MiB",
        "res_KiB", "files", "summary", "anomalies found/planted (false, missed)")
    print(head)
    print("(cpu_s: user+system CPU of the module process, the best of %d runs (median in brackets); floor_s and fused_s"
          " the best of as many; wall time is inflated when other jobs share the machine)" % args.repeat)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            prev = None
            for n in sizes:
                r = run_one(tmp, n, args.rails, shape, args.stages, args.repeat, args.instructions)
                growth = (" cpu x%.2f" % (r["cpu"] / prev)) if prev else ""
                prev = r["cpu"]
                print("%-6s %6d %8d %7.2f %7.2f %8.0f %8.2f %6.1f %8.2f %6.1f %8.1f %7.1f %5d %7d %d/%d (%d, %d)%s  [median %.2f]" % (
                    shape, n, r["lines"], r["cpu"], r["wall"], r["rss"], r["floor_cpu"], r["ratio"], r["fused_cpu"],
                    r["cpu"] / r["fused_cpu"], r["json_mib"], r["result_kib"], r["files"], r["summary_lines"], r["found"],
                    r["planted"], len(r["false"]), len(r["missed"]), growth, r["cpu_median"]))
                if abs(r["fused_nics"] - r["nics"]) > 0.01 * r["nics"]:
                    print("   the fused floor read %d rail NICs, the module %d: it did not do the same work"
                          % (r["fused_nics"], r["nics"]))
                if n == GOAL["nodes"] and args.rails == 8:
                    print("   " + goal_line(r))
                if r["instructions"]:
                    i = r["instructions"]
                    print("   instructions: module %.2f G, floor %.2f G, fused floor %.2f G: %.1fx the floor (fused floor %.1fx),"
                          " %.1fx the fused floor" % (i["module"] / 1e9, i["floor"] / 1e9, i["fused"] / 1e9,
                                                      i["module"] / i["floor"], i["fused"] / i["floor"], i["module"] / i["fused"]))
                if r["stages"]:
                    big = [(k, v) for k, v in r["stages"] if v >= 0.01]
                    print("   stages (cpu s): " + ", ".join("%s %.2f" % kv for kv in big)
                          + "; all steps %.2f" % sum(v for k, v in r["stages"] if k != "startup"))
                for what in ("false", "missed"):
                    if r[what]:
                        print("   %s: %s%s" % (what, ", ".join(r[what][:5]), " ..." if len(r[what]) > 5 else ""))
                sys.stdout.flush()
                rows.append(r)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)
    bad = [r for r in rows if r["false"] or r["missed"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
