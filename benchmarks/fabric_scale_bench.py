#!/usr/bin/env python3
"""The fabric step at the fleet's real size: the fabric_inventory module, run as the fabric role runs
it after a gate, on InfiniBand (an ibnetdiscover capture) and RoCE (one lldpcli JSON file per node)
fleets of 8,192 and 16,384 nodes x 8 rails, without and with a real gate report per node.

    .venv/bin/python benchmarks/fabric_scale_bench.py [--sizes 8192,16384] [--against main] [--keep DIR]

The reports are real: the validate_node module is run in process on the rendered reference trees
(tests/fixtures/trees/hgx-h100-ref.ttar with profile hgx-h100 for InfiniBand, hgx-h100-roce.ttar with
hgx-h100-roce for RoCE) and its report is written as the validate role writes it (report and facts,
about 125 and 145 KB); each node gets a copy with its own name, its NICs' GUIDs (those of its
adapters in the capture), and a gate status (1 node in 50 fails). The InfiniBand capture comes from
lab/fabric/ibnetgen.py (32 nodes per SU, 32 spines, one fault of each kind planted), the NICs named
as the report's facts name them; the LLDP files are what the fabric role's collect entry point writes
(``to_nice_json``), the rails' netdevs those of the report, a storage NIC on a storage leaf, a rail
pair swapped, a link missing and a slow port planted.

Each run is a fresh child process: CPU (user + system) and peak RSS of that whole process (wait4).
Rows per size: InfiniBand capture only; InfiniBand with the reports; LLDP with minimal reports (the
facts the fabric reads, nothing else); LLDP with the real reports. Each is printed beside its goal
(issue 34) and the ratio it is judged by, with met / NOT MET:

- with reports: CPU <= 2x the same fabric's run without them, peak RSS <= 400 MiB;
- LLDP with minimal reports: CPU and peak RSS <= those of the InfiniBand capture-only run.

``--against REV`` also runs the module of git revision REV (``main``) on every input and compares the
SHA-256 of every file it writes with this checkout's: the outputs must be the same byte for byte
(REV's figures are printed beside). ``--repeat N`` runs each N times (best CPU, largest peak).
``--keep DIR`` generates into DIR and keeps it (the module's argument files are ``DIR/<size>/*.args.json``).
Asserts nothing but the digests (exit 1 when outputs differ).
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from fabric_bench import BUILD, measure  # noqa: E402  (wait4 of one child: CPU, wall, peak RSS)

MODULE = os.path.join(REPO, "plugins", "modules", "fabric_inventory.py")
RSS_GOAL = 400.0

# In a child (its memory is not the module's): a real report per reference tree, as the validate role writes it.
REPORTS = r"""
import os, sys, tempfile, time, yaml
repo, out = sys.argv[1], sys.argv[2]
sys.path[:0] = [os.path.join(repo, ".build"), repo]
from lab.hw import ttar
from ansible_collections.gpufleet.provision.plugins.modules import validate_node
from ansible_collections.gpufleet.provision.plugins.plugin_utils import gate_reports
for tree, profile, name in (("hgx-h100-ref", "hgx-h100", "ib"), ("hgx-h100-roce", "hgx-h100-roce", "roce")):
    root = tempfile.mkdtemp()
    with open(os.path.join(repo, "tests", "fixtures", "trees", tree + ".ttar")) as handle:
        ttar.unpack(handle.read(), root)
    with open(os.path.join(repo, "inventories", "profiles", profile + ".yml")) as handle:
        prof = yaml.safe_load(handle)
    res = validate_node.run({"root": root, "profile": prof, "packages": None, "services": None, "outputs": {},
                             "output_errors": {}, "node": "gpu001"})
    with open(os.path.join(out, name + ".json"), "w") as handle:
        handle.write(gate_reports.render(res["report"], res["facts"], time.time())["json"])
"""

# In a child: the fleet's inputs. Shared by both fabrics: a report template with slots for the host,
# its GUIDs and its status, filled per host.
COMMON = r"""
import json, os, re, sys
sys.path.insert(0, os.path.join(%(repo)r, "lab", "fabric"))
import ibnetgen, lldpgen
with open(%(template)r) as handle:
    TEXT = handle.read()
