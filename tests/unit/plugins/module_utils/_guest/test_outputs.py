"""The same plan must read the same in QEMU, libvirt and cloud-hypervisor.

Each output is parsed back by a small reader written here (not by the code under test) into the
same shape: vCPU -> host CPU, guest node -> (vCPUs, MiB, host node), device -> (guest node,
partner), topology. The mini plan's reading is also written out by hand.
"""
import re
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.provision.plugins.module_utils._guest import cloud_hypervisor, libvirt, qemu
from ansible_collections.gpufleet.provision.plugins.module_utils._guest.plan import plan_guests

MINI_READING = {
    "pins": {0: 0, 1: 4, 2: 1, 3: 5, 4: 2, 5: 6, 6: 3, 7: 7},
    "nodes": {0: ([0, 1], 2048, 0), 1: ([2, 3], 1024, 1), 2: ([4, 5], 2048, 2), 3: ([6, 7], 2048, 3)},
    "devices": {"0000:18:00.0": (0, "0000:19:00.0"), "0000:19:00.0": (0, "0000:18:00.0"),
                "0000:bc:00.0": (3, "0000:bd:00.0"), "0000:bd:00.0": (3, "0000:bc:00.0")},
    "topology": (2, 2, 2),
}


def cpus_of(text):
    out = []
    for part in text.strip("[]").split(","):
        lo, dummy, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def props(text):
    kind, dummy, rest = text.partition(",")
    return kind, dict(p.split("=", 1) for p in rest.split(",") if "=" in p)


def partners(devices):
    """{host_pci: (node, switch)} -> {host_pci: (node, the other device on the same switch)}."""
    out = {}
    for pci, (node, switch) in devices.items():
        other = [p for p, (dummy, s) in devices.items() if s == switch and p != pci]
        assert len(other) == 1, (pci, switch, devices)
        out[pci] = (node, other[0])
    return out


def read_qemu(args, script):
    pairs = list(zip(args[::2], args[1::2]))
    backends = dict((p["id"], (int(p["size"].rstrip("M")), int(p["host-nodes"])))
                    for flag, v in pairs if flag == "-object" for dummy, p in [props(v)])
    nodes = {}
    for flag, value in pairs:
        kind, p = props(value)
        if flag == "-numa" and kind == "node":
            size, host = backends[p["memdev"]]
            nodes[int(p["nodeid"])] = (cpus_of(p["cpus"]), size, host)
    smp = props([v for f, v in pairs if f == "-smp"][0])[1]
    devs = dict((p["id"], (kind, p)) for f, v in pairs if f == "-device" for kind, p in [props(v)])
    found = {}
    for kind, p in devs.values():
        if kind == "vfio-pci":
            port = devs[p["bus"]][1]
            switch = port["bus"]
            pxb = devs[devs[devs[switch][1]["bus"]][1]["bus"]][1]
            found[p["host"]] = (int(pxb["numa_node"]), switch)
    pins = dict((int(a), int(b)) for a, b in re.findall(r"'CPU (\d+)/'\*\) taskset -pc (\d+) ", script))
    return {"pins": pins, "nodes": nodes, "devices": partners(found),
            "topology": (int(smp["sockets"]), int(smp["cores"]), int(smp["threads"]))}


def read_libvirt(text):
    dom = ET.fromstring(text)
    pins = dict((int(p.get("vcpu")), int(p.get("cpuset"))) for p in dom.iter("vcpupin"))
    memnode = dict((int(m.get("cellid")), int(m.get("nodeset"))) for m in dom.iter("memnode"))
    nodes = dict((int(c.get("id")), (cpus_of(c.get("cpus")), int(c.get("memory")), memnode[int(c.get("id"))]))
                 for c in dom.iter("cell"))
    ctl = dict((int(c.get("index")), c) for c in dom.iter("controller"))

    def parent(element):
        return ctl[int(element.find("address").get("bus"), 16)]
    found = {}
    for host in dom.iter("hostdev"):
        src = host.find("source/address")
        pci = "%04x:%02x:%02x.%d" % tuple(int(src.get(k), 16) for k in ("domain", "bus", "slot", "function"))
        switch = parent(parent(host))
        pxb = parent(parent(switch))
        assert pxb.get("model") == "pcie-expander-bus"
        found[pci] = (int(pxb.find("target/node").text), switch.get("index"))
    topo = dom.find("cpu/topology")
    return {"pins": pins, "nodes": nodes, "devices": partners(found),
            "topology": (int(topo.get("sockets")), int(topo.get("cores")), int(topo.get("threads")))}


