"""libvirt accepts the plan's domain XML: its own schemas (``virt-xml-validate``), and a real libvirtd
(QEMU driver, started by the test: conftest.libvirt) that defines it and gives back the same
pinning, memory nodes, NUMA cells and device places; the QEMU command line libvirt makes of it is
the one qemu_args writes; the same daemon boots the stand-in form under TCG and the guest shows the
planned topology from inside.

Where libvirtd cannot run, the test driver (test:///default) parses and keeps the domain instead;
it checks less (no PCI address or controller-node checks): those tests say so and skip.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._guest.libvirt import domain_xml
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.qemu import qemu_args
from ansible_collections.gpufleet.provision.tests.integration.guest.conftest import MINI_OPTIONS, need
from ansible_collections.gpufleet.provision.tests.integration.guest.guest_view import differences

# libvirt's own name of an Intel model with HT topology under TCG (QEMU's Skylake-Server-v3/v4 are
# not names libvirt 9's CPU map knows: start fails "Unknown CPU model")
CPU_MODEL = "Skylake-Server-noTSX-IBRS"
CASES = [
    ("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS),
    ("guest-mini", [{"name": "ga", "gpus": 1}, {"name": "gb", "gpus": 1}], MINI_OPTIONS),
    ("hgx-h100-ref", [{"name": "all", "gpus": 8}], None),
    ("hgx-h100-ref", [{"name": "g%d" % i, "gpus": 1} for i in range(8)], None),
    ("hgx-h100-ref", [{"name": "a", "gpus": 4}, {"name": "b", "gpus": 2}, {"name": "c", "gpus": 1}], None),
]
IDS = [",".join(str(r["gpus"]) for r in c[1]) + "@" + c[0] for c in CASES]


def xml_for(plan, **kw):
    return domain_xml(plan, domain_type="qemu", cpu_model=CPU_MODEL, **kw)


def validate(tmp_path, xml):
    """virt-xml-validate on ``xml``: (exit code, its output)."""
    need("virt-xml-validate", "xmllint")
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    proc = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("tree,requests,options", CASES, ids=IDS)
def test_libvirt_schema_accepts_every_domain(tmp_path, plans, tree, requests, options):
    for plan in plans(tree, requests, options):
        for form in ({}, {"devices": "stand-in", "memory": "ram"}):
            rc, out = validate(tmp_path, xml_for(plan, **form))
            assert rc == 0, (plan["name"], form, out)


SCHEMA_BREAKS = {
    "cell-without-memory": (r' memory="\d+" unit="MiB"', ""),
    "vcpupin-cpuset-not-a-list": (r'cpuset="4"', 'cpuset="four"'),
    "memnode-bad-mode": (r'memnode cellid="1" mode="strict"', 'memnode cellid="1" mode="firmly"'),
    "unknown-element": (r"<cputune>", "<cputune><pinning/>"),
}


@pytest.mark.parametrize("name", sorted(SCHEMA_BREAKS))
def test_libvirt_schema_rejects_a_broken_domain(tmp_path, plans, name):
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    pattern, repl = SCHEMA_BREAKS[name]
    xml, count = re.subn(pattern, repl, xml_for(plan), count=1)
    assert count == 1, "the mutation did not apply: the XML changed shape"
    rc, out = validate(tmp_path, xml)
    assert rc != 0 and "fails to validate" in out, out


# --- a libvirtd defines it and reads it back ---------------------------------------------------

def _bdf(address):
    return "%04x:%02x:%02x.%x" % tuple(int(address.get(k), 16) for k in ("domain", "bus", "slot", "function"))


def _chain(controllers, index):
    """Controller models from a bus index up to the root: [(model, element), ...]."""
    chain = []
    while index in controllers:
        ctl = controllers[index]
        chain.append((ctl.get("model"), ctl))
        address = ctl.find("address")
        if address is None or ctl.get("model") == "pcie-expander-bus":
            break
        index = int(address.get("bus"), 16)
    return chain


def libvirt_differences(plan, dumped):
    """What libvirt's definition (``dumped``: virsh dumpxml) says differently from the plan."""
    dom, out = ET.fromstring(dumped), []
    pins = {int(p.get("vcpu")): p.get("cpuset") for p in dom.findall("cputune/vcpupin")}
    if pins != {v["vcpu"]: str(v["host_cpu"]) for v in plan["vcpus"]}:
        out.append("vcpupin %s differs from the plan's vCPUs" % pins)
    memnodes = {int(m.get("cellid")): m.get("nodeset") for m in dom.findall("numatune/memnode")}
    if memnodes != {z["guest_node"]: str(z["host_node"]) for z in plan["memory_zones"]}:
        out.append("memnode %s differs from the plan's zones" % memnodes)
    cells = {int(c.get("id")): (c.get("cpus"), int(c.get("memory")), c.get("unit")) for c in dom.findall("cpu/numa/cell")}
    want = {n["id"]: (_cpulist(n["cpus"]), n["memory_mib"] * 1024, "KiB") for n in plan["guest"]["numa"]}
    if cells != want:
        out.append("numa cells %s, plan %s" % (cells, want))
    topo = dom.find("cpu/topology")
    got = tuple(int(topo.get(k)) for k in ("sockets", "cores", "threads"))
    if got != (plan["topology"]["packages"], plan["topology"]["cores_per_package"], plan["topology"]["threads_per_core"]):
        out.append("cpu topology %s, plan %s" % (got, plan["topology"]))
    return out + _hostdev_differences(plan, dom)


