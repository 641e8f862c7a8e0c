#!/usr/bin/env python3
"""node_facts cost, printed side by side with its baseline.

1. In process: collect() on the reference tree (median of N runs). Target: under 50 ms.
2. As an Ansible task on this host: gpufleet.provision.node_facts versus ansible.builtin.setup with
   gather_subset=all, alternating in one playbook run so both see the same machine load.
   Target: node_facts at most half of setup's wall time.

    .venv/bin/python benchmarks/node_facts_bench.py [--runs 15]
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


def in_process(runs):
    tmp = tempfile.mkdtemp(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    try:
        with open(os.path.join(REPO, "tests/fixtures/trees/hgx-h100-ref.ttar")) as handle:
            ttar.unpack(handle.read(), tmp)
        collect(tmp)  # warm the page cache and imports
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            collect(tmp)
            times.append(time.perf_counter() - start)
        return times
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
{tasks}
"""


def as_tasks(runs):
    tasks = []
    for i in range(runs):
        tasks.append("    - name: setup {0}\n      ansible.builtin.setup:\n        gather_subset: all".format(i))
        tasks.append("    - name: node_facts {0}\n      gpufleet.provision.node_facts:".format(i))
    tmp = tempfile.mkdtemp()
    try:
        book = os.path.join(tmp, "bench.yml")
        out = os.path.join(tmp, "times.jsonl")
        with open(book, "w") as handle:
            handle.write(PLAYBOOK.format(tasks="\n".join(tasks)))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".build"),
                   ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"), TASK_TIMER_OUT=out,
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
                   ANSIBLE_PYTHON_INTERPRETER=sys.executable)
        bindir = os.path.dirname(sys.executable)
        subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", "-c", "local", book],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(line) for line in open(out)]
        setup = [r["seconds"] for r in rows if r["task"].startswith("setup")]
        facts = [r["seconds"] for r in rows if r["task"].startswith("node_facts")]
        return setup, facts
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times = in_process(args.runs)
    med = statistics.median(times) * 1000
    print("node_facts in process, reference tree (208 CPUs, 8 GPUs, 10 NICs), %d runs:" % args.runs)
    print("  median %.1f ms  min %.1f ms  max %.1f ms  target < 50 ms: %s"
          % (med, min(times) * 1000, max(times) * 1000, "OK" if med < 50 else "MISSED"))
    setup, facts = as_tasks(args.runs)
    ms, mf = statistics.median(setup), statistics.median(facts)
    print("as Ansible tasks on this host, alternating, %d runs each (median wall time per task):" % args.runs)
    print("  ansible.builtin.setup gather_subset=all  %7.3f s" % ms)
    print("  gpufleet.provision.node_facts            %7.3f s" % mf)
    print("  ratio node_facts / setup                 %7.2f   target <= 0.50: %s" % (mf / ms, "OK" if mf / ms <= 0.5 else "MISSED"))


if __name__ == "__main__":
    main()
