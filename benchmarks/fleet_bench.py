#!/usr/bin/env python3
"""The gate and a converged provision.yml at fleet size, as AWX runs them. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/fleet_bench.py [--nodes 8,32,128] [--quick] [--forks 16] [--repeat R]
                                               [--provision-nodes 8,32] [--no-provision] [--json FILE] [--keep]

For each N (default 8, 32, 128; --quick: 8 only) an inventory of N localhost nodes node001.. (local
connection, this virtualenv's python, each its own copy of tests/fixtures/trees/hgx-h100-ref.ttar
as gpufleet_hardware_root) and three jobs through ansible-runner's Python API, forks 16, each in a
worker process of its own so that its CPU is exact (os.wait4: the runner, ansible-playbook, its
forks and every module process):
  - ping:      `ansible all -m ping`, the baseline (one module round trip per node);
  - gate:      playbooks/validate.yml, profile hgx-h100, real package and service collection;
  - provision (by default at N <= 32 only): playbooks/provision.yml on converged nodes, a profile
               trimmed to what this machine and the fixture root can be converged to (PROVISION_TRIM)
               and the roles that would write this machine's /etc turned off (CONVERGED_VARS). The
               nodes are made converged first: a --check that must predict no change, then the real
               run, whose gate writes each node's converged stamp into the work folder (the real run
               is refused when the check predicts any change). Then three jobs:
                 prov-full:  --check with the stamps off, the whole washing machine (a converged run
                             before issue 26 part 3);
                 prov-check: --check with the stamps, the converged run;
                 prov-real:  the same, for real.
Per run and per node: wall and CPU seconds, the ratio to ping, the CPU split (NODE CPU below),
module round trips (ROUND TRIPS below),
job-event bytes (the job_events/*.json files of each host, what AWX stores). Then the 10 tasks of the
gate (and of the converged provision run) at the middle N that cost the most events, and the goal
lines of issues 16 (the gate) and 26 part 3 (the converged run: at most 4 round trips and 4x ping's
CPU per node, at most 40 KB of events per node).
"""
import argparse
import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [REPO]

from lab.hw import ttar  # noqa: E402

TREE = os.path.join(REPO, "tests", "fixtures", "trees", "hgx-h100-ref.ttar")
PROFILE = os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")
VENV_BIN = os.path.dirname(sys.executable)

# ROUND TRIPS: a result that ran a module (or an action plugin) on the node. One result event per
# host and task (runner_on_ok, runner_on_failed, runner_on_unreachable), or one per item for a loop
# (runner_item_on_ok/failed; the loop's own closing result is then not counted). Not counted:
# skipped results, the actions below (they run in the controller's worker and never reach the
# node), and results delegated to another host (Ansible puts _ansible_delegated_vars in those: the
# report copies to localhost), which are counted apart as controller runs. An action plugin that
# makes several calls (copy: stat, then copy) counts once.
CONTROLLER_ACTIONS = frozenset((
    "debug", "set_fact", "assert", "fail", "group_by", "add_host", "meta", "set_stats", "include_vars",
    "include_tasks", "include_role", "import_tasks", "import_role", "import_playbook", "pause",
    "validate_argument_spec",
))
RESULT_EVENTS = ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
ITEM_EVENTS = ("runner_item_on_ok", "runner_item_on_failed")