def _cpulist(cpus):
    return ",".join("%d-%d" % (r[0], r[-1]) if len(r) > 1 else str(r[0]) for r in _runs(cpus))


def _runs(cpus):
    runs = []
    for cpu in cpus:
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return runs


def _hostdev_differences(plan, dom):
    out, switch_of = [], {}
    controllers = {int(c.get("index")): c for c in dom.findall("devices/controller[@type='pci']")}
    hostdevs = {_bdf(h.find("source/address")): h for h in dom.findall("devices/hostdev")}
    if sorted(hostdevs) != sorted(d["host_pci"] for d in plan["devices"]):
        return ["hostdevs %s, plan %s" % (sorted(hostdevs), sorted(d["host_pci"] for d in plan["devices"]))]
    for dev in plan["devices"]:
        chain = _chain(controllers, int(hostdevs[dev["host_pci"]].find("address").get("bus"), 16))
        models = [m for m, _ in chain]
        if models != ["pcie-switch-downstream-port", "pcie-switch-upstream-port", "pcie-root-port", "pcie-expander-bus"]:
            out.append("%s %s: under %s, not a switch on a root port of an expander bus" % (dev["kind"], dev["host_pci"], models))
            continue
        target = chain[-1][1].find("target")
        node, bus = target.findtext("node"), target.get("busNr")
        if (node, bus) != (str(dev["guest_node"]), str(dev["guest_bus"])):
            out.append("%s %s: expander bus %s on node %s, plan bus %d node %d"
                       % (dev["kind"], dev["host_pci"], bus, node, dev["guest_bus"], dev["guest_node"]))
        switch_of.setdefault(dev["pair"], set()).add(chain[1][1].get("index"))
    return out + ["pair %d under switches %s" % (p, sorted(s)) for p, s in switch_of.items() if len(s) != 1]


DEFINE_CASES = [CASES[0], CASES[2], CASES[3]]


@pytest.mark.parametrize("tree,requests,options", DEFINE_CASES, ids=[IDS[CASES.index(c)] for c in DEFINE_CASES])
def test_libvirtd_defines_the_plan_and_reads_it_back(libvirt, plans, tree, requests, options):
    for plan in plans(tree, requests, options):
        ok, dumped = libvirt.define_and_read(xml_for(plan), plan["name"])
        assert ok, (libvirt.uri, dumped)
        assert libvirt_differences(plan, dumped) == [], plan["name"]


def test_reference_domain_by_hand(libvirt, plans):
    """Written from the reference node: vCPU 0 and 1 on host CPUs 0 and 104, 8 cells and 8
    memnodes (one per SNC node), GPU 0000:18:00.0 and its PIX NIC 0000:19:00.0 under one switch."""
    (plan,) = plans("hgx-h100-ref", [{"name": "all", "gpus": 8}])
    ok, dumped = libvirt.define_and_read(xml_for(plan), "all")
    assert ok, dumped
    dom = ET.fromstring(dumped)
    pins = {p.get("vcpu"): p.get("cpuset") for p in dom.findall("cputune/vcpupin")}
    assert (pins["0"], pins["1"]) == ("0", "104")
    assert len(dom.findall("cpu/numa/cell")) == 8
    assert sorted(m.get("nodeset") for m in dom.findall("numatune/memnode")) == [str(n) for n in range(8)]
    controllers = {int(c.get("index")): c for c in dom.findall("devices/controller[@type='pci']")}
    hostdevs = {_bdf(h.find("source/address")): h for h in dom.findall("devices/hostdev")}
    up = [_chain(controllers, int(hostdevs[b].find("address").get("bus"), 16))[1][1].get("index")
          for b in ("0000:18:00.0", "0000:19:00.0")]
    assert up[0] == up[1]


