#!/usr/bin/env python3
"""A dirty twin to green: the live path (provision.yml does everything) against the golden image
path (a twin started from the image of its profile: BIOS + one reboot + the gate), wall time and
reboots, on one private lab (issue 26 part 1).

    GPUFLEET_LABTEST_SHIFT=700 GPUFLEET_LABTEST_PREFIX=gpufleet-imgbench- .venv/bin/python benchmarks/image_bench.py [--loads 1,3]

Brings up the image tests' lab (tests/integration/image/conftest.py: ``builder``, then ``imaged``
from the image) plus one dirty twin ``live`` (the lab's twin1 faults: SNC and HT off, GRUB and
tuning faults, packages not held). Measures image.yml (once per profile, not per node), the
export and import, provision.yml on ``imaged`` and on ``live``, validate.yml on ``imaged`` (one
gate) and the reboot task; prints the figures against the goal: the image path costs one reboot
plus one gate plus at most 30 s. Asserts nothing; tears the lab down.

--loads 1,3 measures the node paths once per load: the image is built once, then for each load the
twins ``imaged`` and ``live`` are started fresh (dirty again) and provisioned while LOAD-1 busy
processes run beside the playbook (the playbook being about one runnable process; other users of the
machine add theirs, so the load average is sampled every 2 s during the runs and printed as measured).
Without --loads: one round at whatever load the machine has.
"""
import argparse
import importlib.util
import json
import multiprocessing
import os
import re
import threading
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reboots(stdout):
    match = re.search(r"gpufleet summary: .*?; rebooted (\d+)", stdout)
    return int(match.group(1)) if match else None


def status(stdout):
    match = re.search(r"gpufleet summary: (\d+ node\(s\): READY \d+, QUARANTINED \d+, FAILED \d+)", stdout)
    return match.group(1) if match else "no summary"


def task_seconds(rows, needle):
    return sum(r.get("seconds", 0) for r in rows if needle in (r.get("task") or ""))


def role_seconds(rows):
    """{role: seconds} from task names "gpufleet.provision.<role> : <task>"; play-level tasks as "(play)"."""
    out = {}
    for row in rows:
        name = row.get("task") or ""
        role = name.split(" : ", 1)[0].rsplit(".", 1)[-1] if " : " in name else "(play)"
        out[role] = out.get(role, 0) + row.get("seconds", 0)
    return out


def _burn():
    while True:
        pass


class Load(object):
    """LOAD-1 busy processes beside the measured runs (none for load 0 or 1) and the 1-minute load
    average sampled every 2 s while they run: ``samples`` (list of floats)."""

    def __init__(self, target):
        self.target, self.samples, self._procs = target, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._stop.wait(2.0):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self):
        for _ in range(max(0, int(round(self.target)) - 1)):
            proc = multiprocessing.Process(target=_burn, daemon=True)
            proc.start()
            self._procs.append(proc)
        if self._procs:
            time.sleep(30)   # the 1-minute average follows in about a minute: half of it before the runs
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for proc in self._procs:
            proc.terminate()
            proc.join(5)
        return False

    def describe(self):
        if not self.samples:
            return "load average %.1f" % os.getloadavg()[0]
        return "load average %.1f (min %.1f, max %.1f during the runs; %d busy processes added)" % (
            sum(self.samples) / len(self.samples), min(self.samples), max(self.samples), len(self._procs))


def _loads(text):
    try:
        loads = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("loads are comma-separated numbers, got %r" % text)
    if not loads or min(loads) < 0:
        raise argparse.ArgumentTypeError("loads must be numbers >= 0, got %r" % text)
    return loads