FACTS = json.loads(TEXT)["facts"]
head, sep, tail = TEXT.rpartition('"status": "fail"')    # the report's own status: its last key
TEXT = head + '"status": "@STATUS@"' + tail
def minimal_text():
    # what the fabric reads of the report, nothing else (compact): the floor of any report reading
    nic_keys = ("name", "node_guid", "node_desc", "rail", "role", "netdevs")
    nics = [dict([(k, n.get(k)) for k in nic_keys] + [("ports", [{"gids": n["ports"][0].get("gids") or []}])])
            for n in FACTS["nics"]]
    facts = {"nics": nics, "netdevs": dict((k, {"speed_mbps": v.get("speed_mbps")}) for k, v in FACTS["netdevs"].items()),
             "numa": {"nodes": [{"id": n["id"], "cpus": n["cpus"]} for n in FACTS["numa"]["nodes"]]},
             "pairs": FACTS["pairs"], "cpu": {"siblings": FACTS["cpu"]["siblings"]}}
    return json.dumps({"facts": facts, "report": {"status": "@STATUS@"}}, sort_keys=True)
def slots(tokens, text=None):
    text = TEXT if text is None else text
    pattern = re.compile("|".join(re.escape(t) for t in tokens))
    pieces, names, pos = [], [], 0
    for m in pattern.finditer(text):
        pieces.append(text[pos:m.start()])
        names.append(m.group())
        pos = m.end()
    return pieces + [text[pos:]], names
def write_report(folder, host, index, template, values):
    pieces, names = template
    values = dict(values, **{"gpu001": host, "@STATUS@": "fail" if index %% 50 == 49 else "pass"})
    out = [pieces[0]]
    for name, piece in zip(names, pieces[1:]):
        out.append(values[name])
        out.append(piece)
    with open(os.path.join(folder, host + ".json"), "w") as handle:
        handle.write("".join(out))
