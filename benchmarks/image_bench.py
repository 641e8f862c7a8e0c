#!/usr/bin/env python3
"""A dirty twin to green: the live path (provision.yml does everything) against the golden image
path (a twin started from the image of its profile: BIOS + one reboot + the gate), wall time and
reboots, on one private lab (issue 26 part 1).

    GPUFLEET_LABTEST_SHIFT=700 GPUFLEET_LABTEST_PREFIX=gpufleet-imgbench- .venv/bin/python benchmarks/image_bench.py

Brings up the image tests' lab (tests/integration/image/conftest.py: ``builder``, then ``imaged``
from the image) plus one dirty twin ``live`` (the lab's twin1 faults: SNC and HT off, GRUB and
tuning faults, packages not held). Measures image.yml (once per profile, not per node), the
export and import, provision.yml on ``imaged`` and on ``live``, validate.yml on ``imaged`` (one
gate) and the reboot task; prints the figures against the goal: the image path costs one reboot
plus one gate plus at most 30 s. Asserts nothing; tears the lab down.
"""
import importlib.util
import json
import os
import re
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


def main():
    imgmod = _load("gpufleet_image_conftest_bench", "tests/integration/image/conftest.py")
    provbench = _load("gpufleet_provision_bench", "benchmarks/provision_bench.py")
    lab = imgmod.ImageLab(tempfile.mkdtemp(prefix="gpufleet-imgbench-"))
    lab.write_inventory()
    # the dirty twin of the live path: twin1's faults, on twin2's ports and BMC
    with open(os.path.join(REPO, "inventories", "lab", "hosts.yml")) as handle:
        import yaml
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
    lab.lab_sh("down")
    figures = {}
    try:
        t0 = time.time()
        up = lab.lab_sh("up")
        if up.returncode != 0:
            print(up.stdout[-3000:], up.stderr[-2000:])
            return 1
        figures["lab up (builder + live)"] = time.time() - t0
        build = {}
        provbench.timed(lab, "image.yml", [os.path.join(imgmod._LAB.VENV_BIN, "ansible-playbook"), "-i", lab.inventory_dir,
                                                   os.path.join(REPO, "playbooks", "image.yml"), "-e",
                                                   json.dumps({"image_hosts": "builder", "image_export_path": imgmod.TARBALL})], build)
        t0 = time.time()
        local = os.path.join(lab.base, "golden.tar.gz")
        subprocess.run(["podman", "cp", "%sbuilder:%s" % (imgmod._LAB.PREFIX, imgmod.TARBALL), local], env=lab.env, check=True)
        lab.lab_sh("import-image", local, lab.image_ref)
        figures["export + import"] = time.time() - t0
        lab.add_imaged()
        t0 = time.time()
        lab.lab_sh("up", "imaged")
        figures["imaged twin up"] = time.time() - t0
        runs = {}
        for host in ("imaged", "live"):
            runs[host] = {}
            proc = provbench.timed(lab, host, [os.path.join(imgmod._LAB.VENV_BIN, "ansible-playbook"), "-i", lab.inventory_dir,
                                               os.path.join(REPO, "playbooks", "provision.yml"), "--limit", host,
                                               "-e", json.dumps({"validate_report_dir": lab.base + "/gate"})], runs[host])
            runs[host]["stdout"] = proc.stdout
        gate = {}
        provbench.timed(lab, "gate", [os.path.join(imgmod._LAB.VENV_BIN, "ansible-playbook"), "-i", lab.inventory_dir,
                                             os.path.join(REPO, "playbooks", "validate.yml"), "--limit", "imaged",
                                             "-e", json.dumps({"validate_report_dir": lab.base + "/gate"})], gate)
        gate_seconds = gate["gate"]["seconds"] if gate["gate"]["rc"] == 0 else None
    finally:
        lab.lab_sh("down")
        subprocess.run(["podman", "rmi", "-f", lab.image_ref], capture_output=True, env=lab.env)
    print("\nimage bench (one twin per path, %s, load average %s)" % (
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), " ".join("%.1f" % x for x in os.getloadavg())))
    print("  once per profile: image.yml %.1f s (rc %s), export + import %.1f s, twin up from the image %.1f s" % (
        build["image.yml"]["seconds"], build["image.yml"]["rc"], figures["export + import"], figures["imaged twin up"]))
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
    print("  goal: image path <= one reboot (%.1f s) + one gate (validate.yml %.1f s) + 30 s = %.1f s; measured %.1f s (%s)" % (
        reboot_s, gate_seconds or float("nan"), reboot_s + (gate_seconds or 0) + 30, img["seconds"],
        "met" if img["seconds"] <= reboot_s + (gate_seconds or 0) + 30 else "not met"))
    print("  per role (s, summed task wall time; image path | live path):")
    img_roles, live_roles = role_seconds(img["rows"]), role_seconds(live_run["rows"])
    for role in sorted(set(img_roles) | set(live_roles), key=lambda r: -img_roles.get(r, 0)):
        print("    %-16s %6.1f | %6.1f" % (role, img_roles.get(role, 0), live_roles.get(role, 0)))
    out = os.environ.get("IMAGE_BENCH_ROWS")
    if out:
        with open(out, "w") as handle:
            json.dump({"image": img["rows"], "live": live_run["rows"], "gate": gate["gate"]["rows"],
                       "load": os.getloadavg()}, handle)
    slow = {}
    for row in img["rows"]:
        slow[row["task"]] = slow.get(row["task"], 0) + row.get("seconds", 0)
    print("  image path, slowest tasks:")
    for task, seconds in sorted(slow.items(), key=lambda kv: -kv[1])[:10]:
        print("    %6.1f  %s" % (seconds, task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