# What of hgx-h100 this machine cannot be converged to, and how the provision runs are told to leave
# it alone (profile keys removed, role variables set). The run-time state of tuning and pcie
# (hugepages, THP, NUMA balancing, governor, ACS) is read from the fixture root, which is converged.
PROVISION_TRIM = collections.OrderedDict((
    ("bios", "no BMC on this machine: no bios settings, the bios role skips itself"),
    ("kernel.release", "this machine boots %s, not the profile's kernel: the kernel role skips" % os.uname().release),
    ("nvidia.driver_version", "no NVIDIA packages on this machine: the nvidia_driver role skips"),
    ("ofed.version", "no OFED on this machine: the ofed role skips"),
    ("firmware", "no flint/mlxconfig, no NIC to flash: the firmware role skips"),
    ("packages.held", "none of the profile's packages are installed here"),
))
PROVISION_VARS = collections.OrderedDict((
    ("kernel_cmdline_required", ([], "the GRUB sources are read at / and this machine has none: kernel_cmdline skips")),
    ("kernel_cmdline_forbidden", ([], "(with kernel_cmdline_required)")),
    ("provision_reboot_allowed", (False, "never reboot this machine (--check predicts only, this is a second lock)")),
))
# For the converged runs, what keeps the real run from writing this machine's /etc or installing a
# package: the pcie role (setpci's package, the boot unit) and the tuning role's persistent files are
# turned off by their role variables; the gate still checks their run-time state in the fixture root.
CONVERGED_VARS = collections.OrderedDict((
    ("pcie_host_mode", ("", "the pcie role would install pciutils and a boot unit on this machine: off")),
    ("tuning_hugepages", ({}, "the tuning role would write this machine's sysctl.d and a unit: off")),
    ("tuning_thp", ("", "(with tuning_hugepages)")),
    ("tuning_numa_balancing", ("", "(with tuning_hugepages)")),
    ("tuning_governor", ("", "(with tuning_hugepages)")),
))
# Checks that read what PROVISION_TRIM removed, no longer required in the trimmed profile.
TRIM_REQUIRE = ("kernel.version", "nvidia.driver", "nvidia.fabricmanager", "ofed.version", "ofed.kernel_match",
                "firmware.nic", "packages.held")

PROVISION_MAX_N = 32     # default: provision.yml --check up to this N (at 128 it takes about an hour on 2 cores)
GOAL_CPU = 0.3           # s of CPU per node, gate at N=32
GOAL_KB = 40.0           # KB of job events per node, gate at N=32
GOAL_N = 32
GOAL_GATE_PING_X = 1.5   # the gate's whole-tree CPU per node against ping's, side by side (issue 34)
GOAL_TRIPS = 4           # module round trips per node, a converged provision.yml (issue 26 part 3)
GOAL_PING_X = 4.0        # CPU per node against ping's, the same
FLAT = 1.10              # "flat or falling": per-node figure at the largest N within 10% of the smallest N's


def _counts(text):
    try:
        counts = sorted(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("node counts are comma-separated numbers, got %r" % text)
    if min(counts) < 1:
        raise argparse.ArgumentTypeError("node counts must be at least 1, got %r" % text)
    return counts


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=_counts, default=[8, 32, 128], help="node counts, comma separated")
    parser.add_argument("--quick", action="store_true", help="N=8 only (a smoke run)")
    parser.add_argument("--forks", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1, help="ping/gate pairs per N, in turn (the median pair is shown)")
    parser.add_argument("--provision-nodes", type=_counts, default=None,
                        help="node counts for the check-mode provision run (default: those of --nodes up to %d;"
                             " provision costs about 3x the gate)" % PROVISION_MAX_N)
    parser.add_argument("--no-provision", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (artifacts, reports)")
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes = [8]
    if args.no_provision:
        args.provision_nodes = []
    elif args.provision_nodes is None or args.quick:
        args.provision_nodes = [n for n in args.nodes if n <= PROVISION_MAX_N] or args.nodes[:1]
    if not set(args.provision_nodes) <= set(args.nodes):
        parser.error("--provision-nodes must be a subset of --nodes (got %s and %s)" % (args.provision_nodes, args.nodes))
    return args


# ---- the fleet -------------------------------------------------------------------------------

def unpack_reference(work):
    ref = os.path.join(work, "ref")
    with open(TREE) as handle:
        ttar.unpack(handle.read(), ref)
    return ref


# NODE CPU: the nodes are this machine, so the job's process tree also holds what a real fleet runs
# on the nodes (the module processes and the commands they run). Each node's Python is this wrapper,
# which GNU time makes append its CPU (with its children's) to the job's file: node CPU is their sum,
# controller CPU the rest (forks, templating, results, events: what an AWX execution node pays).
TIME = "/usr/bin/time"
NODE_CPU_ENV = "GPUFLEET_BENCH_NODE_CPU"


def node_python(work):
    """The interpreter path the inventory gives: the wrapper when GNU time is here, else python itself."""
    if not os.access(TIME, os.X_OK):
        return sys.executable
    path = os.path.join(work, "node-python")
    with open(path, "w") as handle:
        handle.write('#!/bin/sh\nexec %s -a -o "${%s:-/dev/null}" -f "%%U %%S" %s "$@"\n' % (TIME, NODE_CPU_ENV, sys.executable))
    os.chmod(path, 0o755)
    return path


def read_node_cpu(path):
    """Seconds of CPU the node-side processes used, or None when they were not measured."""
    if not os.path.exists(path):
        return None
    total = 0.0
    with open(path) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 2:   # GNU time also writes "Command exited with non-zero status N" lines
                try:
                    total += float(parts[0]) + float(parts[1])
                except ValueError:
                    pass
    return total


def write_inventory(work, ref, n):
    """N hosts, each with its own copy of the reference tree; returns the inventory path and the names."""
    python = node_python(work)
    hosts = {}
    for i in range(1, n + 1):
        name = "node%03d" % i
        root = os.path.join(work, "roots", name)
        if not os.path.isdir(root):
            shutil.copytree(ref, root, symlinks=True)
        hosts[name] = {"ansible_connection": "local", "ansible_python_interpreter": python,
                       "gpufleet_hardware_root": root}
    path = os.path.join(work, "inventory-%d.yml" % n)
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts}}, handle, sort_keys=False)
    return path, list(hosts)