RAILS = dict((n["rail"], n) for n in FACTS["nics"] if n.get("role") == "rail")
"""

IB = COMMON + r"""
fab, info = ibnetgen.rail_fabric(sus=%(nodes)d // 32, nodes_per_su=32, rails=8, spines=32, shape="shared")
planted = ibnetgen.plant_anomalies(fab, info)
renamed = dict((r, n["name"]) for r, n in RAILS.items())     # rail 4 is mlx5_6 on this board
for (host, rail), guid in info["nic"].items():
    if guid in fab.by_guid and fab.by_guid[guid][1][1] == "%%s mlx5_%%d" %% (host, rail):
        fab.set_desc(guid, "%%s %%s" %% (host, renamed[rail]))
with open(os.path.join(%(base)r, "ib.out"), "w") as handle:
    handle.write(fab.text())
os.makedirs(os.path.join(%(base)r, "ib-reports"))
os.makedirs(os.path.join(%(base)r, "ib-min"))
tokens = ["gpu001", "@STATUS@"] + [RAILS[r]["node_guid"] for r in sorted(RAILS)]
template, small = slots(tokens), slots(tokens, minimal_text())
hosts = [h for su in sorted(info["hosts"]) for h in info["hosts"][su]]
for index, host in enumerate(hosts):
    values = {}
    for r in sorted(RAILS):
        g = info["nic"][(host, r)]
        values[RAILS[r]["node_guid"]] = ":".join(g[i:i + 4] for i in range(0, 16, 4))
    write_report(os.path.join(%(base)r, "ib-reports"), host, index, template, values)
    write_report(os.path.join(%(base)r, "ib-min"), host, index, small, values)
with open(os.path.join(%(base)r, "done"), "w") as handle:
    handle.write("generated\n")
"""

LLDP = COMMON + r"""
nodes = %(nodes)d
template = slots(["gpu001", "@STATUS@"])
netdev = dict((r, n["netdevs"][0]) for r, n in RAILS.items())
storage = [n for n in FACTS["nics"] if n.get("role") == "non-rail"][0]["netdevs"][0]
def minimal_facts():
    keep = ("name", "node_guid", "netdevs", "rail", "role", "link_layer")
    nics = [dict((k, n.get(k)) for k in keep) for n in FACTS["nics"]]
    for nic, real in zip(nics, FACTS["nics"]):
        nic["ports"] = [{"port": 1, "link_layer": real["link_layer"], "gids": real["ports"][0].get("gids") or []}]
    netdevs = dict((k, dict((f, v.get(f)) for f in ("nic", "mtu", "speed_mbps", "operstate", "ipv4")))
                   for k, v in FACTS["netdevs"].items())
    return {"nics": nics, "netdevs": netdevs}
hosts = ["gpu%%05d" %% (i + 1) for i in range(nodes)]
swapped, dropped, slow = hosts[3], hosts[len(hosts) // 2], hosts[-5]
for folder in ("lldp", "lldp-min", "lldp-reports"):
    os.makedirs(os.path.join(%(base)r, folder))
minimal = minimal_facts()
for index, host in enumerate(hosts):
    su, place = index // 32, index %% 32
    interfaces = dict((netdev[k], lldpgen.neighbour("leaf-r%%d-su%%d" %% (k, su + 1), "swp%%d" %% (place + 1),
                                                    lldpgen._switch_mac(su, k))) for k in sorted(netdev))
    interfaces[storage] = lldpgen.neighbour("storage-leaf-su%%d" %% (su + 1), "swp%%d" %% (place + 1), lldpgen._switch_mac(su, 200))
    if host == swapped:
        interfaces[netdev[2]], interfaces[netdev[3]] = interfaces[netdev[3]], interfaces[netdev[2]]
    if host == dropped:
        del interfaces[netdev[6]]
    with open(os.path.join(%(base)r, "lldp", host + ".json"), "w") as handle:
        handle.write(json.dumps({"lldp": {"interface": interfaces}}, indent=4, sort_keys=True) + "\n")
    status = "fail" if index %% 50 == 49 else "pass"
    write_report(os.path.join(%(base)r, "lldp-reports"), host, index, template, {})
    facts = json.loads(json.dumps(minimal))
    if host == slow:
        facts["netdevs"][netdev[1]]["speed_mbps"] = 200000
        path = os.path.join(%(base)r, "lldp-reports", host + ".json")
        with open(path) as handle:
            doc = json.load(handle)
        doc["facts"]["netdevs"][netdev[1]]["speed_mbps"] = 200000
        with open(path, "w") as handle:
            handle.write(json.dumps(doc, indent=4, sort_keys=True) + "\n")
    with open(os.path.join(%(base)r, "lldp-min", host + ".json"), "w") as handle:
        json.dump({"facts": facts, "report": {"status": status}}, handle)
"""


def folder_mib(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)) / 1048576.0


def generate(base, nodes, reports_dir):
    """Write the fleet's inputs under base (in children; kept from an earlier --keep run) -> the cases."""
    fresh = not os.path.exists(os.path.join(base, "done"))   # written last
    if fresh:
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
    for code, template in ((LLDP, "roce"), (IB, "ib")) if fresh else ():
        values = {"repo": REPO, "nodes": nodes, "base": base, "template": os.path.join(reports_dir, template + ".json")}
        subprocess.run([sys.executable, "-c", code % values], check=True, timeout=3600)
    common = {"topology_statuses": ["green", "unknown"]}
    ib = dict(common, ibnetdiscover=[os.path.join(base, "ib.out")])
    lldp = dict(common, lldp_dir=os.path.join(base, "lldp"), nccl_ib_tc=106)
    return [
        ("ib", "capture only", ib, "%.0f MiB capture" % (os.path.getsize(ib["ibnetdiscover"][0]) / 1048576.0)),
        ("ib+min", "capture + fabric fields", dict(ib, reports_dir=os.path.join(base, "ib-min")),
         "%.0f MiB reports: what the fabric reads of each, compact (the floor)" % folder_mib(os.path.join(base, "ib-min"))),
        ("ib+reports", "capture + real reports", dict(ib, reports_dir=os.path.join(base, "ib-reports")),
         "%.0f MiB reports" % folder_mib(os.path.join(base, "ib-reports"))),
        ("lldp", "LLDP + minimal reports", dict(lldp, reports_dir=os.path.join(base, "lldp-min")),
         "%.0f MiB LLDP + %.0f MiB reports" % (folder_mib(lldp["lldp_dir"]), folder_mib(os.path.join(base, "lldp-min")))),
        ("lldp+reports", "LLDP + real reports", dict(lldp, reports_dir=os.path.join(base, "lldp-reports")),
         "%.0f MiB reports" % folder_mib(os.path.join(base, "lldp-reports"))),
    ]


def run_module(module, build, args, dest, argfile):
    """One run into a fresh dest -> (cpu s, peak MiB, {file: sha256})."""
    shutil.rmtree(dest, ignore_errors=True)
    with open(argfile, "w") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": dict(args, dest=dest)}, handle)
    out, cpu, _, rss = measure([sys.executable, module, argfile], dict(os.environ, PYTHONPATH=build))
    result = json.loads(out)
    if result.get("failed"):
        raise SystemExit("%s failed: %s" % (module, result.get("msg")))
    digests = {}
    for folder, _, files in os.walk(dest):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as handle:
                digests[os.path.relpath(path, dest)] = hashlib.sha256(handle.read()).hexdigest()
    shutil.rmtree(dest, ignore_errors=True)
    return cpu, rss, digests, result["summary"]


def revision(rev, tmp):
    """The module of git revision rev, importable as the collection -> (module path, PYTHONPATH)."""
    root = os.path.join(tmp, "rev")
    os.makedirs(root)
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "plugins"], stdout=subprocess.PIPE, check=True).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    build = os.path.join(tmp, "rev-build")
    os.makedirs(os.path.join(build, "ansible_collections", "gpufleet"))
    os.symlink(root, os.path.join(build, "ansible_collections", "gpufleet", "provision"))
    return os.path.join(root, "plugins", "modules", "fabric_inventory.py"), build


