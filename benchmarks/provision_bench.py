#!/usr/bin/env python3
"""provision.yml on the lab's 4 twins, dirty and converged, against `ansible -m setup` in the same run.

    GPUFLEET_LABTEST_SHIFT=600 GPUFLEET_LABTEST_PREFIX=gpufleet-lt-os- .venv/bin/python benchmarks/provision_bench.py

Brings up a private lab (the lab tests' harness: ports shifted, containers prefixed, state in a
temporary folder), then measures, all hosts in parallel (forks 5):
  - one fact gathering round trip (`ansible all -m setup`), before and after, the baseline;
  - provision.yml on fresh dirty twins (BIOS, GRUB, tuning faults, one reboot), and again converged;
  - tasks per host of each run (results the task_timer callback saw) and the slowest tasks.
Prints figures and the ratios (the issue's goal: a converged run costs no more than 3 fact
gatherings per node). Asserts nothing; tears the lab down.
"""
import collections
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))


def _lab_module():
    spec = importlib.util.spec_from_file_location("gpufleet_lab_conftest_bench",
                                                  os.path.join(REPO, "tests", "integration", "lab", "conftest.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(lab, label, cmd, figures):
    out = os.path.join(lab.base, "timer-%d.jsonl" % time.monotonic_ns())
    env = dict(lab.env, ANSIBLE_CALLBACK_PLUGINS=os.path.join(HERE, "callback_plugins"), TASK_TIMER_OUT=out,
               ANSIBLE_CALLBACKS_ENABLED="task_timer", ANSIBLE_FORKS="5")
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800, cwd=lab.base)
    seconds = time.time() - t0
    if proc.returncode != 0:
        print("%s failed (exit %d):\n%s\n%s" % (label, proc.returncode, proc.stdout[-4000:], proc.stderr[-2000:]))
    rows = []
    if os.path.exists(out):
        with open(out) as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
    figures[label] = {"seconds": seconds, "results": len(rows), "rc": proc.returncode, "rows": rows}
    return proc


def main():
    labmod = _lab_module()
    base = tempfile.mkdtemp(prefix="gpufleet-provbench-")
    lab = labmod.Lab(base)
    lab.write_inventory()
    lab.lab_sh("down")
    t0 = time.time()
    up = lab.lab_sh("up")
    if up.returncode != 0:
        print("lab up failed:\n" + up.stdout[-3000:] + up.stderr[-3000:])
        lab.lab_sh("down")
        sys.exit(1)
    hosts = len(lab.hosts)
    print("lab up (4 twins + 4 BMCs): %.1f s" % (time.time() - t0))
    figures = collections.OrderedDict()
    ansible = os.path.join(labmod.VENV_BIN, "ansible")
    playbook = [os.path.join(labmod.VENV_BIN, "ansible-playbook"), "-i", lab.inventory_dir,
                os.path.join(REPO, "playbooks", "provision.yml"), "-e", json.dumps({"gpufleet_lab_output": os.path.join(base, "out")})]
    try:
        timed(lab, "setup (before)", [ansible, "-i", lab.inventory_dir, "lab_twins", "-m", "ansible.builtin.setup"], figures)
        timed(lab, "provision.yml, dirty", playbook, figures)
        timed(lab, "provision.yml, converged", playbook, figures)
        timed(lab, "setup (after)", [ansible, "-i", lab.inventory_dir, "lab_twins", "-m", "ansible.builtin.setup"], figures)
    finally:
        lab.lab_sh("down")
    setup = (figures["setup (before)"]["seconds"] + figures["setup (after)"]["seconds"]) / 2
    print("\n%-28s %9s %8s %14s %s" % ("run (4 twins, forks 5)", "wall s", "tasks/host", "x setup", "rc"))
    for label, fig in figures.items():
        print("%-28s %9.1f %8.1f %14.2f %s" % (label, fig["seconds"], fig["results"] / float(hosts), fig["seconds"] / setup, fig["rc"]))
    for label in ("provision.yml, dirty", "provision.yml, converged"):
        slow = collections.Counter()
        for row in figures[label]["rows"]:
            slow[row["task"]] += row["seconds"]
        print("\nslowest tasks of %s (summed over hosts, s):" % label)
        for task, seconds in slow.most_common(8):
            print("  %7.1f  %s" % (seconds, task))
    print("\nconverged run / one fact gathering: %.2f (goal <= 3)" % (figures["provision.yml, converged"]["seconds"] / setup))


if __name__ == "__main__":
    main()