def read_vm_config(config):
    pins = dict((a["vcpu"], a["host_cpus"][0]) for a in config["cpus"]["affinity"])
    zones = dict((z["id"], (z["size"] // 1048576, z["host_numa_node"])) for z in config["memory"]["zones"])
    nodes, node_of_segment = {}, {}
    for node in config["numa"]:
        (size, host), = [zones[z] for z in node["memory_zones"]]
        nodes[node["guest_numa_id"]] = (node["cpus"], size, host)
        node_of_segment.update((s, node["guest_numa_id"]) for s in node.get("pci_segments", []))
    found = dict((d["path"].split("/")[-2], (node_of_segment[d["pci_segment"]], d["pci_segment"])) for d in config["devices"])
    topo = config["cpus"]["topology"]
    assert topo["dies_per_package"] == 1
    return {"pins": pins, "nodes": nodes, "devices": partners(found),
            "topology": (topo["packages"], topo["cores_per_die"], topo["threads_per_core"])}


def read_ch_cli(args):
    """The CLI back into the VmConfig shape read_vm_config takes."""
    pairs = list(zip(args[::2], args[1::2]))
    cpus = dict(re.findall(r"(\w+)=(\[(?:[^\[\]]|\[[^\]]*\])*\]|[^,]+)", [v for f, v in pairs if f == "--cpus"][0]))
    threads, cores, dies, packages = (int(x) for x in cpus["topology"].split(":"))
    affinity = [{"vcpu": int(v), "host_cpus": cpus_of(h)} for v, h in re.findall(r"(\d+)@\[([^\]]*)\]", cpus["affinity"])]
    zones = [dict(kv.split("=") for kv in v.split(",")) for f, v in pairs if f == "--memory-zone"]
    numa = []
    for flag, value in pairs:
        if flag == "--numa":
            p = dict(re.findall(r"(\w+)=(\[[^\]]*\]|[^,]+)", value))
            numa.append({"guest_numa_id": int(p["guest_numa_id"]), "cpus": cpus_of(p["cpus"]),
                         "memory_zones": p["memory_zones"].strip("[]").split(","),
                         "pci_segments": [int(s) for s in p.get("pci_segments", "[]").strip("[]").split(",") if s]})
    devices = [dict(kv.split("=") for kv in v.split(",")) for f, v in pairs if f == "--device"]
    return {"cpus": {"affinity": affinity, "topology": {"threads_per_core": threads, "cores_per_die": cores,
                                                        "dies_per_package": dies, "packages": packages}},
            "memory": {"zones": [{"id": z["id"], "size": int(z["size"].rstrip("M")) * 1048576,
                                  "host_numa_node": int(z["host_numa_node"])} for z in zones]},
            "numa": numa,
            "devices": [{"path": d["path"], "pci_segment": int(d["pci_segment"])} for d in devices]}


def readings(plan):
    return [
        read_qemu(qemu.qemu_args(plan), qemu.pin_script(plan)),
        read_libvirt(libvirt.domain_xml(plan)),
        read_vm_config(cloud_hypervisor.vm_config(plan)),
        read_vm_config(read_ch_cli(cloud_hypervisor.cli_args(plan))),
    ]


def test_mini_reads_the_same_everywhere(tree_facts):
    plan = plan_guests(tree_facts("guest-mini"), [{"name": "g1", "gpus": 2, "vcpus": 8}], {"reserve_host_cpus": 0})[0]
    for reading in readings(plan):
        assert reading == MINI_READING


@pytest.mark.parametrize("tree, requests, options", [
    ("hgx-h100-ref", [{"name": "big", "gpus": 8}], None),
    ("hgx-h100-ref", [{"name": "g%d" % i, "gpus": g} for i, g in enumerate([1, 2, 4, 1])], None),
    ("amd-12nic-nps4", [{"name": "amd", "gpus": 8}], {"hugepage_size_kb": 2048}),
    ("amd-12nic-nps4", [{"name": "a", "gpus": 3}, {"name": "b", "gpus": 5}], {"hugepage_size_kb": 2048}),
])
def test_every_plan_reads_the_same_everywhere(tree_facts, tree, requests, options):
    for plan in plan_guests(tree_facts(tree), requests, options):
        first, *others = readings(plan)
        assert all(other == first for other in others)
        assert first["pins"] == dict((v["vcpu"], v["host_cpu"]) for v in plan["vcpus"])
        assert sorted(first["devices"]) == sorted(d["host_pci"] for d in plan["devices"])


def test_reference_pins_vcpu_0_and_1_on_one_core_in_all_three(tree_facts):
    plan = plan_guests(tree_facts("hgx-h100-ref"), [{"name": "big", "gpus": 8}])[0]
    for reading in readings(plan):
        assert (reading["pins"][0], reading["pins"][1]) == (0, 104)
        assert reading["nodes"][0] == (list(range(24)), 16384, 0)
        assert reading["devices"]["0000:18:00.0"] == (0, "0000:19:00.0")
        assert reading["devices"]["0000:ce:00.0"] == (7, "0000:cd:00.0")
        assert reading["topology"] == (2, 48, 2)


def test_qemu_and_libvirt_build_the_same_pci_tree(tree_facts):
    """Firmware numbers buses depth first: the guest_pci of the plan holds only if both outputs build
    pxb(bus_nr) -> root port (slot i) -> switch -> downstream port (0 GPU, 1 NIC)."""
    plan = plan_guests(tree_facts("hgx-h100-ref"), [{"name": "b", "gpus": 2}], {"reserve_host_cpus": 0})[0]
    args = qemu.qemu_args(plan)
    devs = [props(v) for f, v in zip(args[::2], args[1::2]) if f == "-device"]
    assert [dev[0] for dev in devs] == ["pxb-pcie", "pcie-root-port", "x3130-upstream", "xio3130-downstream", "vfio-pci",
                                        "xio3130-downstream", "vfio-pci"] * 2
    assert [(p["bus_nr"], p["numa_node"]) for k, p in devs if k == "pxb-pcie"] == [("16", "0"), ("32", "1")]
    dom = ET.fromstring(libvirt.domain_xml(plan))
    models = [(c.get("index"), c.get("model")) for c in dom.iter("controller")]
    assert models == [("0", "pcie-root")] + [(str(i), m) for i, m in enumerate(
        ["pcie-expander-bus", "pcie-root-port", "pcie-switch-upstream-port", "pcie-switch-downstream-port",
         "pcie-switch-downstream-port"] * 2, start=1)]
    assert [(t.get("busNr"), t.find("node").text) for t in dom.iter("target") if t.get("busNr")] == [("16", "0"), ("32", "1")]
    assert [d["guest_pci"] for d in plan["devices"]] == ["0000:13:00.0", "0000:14:00.0", "0000:23:00.0", "0000:24:00.0"]


def test_stand_ins_and_ram_keep_the_places(tree_facts):
    plan = plan_guests(tree_facts("guest-mini"), [{"name": "g1", "gpus": 2, "vcpus": 8}], {"reserve_host_cpus": 0})[0]
    args = qemu.qemu_args(plan, devices="stand-in", memory="ram", cpu_model="Skylake-Server-v4")
    text = " ".join(args)
    assert "vfio-pci" not in text and "host-nodes" not in text and "hugetlb" not in text
    assert text.count("virtio-rng-pci,id=") == 4 and "virtio-rng-pci,id=gpu1,bus=gpu1-port,addr=0.0" in text
    assert "memory-backend-ram,id=mem1,size=1024M" in text and "-cpu Skylake-Server-v4" in text
    dom = ET.fromstring(libvirt.domain_xml(plan, devices="stand-in", memory="ram", domain_type="qemu"))
    assert dom.find("numatune") is None and dom.find("memoryBacking") is None and not list(dom.iter("hostdev"))
    assert [r.find("address").get("bus") for r in dom.iter("rng")] == ["0x04", "0x05", "0x09", "0x0a"]
    config = cloud_hypervisor.vm_config(plan, devices="stand-in", memory="ram")
    assert "devices" not in config and [(n["pci_segment"], n["pci_device_id"]) for n in config["net"]] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert all("host_numa_node" not in z for z in config["memory"]["zones"])


def test_vm_config_matches_cloud_hypervisor_schema(tree_facts, realdata):
    import jsonschema  # requirements-test.txt
    import os
    import yaml
    with open(os.path.join(realdata, "cloud-hypervisor", "cloud-hypervisor.yaml")) as handle:
        spec = yaml.safe_load(handle)
    schema = {"$ref": "#/components/schemas/VmConfig", "components": spec["components"]}
    plans = plan_guests(tree_facts("hgx-h100-ref"), [{"name": "g%d" % i, "gpus": 1} for i in range(8)])
    plans += plan_guests(tree_facts("guest-mini"), [{"name": "m", "gpus": 2, "vcpus": 8}], {"reserve_host_cpus": 0})
    for plan in plans:
        for devices in ("vfio", "stand-in"):
            jsonschema.validate(cloud_hypervisor.vm_config(plan, devices=devices, kernel="/boot/vmlinuz",
                                                           cmdline="console=ttyS0"), schema)


def test_64bit_hole_holds_the_gpus_bars(tree_facts):
    # an H100's BAR1 is 128 GiB: 256 GiB of 64-bit MMIO per GPU, rounded up to a power of two
    three, five = plan_guests(tree_facts("hgx-h100-ref"), [{"name": "a", "gpus": 3}, {"name": "b", "gpus": 5}])
    assert "q35-pcihost.pci-hole64-size=1024G" in qemu.qemu_args(three)        # 768 -> 1024
    assert "q35-pcihost.pci-hole64-size=2048G" in qemu.qemu_args(five)         # 1280 -> 2048
    hole = ET.fromstring(libvirt.domain_xml(five)).find("devices/controller/pcihole64")
    assert (hole.get("unit"), hole.text) == ("KiB", str(2048 * 1024 * 1024))
    assert "-global" not in qemu.qemu_args(three, devices="stand-in")
    assert ET.fromstring(libvirt.domain_xml(three, devices="stand-in")).find("devices/controller/pcihole64") is None
    # a named CPU model has 40 address bits (1 TiB, QEMU refuses the hole): the host's are passed
    assert "Skylake-Server-v4,host-phys-bits=on" in qemu.qemu_args(five, cpu_model="Skylake-Server-v4")
    cpu = ET.fromstring(libvirt.domain_xml(five, cpu_model="Skylake-Server")).find("cpu")
    assert cpu.find("maxphysaddr").get("mode") == "passthrough"
    assert "-cpu host" in " ".join(qemu.qemu_args(five)) and "Skylake" not in " ".join(qemu.qemu_args(five))