def test_libvirt_differences_bite(plans):
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    xml = xml_for(plan)
    mutated = xml.replace('<vcpupin vcpu="1" cpuset="4" />', '<vcpupin vcpu="1" cpuset="5" />')
    mutated = mutated.replace('memnode cellid="1" mode="strict" nodeset="3"', 'memnode cellid="1" mode="strict" nodeset="2"')
    mutated = mutated.replace('<node>1</node>', '<node>0</node>')
    found = libvirt_differences(plan, mutated.replace('memory="2048" unit="MiB"', 'memory="2097152" unit="KiB"'))
    for start in ("vcpupin", "memnode", "gpu 0000:bc:00.0: expander bus"):
        assert any(f.startswith(start) for f in found), (start, found)


REJECTED_BY_THE_DAEMON = {
    # (pattern, replacement, libvirt's message): a valid document that the QEMU driver refuses
    "expander-on-a-missing-node": (r"<node>1</node>", "<node>9</node>", "not present in the domain's <cpu><numa>"),
    "two-devices-one-address": (r'(<hostdev .*?<address type="pci" domain="0x0000" bus=)"0x09"', r'\1"0x04"',
                                "double use of PCI Address"),
    "overlapping-cells": (r'cpus="2-3"', 'cpus="1-3"', "overlapping vCPU ids"),
    "memnode-of-a-missing-cell": (r'memnode cellid="1"', 'memnode cellid="5"', "existing guest's NUMA cell"),
}


@pytest.mark.parametrize("name", sorted(REJECTED_BY_THE_DAEMON))
def test_libvirtd_rejects_a_wrong_domain(libvirt, plans, name):
    pattern, repl, message = REJECTED_BY_THE_DAEMON[name]
    if libvirt.why and name in ("expander-on-a-missing-node", "two-devices-one-address"):
        pytest.skip("libvirt's test driver does not check PCI addresses or controller nodes (%s)" % libvirt.why)
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    xml, count = re.subn(pattern, repl, xml_for(plan), count=1, flags=re.S)
    assert count == 1, "the mutation did not apply: the XML changed shape"
    ok, err = libvirt.define_and_read(xml, "g2")
    assert not ok and message in err, err


# --- the same daemon boots the stand-in form -------------------------------------------------

def _bootable(plan, libvirt):
    """The stand-in domain with the lab guest's kernel and initramfs (copied where the daemon's
    user reads them), the serial console into a file, and no vCPU pinning (the plan's host CPUs
    are not this machine's)."""
    from lab.guest import boot, build
    kernel, initrd = build.artifacts()
    for src in (kernel, initrd):
        shutil.copyfile(src, os.path.join(libvirt.base, os.path.basename(src)))
    xml = xml_for(plan, devices="stand-in", memory="ram", kernel=os.path.join(libvirt.base, os.path.basename(kernel)),
                  initrd=os.path.join(libvirt.base, os.path.basename(initrd)), cmdline=boot.APPEND)
    xml = re.sub(r"\s*<cputune>.*?</cputune>", "", xml, flags=re.S)
    console = os.path.join(libvirt.base, plan["name"] + "-console.log")
    serial = "<serial type='file'><source path='%s'/><target port='0'/></serial>\n  </devices>" % console
    return xml.replace("</devices>", serial), console


def test_libvirt_boots_the_stand_in_domain(libvirt, plans):
    """libvirt's own QEMU command line from the domain XML gives the guest the planned nodes, CPUs,
    memory, siblings and device places (the same checks as test_qemu_boot)."""
    if libvirt.why:
        pytest.skip("needs a real libvirtd (%s)" % libvirt.why)
    need("qemu-system-x86_64", "cpio")
    from lab.guest import boot
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    xml, console = _bootable(plan, libvirt)
    path = os.path.join(libvirt.base, "boot.xml")
    with open(path, "w") as handle:
        handle.write(xml)
    libvirt.virsh("define", path)
    try:
        started = time.monotonic()
        libvirt.virsh("start", plan["name"])
        while libvirt.virsh("domstate", plan["name"]).stdout.strip() != "shut off":
            assert time.monotonic() - started < 180, "the libvirt guest did not power off in 180 s"
            time.sleep(0.5)
        with open(console, errors="replace") as handle:
            dump = boot.parse_console(handle.read(), "libvirt", time.monotonic() - started)
    finally:
        libvirt.virsh("destroy", plan["name"], check=False)
        libvirt.virsh("undefine", plan["name"])
    print("libvirt guest booted in %.1f s" % dump.seconds)
    assert differences(plan, dump.topology()) == []