def goals(case, row, rows):
    """(goal text, ratio text, met) of one row against the rows of the same size."""
    if case == "ib":
        return "reference", "", None
    if case == "ib+min":
        return "(no goal: the floor of the next row)", "%.2fx cpu" % (row["cpu"] / rows["ib"]["cpu"]), None
    base = rows["lldp" if case == "lldp+reports" else "ib"]
    if case == "lldp":
        ok = row["cpu"] <= base["cpu"] and row["rss"] <= base["rss"]
        return ("<= InfiniBand capture only (%.2f s, %.0f MiB)" % (base["cpu"], base["rss"]),
                "%.2fx cpu, %.2fx mem" % (row["cpu"] / base["cpu"], row["rss"] / base["rss"]), ok)
    ok = row["cpu"] <= 2 * base["cpu"] and row["rss"] <= RSS_GOAL
    return ("<= 2x %s (%.2f s), <= %.0f MiB" % (base["label"], 2 * base["cpu"], RSS_GOAL),
            "%.2fx cpu" % (row["cpu"] / base["cpu"]), ok)


def run_size(base, nodes, reports_dir, repeat, against):
    cases = generate(base, nodes, reports_dir)
    rows, same = {}, True
    for case, label, args, inputs in cases:
        runs = [run_module(MODULE, BUILD, args, os.path.join(base, "out"), os.path.join(base, case + ".args.json"))
                for _ in range(repeat)]
        row = rows[case] = {"label": label, "cpu": min(r[0] for r in runs), "rss": max(r[1] for r in runs),
                            "inputs": inputs, "nodes": runs[0][3]["nodes"], "anomalies": sum(runs[0][3]["anomalies"].values())}
        goal, ratio, ok = goals(case, row, rows)
        print("%6d  %-24s %8.2f %9.0f   %-44s %-22s %-8s %s; %d nodes, %d anomalies" % (
            nodes, label, row["cpu"], row["rss"], goal, ratio, "" if ok is None else "met" if ok else "NOT MET",
            inputs, row["nodes"], row["anomalies"]))
        if against:
            old = run_module(against[0], against[1], args, os.path.join(base, "out-rev"), os.path.join(base, case + ".rev.json"))
            differ = sorted(f for f in set(old[2]) | set(runs[0][2]) if old[2].get(f) != runs[0][2].get(f))
            same = same and not differ
            verdict = ("outputs identical, %d files" % len(old[2]) if not differ
                       else "OUTPUTS DIFFER: %s" % ", ".join(differ[:5]))
            print("%6s  %-24s %8.2f %9.0f   %s" % ("", "  (the revision's module)", old[0], old[1], verdict))
        sys.stdout.flush()
    return same


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8192,16384")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--against", metavar="REV", help="also run REV's module and compare every output file's digest")
    parser.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    args = parser.parse_args(argv)
    tmp = args.keep or tempfile.mkdtemp(prefix="fabric-scale-")
    os.makedirs(tmp, exist_ok=True)
    try:
        reports_dir = os.path.join(tmp, "templates")
        os.makedirs(reports_dir, exist_ok=True)
        subprocess.run([sys.executable, "-c", REPORTS, REPO, reports_dir], check=True, timeout=600)
        sizes = ["%s %.0f KB" % (n, os.path.getsize(os.path.join(reports_dir, n + ".json")) / 1000.0) for n in ("ib", "roce")]
        print("real reports: %s" % ", ".join(sizes))
        against = revision(args.against, tmp) if args.against else None
        print("%6s  %-24s %8s %9s   %-44s %-22s %-8s %s" % (
            "nodes", "run (x8 rails)", "cpu s", "peak MiB", "goal", "ratio", "", "inputs"))
        same = True
        for size in [int(s) for s in args.sizes.split(",")]:
            same = run_size(os.path.join(tmp, str(size)), size, reports_dir, args.repeat, against) and same
            if not args.keep:
                shutil.rmtree(os.path.join(tmp, str(size)), ignore_errors=True)
        return 0 if same else 1
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