def setup_lab(imgmod, provbench):
    """The image tests' lab plus the dirty twin ``live`` (twin1's faults on twin2's ports and BMC)."""
    import yaml
    lab = imgmod.ImageLab(tempfile.mkdtemp(prefix="gpufleet-imgbench-"))
    lab.write_inventory()
    with open(os.path.join(REPO, "inventories", "lab", "hosts.yml")) as handle:
        base = yaml.safe_load(handle)["all"]["children"]["lab_twins"]["hosts"]
    live = dict(lab._imaged)
    live.update(ansible_port=base["twin2"]["ansible_port"] + imgmod._LAB.PORT_SHIFT)
    bmc_port = base["twin2"]["gpufleet_lab_twin"]["bmc"]["port"] + imgmod._LAB.PORT_SHIFT
    live["gpufleet_bmc_address"] = "127.0.0.1:%d" % bmc_port
    live["gpufleet_lab_twin"] = dict(base["twin1"]["gpufleet_lab_twin"], bmc={"flavour": "dell", "port": bmc_port})
    lab._inv["all"]["children"]["lab_twins"]["hosts"]["live"] = live
    lab.hosts["live"] = live
    with open(os.path.join(lab.inventory_dir, "hosts.yml"), "w") as handle:
        yaml.safe_dump(lab._inv, handle, sort_keys=False)
    return lab


def build_image(lab, imgmod, provbench, figures):
    """image.yml on ``builder``, its tarball imported; False when the build failed."""
    build = {}
    provbench.timed(lab, "image.yml", [os.path.join(imgmod._LAB.VENV_BIN, "ansible-playbook"), "-i", lab.inventory_dir,
                                       os.path.join(REPO, "playbooks", "image.yml"), "-e",
                                       json.dumps({"image_hosts": "builder", "image_export_path": imgmod.TARBALL})], build)
    figures["image.yml"] = build["image.yml"]
    if build["image.yml"]["rc"] != 0:
        return False
    t0 = time.time()
    local = os.path.join(lab.base, "golden.tar.gz")
    subprocess.run(["podman", "cp", "%sbuilder:%s" % (imgmod._LAB.PREFIX, imgmod.TARBALL), local], env=lab.env, check=True)
    lab.lab_sh("import-image", local, lab.image_ref)
    figures["export + import"] = time.time() - t0
    lab.add_imaged()
    return True


def one_round(lab, imgmod, provbench, target, fresh):
    """provision.yml on ``imaged`` and on ``live``, then validate.yml on ``imaged``, at one load."""
    playbook = os.path.join(imgmod._LAB.VENV_BIN, "ansible-playbook")
    out = {"target": target}
    if fresh:
        # dirty twins again: the imported image stays, the containers are made anew
        lab.lab_sh("down")
        up = lab.lab_sh("up")
        if up.returncode != 0:
            out["error"] = "lab up: " + up.stdout[-1500:] + up.stderr[-1500:]
            return out
    else:
        t0 = time.time()
        lab.lab_sh("up", "imaged")
        out["imaged twin up"] = time.time() - t0
    runs, gate = {}, {}
    with Load(target) as load:
        for host in ("imaged", "live"):
            runs[host] = {}
            proc = provbench.timed(lab, host, [playbook, "-i", lab.inventory_dir, os.path.join(REPO, "playbooks", "provision.yml"),
                                               "--limit", host, "-e", json.dumps({"validate_report_dir": lab.base + "/gate"})], runs[host])
            runs[host]["stdout"] = proc.stdout
        provbench.timed(lab, "gate", [playbook, "-i", lab.inventory_dir, os.path.join(REPO, "playbooks", "validate.yml"),
                                      "--limit", "imaged", "-e", json.dumps({"validate_report_dir": lab.base + "/gate"})], gate)
    out.update(runs=runs, gate=gate, load=load.describe(), load_mean=(sum(load.samples) / len(load.samples)) if load.samples else os.getloadavg()[0])
    return out