def _drop(profile, dotted):
    node = profile
    keys = dotted.split(".")
    for key in keys[:-1]:
        node = node.get(key) or {}
    node.pop(keys[-1], None)


def write_provision_profile(work):
    with open(PROFILE) as handle:
        profile = yaml.safe_load(handle)
    for key in PROVISION_TRIM:
        _drop(profile, key)
    # no NVIDIA packages here: without this the fabric manager check is red and no node is stamped
    profile.setdefault("nvidia", {})["fabricmanager"] = False
    profile["name"] = "hgx-h100-bench"
    profile["require"] = [c for c in profile.get("require", []) if c not in TRIM_REQUIRE]
    path = os.path.join(work, "hgx-h100-bench.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(profile, handle, sort_keys=False)
    return path


# ---- one job -------------------------------------------------------------------------------

def run_worker(spec_path):
    """In the worker process: one ansible_runner.run() as AWX does it, artifacts in the temp folder."""
    with open(spec_path) as handle:
        spec = json.load(handle)
    os.environ["PATH"] = VENV_BIN + os.pathsep + os.environ.get("PATH", "")
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS"):
        os.environ.pop(name, None)
    import ansible_runner
    ansible_runner.run(quiet=True, **spec)


def run_job(pdd, ident, inventory, forks, **how):
    """Run one job in a worker process; returns wall and CPU seconds of the whole process tree."""
    os.makedirs(pdd, exist_ok=True)
    # one file per private data dir, emptied before each job: ansible-runner keeps the first job's
    # envvars in <pdd>/env/envvars and gives them to the later jobs of the same folder
    node_cpu = os.path.join(pdd, "node-cpu.txt")
    # and ansible-runner keeps a job's env/cmdline (--check) and env/extravars for the later jobs of
    # the same folder: each job writes its own
    for path in (node_cpu, os.path.join(pdd, "env", "cmdline"), os.path.join(pdd, "env", "extravars")):
        if os.path.exists(path):
            os.unlink(path)
    spec = dict(private_data_dir=pdd, project_dir=REPO, ident=ident, inventory=inventory, forks=forks,
                envvars={"ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "false", NODE_CPU_ENV: node_cpu}, **how)
    spec_path = os.path.join(pdd, "spec-%s.json" % ident)
    with open(spec_path, "w") as handle:
        json.dump(spec, handle)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", spec_path], cwd=REPO)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    artifacts = os.path.join(pdd, "artifacts", ident)
    cpu = usage.ru_utime + usage.ru_stime
    node = read_node_cpu(node_cpu)
    return {"wall_s": wall, "cpu_s": cpu, "node_cpu_s": node, "controller_cpu_s": None if node is None else cpu - node,
            "user_s": usage.ru_utime,
            "sys_s": usage.ru_stime, "worker_rc": proc.returncode, "artifacts": artifacts,
            "status": _read(artifacts, "status"), "rc": _read(artifacts, "rc")}


def _read(folder, name):
    try:
        with open(os.path.join(folder, name)) as handle:
            return handle.read().strip()
    except OSError:
        return "missing"


# ---- reading the job events ---------------------------------------------------------------------

def load_events(artifacts):
    folder = os.path.join(artifacts, "job_events")
    events = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        with open(path) as handle:
            event = json.load(handle)
        event["_bytes"] = os.path.getsize(path)
        events.append(event)
    return events


def _short(action):
    return (action or "").rsplit(".", 1)[-1]


def _controller_only(data):
    return _short(data.get("resolved_action") or data.get("task_action")) in CONTROLLER_ACTIONS


def _delegated(data):
    return "_ansible_delegated_vars" in (data.get("res") or {})


def round_trips(events):
    """Module round trips per host on the node, and module runs delegated to the controller (rule: ROUND TRIPS)."""
    looped = {(e["event_data"].get("host"), e["event_data"].get("task_uuid"))
              for e in events if e["event"] in ITEM_EVENTS + ("runner_item_on_skipped",)}
    trips, delegated = collections.Counter(), collections.Counter()
    for event in events:
        data = event.get("event_data") or {}
        host = data.get("host")
        if not host or _controller_only(data):
            continue
        if event["event"] in ITEM_EVENTS or (event["event"] in RESULT_EVENTS
                                             and (host, data.get("task_uuid")) not in looped):
            (delegated if _delegated(data) else trips)[host] += 1
    return trips, delegated


def bytes_per_host(events):
    per_host = collections.Counter()
    for event in events:
        host = (event.get("event_data") or {}).get("host")
        if host:
            per_host[host] += event["_bytes"]
    return per_host


def costly_tasks(events, top=10):
    """(task, events, bytes) of the tasks whose host events cost the most bytes."""
    count, size = collections.Counter(), collections.Counter()
    for event in events:
        data = event.get("event_data") or {}
        if data.get("host") and data.get("task"):
            count[data["task"]] += 1
            size[data["task"]] += event["_bytes"]
    return [(task, count[task], size[task]) for task, _ in size.most_common(top)]


def host_failures(events):
    """Hosts with failures or unreachable in the closing stats, and the hosts the stats name."""
    stats = [e for e in events if e["event"] == "playbook_on_stats"]
    if not stats:
        return None, set()
    data = stats[-1]["event_data"]
    bad = set(data.get("failures") or {}) | set(data.get("dark") or {})
    seen = set()
    for key in ("ok", "changed", "failures", "dark", "skipped"):
        seen |= set(data.get(key) or {})
    return sorted(bad), seen


def changed_tasks(events):
    """Tasks that report changed (or would, in --check) on a node, with the number of hosts. Results
    delegated to the controller, and the gate's (changed: it wrote report files on the controller, in
    this run's new report folder), are not the node's."""
    delegated = {(e["event_data"].get("host"), e["event_data"].get("task_uuid")) for e in events
                 if "_ansible_delegated_vars" in ((e.get("event_data") or {}).get("res") or {})}
    out = collections.Counter()
    for event in events:
        data = event.get("event_data") or {}
        res = data.get("res") or {}
        if (event["event"] == "runner_on_ok" and res.get("changed") and data.get("host") and "report_files" not in res
                and (data["host"], data.get("task_uuid")) not in delegated):
            out[data.get("task")] += 1
    return out


def figures(job, nodes, events):
    """Per-node figures over the inventory's nodes (not the implicit localhost of the fabric play);
    event_bytes_job is every event of the job (also the once-per-job ones), what AWX stores."""
    n = len(nodes)
    (trips, delegated), size = round_trips(events), bytes_per_host(events)
    trips = [trips.get(node, 0) for node in nodes]
    size = [size.get(node, 0) for node in nodes]
    failed, seen = host_failures(events)
    job.update({
        "nodes": n, "wall_per_node_s": job["wall_s"] / n, "cpu_per_node_s": job["cpu_s"] / n,
        "controller_cpu_per_node_s": None if job["controller_cpu_s"] is None else job["controller_cpu_s"] / n,
        "node_cpu_per_node_s": None if job["node_cpu_s"] is None else job["node_cpu_s"] / n,
        "controller_runs_per_node": sum(delegated.get(node, 0) for node in nodes) / float(n),
        "round_trips_per_node": sum(trips) / float(n), "round_trips_min": min(trips), "round_trips_max": max(trips),
        "event_bytes_per_node": sum(size) / float(n), "event_bytes_max": max(size),
        "event_bytes_job": sum(e["_bytes"] for e in events), "events": len(events),
        "job_event_bytes_per_node": sum(e["_bytes"] for e in events) / float(n),
        "hosts_in_stats": len(seen & set(nodes)), "hosts_failed": failed,
    })
    return job


# ---- the runs -------------------------------------------------------------------------------

def measure(kind, nodes, pdd, inventory, args, ident=None, **how):
    """One job, its figures from the job events, and a progress line. ``ident``: the job's artifacts
    folder (default: kind; a repeated job needs its own, its events would add up)."""
    print("N=%d: %s ..." % (len(nodes), kind), end=" ", flush=True)
    job = run_job(pdd, ident or kind, inventory, args.forks, **how)
    events = load_events(job["artifacts"])
    figures(job, nodes, events)
    job["costly_tasks"] = costly_tasks(events)
    job["load_after"] = os.getloadavg()[0]
    if kind.startswith("prov"):
        job["changed_tasks"] = dict(changed_tasks(events))
    print("%s, %.1f s wall, %.1f s CPU, %.0f KB of events, load %.1f"
          % (job["status"], job["wall_s"], job["cpu_s"], job["event_bytes_job"] / 1024.0, job["load_after"]), flush=True)
    return job


def bench_n(work, ref, n, args, profile_bench):
    inventory, nodes = write_inventory(work, ref, n)
    pdd = os.path.join(work, "pdd-%d" % n)
    out = collections.OrderedDict()
    pairs = []
    for rep in range(args.repeat):
        # ping and the gate in turn: on a shared machine the ratio of a pair holds when the speed drifts
        ping = measure("ping", nodes, pdd, inventory, args, ident="ping-%d" % rep, module="ping", host_pattern="all")
        gate = measure("gate", nodes, pdd, inventory, args, ident="gate-%d" % rep, playbook=os.path.join(REPO, "playbooks", "validate.yml"),
                       extravars={"validate_profile": PROFILE,
                                  "validate_report_dir": os.path.join(work, "reports-%d-%d" % (n, rep))})
        pairs.append((gate["cpu_per_node_s"] / ping["cpu_per_node_s"], ping, gate))
    # the table shows the pair of the median ratio; every pair's ratio goes with it
    median = sorted(pairs, key=lambda pair: pair[0])[len(pairs) // 2]
    out["ping"], out["gate"] = median[1], median[2]
    out["gate"]["pair_ratios"] = [round(pair[0], 3) for pair in pairs]
    out["gate"]["pair_loads"] = [round(pair[2]["load_after"], 1) for pair in pairs]
    if n in args.provision_nodes:
        out.update(bench_provision(work, n, nodes, pdd, inventory, args, profile_bench))
    return out


def machine_files():
    """The converged stamp's files digest of this machine (plugins/module_utils/_os/stamp.py, loaded by
    path: it imports nothing of the collection): the seed run must leave it as it was."""
    spec = importlib.util.spec_from_file_location(
        "gpufleet_stamp", os.path.join(REPO, "plugins", "module_utils", "_os", "stamp.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.files_digest("/")


def bench_provision(work, n, nodes, pdd, inventory, args, profile_bench):
    """The converged provision.yml (issue 26 part 3): the nodes are made converged first (a --check
    that must predict no change, then the real run whose gate writes each node's stamp into the work
    folder), then measured: the whole washing machine on them (--check, stamps off: what a converged
    run cost before), and the converged run with the stamps, --check and real."""
    extravars = {k: v for k, (v, _why) in PROVISION_VARS.items()}
    extravars.update((k, v) for k, (v, _why) in CONVERGED_VARS.items())
    extravars.update(gpufleet_profile=profile_bench, validate_profile=profile_bench,
                     validate_report_dir=os.path.join(work, "reports-prov-%d" % n),
                     provision_converged_stamp=os.path.join(work, "stamps-%d" % n, "{{ inventory_hostname }}.json"))
    play = os.path.join(REPO, "playbooks", "provision.yml")
    out = collections.OrderedDict()
    seed = measure("prov-seed-check", nodes, pdd, inventory, args, cmdline="--check", playbook=play, extravars=extravars)
    if seed["changed_tasks"] or seed["hosts_failed"]:
        print("N=%d: not converged here, no real run: %s" % (n, seed["changed_tasks"] or seed["hosts_failed"]))
        out["prov-full"] = seed
        return out
    before = machine_files()
    measure("prov-seed", nodes, pdd, inventory, args, playbook=play, extravars=extravars)
    if machine_files() != before:
        print("N=%d: WARNING: the real run moved a file provisioning manages on this machine (_os/stamp.MANAGED)" % n)
    stamps = [node for node in nodes if os.path.exists(os.path.join(work, "stamps-%d" % n, node + ".json"))]
    print("N=%d: %d of %d nodes stamped converged" % (n, len(stamps), len(nodes)))
    out["prov-full"] = measure("prov-full", nodes, pdd, inventory, args, cmdline="--check", playbook=play,
                               extravars=dict(extravars, provision_converged_stamp=""))
    out["prov-check"] = measure("prov-check", nodes, pdd, inventory, args, cmdline="--check", playbook=play,
                                extravars=extravars)
    out["prov-real"] = measure("prov-real", nodes, pdd, inventory, args, playbook=play, extravars=extravars)
    return out


# ---- printing -------------------------------------------------------------------------------

# (heading, width, format, value of a job given the ping job of the same N)
COLUMNS = (
    ("wall s", 7, "%.1f", lambda job, ping: job["wall_s"]),
    ("CPU s", 7, "%.1f", lambda job, ping: job["cpu_s"]),
    ("wall/node", 9, "%.2f", lambda job, ping: job["wall_per_node_s"]),
    ("CPU/node", 8, "%.3f", lambda job, ping: job["cpu_per_node_s"]),
    ("x ping wall", 11, "%.2f", lambda job, ping: job["wall_per_node_s"] / ping["wall_per_node_s"]),
    ("x ping CPU", 10, "%.2f", lambda job, ping: job["cpu_per_node_s"] / ping["cpu_per_node_s"]),
    ("ctl CPU/node", 12, "%s", lambda job, ping: _opt(job["controller_cpu_per_node_s"])),
    ("x ping ctl", 10, "%s", lambda job, ping: _opt(_ratio(job["controller_cpu_per_node_s"], ping["controller_cpu_per_node_s"]), "%.2f")),
    ("node CPU/node", 13, "%s", lambda job, ping: _opt(job["node_cpu_per_node_s"])),
    ("trips/node", 10, "%.1f", lambda job, ping: job["round_trips_per_node"]),
    ("ctl/node", 8, "%.1f", lambda job, ping: job["controller_runs_per_node"]),
    ("KB/node", 7, "%.1f", lambda job, ping: job["event_bytes_per_node"] / 1024.0),
    ("KB max", 7, "%.1f", lambda job, ping: job["event_bytes_max"] / 1024.0),
    ("job KB/node", 11, "%.1f", lambda job, ping: job["job_event_bytes_per_node"] / 1024.0),
)


def _ratio(a, b):
    return None if a is None or not b else a / b


def _opt(value, fmt="%.3f"):
    return "-" if value is None else fmt % value


def print_table(results):
    print("\n%-10s %4s " % ("run", "N") + " ".join("%*s" % (w, head) for head, w, _f, _v in COLUMNS) + "  status")
    for n, runs in results.items():
        for kind, job in runs.items():
            cells = " ".join("%*s" % (w, fmt % value(job, runs["ping"])) for _h, w, fmt, value in COLUMNS)
            print("%-10s %4d %s  %s%s" % (kind, n, cells, job["status"], _status_note(job, n)))
    print("CPU: the job's whole process tree; ctl CPU: without what ran as the nodes' Python (NODE CPU in the"
          " source; '-' without GNU time); node CPU: that part")
    print("trips: module round trips on the node; ctl: module runs delegated to the controller; KB: job events"
          " of the node (max: the largest node); job KB: every event of the job / N")


def _status_note(job, n):
    notes = []
    if job["hosts_failed"]:
        notes.append(" failed: %s" % ",".join(job["hosts_failed"][:5]))
    if job["hosts_in_stats"] and job["hosts_in_stats"] < n:
        notes.append(" only %d host(s) in the stats" % job["hosts_in_stats"])
    return "".join(notes)


def print_costly(results, kind="gate"):
    ns = [n for n, runs in results.items() if kind in runs]
    if not ns:
        return
    n = ns[len(ns) // 2]
    print("\nThe 10 tasks of the %s at N=%d that cost the most job events:" % (kind, n))
    print("  %8s %7s %9s  %s" % ("KB/node", "events", "KB total", "task"))
    for task, count, size in results[n][kind]["costly_tasks"]:
        print("  %8.1f %7d %9.1f  %s" % (size / 1024.0 / n, count, size / 1024.0, task))


def print_provision_notes(results):
    runs = [(n, r) for n, r in results.items() if "prov-full" in r]
    if not runs:
        return
    print("\nprovision.yml on converged nodes: profile hgx-h100 trimmed to what this machine and the fixture root")
    print("can be converged to. Left out or turned off here:")
    for key, why in PROVISION_TRIM.items():
        print("  - %s: %s" % (key, why))
    for name, (value, why) in list(PROVISION_VARS.items()) + list(CONVERGED_VARS.items()):
        print("  - %s=%s: %s" % (name, json.dumps(value), why))
    for n, r in runs:
        for kind in ("prov-full", "prov-check", "prov-real"):
            if kind in r and r[kind]["changed_tasks"]:
                print("N=%d %s: tasks that report a change: %s" % (n, kind, "; ".join(
                    "%s (%d nodes)" % kv for kv in sorted(r[kind]["changed_tasks"].items()))))


def print_converged_goals(results):
    """Issue 26 part 3: a converged provision.yml (check mode and real) per node."""
    runs = [(n, r) for n, r in results.items() if "prov-check" in r]
    if not runs:
        return
    print("\nGoals (issue 26 part 3), a converged provision.yml, per node:")
    for n, r in runs:
        ping = r["ping"]
        for kind in ("prov-check", "prov-real"):
            job = r[kind]
            ratio = job["cpu_per_node_s"] / ping["cpu_per_node_s"]
            kb = job["event_bytes_per_node"] / 1024.0
            print("  N=%d %-10s round trips %.1f (max %d) goal <= %d %s; CPU %.2fx ping goal <= %.0fx %s;"
                  " events %.1f KB goal <= %.0f KB %s"
                  % (n, kind, job["round_trips_per_node"], job["round_trips_max"], GOAL_TRIPS,
                     _verdict(job["round_trips_max"] <= GOAL_TRIPS), ratio, GOAL_PING_X, _verdict(ratio <= GOAL_PING_X),
                     kb, GOAL_KB, _verdict(kb <= GOAL_KB)))
        full = r["prov-full"]
        print("  N=%d the whole washing machine on the same nodes (prov-full): %.1f round trips, %.2fx ping, %.1f KB;"
              " the converged check costs %.2fx of it" % (n, full["round_trips_per_node"], full["cpu_per_node_s"] / ping["cpu_per_node_s"],
                                                          full["event_bytes_per_node"] / 1024.0,
                                                          r["prov-check"]["cpu_per_node_s"] / full["cpu_per_node_s"]))


def _verdict(ok):
    return "met" if ok else "MISSED"


def print_goals(results, forks=16):
    ns = list(results)
    print("\nGoals (issue 16), the gate:")
    if GOAL_N in results:
        gate = results[GOAL_N]["gate"]
        cpu, kb = gate["cpu_per_node_s"], gate["event_bytes_per_node"] / 1024.0
        print("  CPU per node at N=%d     %7.3f s   goal <= %.1f s   %s" % (GOAL_N, cpu, GOAL_CPU, _verdict(cpu <= GOAL_CPU)))
        ctl = gate["controller_cpu_per_node_s"]
        if ctl is not None:
            print("    of which the controller %7.3f s   goal <= %.1f s   %s  (ping's: %.3f s)"
                  % (ctl, GOAL_CPU, _verdict(ctl <= GOAL_CPU), results[GOAL_N]["ping"]["controller_cpu_per_node_s"]))
        print("  events per node at N=%d  %7.1f KB  goal <= %.0f KB   %s" % (GOAL_N, kb, GOAL_KB, _verdict(kb <= GOAL_KB)))
        ping = results[GOAL_N]["ping"]
        ratio = cpu / ping["cpu_per_node_s"]
        print("\nGoals (issue 34), the gate at N=%d, forks %d, against ping in the same run:" % (GOAL_N, forks))
        if len(gate.get("pair_ratios", [])) > 1:
            print("  ratios of the %d ping/gate pairs run in turn: %s (loads %s); the median pair:" % (
                len(gate["pair_ratios"]), ", ".join("%.2f" % r for r in gate["pair_ratios"]),
                ", ".join("%.1f" % x for x in gate["pair_loads"])))
        print("  CPU per node %.3f s = %.2fx ping's %.3f s   goal <= %.1fx   %s  (controller %s vs %s, node %s vs %s)"
              % (cpu, ratio, ping["cpu_per_node_s"], GOAL_GATE_PING_X, _verdict(ratio <= GOAL_GATE_PING_X),
                 _opt(ctl), _opt(ping["controller_cpu_per_node_s"]), _opt(gate["node_cpu_per_node_s"]),
                 _opt(ping["node_cpu_per_node_s"])))
        print("  events per node %.1f KB (ping %.1f KB)   goal <= %.0f KB   %s"
              % (kb, ping["event_bytes_per_node"] / 1024.0, GOAL_KB, _verdict(kb <= GOAL_KB)))
        print("  load average at the end of the run: %s" % " ".join("%.1f" % x for x in os.getloadavg()))
    else:
        print("  (no run at N=%d: the absolute goals are not measured)" % GOAL_N)
    if len(ns) > 1:
        first, last = results[ns[0]]["gate"], results[ns[-1]]["gate"]
        for label, key in (("CPU per node", "cpu_per_node_s"), ("events per node", "event_bytes_per_node")):
            ratio = last[key] / first[key]
            print("  %-16s N=%d vs N=%d: %.2fx  goal: flat or falling (<= %.2fx)  %s"
                  % (label, ns[-1], ns[0], ratio, FLAT, _verdict(ratio <= FLAT)))


def write_json(path, results, args):
    doc = {"nodes": args.nodes, "forks": args.forks,
           "provision_trim": PROVISION_TRIM, "provision_vars": {k: v for k, (v, _why) in PROVISION_VARS.items()},
           "converged_vars": {k: v for k, (v, _why) in CONVERGED_VARS.items()},
           "goals": {"n": GOAL_N, "cpu_per_node_s": GOAL_CPU, "event_kb_per_node": GOAL_KB, "flat": FLAT},
           "runs": {str(n): {k: {f: v for f, v in job.items() if f != "artifacts"} for k, job in runs.items()}
                    for n, runs in results.items()}}
    with open(path, "w") as handle:
        json.dump(doc, handle, indent=2, sort_keys=True)


def main():
    args = parse_args()
    if args.worker:
        run_worker(args.worker)
        return
    work = tempfile.mkdtemp(prefix="fleet-bench-")
    print("fleet_bench: N=%s, forks %d, provision --check at N=%s; work folder %s"
          % (",".join(map(str, args.nodes)), args.forks, ",".join(map(str, args.provision_nodes)) or "-", work))
    try:
        ref = unpack_reference(work)
        profile_bench = write_provision_profile(work)
        results = collections.OrderedDict()
        for n in args.nodes:
            results[n] = bench_n(work, ref, n, args, profile_bench)
            if args.json:
                write_json(args.json, results, args)
        print_table(results)
        print_costly(results)
        print_costly(results, "prov-check")
        print_provision_notes(results)
        print_goals(results, args.forks)
        print_converged_goals(results)
        if args.json:
            write_json(args.json, results, args)
            print("\nfigures written to %s" % args.json)
    finally:
        if args.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
