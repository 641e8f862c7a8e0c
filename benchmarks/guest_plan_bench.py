#!/usr/bin/env python3
"""guest_plan cost, printed side by side with its baselines.

1. In process, on the reference node's facts (208 CPUs, 8 NUMA nodes, 8 GPU-NIC pairs): plan_guests
   for one 8-GPU guest and for 8 guests of 1 GPU, then the same with the three renderings (QEMU,
   libvirt, cloud-hypervisor) of every plan; and collect() of the tree, the step the module adds
   when it reads facts through root. Median of N runs.
2. As Ansible tasks on this host, alternating in one playbook run so all see the same load:
   ansible.builtin.ping (the floor of any module task), guest_plan with the facts given, guest_plan
   reading them through root. Median wall time per task and ratios against ping.
3. As whole processes: `ansible localhost -m gpufleet.provision.guest_plan` against
   `ansible localhost -m ansible.builtin.ping` (interpreter start, plugin loading, the task).

    .venv/bin/python benchmarks/guest_plan_bench.py [--runs 15]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(REPO, ".build"), REPO]

from lab.hw import ttar  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._node.facts import collect  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.outputs import render  # noqa: E402
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import plan_guests  # noqa: E402

ONE_BIG = [{"name": "big", "gpus": 8}]
EIGHT_SMALL = [{"name": "g%d" % i, "gpus": 1} for i in range(8)]


def median_ms(func, runs):
    func()  # imports, caches
    times = []
    for dummy in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, min(times) * 1000, max(times) * 1000


def in_process(root, runs):
    facts, warnings = collect(root)
    assert not warnings, warnings
    rows = [
        ("plan_guests, one 8-GPU guest", lambda: plan_guests(facts, ONE_BIG)),
        ("plan_guests, 8 guests of 1 GPU", lambda: plan_guests(facts, EIGHT_SMALL)),
        ("plan + 3 renderings, one 8-GPU guest", lambda: [render(p) for p in plan_guests(facts, ONE_BIG)]),
        ("plan + 3 renderings, 8 guests of 1 GPU", lambda: [render(p) for p in plan_guests(facts, EIGHT_SMALL)]),
        ("collect(root) (the module without facts)", lambda: collect(root)),
    ]
    return facts, [(label,) + median_ms(func, runs) for label, func in rows]


# The facts are read once (set_fact), as a play that got them from node_facts or a gate report has them.
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: facts
      ansible.builtin.set_fact:
        ref_facts: "{{{{ lookup('file', '{facts}') | from_json }}}}"
{tasks}
"""


def ansible_env(out=None):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"), ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="0", ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    if out:
        env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"), TASK_TIMER_OUT=out)
    return env


def as_tasks(root, facts, runs, tmp):
    requests = json.dumps(EIGHT_SMALL)
    tasks = []
    for i in range(runs):
        tasks.append("    - name: ping {0}\n      ansible.builtin.ping:".format(i))
        tasks.append("    - name: given {0}\n      gpufleet.provision.guest_plan:\n        facts: \"{{{{ ref_facts }}}}\"\n"
                     "        requests: {1}".format(i, requests))
        tasks.append("    - name: root {0}\n      gpufleet.provision.guest_plan:\n        root: {1}\n"
                     "        requests: {2}".format(i, root, requests))
    facts_file = os.path.join(tmp, "facts.json")
    with open(facts_file, "w") as handle:
        json.dump(facts, handle)
    book = os.path.join(tmp, "bench.yml")
    out = os.path.join(tmp, "times.jsonl")
    with open(book, "w") as handle:
        handle.write(PLAYBOOK.format(facts=facts_file, tasks="\n".join(tasks)))
    bindir = os.path.dirname(sys.executable)
    subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", "-c", "local", book],
                   env=ansible_env(out), check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(out)]
    return dict((kind, statistics.median(r["seconds"] for r in rows if r["task"].startswith(kind + " ")))
                for kind in ("ping", "given", "root"))


def whole_process(root, runs):
    bindir = os.path.dirname(sys.executable)
    args = {"root": root, "requests": EIGHT_SMALL}
    commands = {
        "ping": [os.path.join(bindir, "ansible"), "localhost", "-m", "ansible.builtin.ping"],
        "guest_plan": [os.path.join(bindir, "ansible"), "localhost", "-m", "gpufleet.provision.guest_plan", "-a", json.dumps(args)],
    }
    times = dict((k, []) for k in commands)
    for dummy in range(runs):
        for kind, cmd in commands.items():  # alternating
            start = time.perf_counter()
            subprocess.run(cmd, env=ansible_env(), check=True, stdout=subprocess.DEVNULL)
            times[kind].append(time.perf_counter() - start)
    return dict((k, statistics.median(v)) for k, v in times.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--process-runs", type=int, default=5)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    try:
        root = os.path.join(tmp, "ref")
        with open(os.path.join(REPO, "tests/fixtures/trees/hgx-h100-ref.ttar")) as handle:
            ttar.unpack(handle.read(), root)
        facts, rows = in_process(root, args.runs)
        print("in process, reference node facts, %d runs (median, min, max):" % args.runs)
        for label, med, low, high in rows:
            print("  %-42s %7.2f ms  (%.2f-%.2f)" % (label, med, low, high))
        tasks = as_tasks(root, facts, args.runs, tmp)
        print("as Ansible tasks on this host, alternating, %d runs each (median wall time per task), 8 guests of 1 GPU:" % args.runs)
        print("  ansible.builtin.ping                      %7.3f s" % tasks["ping"])
        print("  guest_plan, facts given                   %7.3f s   %.2f x ping" % (tasks["given"], tasks["given"] / tasks["ping"]))
        print("  guest_plan, facts read through root       %7.3f s   %.2f x ping" % (tasks["root"], tasks["root"] / tasks["ping"]))
        procs = whole_process(root, args.process_runs)
        print("as whole processes (ansible localhost -m ...), alternating, %d runs each (median):" % args.process_runs)
        print("  ansible -m ansible.builtin.ping           %7.3f s" % procs["ping"])
        print("  ansible -m gpufleet.provision.guest_plan  %7.3f s   %.2f x ping" % (procs["guest_plan"], procs["guest_plan"] / procs["ping"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