def report_round(rnd):
    runs, gate = rnd["runs"], rnd["gate"]
    gate_seconds = gate["gate"]["seconds"] if gate["gate"]["rc"] == 0 else None
    print("\n  at target load %s: %s" % (("%g" % rnd["target"]) if rnd["target"] is not None else "(ambient)", rnd["load"]))
    for host, label in (("imaged", "image path"), ("live", "live path")):
        run = runs[host][host]
        out = runs[host]["stdout"]
        print("  %-10s provision.yml %.1f s, %d task results, reboots %s, %s; reboot task %.1f s; package tasks %.1f s" % (
            label, run["seconds"], run["results"], reboots(out), status(out), task_seconds(run["rows"], "reboot"),
            sum(task_seconds(run["rows"], n) for n in ("Install the kernel", "Install and hold", "Resolve"))))
    img, live_run = runs["imaged"]["imaged"], runs["live"]["live"]
    print("  ratio image/live: %.2f" % (img["seconds"] / live_run["seconds"]))
    # the reboot role's tasks (drain check, reset, wait for the node, boot id): what one reboot costs here
    reboot_s = task_seconds(img["rows"], "provision.reboot :")
    goal = reboot_s + (gate_seconds or 0) + 30
    met = gate_seconds is not None and img["seconds"] <= goal and reboots(runs["imaged"]["stdout"]) == 1
    print("  GOAL image path <= one reboot (%.1f s) + one gate (validate.yml %.1f s) + 30 s = %.1f s: measured %.1f s,"
          " %.2fx the goal, %s reboot(s): %s" % (
              reboot_s, gate_seconds or float("nan"), goal, img["seconds"], img["seconds"] / goal,
              reboots(runs["imaged"]["stdout"]), "met" if met else "NOT met"))
    print("  per role (s, summed task wall time; image path | live path):")
    img_roles, live_roles = role_seconds(img["rows"]), role_seconds(live_run["rows"])
    for role in sorted(set(img_roles) | set(live_roles), key=lambda r: -img_roles.get(r, 0)):
        print("    %-16s %6.1f | %6.1f" % (role, img_roles.get(role, 0), live_roles.get(role, 0)))
    slow = {}
    for row in img["rows"]:
        slow[row["task"]] = slow.get(row["task"], 0) + row.get("seconds", 0)
    print("  image path, slowest tasks:")
    for task, seconds in sorted(slow.items(), key=lambda kv: -kv[1])[:10]:
        print("    %6.1f  %s" % (seconds, task))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=_loads, default=None, help="target load averages, e.g. 1,3 (default: as it is)")
    args = parser.parse_args(argv)
    imgmod = _load("gpufleet_image_conftest_bench", "tests/integration/image/conftest.py")
    provbench = _load("gpufleet_provision_bench", "benchmarks/provision_bench.py")
    lab = setup_lab(imgmod, provbench)
    lab.lab_sh("down")
    figures, rounds = {}, []
    try:
        t0 = time.time()
        up = lab.lab_sh("up")
        if up.returncode != 0:
            print(up.stdout[-3000:], up.stderr[-2000:])
            return 1
        figures["lab up (builder + live)"] = time.time() - t0
        if not build_image(lab, imgmod, provbench, figures):
            return 1
        for i, target in enumerate(args.loads or [None]):
            rounds.append(one_round(lab, imgmod, provbench, target, fresh=i > 0))
    finally:
        lab.lab_sh("down")
        subprocess.run(["podman", "rmi", "-f", lab.image_ref], capture_output=True, env=lab.env)
    print("\nimage bench (one twin per path, %s, load average now %s)" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), " ".join("%.1f" % x for x in os.getloadavg())))
    print("  once per profile: image.yml %.1f s (rc %s), export + import %.1f s, twin up from the image %.1f s" % (
        figures["image.yml"]["seconds"], figures["image.yml"]["rc"], figures["export + import"],
        rounds[0].get("imaged twin up", float("nan"))))
    for rnd in rounds:
        if "error" in rnd:
            print("\n  at target load %s: %s" % (rnd["target"], rnd["error"]))
            continue
        report_round(rnd)
    out = os.environ.get("IMAGE_BENCH_ROWS")
    if out:
        with open(out, "w") as handle:
            json.dump([{"target": r["target"], "load": r.get("load"), "image": r["runs"]["imaged"]["imaged"]["rows"],
                        "live": r["runs"]["live"]["live"]["rows"], "gate": r["gate"]["gate"]["rows"]}
                       for r in rounds if "runs" in r], handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