# --- libvirt's own QEMU command line is the one qemu_args writes -------------------------------

def _fields(text):
    """A QEMU option value as a dict: JSON (libvirt) or ``type,key=value,...`` (qemu_args)."""
    if text.startswith("{"):
        return json.loads(text)
    head, *rest = text.split(",")
    out = {"driver": head} if "=" not in head else dict([head.split("=", 1)])
    for part in rest:
        key, _, value = part.partition("=")
        out[key] = value
    return out


def _size(value):
    value = str(value)
    return int(value[:-1]) * 1024 * 1024 if value.endswith("M") else int(value)


def _slot(addr):
    return int(str(addr or "0").split(".")[0], 16)


def qemu_view(argv):
    """What a QEMU command line gives the guest, whatever the spelling: CPUs, nodes with their CPUs
    and memory, distances, expander buses, and where each stand-in sits (expander bus_nr and node,
    root port slot, downstream port slot)."""
    options = [(argv[i], argv[i + 1]) for i in range(len(argv) - 1) if argv[i].startswith("-")]
    objects = {f["id"]: f for f in (_fields(v) for k, v in options if k == "-object")}
    devices = {f.get("id"): f for f in (_fields(v) for k, v in options if k == "-device")}
    smp = _fields("cpus=" + [v for k, v in options if k == "-smp"][0])
    numa = [_fields(v) for k, v in options if k == "-numa"]
    view = {"smp": tuple(int(smp.get(k, 1)) for k in ("cpus", "sockets", "cores", "threads")),
            "nodes": {int(n["nodeid"]): (n["cpus"], _size(objects[n["memdev"]]["size"])) for n in numa if n["driver"] == "node"},
            "distances": {(int(n["src"]), int(n["dst"]), int(n["val"])) for n in numa
                          if n["driver"] == "dist" and n["src"] != n["dst"]},
            "expanders": sorted((int(d["bus_nr"]), int(d["numa_node"])) for d in devices.values() if d["driver"] == "pxb-pcie"),
            "stand-ins": []}
    for dev in devices.values():
        if dev["driver"] == "virtio-rng-pci":
            down = devices[dev["bus"]]
            root = devices[devices[down["bus"]]["bus"]]
            pxb = devices[root["bus"]]
            view["stand-ins"].append((int(pxb["bus_nr"]), int(pxb["numa_node"]), _slot(root.get("addr")), _slot(down.get("addr"))))
    view["stand-ins"].sort()
    return view


@pytest.mark.parametrize("tree,requests,options", [CASES[0], CASES[2]], ids=[IDS[0], IDS[2]])
def test_libvirt_runs_the_qemu_that_qemu_args_writes(libvirt, plans, tree, requests, options):
    """``virsh domxml-to-native qemu-argv``: the QEMU command line libvirt makes of domain_xml(plan)
    gives the guest what qemu_args(plan) gives it (stand-in devices, RAM: this host has neither the
    GPUs nor the nodes)."""
    if libvirt.why:
        pytest.skip("domxml-to-native needs libvirt's QEMU driver (%s)" % libvirt.why)
    for plan in plans(tree, requests, options):
        path = os.path.join(libvirt.base, "native.xml")
        with open(path, "w") as handle:
            handle.write(xml_for(plan, devices="stand-in", memory="ram"))
        native = shlex.split(libvirt.virsh("domxml-to-native", "qemu-argv", path).stdout)
        ours = qemu_view(qemu_args(plan, devices="stand-in", memory="ram", cpu_model=CPU_MODEL))
        assert qemu_view(native) == ours, plan["name"]
        assert len(ours["stand-ins"]) == len(plan["devices"]) and len(ours["nodes"]) == len(plan["guest"]["numa"])


def test_qemu_view_bites(plans):
    (plan,) = plans("guest-mini", [{"name": "g2", "gpus": 2}], MINI_OPTIONS)
    args = qemu_args(plan, devices="stand-in", memory="ram")
    view = qemu_view(args)
    assert view["smp"] == (4, 2, 1, 2) and view["expanders"] == [(16, 0), (32, 1)]
    moved = [a.replace("numa_node=1", "numa_node=0") for a in args]
    assert qemu_view(moved)["expanders"] == [(16, 0), (32, 0)]
    assert qemu_view(moved)["stand-ins"] != view["stand-ins"]
