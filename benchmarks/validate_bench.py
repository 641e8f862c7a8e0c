#!/usr/bin/env python3
"""Benchmark of the validation gate. Prints figures and ratios; asserts nothing.

1. validate_node in-process on the reference tree (hgx-h100-ref): facts collection, GRUB read and
   all non-probe checks, median of --repeat runs (target: under 100 ms for everything).
2. Wall time of playbooks/validate.yml against N localhost fixture nodes (each its own unpacked
   tree): with recorded inputs (validate_inputs, no package/service collection) and collecting
   for real on this machine (package_facts, service_facts, commands).

    .venv/bin/python benchmarks/validate_bench.py [--repeat 30] [--nodes 1,4,8] [--no-playbook]
"""
import argparse
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(REPO, ".build"), REPO]

from lab.hw import ttar  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._desired import profile as _profile  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._gate import gate  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._node.fs import Root  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.modules import validate_node  # noqa: E402

TREE = os.path.join(REPO, "tests", "fixtures", "trees", "hgx-h100-ref.ttar")


def unpack(dest):
    with open(TREE) as handle:
        ttar.unpack(handle.read(), dest)
    return dest


def in_process(root, profile, repeat):
    collect_ms, checks_ms, total_ms = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        facts = collect(root)[0]
        t1 = time.perf_counter()
        prof = _profile.validate(copy.deepcopy(profile), gate.CHECK_IDS)
        inputs = gate.Inputs(facts, prof, grub=gate.read_grub_sources(Root(root)))
        gate.evaluate(inputs, node="bench")
        t2 = time.perf_counter()
        collect_ms.append((t1 - t0) * 1000)
        checks_ms.append((t2 - t1) * 1000)
        t3 = time.perf_counter()
        validate_node.run({"root": root, "profile": profile, "packages": None, "services": None,
                           "outputs": {}, "output_errors": {}, "node": "bench"})
        total_ms.append((time.perf_counter() - t3) * 1000)
    return statistics.median(collect_ms), statistics.median(checks_ms), statistics.median(total_ms)


def playbook(n, workdir, replay):
    hosts = {}
    for i in range(n):
        root = unpack(os.path.join(workdir, "node%02d" % i))
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gpufleet_hardware_root": root}
        if replay:
            host["validate_inputs"] = {"packages": {}, "services": {}, "outputs": {}}
        hosts["gpu%03d" % (i + 1)] = host
    inventory = os.path.join(workdir, "inventory.yml")
    with open(inventory, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts}}, handle)
    timings = os.path.join(workdir, "tasks.jsonl")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_FORKS=str(max(5, n)), ANSIBLE_CALLBACK_PLUGINS=os.path.join(REPO, "benchmarks", "callback_plugins"),
               TASK_TIMER_OUT=timings)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory,
           os.path.join(REPO, "playbooks", "validate.yml"), "-e", "validate_profile=hgx-h100",
           "-e", "validate_report_dir=%s" % os.path.join(workdir, "reports")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:])
    per_task = {}
    if os.path.exists(timings):
        with open(timings) as handle:
            for line in handle:
                entry = json.loads(line)
                per_task[entry["task"]] = max(per_task.get(entry["task"], 0.0), entry["seconds"])
    return wall, per_task


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--nodes", default="1,4,8")
    parser.add_argument("--no-playbook", action="store_true")
    args = parser.parse_args()
    with open(os.path.join(REPO, "inventories", "profiles", "hgx-h100.yml")) as handle:
        profile = yaml.safe_load(handle)
    work = tempfile.mkdtemp(prefix="validate-bench-")
    try:
        root = unpack(os.path.join(work, "ref"))
        c_ms, k_ms, t_ms = in_process(root, profile, args.repeat)
        print("in-process on hgx-h100-ref (median of %d runs):" % args.repeat)
        print("  collect facts          %7.1f ms" % c_ms)
        print("  profile + GRUB + %d checks %5.1f ms" % (len(gate.CHECK_IDS), k_ms))
        print("  validate_node.run()    %7.1f ms  (incl. JUnit/Prometheus rendering; target < 100 ms: %s)"
              % (t_ms, "met" if t_ms < 100 else "MISSED"))
        print("  checks / collection    %7.2f x" % (k_ms / c_ms))
        if args.no_playbook:
            return
        print("playbooks/validate.yml wall time (ansible-playbook, localhost fixture nodes):")
        first = {}
        for replay in (True, False):
            for n in [int(x) for x in args.nodes.split(",")]:
                sub = tempfile.mkdtemp(dir=work)
                wall, per_task = playbook(n, sub, replay)
                base = first.setdefault(replay, wall / n)
                print("  %-22s N=%-3d %6.1f s  %5.2f s/node  (per-node vs N=%s: %.2fx)"
                      % ("recorded inputs" if replay else "collecting for real", n, wall, wall / n,
                         args.nodes.split(",")[0], (wall / n) / base))
                shutil.rmtree(sub, ignore_errors=True)
                slowest = sorted(per_task.items(), key=lambda kv: -kv[1])[:4]
                print("      slowest tasks: " + "; ".join("%s %.1f s" % (name.split(" : ")[-1], sec) for name, sec in slowest))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
